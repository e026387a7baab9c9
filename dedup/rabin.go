package dedup

import "github.com/restic/chunker"

// rabin holds the lookup tables of the 64-byte rolling Rabin fingerprint that restic/chunker uses,
// computed here from the polynomial so that the scan loop can read the outgoing byte straight from
// the data instead of keeping a window ring (restic's tables are private).
type rabin struct {
	out   [256]uint64 // out[b] = b·x^(8·63) mod pol: removes the byte leaving the window
	mod   [256]uint64 // mod[t] = (t·x^deg mod pol) | t·x^deg: reduces after a shift by one byte
	shift uint        // deg - 8: position of the byte that overflows on the next shift
	mask  uint64      // a window whose digest has these bits clear ends a chunk
}

func newRabin(pol chunker.Pol, avgBits int) *rabin {
	r := &rabin{shift: uint(pol.Deg() - 8), mask: 1<<uint(avgBits) - 1}
	// x^(8·63) mod pol, the weight of the oldest byte in a full window.
	w := chunker.Pol(1)
	for i := 0; i < windowSize-1; i++ {
		w = (w << 8).Mod(pol)
	}
	deg := uint(pol.Deg())
	for b := 0; b < 256; b++ {
		r.out[b] = uint64(chunker.Pol(b).MulMod(w, pol))
		top := chunker.Pol(uint64(b) << deg)
		r.mod[b] = uint64(top.Mod(pol) | top)
	}
	return r
}

// roll feeds data to the fingerprint. hist holds the 64 bytes preceding data[0] (the bytes leaving
// the window) and is updated to the last 64 bytes consumed. A window ending after data[i] is tested
// only for i >= from (from < 64: at most the priming bytes of a chunk are untested). It returns the
// index of the byte that completes a cutting window, or -1, and the new digest.
func (r *rabin) roll(d uint64, hist *[windowSize]byte, data []byte, from int) (int, uint64) {
	out, mod, shift, mask := &r.out, &r.mod, r.shift, r.mask
	n := len(data)
	h := min(n, windowSize)
	// The first 64 bytes slide out history bytes: run them over a scratch copy of history+head.
	var sc [2 * windowSize]byte
	copy(sc[:windowSize], hist[:])
	copy(sc[windowSize:], data[:h])
	for i := 0; i < h; i++ {
		d ^= out[sc[i]]
		d = (d<<8 | uint64(sc[windowSize+i])) ^ mod[uint8(d>>shift)]
		if d&mask == 0 && i >= from {
			return i, d
		}
	}
	if n > windowSize {
		var j int
		var d2 uint64
		if r.shift == 45 {
			j, d2 = r.scan8(d, data, windowSize)
		} else {
			j, d2 = r.scan(d, data, windowSize)
		}
		if j >= 0 {
			return j, d2
		}
		d = d2
		copy(hist[:], data[n-windowSize:])
	} else {
		copy(hist[:], sc[n:n+windowSize])
	}
	return -1, d
}

// Lanes: the digest is a function of the 64-byte window alone, so independent stretches of data can
// be hashed at the same time. Four interleaved dependency chains keep the CPU busy where a single
// chain waits on each table load; a lane starts by hashing the 64 bytes before its stretch.
const (
	laneLen = 16 << 10
	lanes   = 4
)

type laneBuf = [laneLen + windowSize]byte

// prime returns the digest of the window w.
func (r *rabin) prime(w *[windowSize]byte) uint64 {
	var d uint64
	for _, b := range w {
		d = (d<<8 | uint64(b)) ^ r.mod[uint8(d>>r.shift)]
	}
	return d
}

// scan tests every window ending after data[i:], with d the digest of data[i-64:i] (i >= 64). It
// returns the index of the first byte that completes a cutting window, or -1 and the final digest.
func (r *rabin) scan(d uint64, data []byte, i int) (int, uint64) {
	out, mod, shift, mask := &r.out, &r.mod, r.shift, r.mask
	for len(data)-i >= lanes*laneLen {
		a := [lanes]int{i, i + laneLen, i + 2*laneLen, i + 3*laneLen}
		l0 := (*laneBuf)(data[a[0]-windowSize : a[0]+laneLen])
		l1 := (*laneBuf)(data[a[1]-windowSize : a[1]+laneLen])
		l2 := (*laneBuf)(data[a[2]-windowSize : a[2]+laneLen])
		l3 := (*laneBuf)(data[a[3]-windowSize : a[3]+laneLen])
		d0 := d
		d1 := r.prime((*[windowSize]byte)(l1[:windowSize]))
		d2 := r.prime((*[windowSize]byte)(l2[:windowSize]))
		d3 := r.prime((*[windowSize]byte)(l3[:windowSize]))
		for j := 0; j < laneLen; j++ {
			d0 ^= out[l0[j]]
			d1 ^= out[l1[j]]
			d2 ^= out[l2[j]]
			d3 ^= out[l3[j]]
			d0 = (d0<<8 | uint64(l0[j+windowSize])) ^ mod[uint8(d0>>shift)]
			d1 = (d1<<8 | uint64(l1[j+windowSize])) ^ mod[uint8(d1>>shift)]
			d2 = (d2<<8 | uint64(l2[j+windowSize])) ^ mod[uint8(d2>>shift)]
			d3 = (d3<<8 | uint64(l3[j+windowSize])) ^ mod[uint8(d3>>shift)]
			if d0&mask == 0 || d1&mask == 0 || d2&mask == 0 || d3&mask == 0 {
				// Some lane cuts here. The earliest cut is the first lane's first cut: lanes before
				// the first one that cut at j carry on alone over the rest of their stretch.
				ds := [lanes]uint64{d0, d1, d2, d3}
				ls := [lanes]*laneBuf{l0, l1, l2, l3}
				for k := range lanes {
					dk, lk := ds[k], ls[k]
					if dk&mask == 0 {
						return a[k] + j, dk
					}
					for jj := j + 1; jj < laneLen; jj++ {
						dk ^= out[lk[jj]]
						dk = (dk<<8 | uint64(lk[jj+windowSize])) ^ mod[uint8(dk>>shift)]
						if dk&mask == 0 {
							return a[k] + jj, dk
						}
					}
				}
			}
		}
		d = d3
		i += lanes * laneLen
	}
	if i >= len(data) {
		return -1, d
	}
	old := data[i-windowSize : len(data)-windowSize]
	in := data[i:]
	old = old[:len(in)]
	for j, b := range in {
		d ^= out[old[j]]
		d = (d<<8 | uint64(b)) ^ mod[uint8(d>>shift)]
		if d&mask == 0 {
			return i + j, d
		}
	}
	return -1, d
}
