//go:build race

package vcsimtests

const raceEnabled = true
