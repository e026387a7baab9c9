package restore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/vmvault/vmvault/disk/vmdk"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/vmconfig"
	"github.com/vmvault/vmvault/vsphere"
)

// Points is what restore needs of a repository (*repository.Repository
// implements it).
type Points interface {
	Point(ctx context.Context, idOrPrefix string) (repository.Point, error)
	LoadConfigBlob(ctx context.Context, p repository.Point) ([]byte, error)
	OpenDisk(ctx context.Context, pointID string, disk int) (*repository.DiskReader, error)
}

// Options tune an Engine. The zero value is ready to use.
type Options struct {
	// Now is the clock (rehearsal names and ages); default time.Now.
	Now func() time.Time
	// CleanupTimeout bounds the removal of a half-made VM or disk after a
	// failure or cancellation (it runs on a context detached from the
	// caller's); default 2 minutes.
	CleanupTimeout time.Duration
}

// Engine restores restore points to one vCenter.
type Engine struct {
	repo Points
	vc   VCenter // nil: downloads only
	opts Options
}

// New returns an Engine over a repository and a vCenter connection (vc may
// be nil, or a nil *vsphere.Client, for downloads only).
func New(repo Points, vc VCenter, opts Options) *Engine {
	// A nil *vsphere.Client in a non-nil interface must read as "no
	// vCenter", not crash on the first call.
	if c, ok := vc.(*vsphere.Client); ok && c == nil {
		vc = nil
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.CleanupTimeout <= 0 {
		opts.CleanupTimeout = 2 * time.Minute
	}
	return &Engine{repo: repo, vc: vc, opts: opts}
}

// Progress is one progress report of a running restore.
type Progress struct {
	Phase string `json:"phase"` // validate, create, disk, power-on, cleanup, done
	Disk  int    `json:"disk"`  // restore point disk index (phase "disk")
	Done  int64  `json:"done"`  // bytes of this disk written so far
	Size  int64  `json:"size"`  // bytes of this disk
}

// DiskResult says what was written for one disk.
type DiskResult struct {
	Index        int    `json:"index"` // disk index in the restore point
	SourceKey    int32  `json:"sourceKey"`
	TargetKey    int32  `json:"targetKey,omitempty"`
	Label        string `json:"label,omitempty"`
	Capacity     int64  `json:"capacity"`
	BytesWritten int64  `json:"bytesWritten"`
	// SHA256 is the hex SHA-256 of the disk's whole content (capacity
	// bytes, holes as zeros) as restored; DiskDigest computes the same
	// value from the repository.
	SHA256  string  `json:"sha256"`
	Seconds float64 `json:"seconds"`
	Target  string  `json:"target,omitempty"` // datastore path or file
}

// Result is the outcome of a VM or disk restore.
type Result struct {
	Mode          string        `json:"mode"` // new, rehearsal, overwrite, attach, download
	RestorePoint  string        `json:"restorePoint"`
	VM            vsphere.VMRef `json:"vm"`
	PoweredOn     bool          `json:"poweredOn"`
	Disks         []DiskResult  `json:"disks"`
	BytesWritten  int64         `json:"bytesWritten"`
	Seconds       float64       `json:"seconds"`
	BytesPerSec   float64       `json:"bytesPerSecond"`
	Warnings      []string      `json:"warnings,omitempty"`
	RemoveCommand string        `json:"removeCommand,omitempty"`
}

func (r *Result) finish(start time.Time) {
	r.Seconds = time.Since(start).Seconds()
	r.BytesWritten = 0
	for _, d := range r.Disks {
		r.BytesWritten += d.BytesWritten
	}
	if r.Seconds > 0 {
		r.BytesPerSec = float64(r.BytesWritten) / r.Seconds
	}
}

// loadPoint finds a point and checks it can be restored; it returns the
// decoded configuration (nil when needConfig is false and there is none).
func (e *Engine) loadPoint(ctx context.Context, id string, needConfig bool) (repository.Point, *vmconfig.VMConfig, error) {
	if id == "" {
		return repository.Point{}, nil, fmt.Errorf("%w: no restore point given", ErrInvalidRequest)
	}
	p, err := e.repo.Point(ctx, id)
	if err != nil {
		if errors.Is(err, repository.ErrNotFound) || errors.Is(err, repository.ErrAmbiguous) {
			return p, nil, fmt.Errorf("%w: %w", ErrTargetNotFound, err)
		}
		return p, nil, fmt.Errorf("restore point %s: %w", id, err)
	}
	if p.Partial {
		return p, nil, fmt.Errorf("%w: restore point %s is partial (a disk failed during its backup)", ErrPointUnusable, p.ID)
	}
	b, err := e.repo.LoadConfigBlob(ctx, p)
	if err != nil {
		return p, nil, fmt.Errorf("%w: restore point %s: VM configuration: %w", ErrPointUnusable, p.ID, err)
	}
	if len(b) == 0 {
		if needConfig {
			return p, nil, fmt.Errorf("%w: restore point %s has no VM configuration (an image backup?); restore its disks with restore-disk", ErrPointUnusable, p.ID)
		}
		return p, nil, nil
	}
	c, err := vmconfig.Decode(b)
	if err != nil {
		if needConfig {
			return p, nil, fmt.Errorf("%w: restore point %s: %w", ErrPointUnusable, p.ID, err)
		}
		return p, nil, nil
	}
	for _, d := range c.Disks {
		if d.Index >= len(p.Disks) || (d.Index >= 0 && p.Disks[d.Index].Key != d.Key) {
			return p, nil, fmt.Errorf("%w: restore point %s: configuration disk %d (key %d) does not match the point's disks", ErrPointUnusable, p.ID, d.Index, d.Key)
		}
	}
	// Open every disk's map root now, so a damaged point fails before
	// anything is created.
	for i := range p.Disks {
		dr, err := e.repo.OpenDisk(ctx, p.ID, i)
		if err != nil {
			return p, nil, fmt.Errorf("%w: restore point %s disk %d: %w", ErrPointUnusable, p.ID, i, err)
		}
		_ = dr.Close()
	}
	return p, &c, nil
}

// DiskDigest computes the SHA-256 of a restore point disk's whole content
// (holes as zeros) from the repository without writing anything: the value
// a restore's DiskResult.SHA256 must equal.
func DiskDigest(ctx context.Context, repo Points, pointID string, disk int) (string, error) {
	dr, err := repo.OpenDisk(ctx, pointID, disk)
	if err != nil {
		return "", err
	}
	defer dr.Close()
	h := sha256.New()
	n, err := dr.StreamTo(ctx, h, nil)
	if err != nil {
		return "", fmt.Errorf("digest of disk %d of %s: %w", disk, pointID, err)
	}
	if n != dr.Size() {
		return "", fmt.Errorf("digest of disk %d of %s: %d of %d bytes", disk, pointID, n, dr.Size())
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// uploadDisk streams one restore point disk into a VM disk: the repository
// reader fills a pipe in disk order (verified blobs, parallel prefetch,
// zeros for holes streamed from a fixed buffer, never materialised) while
// the datastore PUT drains it; the SHA-256 is computed on the way.
func (e *Engine) uploadDisk(ctx context.Context, vm vsphere.VMRef, pointID string, idx int, targetKey int32, progress func(Progress)) (DiskResult, error) {
	start := time.Now()
	dr, err := e.repo.OpenDisk(ctx, pointID, idx)
	if err != nil {
		return DiskResult{}, err
	}
	defer dr.Close()
	size := dr.Size()
	h := newAsyncHasher()
	hashed := false
	defer func() {
		if !hashed {
			h.Sum()
		}
	}()
	pr, pw := io.Pipe()
	g, gctx := errgroup.WithContext(ctx)
	var streamed int64
	var readErr, upErr error
	g.Go(func() error {
		streamed, readErr = dr.StreamTo(gctx, io.MultiWriter(h, pw), nil)
		pw.CloseWithError(readErr)
		return readErr
	})
	g.Go(func() error {
		upErr = e.vc.UploadDisk(gctx, vm, targetKey, pr, size, func(done int64) {
			if progress != nil {
				progress(Progress{Phase: "disk", Disk: idx, Done: done, Size: size})
			}
		})
		pr.CloseWithError(upErr)
		return upErr
	})
	_ = g.Wait()
	// Report the cause, not its echo: a failed upload makes the reader see
	// a closed pipe or the group's cancellation, and a failed read makes the
	// upload see a short body.
	switch {
	case upErr != nil && (readErr == nil || errors.Is(readErr, upErr) || (errors.Is(readErr, context.Canceled) && ctx.Err() == nil)):
		return DiskResult{}, fmt.Errorf("disk %d: %w", idx, upErr)
	case readErr != nil:
		return DiskResult{}, fmt.Errorf("disk %d: read from the repository: %w", idx, readErr)
	case upErr != nil:
		return DiskResult{}, fmt.Errorf("disk %d: %w", idx, upErr)
	}
	if streamed != size {
		return DiskResult{}, fmt.Errorf("disk %d: %d of %d bytes streamed", idx, streamed, size)
	}
	hashed = true
	return DiskResult{Index: idx, TargetKey: targetKey, Capacity: size, BytesWritten: size,
		SHA256: h.Sum(), Seconds: time.Since(start).Seconds()}, nil
}

// importVM creates the VM through an NFC import lease and streams every
// disk as a streamOptimized VMDK: the repository reader feeds the encoder
// in disk order, zero grains are skipped (never sent) and each disk's
// SHA-256 is computed on the way. It fills res.Disks (without target keys).
func (e *Engine) importVM(ctx context.Context, pl *plan, res *Result, report func(Progress)) (vsphere.VM, error) {
	results := make([]DiskResult, len(pl.diskIdx))
	fill := func(ctx context.Context, disk int, w *vmdk.StreamWriter) error {
		if disk < 0 || disk >= len(pl.diskIdx) {
			return fmt.Errorf("the import asked for disk %d of %d", disk, len(pl.diskIdx))
		}
		idx := pl.diskIdx[disk]
		start := time.Now()
		dr, err := e.repo.OpenDisk(ctx, pl.point.ID, idx)
		if err != nil {
			return err
		}
		defer dr.Close()
		size := dr.Size()
		h := newAsyncHasher()
		defer func() {
			if results[disk].SHA256 == "" {
				h.Sum()
			}
		}()
		gw := &grainWriter{w: w}
		n, err := dr.StreamTo(ctx, io.MultiWriter(h, gw), func(done int64) {
			report(Progress{Phase: "disk", Disk: idx, Done: done, Size: size})
		})
		if err != nil {
			return fmt.Errorf("read disk %d from the repository: %w", idx, err)
		}
		if n != size {
			return fmt.Errorf("disk %d: %d of %d bytes streamed", idx, n, size)
		}
		pd := pl.point.Disks[idx]
		results[disk] = DiskResult{Index: idx, SourceKey: pd.Key, Label: pd.Label, Capacity: size, BytesWritten: size,
			SHA256: h.Sum(), Seconds: time.Since(start).Seconds()}
		return nil
	}
	vm, err := e.vc.ImportVM(ctx, pl.spec, fill, nil)
	if err != nil {
		return vm, err
	}
	res.Disks = results
	return vm, nil
}

// cleanupCtx is a context for removing what a failed restore made: detached
// from the caller's (which may be the cancelled one) and bounded.
func (e *Engine) cleanupCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), e.opts.CleanupTimeout)
}

