package dedup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/vmvault/vmvault/internal/extent"
)

const (
	defaultBlockSize = 8 << 20 // source reads are this large (packed with small extents)
	readAheadBlocks  = 2       // blocks read while the chunker works on earlier ones
)

type impl struct {
	p         Params
	rabin     *rabin // nil for fixed-size chunks
	zeroLen   int64  // length of a chunk that starts inside a long zero run
	blockSize int    // tests shrink it to exercise block edges
}

func (c *impl) Params() Params { return c.p }

// zeroRunLength chunks zeros to find the length of a chunk that starts in a long zero run.
func (c *impl) zeroRunLength() (int64, error) {
	var hist [windowSize]byte
	// The chunker skips the first MinSize-64 bytes of a chunk and hashes from there; feed it zeros.
	j, _ := c.rabin.roll(0, &hist, zeroPage[:windowSize], windowSize-1)
	if j < 0 {
		return 0, fmt.Errorf("dedup internal error: a zero window does not cut")
	}
	z := int64(c.p.MinSize - windowSize + j + 1)
	if z != int64(c.p.MinSize) {
		return 0, fmt.Errorf("dedup internal error: zero-run chunk length %d, want min size %d", z, c.p.MinSize)
	}
	return z, nil
}

// normalizeExtents validates extents against the disk size, then normalises them
// (extent.Normalize: sorted, empty ones dropped, overlapping or touching ones merged).
// The input is not modified.
func normalizeExtents(exts []Extent, size int64, what string) ([]Extent, error) {
	out := make([]Extent, 0, len(exts))
	for _, x := range exts {
		if x.Offset < 0 || x.Length < 0 || x.Offset > size || x.Length > size-x.Offset {
			return nil, fmt.Errorf("%w: %s extent %d+%d outside disk of %d bytes", ErrBadExtent, what, x.Offset, x.Length, size)
		}
		if x.Length > 0 {
			out = append(out, x)
		}
	}
	return extent.Normalize(out, size), nil
}

func sumExtents(exts []Extent) int64 {
	var n int64
	for _, x := range exts {
		n += x.Length
	}
	return n
}

var blockPool sync.Pool // of *[]byte, len defaultBlockSize

func getBlockBuf(n int) []byte {
	if n == defaultBlockSize {
		if p, ok := blockPool.Get().(*[]byte); ok {
			return *p
		}
	}
	return make([]byte, n)
}

func putBlockBuf(b []byte) {
	if len(b) == defaultBlockSize {
		blockPool.Put(&b)
	}
}

// readAhead reads extents of src in order into packed blocks on one goroutine, at most a fixed
// number of blocks ahead of the consumer.
type readAhead struct {
	out   chan *block
	free  chan *block
	read  atomic.Int64
	owned []*block
}

