//go:build race

package repository

const raceEnabled = true
