//go:build race

package restoree2e

const raceEnabled = true
