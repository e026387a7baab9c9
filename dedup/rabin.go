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
		// Hot loop: the byte leaving the window is data[i-64].
		old := data[:n-windowSize]
		in := data[windowSize:n]
		old = old[:len(in)]
		for j, b := range in {
			d ^= out[old[j]]
			d = (d<<8 | uint64(b)) ^ mod[uint8(d>>shift)]
			if d&mask == 0 {
				return j + windowSize, d
			}
		}
		copy(hist[:], data[n-windowSize:])
	} else {
		copy(hist[:], sc[n:n+windowSize])
	}
	return -1, d
}
