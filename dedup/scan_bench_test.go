package dedup

import (
	"testing"

	"github.com/restic/chunker"
)

func benchRabin() *rabin {
	r := newRabin(chunker.Pol(testPol), 20)
	r.mask = 1<<52 - 1 // (almost) never cuts: measures the loop
	return r
}

func BenchmarkScanLanes(b *testing.B) {
	r := benchRabin()
	data := benchData[:16<<20]
	b.SetBytes(int64(len(data) - 64))
	m := meterCPU(b)
	defer m.stop(int64(len(data) - 64))
	for range b.N {
		r.scan(0, data, 64)
	}
}

func BenchmarkScanSingle(b *testing.B) {
	r := benchRabin()
	data := benchData[:16<<20]
	b.SetBytes(int64(len(data) - 64))
	m := meterCPU(b)
	defer m.stop(int64(len(data) - 64))
	out, mod, shift, mask := &r.out, &r.mod, r.shift, r.mask
	for range b.N {
		var d uint64
		old := data[:len(data)-64]
		in := data[64:]
		old = old[:len(in)]
		for j, c := range in {
			d ^= out[old[j]]
			d = (d<<8 | uint64(c)) ^ mod[uint8(d>>shift)]
			if d&mask == 0 {
				break
			}
		}
	}
}

func BenchmarkScan8(b *testing.B) {
	r := benchRabin()
	data := benchData[:16<<20]
	b.SetBytes(int64(len(data) - 64))
	m := meterCPU(b)
	defer m.stop(int64(len(data) - 64))
	for range b.N {
		r.scan8(0, data, 64)
	}
}
