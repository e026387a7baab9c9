//go:build !race

package backupe2e

const raceEnabled = false
