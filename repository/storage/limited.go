package storage

import (
	"context"
	"errors"
	"io"
)

// Limiter paces bytes: WaitN blocks until n may pass or ctx ends.
// internal/ratelimit's Limiter implements it (this package may not import
// it); a nil Limiter is unlimited.
type Limiter interface {
	WaitN(ctx context.Context, n int) error
}

// CommitSender is a backend whose staged objects travel at Commit (an
// object store stages in memory or a local file and uploads then): Limited
// paces the upload body (BodyPacer) instead of the writes, so the network
// sees the limit, not the staging.
type CommitSender interface {
	SendsAtCommit() bool
}

// Limited wraps a Storage so that the bytes it uploads (Put bodies, staged
// writes or, on a CommitSender, the Commit's upload) pass up and the bytes
// it downloads (Object.ReadAt, GetRange) pass down. Metadata calls (Stat,
// List, Delete) and the small objects of optional interfaces (leases,
// PutExclusive's writer records) are not paced. Reach those interfaces
// with As: Limited unwraps.
type Limited struct {
	Storage
	up, down Limiter
}

// NewLimited wraps s; up or down may be nil (that direction unlimited).
func NewLimited(s Storage, up, down Limiter) *Limited {
	return &Limited{Storage: s, up: up, down: down}
}

// Unwrap returns the wrapped backend (for As).
func (l *Limited) Unwrap() Storage { return l.Storage }

// As finds in s, or in what it wraps (Unwrap chains), a backend of type
// T: an optional interface (Exclusive, SpaceReporter) or a concrete
// backend (*Local).
func As[T any](s Storage) (T, bool) {
	for s != nil {
		if t, ok := s.(T); ok {
			return t, true
		}
		u, ok := s.(interface{ Unwrap() Storage })
		if !ok {
			break
		}
		s = u.Unwrap()
	}
	var zero T
	return zero, false
}

func wait(ctx context.Context, l Limiter, n int) error {
	if l == nil || n <= 0 {
		return nil
	}
	return l.WaitN(ctx, n)
}

func (l *Limited) Put(ctx context.Context, name string, r io.Reader, size int64, steps Steps) error {
	if l.up != nil {
		r = PaceReader(ctx, r, l.up)
	}
	return l.Storage.Put(ctx, name, r, size, steps)
}

func (l *Limited) Create(ctx context.Context, name string) (Staged, error) {
	st, err := l.Storage.Create(ctx, name)
	if err != nil || l.up == nil {
		return st, err
	}
	cs, ok := As[CommitSender](l.Storage)
	atCommit := ok && cs.SendsAtCommit()
	return &limitedStaged{Staged: st, ctx: ctx, up: l.up, atCommit: atCommit}, nil
}

func (l *Limited) Open(ctx context.Context, name string) (Object, error) {
	o, err := l.Storage.Open(ctx, name)
	if err != nil || l.down == nil {
		return o, err
	}
	return &limitedObject{Object: o, down: l.down}, nil
}

func (l *Limited) GetRange(ctx context.Context, name string, off, length int64) ([]byte, error) {
	if length > 0 {
		if err := waitSize(ctx, l.down, length); err != nil {
			return nil, err
		}
	}
	b, err := l.Storage.GetRange(ctx, name, off, length)
	if err == nil && length < 0 {
		// To the end: the size is known only now; the next request pays.
		err = waitSize(ctx, l.down, int64(len(b)))
	}
	return b, err
}

func waitSize(ctx context.Context, l Limiter, n int64) error {
	for n > 0 {
		c := min(n, 1<<30)
		if err := wait(ctx, l, int(c)); err != nil {
			return err
		}
		n -= c
	}
	return nil
}

type limitedStaged struct {
	Staged
	ctx      context.Context
	up       Limiter
	atCommit bool
}

func (s *limitedStaged) Write(p []byte) (int, error) {
	if s.atCommit {
		return s.Staged.Write(p)
	}
	var done int
	for len(p) > 0 {
		c := p[:min(len(p), paceChunk)]
		if err := wait(s.ctx, s.up, len(c)); err != nil {
			return done, err
		}
		n, err := s.Staged.Write(c)
		done += n
		if err != nil {
			return done, err
		}
		p = p[n:]
	}
	return done, nil
}

func (s *limitedStaged) Commit(ctx context.Context, steps Steps) error {
	if s.atCommit {
		ctx = context.WithValue(ctx, pacerKey{}, s.up)
	}
	return s.Staged.Commit(ctx, steps)
}

type limitedObject struct {
	Object
	down Limiter
}

// ReadAt waits before the read: a ranged GET is not sent before its bytes
// may pass. An object's reads carry no context of their own (io.ReaderAt);
// a wait is bounded by the limit, and the caller's context cancels the
// read that follows.
func (o *limitedObject) ReadAt(p []byte, off int64) (int, error) {
	if err := waitSize(context.Background(), o.down, int64(len(p))); err != nil {
		return 0, err
	}
	return o.Object.ReadAt(p, off)
}

type pacerKey struct{}

// BodyPacer returns the Limiter a CommitSender's Commit must pace its
// upload with (nil: none): Limited puts it in the Commit's context.
func BodyPacer(ctx context.Context) Limiter {
	l, _ := ctx.Value(pacerKey{}).(Limiter)
	return l
}

// paceChunk bounds one paced read or write, so that a large buffer is
// sent smoothly rather than at once after a long wait.
const paceChunk = 256 << 10

// PaceReader returns r with its bytes passing l as they are read. When r
// is also an io.ReaderAt and io.Seeker (bytes.Reader, io.SectionReader,
// *os.File), so is the result, with ReadAt paced too: an S3 client then
// still sends parts in parallel and retries by seeking.
func PaceReader(ctx context.Context, r io.Reader, l Limiter) io.Reader {
	if l == nil {
		return r
	}
	p := &pacedReader{ctx: ctx, r: r, l: l}
	ra, okA := r.(io.ReaderAt)
	sk, okS := r.(io.Seeker)
	if okA && okS {
		return &pacedReadSeekerAt{pacedReader: p, ra: ra, sk: sk}
	}
	return p
}

type pacedReader struct {
	ctx context.Context
	r   io.Reader
	l   Limiter
}

func (p *pacedReader) Read(b []byte) (int, error) {
	if len(b) > paceChunk {
		b = b[:paceChunk]
	}
	n, err := p.r.Read(b)
	if n > 0 {
		if werr := p.l.WaitN(p.ctx, n); werr != nil {
			return n, werr
		}
	}
	return n, err
}

type pacedReadSeekerAt struct {
	*pacedReader
	ra io.ReaderAt
	sk io.Seeker
}

func (p *pacedReadSeekerAt) ReadAt(b []byte, off int64) (int, error) {
	n, err := p.ra.ReadAt(b, off)
	if n > 0 {
		if werr := waitSize(p.ctx, p.l, int64(n)); werr != nil && (err == nil || errors.Is(err, io.EOF)) {
			return n, werr
		}
	}
	return n, err
}

func (p *pacedReadSeekerAt) Seek(off int64, whence int) (int64, error) {
	return p.sk.Seek(off, whence)
}
