package dedup

const (
	lane8Len = 8 << 10
	lanes8   = 8
)

type group8 = [lanes8*lane8Len + windowSize]byte

// scan8 is scan for degree-53 polynomials (all that RandomPolynomial makes): a constant shift and
// one base pointer leave registers for eight chains.
func (r *rabin) scan8(d uint64, data []byte, i int) (int, uint64) {
	out, mod, mask := &r.out, &r.mod, r.mask
	const sh = 45
	for len(data)-i >= lanes8*lane8Len {
		g := (*group8)(data[i-windowSize : i+lanes8*lane8Len])
		d0 := d
		d1 := r.prime((*[windowSize]byte)(g[1*lane8Len:]))
		d2 := r.prime((*[windowSize]byte)(g[2*lane8Len:]))
		d3 := r.prime((*[windowSize]byte)(g[3*lane8Len:]))
		d4 := r.prime((*[windowSize]byte)(g[4*lane8Len:]))
		d5 := r.prime((*[windowSize]byte)(g[5*lane8Len:]))
		d6 := r.prime((*[windowSize]byte)(g[6*lane8Len:]))
		d7 := r.prime((*[windowSize]byte)(g[7*lane8Len:]))
		for j := 0; j < lane8Len; j++ {
			d0 ^= out[g[j]]
			d1 ^= out[g[j+1*lane8Len]]
			d2 ^= out[g[j+2*lane8Len]]
			d3 ^= out[g[j+3*lane8Len]]
			d4 ^= out[g[j+4*lane8Len]]
			d5 ^= out[g[j+5*lane8Len]]
			d6 ^= out[g[j+6*lane8Len]]
			d7 ^= out[g[j+7*lane8Len]]
			d0 = (d0<<8 | uint64(g[j+windowSize])) ^ mod[uint8(d0>>sh)]
			d1 = (d1<<8 | uint64(g[j+windowSize+1*lane8Len])) ^ mod[uint8(d1>>sh)]
			d2 = (d2<<8 | uint64(g[j+windowSize+2*lane8Len])) ^ mod[uint8(d2>>sh)]
			d3 = (d3<<8 | uint64(g[j+windowSize+3*lane8Len])) ^ mod[uint8(d3>>sh)]
			d4 = (d4<<8 | uint64(g[j+windowSize+4*lane8Len])) ^ mod[uint8(d4>>sh)]
			d5 = (d5<<8 | uint64(g[j+windowSize+5*lane8Len])) ^ mod[uint8(d5>>sh)]
			d6 = (d6<<8 | uint64(g[j+windowSize+6*lane8Len])) ^ mod[uint8(d6>>sh)]
			d7 = (d7<<8 | uint64(g[j+windowSize+7*lane8Len])) ^ mod[uint8(d7>>sh)]
			if (d0&mask == 0 || d1&mask == 0 || d2&mask == 0 || d3&mask == 0) || (d4&mask == 0 || d5&mask == 0 || d6&mask == 0 || d7&mask == 0) {
				ds := [lanes8]uint64{d0, d1, d2, d3, d4, d5, d6, d7}
				for k := range lanes8 {
					dk := ds[k]
					base := k * lane8Len
					if dk&mask == 0 {
						return i + base + j, dk
					}
					for jj := j + 1; jj < lane8Len; jj++ {
						dk ^= out[g[base+jj]]
						dk = (dk<<8 | uint64(g[base+jj+windowSize])) ^ mod[uint8(dk>>sh)]
						if dk&mask == 0 {
							return i + base + jj, dk
						}
					}
				}
			}
		}
		d = d7
		i += lanes8 * lane8Len
	}
	return r.scan(d, data, i)
}
