package ext4

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"time"
)

// TestExtentTreeBomb: an extent tree five levels deep whose index entries
// all point at the same next node, ending in an empty leaf, would take
// 4·84⁴ steps; it must fail fast instead.
func TestExtentTreeBomb(t *testing.T) {
	const bs = 1024
	img := make([]byte, 64*bs)
	le := binary.LittleEndian
	node := func(blk, entries, depth int, child uint32) {
		b := img[blk*bs:]
		le.PutUint16(b, 0xF30A)
		le.PutUint16(b[2:], uint16(entries))
		le.PutUint16(b[4:], uint16(entries))
		le.PutUint16(b[6:], uint16(depth))
		for i := 0; i < entries; i++ {
			le.PutUint32(b[12+12*i+4:], child)
		}
	}
	for d := 4; d >= 1; d-- {
		node(14-d, 84, d, uint32(15-d)) // 10 (depth 4) -> 11 -> 12 -> 13 (depth 1) -> 14
	}
	node(14, 0, 0, 0) // an empty leaf
	f := &FS{r: bytes.NewReader(img), size: int64(len(img)), bs: bs, blocks: 64, cache: map[int64][]byte{}, dirs: map[uint32]map[string]uint32{}}
	in := &inode{ino: 12, mode: 0x8000, size: 1 << 30, flags: flagExtents}
	root := in.iblk[:]
	le.PutUint16(root, 0xF30A)
	le.PutUint16(root[2:], 4)
	le.PutUint16(root[4:], 4)
	le.PutUint16(root[6:], 5)
	for i := 0; i < 4; i++ {
		le.PutUint32(root[12+12*i+4:], 10)
	}
	start := time.Now()
	_, err := f.extents(in)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("extents = %v, want ErrCorrupt", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("took %v", d)
	}
}
