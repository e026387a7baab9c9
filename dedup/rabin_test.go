package dedup

import (
	"math/rand"
	"testing"

	"github.com/restic/chunker"
)

// TestScanLanes: the four-lane scan finds exactly the cut a byte-by-byte scan finds, whichever lane
// holds it, and ends with the same digest when nothing cuts.
func TestScanLanes(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	data := make([]byte, 5*lanes*laneLen+1000)
	if r := newRabin(chunker.Pol(testPol), 20); r.shift != 45 {
		t.Fatalf("test polynomial has degree %d, want 53", r.shift+8)
	}
	rng.Read(data)
	for iter := range scale(300) {
		bits := 10 + rng.Intn(10)
		r := newRabin(chunker.Pol(testPol), bits)
		n := 64 + rng.Intn(len(data)-64)
		d := data[:n]
		if iter%4 == 0 { // a cut only far in: exercise lanes 2 and 3
			r.mask = 1<<uint(30+rng.Intn(20)) - 1
		}
		start := r.prime((*[windowSize]byte)(d[:windowSize]))
		j, dig := r.scan(start, d, windowSize)
		j8, dig8 := r.scan8(start, d, windowSize)
		if j8 != j || (j < 0 && dig8 != dig) {
			t.Fatalf("iter %d: scan8 cut at %d digest %#x, scan at %d digest %#x", iter, j8, dig8, j, dig)
		}
		// Reference: one byte at a time.
		wj, wd := -1, start
		for i := windowSize; i < n; i++ {
			wd ^= r.out[d[i-windowSize]]
			wd = (wd<<8 | uint64(d[i])) ^ r.mod[uint8(wd>>r.shift)]
			if wd&r.mask == 0 {
				wj = i
				break
			}
		}
		if j != wj || (j < 0 && dig != wd) {
			t.Fatalf("iter %d (n %d, mask %#x): scan cut at %d digest %#x, want %d digest %#x", iter, n, r.mask, j, dig, wj, wd)
		}
	}
}

// TestRabinTablesMatchRestic: the digest of a window equals restic's Rabin fingerprint (computed
// with its exported polynomial arithmetic), for several polynomials.
func TestRabinTablesMatchRestic(t *testing.T) {
	rng := rand.New(rand.NewSource(12))
	for range 5 {
		pol, err := chunker.RandomPolynomial()
		if err != nil {
			t.Fatal(err)
		}
		r := newRabin(pol, 20)
		var w [windowSize]byte
		rng.Read(w[:])
		var want chunker.Pol
		for _, b := range w {
			want = (want<<8 | chunker.Pol(b)).Mod(pol)
		}
		if got := r.prime(&w); got != uint64(want) {
			t.Fatalf("pol %v: digest %#x, want %#x", pol, got, uint64(want))
		}
	}
}
