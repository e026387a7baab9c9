package dedup

import (
	"context"
	"errors"
)

// memView is a disk held in memory as one piece: no read-ahead, no copy.
type memView struct{ data []byte }

func (v memView) piece(off int64) (piece, error) {
	return piece{off: off, n: int64(len(v.data)) - off, data: v.data[off:]}, nil
}

// CutKernel finds the chunk boundaries of data as if it were a whole disk,
// with the cut search alone: no read-ahead copy, no zero test, no chunk
// buffer. It returns the number of chunks. It is the bare kernel that the
// stage table (internal/benchstage) sets beside the chunk stage of a real
// backup; Split cuts the same data at the same offsets.
func CutKernel(c Chunker, data []byte) (int, error) {
	ci, ok := c.(*impl)
	if !ok {
		return 0, errors.New("cut kernel: not a chunker of this package")
	}
	size := int64(len(data))
	e := &engine{ctx: context.Background(), c: ci, v: memView{data}, size: size}
	n := 0
	for s := int64(0); s < size; n++ {
		var cut int64
		if ci.rabin != nil {
			var err error
			if cut, err = e.cutCDC(s); err != nil {
				return n, err
			}
		} else {
			cut = min(s+ci.zeroLen, size)
		}
		e.skip(cut)
		s = cut
	}
	return n, nil
}
