package repository

import (
	"crypto/sha256"
	"encoding/binary"
	"testing"
)

func testID(n uint64) ID {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], n)
	return ID(sha256.Sum256(b[:]))
}

// TestLiveSet: every id added is live whatever the growth and compaction
// (no live id is ever taken as dead), metadata ids are exact, and ids
// never added are not live unless they share an 8-byte prefix.
func TestLiveSet(t *testing.T) {
	l := newLiveSet(0)
	const n = 200_000
	for i := range uint64(n) {
		l.add(testID(i))
		if i%3 == 0 {
			l.add(testID(i / 2)) // duplicates, as chunks shared by segments
		}
	}
	meta := testID(1 << 40)
	l.addMeta(meta)
	if got := l.len(); got != n+1 {
		t.Errorf("len %d, want %d distinct", got, n+1)
	}
	if cap(l.prefixes) > 4*n {
		t.Errorf("capacity %d for %d ids: duplicates were not compacted", cap(l.prefixes), n)
	}
	for i := range uint64(n) {
		if !l.has(testID(i)) {
			t.Fatalf("live id %d taken as dead", i)
		}
	}
	if !l.has(meta) || !l.hasMeta(meta) {
		t.Error("metadata id not live")
	}
	if l.hasMeta(testID(5)) {
		t.Error("a data id (prefix only) answered as an exact metadata id")
	}
	for i := uint64(n); i < 2*n; i++ {
		if l.has(testID(i)) {
			t.Errorf("dead id %d taken as live", i)
		}
	}
	// A dead id sharing a live prefix is kept (the safe side).
	twin := testID(7)
	twin[31] ^= 1
	if !l.has(twin) {
		t.Error("an id sharing a live prefix is not kept")
	}
	// Adding after queries keeps working.
	late := testID(3 * n)
	l.add(late)
	if !l.has(late) {
		t.Error("id added after a query is not live")
	}
}
