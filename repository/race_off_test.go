//go:build !race

package repository

const raceEnabled = false