// asyncHasher hashes what is written to it on its own goroutine, so the
// digest is computed while the previous buffer is being uploaded instead of
// before it. Memory is bounded: at most asyncHashDepth buffers of up to
// 1 MiB are queued.
type asyncHasher struct {
	h    hash.Hash
	ch   chan []byte
	done chan struct{}
	pool sync.Pool
}

const asyncHashDepth = 8

func newAsyncHasher() *asyncHasher {
	a := &asyncHasher{h: sha256.New(), ch: make(chan []byte, asyncHashDepth), done: make(chan struct{})}
	a.pool.New = func() any { b := make([]byte, 0, 1<<20); return &b }
	go func() {
		defer close(a.done)
		for b := range a.ch {
			a.h.Write(b)
			b = b[:0]
			a.pool.Put(&b)
		}
	}()
	return a
}

func (a *asyncHasher) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		bp := a.pool.Get().(*[]byte)
		c := min(len(p), cap(*bp))
		b := append((*bp)[:0], p[:c]...)
		a.ch <- b
		p = p[c:]
	}
	return n, nil
}

// Sum stops the hasher and returns the hex digest; call it once, after the
// last Write.
func (a *asyncHasher) Sum() string {
	close(a.ch)
	<-a.done
	return hex.EncodeToString(a.h.Sum(nil))
}
