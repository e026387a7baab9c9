package dedup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
)

// checkParent verifies that parentChunks tile [0,size) and could have come from these parameters.
// It catches a parent made with other sizes; a different polynomial cannot be detected without
// reading, so the caller must pass the parent's own chunk list.
func (c *impl) checkParent(parentChunks []ParentChunk, size int64) error {
	if n := len(parentChunks); n == 0 && size != 0 || n > 0 && parentChunks[n-1].Offset+parentChunks[n-1].Length != size {
		var end int64
		if n > 0 {
			end = parentChunks[n-1].Offset + parentChunks[n-1].Length
		}
		return fmt.Errorf("%w: parent chunks end at %d, disk has %d bytes", ErrSizeChanged, end, size)
	}
	var off int64
	for i, p := range parentChunks {
		if p.Offset != off || p.Length <= 0 {
			if p.Offset == off && p.Length == 0 {
				return fmt.Errorf("%w: chunk %d at %d is empty", ErrParentMismatch, i, p.Offset)
			}
			return fmt.Errorf("%w: chunk %d at %d+%d, expected offset %d", ErrParentMismatch, i, p.Offset, p.Length, off)
		}
		if p.Length > size-off {
			return fmt.Errorf("%w: parent chunks end after %d bytes, disk has %d", ErrSizeChanged, off+p.Length, size)
		}
		end := p.Offset + p.Length
		last := end == size
		switch {
		case p.Zero:
			if p.Length%c.zeroLen != 0 && !last {
				return fmt.Errorf("%w: zero run %d at %d+%d is not a multiple of %d", ErrParentMismatch, i, p.Offset, p.Length, c.zeroLen)
			}
			if c.rabin == nil && p.Offset%c.zeroLen != 0 {
				return fmt.Errorf("%w: zero run %d at %d is not aligned to %d", ErrParentMismatch, i, p.Offset, c.zeroLen)
			}
		case c.rabin == nil:
			if p.Offset%c.zeroLen != 0 || (p.Length != c.zeroLen && !last) {
				return fmt.Errorf("%w: chunk %d at %d+%d is not a %d-byte fixed chunk", ErrParentMismatch, i, p.Offset, p.Length, c.zeroLen)
			}
		default:
			if p.Length > int64(c.p.MaxSize) || (p.Length < int64(c.p.MinSize) && !last) {
				return fmt.Errorf("%w: chunk %d at %d+%d outside %d..%d bytes", ErrParentMismatch, i, p.Offset, p.Length, c.p.MinSize, c.p.MaxSize)
			}
		}
		off = end
	}
	if off != size {
		return fmt.Errorf("%w: parent chunks cover %d bytes, disk has %d", ErrSizeChanged, off, size)
	}
	return nil
}

// rechunkView is the new disk of a Rechunk: changed extents from the source's read-ahead, zeros where
// the parent had zero chunks, the parent's bytes elsewhere (read on demand, never past the parent
// chunk that holds them, so a chain that falls back onto a parent boundary has read nothing extra).
type rechunkView struct {
	size    int64
	changed []Extent
	ci      int
	par     []ParentChunk
	pi      int
	src     *stream
	parent  io.ReaderAt
	read    *atomic.Int64
	maxRead int
}

func (v *rechunkView) piece(off int64) (piece, error) {
	for v.ci < len(v.changed) && v.changed[v.ci].Offset+v.changed[v.ci].Length <= off {
		v.ci++
	}
	nextChange := v.size
	if v.ci < len(v.changed) {
		if v.changed[v.ci].Offset <= off {
			return v.src.next(off)
		}
		nextChange = v.changed[v.ci].Offset
	}
	for v.pi < len(v.par) && v.par[v.pi].Offset+v.par[v.pi].Length <= off {
		v.pi++
	}
	p := v.par[v.pi]
	end := p.Offset + p.Length
	if p.Zero {
		for j := v.pi + 1; j < len(v.par) && v.par[j].Zero && end < nextChange; j++ {
			end = v.par[j].Offset + v.par[j].Length
		}
		return piece{off: off, n: min(end, nextChange) - off}, nil
	}
	end = min(end, nextChange, off+int64(v.maxRead))
	n := int(end - off)
	buf := getBuffer(n)
	got, err := v.parent.ReadAt(buf, off)
	v.read.Add(int64(got))
	if got < n {
		ReleaseBuffer(buf)
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return piece{}, fmt.Errorf("read parent at offset %d (%d bytes): %w", off, n, err)
	}
	b := &block{buf: buf, refs: 1, done: true, free: func(b *block) { ReleaseBuffer(b.buf) }}
	return piece{off: off, n: int64(n), data: buf, blk: b}, nil
}

func (c *impl) Rechunk(ctx context.Context, src, parent io.ReaderAt, size int64, parentChunks []ParentChunk, changed []Extent,
	emit func(Chunk) error) error {
	if size < 0 {
		return fmt.Errorf("%w: negative disk size %d", ErrBadExtent, size)
	}
	if err := c.checkParent(parentChunks, size); err != nil {
		return err
	}
	ch, err := normalizeExtents(changed, size, "changed")
	if err != nil {
		return err
	}
	if len(ch) > 0 && src == nil {
		return errors.New("rechunk: nil source")
	}
	if parent == nil {
		return errors.New("rechunk: nil parent reader")
	}
	var parentRead atomic.Int64

	return c.run(ctx, src, ch, func(sctx context.Context, s *stream) (view, func(*engine) error) {
		v := &rechunkView{size: size, changed: ch, par: parentChunks, src: s, parent: parent,
			read: &parentRead, maxRead: c.blockSize}
		return v, func(e *engine) error {
			pj, cj := 0, 0
			for s := int64(0); s < size; {
				for parentChunks[pj].Offset+parentChunks[pj].Length <= s {
					pj++
				}
				p := parentChunks[pj]
				pend := p.Offset + p.Length
				// Does a parent chunk start at s? Zero runs may be coalesced: their chunks are zeroLen long.
				bEnd := int64(-1)
				if s == p.Offset {
					bEnd = pend
				}
				if p.Zero && (s-p.Offset)%c.zeroLen == 0 {
					bEnd = min(s+c.zeroLen, pend)
				}
				if bEnd > 0 {
					for cj < len(ch) && ch[cj].Offset+ch[cj].Length <= s {
						cj++
					}
					if cj == len(ch) || ch[cj].Offset >= bEnd {
						// Unchanged parent chunk on the chain: its cut depends only on its own bytes.
						out := Chunk{Offset: s, Length: int(bEnd - s), Zero: p.Zero, Parent: -1}
						if s == p.Offset && bEnd == pend {
							out.Parent = pj
						}
						e.skip(bEnd)
						s = bEnd
						if err := emit(out); err != nil {
							return fmt.Errorf("emit chunk at offset %d: %w", out.Offset, err)
						}
						if err := sctx.Err(); err != nil {
							return err
						}
						continue
					}
				}
				out, err := e.next(s)
				if err != nil {
					return err
				}
				s += int64(out.Length)
				if err := emit(out); err != nil {
					return fmt.Errorf("emit chunk at offset %d: %w", out.Offset, err)
				}
			}
			if want := sumExtents(ch); v.src.handed != want {
				return fmt.Errorf("dedup internal error: re-chunked %d of %d changed bytes", v.src.handed, want)
			}
			return nil
		}
	}, size, &parentRead)
}
