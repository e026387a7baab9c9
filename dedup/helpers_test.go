package dedup

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand"
	"slices"
	"sync"
	"testing"

	"github.com/restic/chunker"
)

// testPol is a fixed irreducible polynomial so failures reproduce.
const testPol = 0x3DA3358B4DC173

func smallParams(alg string) Params {
	return Params{Algorithm: alg, Polynomial: testPol, MinSize: 4 << 10, AvgSize: 16 << 10, MaxSize: 64 << 10}
}

func newChunker(t testing.TB, p Params, blockSize int) *impl {
	t.Helper()
	c, err := New(p)
	if err != nil {
		t.Fatalf("New(%+v): %v", p, err)
	}
	ci := c.(*impl)
	if blockSize > 0 {
		ci.blockSize = blockSize
	}
	return ci
}

// span is a chunk as the oracle sees it.
type span struct {
	Off, Len int64
	Zero     bool
}

// oracle chunks every byte: restic/chunker itself for CDC, plain arithmetic for fixed.
func oracle(t testing.TB, p Params, data []byte) []span {
	t.Helper()
	var out []span
	add := func(off, n int64) {
		out = append(out, span{off, n, isZero(data[off : off+n])})
	}
	if p.Algorithm == AlgorithmFixed {
		for off := int64(0); off < int64(len(data)); off += int64(p.AvgSize) {
			add(off, min(int64(p.AvgSize), int64(len(data))-off))
		}
		return out
	}
	ck := chunker.NewWithBoundaries(bytes.NewReader(data), chunker.Pol(p.Polynomial), uint(p.MinSize), uint(p.MaxSize))
	ck.SetAverageBits(trailingBits(p.AvgSize))
	buf := make([]byte, p.MaxSize)
	for {
		c, err := ck.Next(buf)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("restic chunker: %v", err)
		}
		add(int64(c.Start), int64(c.Length))
	}
	return out
}

func trailingBits(n int) int {
	b := 0
	for n > 1 {
		n >>= 1
		b++
	}
	return b
}

// recorder is an io.ReaderAt over a byte slice that records every range read.
type recorder struct {
	mu    sync.Mutex
	data  []byte
	reads []Extent
}

func (r *recorder) ReadAt(p []byte, off int64) (int, error) {
	r.mu.Lock()
	r.reads = append(r.reads, Extent{off, int64(len(p))})
	r.mu.Unlock()
	if off < 0 || off > int64(len(r.data)) {
		return 0, fmt.Errorf("read at %d outside %d bytes", off, len(r.data))
	}
	n := copy(p, r.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (r *recorder) total() int64 {
	var n int64
	for _, x := range r.reads {
		n += x.Length
	}
	return n
}

// got is what a Split or Rechunk emitted.
type got struct {
	spans  []span
	parent []int
}

func collect(t testing.TB, data []byte, run func(emit func(Chunk) error) error) got {
	t.Helper()
	var g got
	var next int64
	err := run(func(c Chunk) error {
		defer ReleaseBuffer(c.Data)
		if c.Offset != next {
			return fmt.Errorf("chunk at %d, expected %d", c.Offset, next)
		}
		next += int64(c.Length)
		switch {
		case c.Zero || c.Parent >= 0:
			if c.Data != nil {
				return fmt.Errorf("chunk at %d (zero=%v parent=%d) carries data", c.Offset, c.Zero, c.Parent)
			}
		case len(c.Data) != c.Length:
			return fmt.Errorf("chunk at %d: %d bytes of data for length %d", c.Offset, len(c.Data), c.Length)
		case data != nil && !bytes.Equal(c.Data, data[c.Offset:c.Offset+int64(c.Length)]):
			return fmt.Errorf("chunk at %d+%d: wrong bytes", c.Offset, c.Length)
		}
		g.spans = append(g.spans, span{c.Offset, int64(c.Length), c.Zero})
		g.parent = append(g.parent, c.Parent)
		return nil
	})
	if err != nil {
		t.Fatalf("chunking failed: %v", err)
	}
	return g
}

func split(t testing.TB, c *impl, r io.ReaderAt, size int64, alloc []Extent, data []byte) got {
	t.Helper()
	return collect(t, data, func(emit func(Chunk) error) error {
		return c.Split(context.Background(), r, size, alloc, emit)
	})
}

func diffSpans(t testing.TB, what string, got, want []span) {
	t.Helper()
	if slices.Equal(got, want) {
		return
	}
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			t.Fatalf("%s: chunk %d is %+v, want %+v (%d vs %d chunks)", what, i, got[i], want[i], len(got), len(want))
		}
	}
	t.Fatalf("%s: %d chunks, want %d", what, len(got), len(want))
}

// image makes a disk image with random data, long zero runs and low-entropy runs.
func image(rng *rand.Rand, size int) []byte {
	b := make([]byte, size)
	for off := 0; off < size; {
		n := min(size-off, 1+rng.Intn(256<<10))
		switch rng.Intn(5) {
		case 0, 1:
			rng.Read(b[off : off+n])
		case 2: // zeros: already
		case 3: // a repeated byte: a window that may never cut (max-size chunks)
			v := byte(1 + rng.Intn(255))
			for i := off; i < off+n; i++ {
				b[i] = v
			}
		case 4: // text-like
			for i := off; i < off+n; i++ {
				b[i] = "abcdefgh \n"[rng.Intn(10)]
			}
		}
		off += n
	}
	return b
}

// dataExtents returns extents that cover every non-zero byte of b, sometimes with zero bytes
// included, as a file system's allocation map would.
func dataExtents(rng *rand.Rand, b []byte) []Extent {
	var out []Extent
	const blk = 4096
	for off := 0; off < len(b); off += blk {
		end := min(off+blk, len(b))
		if isZero(b[off:end]) && rng.Intn(8) != 0 {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Offset+out[n-1].Length == int64(off) {
			out[n-1].Length += int64(end - off)
		} else {
			out = append(out, Extent{int64(off), int64(end - off)})
		}
	}
	if out == nil {
		// Nothing allocated: an empty map, not nil (which means the whole disk).
		out = []Extent{}
	}
	return out
}

// within reports whether every read lies inside one of the extents (sorted, non-overlapping).
func within(reads, exts []Extent) bool {
	for _, r := range reads {
		if r.Length == 0 {
			continue
		}
		i, _ := slices.BinarySearchFunc(exts, r.Offset, func(x Extent, off int64) int {
			switch {
			case x.Offset+x.Length <= off:
				return -1
			case x.Offset > off:
				return 1
			}
			return 0
		})
		if i == len(exts) || exts[i].Offset > r.Offset || r.Offset+r.Length > exts[i].Offset+exts[i].Length {
			return false
		}
	}
	return true
}

// scale shrinks test data under the race detector.
func scale(n int) int {
	if raceEnabled {
		return max(1, n/3)
	}
	return n
}
