package dedup

import (
	"context"
	"fmt"
)

// block is a buffer that backs one or more pieces; it goes back to its owner once the view has
// handed out all of its pieces and the engine has dropped them. Only the consuming goroutine
// touches refs and done.
type block struct {
	buf  []byte
	segs []seg // read-ahead blocks: the extents packed into buf, in disk order
	refs int
	done bool
	free func(*block)
}

type seg struct {
	off int64 // disk offset
	pos int   // offset in buf
	n   int
}

func (b *block) unref() {
	b.refs--
	if b.refs == 0 && b.done && b.free != nil {
		b.free(b)
	}
}

// piece is a run of the disk being chunked: bytes in memory, or known zeros (data == nil).
type piece struct {
	off, n int64
	data   []byte
	blk    *block
}

func (p *piece) end() int64 { return p.off + p.n }

// view yields the disk's pieces in offset order: piece(off) returns the piece starting at off,
// where off is the end of the previous piece or a later position (a forward jump).
type view interface {
	piece(off int64) (piece, error)
}

// engine cuts chunks from a view. It keeps the pieces between the current chunk's start and the
// furthest byte examined (at most MaxSize plus one piece), and copies each data chunk once, from
// the pieces into a pooled buffer.
type engine struct {
	ctx  context.Context
	c    *impl
	v    view
	size int64
	q    []piece // contiguous pieces, q[0] holds the current chunk start
	qEnd int64
}

// pull appends the next piece from the view.
func (e *engine) pull() error {
	if err := e.ctx.Err(); err != nil {
		return err
	}
	p, err := e.v.piece(e.qEnd)
	if err != nil {
		return err
	}
	if p.off != e.qEnd || p.n <= 0 || p.end() > e.size || (p.data != nil && int64(len(p.data)) != p.n) {
		if p.blk != nil {
			p.blk.unref()
		}
		return fmt.Errorf("dedup internal error: view returned piece %d+%d at %d", p.off, p.n, e.qEnd)
	}
	e.q = append(e.q, p)
	e.qEnd = p.end()
	return nil
}

// at returns the index in q of the piece holding byte off, pulling pieces as needed.
func (e *engine) at(off int64, hint int) (int, error) {
	for e.qEnd <= off {
		if err := e.pull(); err != nil {
			return 0, err
		}
	}
	i := max(hint, 0)
	for i < len(e.q) && e.q[i].end() <= off {
		i++
	}
	return i, nil
}

// skip drops everything before off; the next pieces come from the view starting at off.
func (e *engine) skip(off int64) {
	i := 0
	for i < len(e.q) && e.q[i].end() <= off {
		if e.q[i].blk != nil {
			e.q[i].blk.unref()
		}
		i++
	}
	n := copy(e.q, e.q[i:])
	clear(e.q[n:])
	e.q = e.q[:n]
	if n > 0 && e.q[0].off < off {
		d := off - e.q[0].off
		e.q[0].off = off
		e.q[0].n -= d
		if e.q[0].data != nil {
			e.q[0].data = e.q[0].data[d:]
		}
	}
	if n == 0 {
		e.qEnd = off
	}
}

// close releases every piece still held.
func (e *engine) close() { e.skip(e.qEnd) }

// next cuts the chunk that starts at s (s must be a cut of the disk) and drops the pieces before its
// end. The chunk's Parent is -1.
func (e *engine) next(s int64) (Chunk, error) {
	i, err := e.at(s, 0)
	if err != nil {
		return Chunk{}, err
	}
	// Sparse fast path: a chunk starting in a long enough zero run has a fixed length.
	if p := &e.q[i]; p.data == nil {
		if end := p.end(); s+e.c.zeroLen <= end || end == e.size {
			c := min(s+e.c.zeroLen, e.size)
			e.skip(c)
			return Chunk{Offset: s, Length: int(c - s), Zero: true, Parent: -1}, nil
		}
	}
	var c int64
	if e.c.rabin != nil {
		c, err = e.cutCDC(s)
	} else {
		c = min(s+e.c.zeroLen, e.size)
		_, err = e.at(c-1, 0)
	}
	if err != nil {
		return Chunk{}, err
	}
	ch := e.gather(s, c)
	e.skip(c)
	return ch, nil
}

// cutCDC finds the cut after s exactly as restic/chunker does: the first window end p in
// [s+MinSize, s+MaxSize] whose 64-byte window digest has the average bits clear, else s+MaxSize,
// capped by the disk size. The hash is primed over the 64 bytes before s+MinSize; bytes before
// that are not hashed. Zero pieces are not walked: 64 zero bytes make the digest 0, which cuts.
func (e *engine) cutCDC(s int64) (int64, error) {
	minSz, maxSz := int64(e.c.p.MinSize), int64(e.c.p.MaxSize)
	lo := s + minSz
	if lo >= e.size {
		return e.size, e.need(s, e.size)
	}
	hi := min(s+maxSz, e.size)
	w0 := lo - windowSize
	var (
		d    uint64
		hist [windowSize]byte
		q    = w0
		idx  = 0
	)
	for q < hi {
		i, err := e.at(q, idx)
		if err != nil {
			return 0, err
		}
		idx = i
		p := &e.q[i]
		end := min(p.end(), hi)
		from := int(max(0, w0+windowSize-1-q))
		if p.data == nil {
			k := end - q
			m := min(k, windowSize)
			j, d2 := e.c.rabin.roll(d, &hist, zeroPage[:m], from)
			if j >= 0 {
				return q + int64(j) + 1, nil
			}
			d = d2
			if k > windowSize {
				// The window is all zero from q+64 on: the first tested end cuts.
				if c := max(q+windowSize+1, lo); c <= end {
					return c, nil
				}
			}
			q = end
			continue
		}
		j, d2 := e.c.rabin.roll(d, &hist, p.data[q-p.off:end-p.off], from)
		if j >= 0 {
			return q + int64(j) + 1, nil
		}
		d = d2
		q = end
	}
	return hi, nil
}

// need makes sure the pieces cover [s, c).
func (e *engine) need(s, c int64) error {
	if c <= s {
		return nil
	}
	_, err := e.at(c-1, 0)
	return err
}

// gather builds the chunk [s, c) from the pieces: Zero when every byte is zero (word compare), else
// a pooled copy of the bytes.
func (e *engine) gather(s, c int64) Chunk {
	ch := Chunk{Offset: s, Length: int(c - s), Parent: -1}
	zero := true
	for i := range e.q {
		p := &e.q[i]
		if p.off >= c {
			break
		}
		if p.data == nil || p.end() <= s {
			continue
		}
		a, b := max(s, p.off)-p.off, min(c, p.end())-p.off
		if !isZero(p.data[a:b]) {
			zero = false
			break
		}
	}
	if zero {
		ch.Zero = true
		return ch
	}
	buf := getBuffer(ch.Length)
	for i := range e.q {
		p := &e.q[i]
		if p.off >= c {
			break
		}
		if p.end() <= s {
			continue
		}
		a, b := max(s, p.off), min(c, p.end())
		dst := buf[a-s : b-s]
		if p.data == nil {
			clear(dst)
		} else {
			copy(dst, p.data[a-p.off:b-p.off])
		}
	}
	ch.Data = buf
	return ch
}
