package dedup

import (
	"context"
	"encoding/binary"
	"testing"
)

func fuzzParams(alg string) Params {
	return Params{Algorithm: alg, Polynomial: testPol, MinSize: 64, AvgSize: 256, MaxSize: 1024}
}

// FuzzSplit: any bytes, any allocation map derived from them: Split equals the oracle and reads only
// allocated bytes.
func FuzzSplit(f *testing.F) {
	f.Add([]byte("hello world"), uint8(0))
	f.Add(make([]byte, 5000), uint8(3))
	f.Add(append(make([]byte, 300), []byte("some data after a zero run, long enough to cut twice or more.....")...), uint8(7))
	base := fuzzChunkers(f)
	f.Fuzz(func(t *testing.T, data []byte, mode uint8) {
		for _, b := range base {
			c := *b
			c.blockSize = 64 + int(mode)*7
			alg := c.p.Algorithm
			var alloc []Extent
			if mode&1 != 0 { // map the non-zero 16-byte blocks only
				alloc = []Extent{}
				for off := 0; off < len(data); off += 16 {
					end := min(off+16, len(data))
					if !isZero(data[off:end]) {
						alloc = append(alloc, Extent{int64(off), int64(end - off)})
					}
				}
			}
			r := &recorder{data: data}
			g := split(t, &c, r, int64(len(data)), alloc, data)
			diffSpans(t, alg, g.spans, oracle(t, c.p, data))
			if alloc != nil && !withinUnion(r.reads, alloc) {
				t.Fatal("read outside the allocation map")
			}
		}
	})
}

// FuzzRechunk: a parent image and writes decoded from the input: Rechunk equals the oracle on the
// new image and reads exactly the changed bytes from the source.
func FuzzRechunk(f *testing.F) {
	f.Add(make([]byte, 3000), []byte{0, 10, 0, 20, 1})
	f.Add([]byte("the quick brown fox jumps over the lazy dog, again and again and again and again"), []byte{0, 0, 0, 5, 0, 0, 40, 0, 3, 2})
	base := fuzzChunkers(f)
	f.Fuzz(func(t *testing.T, old []byte, spec []byte) {
		if len(old) == 0 {
			return
		}
		size := int64(len(old))
		cur := append([]byte(nil), old...)
		var changed []Extent
		for len(spec) >= 5 {
			off := int64(binary.BigEndian.Uint16(spec)) % size
			n := 1 + int64(binary.BigEndian.Uint16(spec[2:]))%(size-off)
			for i := off; i < off+n; i++ {
				switch spec[4] % 3 {
				case 0:
					cur[i] = byte(i*7) ^ spec[4]
				case 1:
					cur[i] = 0
				}
			}
			changed = append(changed, Extent{off, n})
			spec = spec[5:]
		}
		for _, c := range base {
			alg := c.p.Algorithm
			parent := parentList(oracle(t, c.p, old), func() bool { return len(spec)%2 == 0 })
			src, par := &recorder{data: cur}, &recorder{data: old}
			g := collect(t, cur, func(emit func(Chunk) error) error {
				return c.Rechunk(context.Background(), src, par, size, parent, changed, emit)
			})
			diffSpans(t, alg, g.spans, oracle(t, c.p, cur))
			norm, _ := normalizeExtents(changed, size, "changed")
			if src.total() != sumExtents(norm) || !within(src.reads, norm) {
				t.Fatalf("read %d source bytes, %d changed", src.total(), sumExtents(norm))
			}
		}
	})
}

// fuzzChunkers builds the chunkers once: validating a polynomial costs milliseconds.
func fuzzChunkers(f *testing.F) []*impl {
	return []*impl{newChunker(f, fuzzParams(AlgorithmCDC), 200), newChunker(f, fuzzParams(AlgorithmFixed), 200)}
}
