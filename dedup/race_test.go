//go:build race

package dedup

// The race detector slows the byte loops ~30x: the property tests scale their data down under it.
const raceEnabled = true