// startReadAhead starts the reader on g. The consumer holds at most maxChunk/bs+3 blocks at once
// (a chunk's data, the block it started in, the piece read past its end); readAheadBlocks more let
// the reader run ahead. Blocks are allocated on first use, so a small disk costs little.
func startReadAhead(ctx context.Context, g *errgroup.Group, src io.ReaderAt, exts []Extent, bs, maxChunk int) *readAhead {
	bs = int(min(int64(bs), max(64<<10, sumExtents(exts))))
	limit := (maxChunk+bs-1)/bs + 3 + readAheadBlocks
	ra := &readAhead{out: make(chan *block, limit), free: make(chan *block, limit)}
	g.Go(func() error {
		defer close(ra.out)
		getBlock := func() (*block, error) {
			select {
			case b := <-ra.free:
				return b, nil
			default:
			}
			if len(ra.owned) < limit {
				b := &block{buf: getBlockBuf(bs)}
				b.free = func(b *block) { ra.free <- b }
				ra.owned = append(ra.owned, b)
				return b, nil
			}
			select {
			case b := <-ra.free:
				return b, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		var cur *block
		used := 0
		send := func() error {
			select {
			case ra.out <- cur:
				cur = nil
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		for _, x := range exts {
			for off, end := x.Offset, x.Offset+x.Length; off < end; {
				if cur == nil {
					var err error
					if cur, err = getBlock(); err != nil {
						return err
					}
					cur.segs, cur.refs, cur.done, used = cur.segs[:0], 0, false, 0
				}
				n := int(min(end-off, int64(len(cur.buf)-used)))
				got, err := src.ReadAt(cur.buf[used:used+n], off)
				ra.read.Add(int64(got))
				if got < n {
					if err == nil || errors.Is(err, io.EOF) {
						err = io.ErrUnexpectedEOF
					}
					return fmt.Errorf("read source at offset %d (%d bytes): %w", off, n, err)
				}
				cur.segs = append(cur.segs, seg{off: off, pos: used, n: n})
				used += n
				off += int64(n)
				if used == len(cur.buf) {
					if err := send(); err != nil {
						return err
					}
				}
			}
		}
		if cur != nil {
			return send()
		}
		return nil
	})
	return ra
}

// release hands the blocks back to the package pool; only after the reader goroutine has stopped.
func (ra *readAhead) release() {
	for _, b := range ra.owned {
		putBlockBuf(b.buf)
	}
	ra.owned = nil
}

// stream hands out the read-ahead blocks' segments as pieces, in order.
type stream struct {
	ctx    context.Context
	ra     *readAhead
	cur    *block
	si     int
	handed int64 // bytes handed out as pieces
}

func (s *stream) next(off int64) (piece, error) {
	if s.cur == nil {
		select {
		case b, ok := <-s.ra.out:
			if !ok {
				// The reader failed (its error wins in Wait) or an extent was skipped.
				return piece{}, fmt.Errorf("source read-ahead ended before offset %d: %w", off, context.Canceled)
			}
			s.cur, s.si = b, 0
		case <-s.ctx.Done():
			return piece{}, s.ctx.Err()
		}
	}
	sg := s.cur.segs[s.si]
	if sg.off != off {
		return piece{}, fmt.Errorf("dedup internal error: source data at %d requested, read-ahead is at %d", off, sg.off)
	}
	b := s.cur
	b.refs++
	s.si++
	s.handed += int64(sg.n)
	if s.si == len(b.segs) {
		b.done = true
		s.cur = nil
	}
	return piece{off: off, n: int64(sg.n), data: b.buf[sg.pos : sg.pos+sg.n], blk: b}, nil
}

// extentView is the disk of a Split: allocated extents from the read-ahead, zeros elsewhere.
type extentView struct {
	size int64
	ext  []Extent
	ei   int
	src  *stream
}

func (v *extentView) piece(off int64) (piece, error) {
	for v.ei < len(v.ext) && v.ext[v.ei].Offset+v.ext[v.ei].Length <= off {
		v.ei++
	}
	if v.ei == len(v.ext) {
		return piece{off: off, n: v.size - off}, nil
	}
	if x := v.ext[v.ei]; off < x.Offset {
		return piece{off: off, n: x.Offset - off}, nil
	}
	return v.src.next(off)
}

func (c *impl) Split(ctx context.Context, src io.ReaderAt, size int64, allocated []Extent, emit func(Chunk) error) (err error) {
	if size < 0 {
		return fmt.Errorf("%w: negative disk size %d", ErrBadExtent, size)
	}
	var exts []Extent
	if allocated == nil {
		if size > 0 {
			exts = []Extent{{0, size}}
		}
	} else if exts, err = normalizeExtents(allocated, size, "allocated"); err != nil {
		return err
	}
	if len(exts) > 0 && src == nil {
		return errors.New("split: nil source")
	}
	return c.run(ctx, src, exts, func(sctx context.Context, s *stream) (view, func(*engine) error) {
		return &extentView{size: size, ext: exts, src: s}, func(e *engine) error {
			for off := int64(0); off < size; {
				if err := sctx.Err(); err != nil {
					return err
				}
				ch, err := e.next(off)
				if err != nil {
					return err
				}
				off += int64(ch.Length)
				if err := emit(ch); err != nil {
					return fmt.Errorf("emit chunk at offset %d: %w", ch.Offset, err)
				}
			}
			return nil
		}
	}, size, nil)
}

// run owns the read-ahead goroutine around one chunking loop and accounts the bytes read.
func (c *impl) run(ctx context.Context, src io.ReaderAt, exts []Extent,
	setup func(context.Context, *stream) (view, func(*engine) error), size int64, parentRead *atomic.Int64) error {
	cctx, cancel := context.WithCancel(ctx)
	g, gctx := errgroup.WithContext(cctx)
	ra := startReadAhead(gctx, g, src, exts, c.blockSize, c.p.MaxSize)
	s := &stream{ctx: gctx, ra: ra}
	v, loop := setup(gctx, s)
	e := &engine{ctx: gctx, c: c, v: v, size: size}
	loopErr := loop(e)
	e.close()
	cancel()
	readErr := g.Wait()
	ra.release()
	if st, ok := ctx.Value(statsKey{}).(*Stats); ok && st != nil {
		st.SourceBytesRead += ra.read.Load()
		if parentRead != nil {
			st.ParentBytesRead += parentRead.Load()
		}
	}
	switch {
	case loopErr == nil:
		return nil
	case readErr != nil && !errors.Is(readErr, context.Canceled):
		return readErr
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return loopErr
}
