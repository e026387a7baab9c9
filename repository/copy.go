package repository

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/vmvault/vmvault/internal/failpoint"
	"github.com/vmvault/vmvault/repository/storage"
)

// CopySourceTag is the tag a copied restore point carries in the target:
// "<source repository id>:<source point id>". It is how a second copy
// knows the point is already there (idempotence) without reading a byte of
// its data, and how a copy back to the source recognises the original.
const CopySourceTag = "copy.source"

// CopyOptions select the restore points a Copy sends and observe it.
type CopyOptions struct {
	// Points are restore point ids or unique prefixes (empty: every point).
	Points []string
	// VMs are VM names (empty: every VM). With Points, a point must match
	// both.
	VMs []string
	// Progress is called as the copy advances (from one goroutine at a time).
	Progress func(CopyProgress)
	// Workers bounds the blobs read, re-encoded and written in parallel
	// (0 = GOMAXPROCS, at least 2).
	Workers int
	// Limit paces the bytes this copy sends into the target (stored
	// bytes, as BytesSent counts them), on top of any limit the target's
	// storage has: a copy job's own upload limit. nil: unlimited.
	Limit storage.Limiter
}

// CopyProgress reports a Copy's position.
type CopyProgress struct {
	Point       string `json:"point"` // source point id being copied
	VM          string `json:"vm"`
	PointsDone  int    `json:"pointsDone"`
	PointsTotal int    `json:"pointsTotal"`
	BlobsDone   int64  `json:"blobsDone"` // data blobs of this point examined
	BlobsSent   int64  `json:"blobsSent"` // of the whole copy so far
	BytesSent   int64  `json:"bytesSent"`
}

// CopiedPoint is one restore point of a Copy.
type CopiedPoint struct {
	Source  string    `json:"source"`           // point id in the source
	Target  string    `json:"target,omitempty"` // point id in the target
	VM      string    `json:"vm"`
	Time    time.Time `json:"time"`
	Skipped bool      `json:"skipped"` // already in the target: nothing was read or sent
	// BlobsSent / BytesSent: blobs the target lacked, written (stored bytes).
	BlobsSent int64 `json:"blobsSent"`
	BytesSent int64 `json:"bytesSent"`
	// BlobsReused: data blobs the target already held.
	BlobsReused int64 `json:"blobsReused"`
}

// CopyResult summarises a Copy.
type CopyResult struct {
	PointsCopied  int   `json:"pointsCopied"`
	PointsSkipped int   `json:"pointsSkipped"`
	BlobsSent     int64 `json:"blobsSent"`
	BytesSent     int64 `json:"bytesSent"`
	BlobsReused   int64 `json:"blobsReused"`
	// BlobsRead: data blobs read from the source (the others were known to
	// the target's copy map and not read at all).
	BlobsRead int64 `json:"blobsRead"`
	// BlobsVerified: blobs read back from the target and checked against
	// their ids before the point was committed (every blob sent).
	BlobsVerified int64         `json:"blobsVerified"`
	Points        []CopiedPoint `json:"points"`
}

// Copy copies restore points from src to dst, sending only the blobs dst
// lacks. Blobs are decoded and verified in src, re-encoded (compressed and
// sealed under dst's keys, with dst's blob ids) and deduplicated against
// everything dst holds; disk maps and manifests are rebuilt for dst. Each
// point follows dst's backup write order: its packs are written and read
// back, then its commit record is written last, so a Copy killed at any
// moment leaves dst consistent and the next Copy resumes (blobs already in
// dst packs are not sent again). A point already copied (its CopySourceTag
// names it, or it is itself the dst original of a copy) is skipped without
// reading its data, so a second Copy sends nothing.
//
// Locks and time locks are not copied: the target's own policy decides.
func Copy(ctx context.Context, src, dst *Repository, opts CopyOptions) (*CopyResult, error) {
	if err := dst.writable("copy into"); err != nil {
		return nil, fmt.Errorf("copy: target: %w", err)
	}
	if err := src.enter(); err != nil {
		return nil, fmt.Errorf("copy: source: %w", err)
	}
	defer src.leave()
	if err := dst.enter(); err != nil {
		return nil, fmt.Errorf("copy: target: %w", err)
	}
	defer dst.leave()
	if src.cfg.ID == dst.cfg.ID {
		return nil, fmt.Errorf("copy: source and target are the same repository (%s)", src.cfg.ID)
	}
	points, err := selectCopyPoints(ctx, src, opts)
	if err != nil {
		return nil, fmt.Errorf("copy: %w", err)
	}
	have, err := copiedPoints(ctx, dst, src.cfg.ID)
	if err != nil {
		return nil, fmt.Errorf("copy: target: %w", err)
	}
	c := &copier{src: src, dst: dst, opts: opts, ids: map[ID]ID{}, fresh: map[ID]ID{}, have: have, res: &CopyResult{Points: []CopiedPoint{}}}
	if c.opts.Workers <= 0 {
		c.opts.Workers = defaultWorkers()
	}
	for i, p := range points {
		c.prog = CopyProgress{Point: p.ID, VM: p.VM.Name, PointsDone: i, PointsTotal: len(points)}
		c.report()
		cp, err := c.copyPoint(ctx, p)
		if err != nil {
			return c.res, fmt.Errorf("copy: restore point %s (%s, %s): %w", p.ID, p.VM.Name, p.Time.Format(time.RFC3339), err)
		}
		c.res.Points = append(c.res.Points, cp)
		if cp.Skipped {
			c.res.PointsSkipped++
		} else {
			c.res.PointsCopied++
		}
	}
	c.prog.PointsDone = len(points)
	c.report()
	return c.res, nil
}

// selectCopyPoints returns the source points the options select, oldest
// first (so that a parent is copied before its incrementals). An id that
// matches nothing is an error before anything is copied.
func selectCopyPoints(ctx context.Context, src *Repository, opts CopyOptions) ([]Point, error) {
	all, err := src.List(ctx)
	if err != nil {
		return nil, err
	}
	var ids map[string]bool
	if len(opts.Points) > 0 {
		ids = map[string]bool{}
		for _, s := range opts.Points {
			p, err := src.Point(ctx, s)
			if err != nil {
				return nil, err
			}
			ids[p.ID] = true
		}
	}
	var vms map[string]bool
	if len(opts.VMs) > 0 {
		vms = map[string]bool{}
		for _, v := range opts.VMs {
			vms[v] = true
		}
	}
	var out []Point
	for _, p := range all {
		if (ids == nil || ids[p.ID]) && (vms == nil || vms[p.VM.Name]) {
			out = append(out, p)
		}
	}
	return out, nil
}

// copiedPoints maps, for the target, every source point id it already holds
// (as a copy, or as the original of a copy) to the target's point id.
func copiedPoints(ctx context.Context, dst *Repository, srcID string) (map[string]string, error) {
	pts, err := dst.List(ctx)
	if err != nil {
		return nil, err
	}
	have := map[string]string{}
	for _, p := range pts {
		if repo, pid, ok := strings.Cut(p.Tags[CopySourceTag], ":"); ok && repo == srcID {
			have[pid] = p.ID
		}
	}
	return have, nil
}

type copier struct {
	src, dst *Repository
	opts     CopyOptions
	res      *CopyResult
	have     map[string]string // source point id → target point id

	mu    sync.Mutex
	ids   map[ID]ID // source data blob id → target id, for this Copy
	fresh map[ID]ID // learnt since the last commit, for the copy map
	prog  CopyProgress
}

func (c *copier) report() {
	if c.opts.Progress != nil {
		c.opts.Progress(c.prog)
	}
}

// original returns the target point a source point is a copy of (a copy
// back to where it came from).
func (c *copier) original(ctx context.Context, p Point) (string, bool) {
	repo, pid, ok := strings.Cut(p.Tags[CopySourceTag], ":")
	if !ok || repo != c.dst.cfg.ID {
		return "", false
	}
	if _, err := c.dst.Point(ctx, pid); err != nil {
		return "", false
	}
	return pid, true
}

func (c *copier) copyPoint(ctx context.Context, p Point) (CopiedPoint, error) {
	cp := CopiedPoint{Source: p.ID, VM: p.VM.Name, Time: p.Time}
	if t, ok := c.have[p.ID]; ok {
		cp.Target, cp.Skipped = t, true
		return cp, nil
	}
	if t, ok := c.original(ctx, p); ok {
		cp.Target, cp.Skipped = t, true
		c.have[p.ID] = t
		return cp, nil
	}
	s, err := c.dst.NewSession(ctx)
	if err != nil {
		return cp, err
	}
	defer s.Abort()
	np := NewPoint{VM: p.VM, Time: p.Time, Consistency: p.Consistency, Warnings: p.Warnings, Partial: p.Partial,
		Tags: maps.Clone(p.Tags), Parent: c.have[p.Parent]}
	if np.Tags == nil {
		np.Tags = map[string]string{}
	}
	np.Tags[CopySourceTag] = c.src.cfg.ID + ":" + p.ID
	if !p.ConfigID.IsZero() {
		if np.Config, err = c.src.loadBlob(ctx, p.ConfigID, nil); err != nil {
			return cp, fmt.Errorf("VM configuration: %w", err)
		}
	}
	var sent []ID
	for i, d := range p.Disks {
		root, ids, err := c.copyDisk(ctx, s, d.Map, &cp)
		if err != nil {
			return cp, fmt.Errorf("disk %d (%s): %w", i, d.Label, err)
		}
		sent = append(sent, ids...)
		d.Map = root
		np.Disks = append(np.Disks, d)
	}
	// The packs this point needs are durable before anything is verified,
	// and verified before the commit record makes the point exist.
	if err := s.flush(ctx); err != nil {
		return cp, fmt.Errorf("flush: %w", err)
	}
	if err := c.verify(ctx, sent); err != nil {
		return cp, err
	}
	if err := c.verifyMaps(ctx, np.Disks); err != nil {
		return cp, err
	}
	if err := failpoint.Hit("copy.commit"); err != nil {
		return cp, fmt.Errorf("commit: %w", err)
	}
	pt, err := s.Commit(ctx, np)
	if err != nil {
		return cp, err
	}
	cp.Target = pt.ID
	c.have[p.ID] = pt.ID
	// The copy map is a cache: failing to save it costs the next copy reads.
	c.mu.Lock()
	fresh := c.fresh
	c.fresh = map[ID]ID{}
	c.mu.Unlock()
	if err := c.dst.copyMapPut(c.src.cfg.ID, fresh); err != nil {
		c.dst.warn(fmt.Sprintf("copy: the copy map was not saved (the next copy reads these blobs again): %v", err))
	}
	return cp, nil
}

// verify reads every blob the point sent back from the target's storage
// and checks it against its id (the codec verifies every read).
func (c *copier) verify(ctx context.Context, ids []ID) error {
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return err
		}
		loc, ok, err := c.dst.lookup(id)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("verify: blob %s written to the target is not indexed: %w", id, ErrNotFound)
		}
		buf := make([]byte, loc.StoredLen)
		if err := c.dst.readPackAt(loc.Pack, buf, int64(loc.Offset)); err != nil {
			return fmt.Errorf("verify: read back blob %s: %w", id, err)
		}
		if _, err := c.dst.codec.decode(nil, loc.entry(id), buf); err != nil {
			return fmt.Errorf("verify: blob %s read back from pack %s: %w", id, loc.Pack, errors.Join(ErrCorrupt, err))
		}
		c.res.BlobsVerified++
	}
	return nil
}

// verifyMaps reads the target's disk maps of the point back (roots and
// segments: every read verifies the blob against its id and decodes it).
func (c *copier) verifyMaps(ctx context.Context, disks []Disk) error {
	for _, d := range disks {
		dr, err := c.dst.loadRoot(ctx, d.Map)
		if err != nil {
			return fmt.Errorf("verify: %w", err)
		}
		for _, ref := range dr.Segs {
			if _, err := c.dst.loadSegment(ctx, ref); err != nil {
				return fmt.Errorf("verify: %w", err)
			}
		}
	}
	return nil
}

// copyDisk copies the data blobs of one disk map and stores the map again
// under the target's ids (PutDisk rebuilds its segments and root and
// re-validates every extent against its blob). It returns the target's
// root and the ids of the data blobs it sent.
func (c *copier) copyDisk(ctx context.Context, s *Session, srcRoot ID, cp *CopiedPoint) (ID, []ID, error) {
	dr, err := c.src.loadRoot(ctx, srcRoot)
	if err != nil {
		return ID{}, nil, err
	}
	var ext []Extent
	var sent []ID
	var sentMu sync.Mutex
	for _, ref := range dr.Segs {
		seg, err := c.src.loadSegment(ctx, ref)
		if err != nil {
			return ID{}, nil, err
		}
		base := len(ext)
		ext = append(ext, seg.Extents...)
		done, err := c.mapped(s, ext[base:])
		if err != nil {
			return ID{}, nil, err
		}
		cp.BlobsReused += int64(len(done))
		c.mu.Lock()
		c.res.BlobsReused += int64(len(done))
		c.prog.BlobsDone += int64(len(done))
		c.mu.Unlock()
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(c.opts.Workers)
		for i := base; i < len(ext); i++ {
			if ext[i].Zero || done[i-base] {
				continue
			}
			g.Go(func() error {
				id, added, n, err := c.copyChunk(gctx, s, ext[i].ID)
				if err != nil {
					return fmt.Errorf("data blob %s at disk offset %d: %w", ext[i].ID, ext[i].Offset, err)
				}
				ext[i].ID = id
				c.mu.Lock()
				c.prog.BlobsDone++
				if added {
					cp.BlobsSent++
					cp.BytesSent += int64(n)
					c.res.BlobsSent++
					c.res.BytesSent += int64(n)
					c.prog.BlobsSent, c.prog.BytesSent = c.res.BlobsSent, c.res.BytesSent
				} else {
					cp.BlobsReused++
					c.res.BlobsReused++
				}
				c.mu.Unlock()
				if added {
					sentMu.Lock()
					sent = append(sent, id)
					sentMu.Unlock()
				}
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return ID{}, nil, err
		}
		c.mu.Lock()
		c.report()
		c.mu.Unlock()
	}
	for i := range ext {
		ext[i].Slice = false // PutDisk derives it from the blob's length
	}
	root, err := s.PutDisk(ctx, dr.Size, ext)
	if err != nil {
		return ID{}, nil, err
	}
	return root, sent, nil
}

// mapped resolves, without reading the source, the data extents whose
// blob this Copy or an earlier one (the target's copy map) already put in
// the target and that the target still holds: their ids are replaced by
// the target's, the blobs referenced by the session, and done[i] is set.
func (c *copier) mapped(s *Session, ext []Extent) (map[int]bool, error) {
	var unknown []ID
	c.mu.Lock()
	for _, e := range ext {
		if _, ok := c.ids[e.ID]; !ok && !e.Zero {
			unknown = append(unknown, e.ID)
		}
	}
	c.mu.Unlock()
	if len(unknown) > 0 {
		known, err := c.dst.copyMapGet(c.src.cfg.ID, unknown)
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		maps.Copy(c.ids, known)
		c.mu.Unlock()
	}
	var idx []int
	var dst []ID
	c.mu.Lock()
	for i, e := range ext {
		if d, ok := c.ids[e.ID]; ok && !e.Zero {
			idx, dst = append(idx, i), append(dst, d)
		}
	}
	c.mu.Unlock()
	done := map[int]bool{}
	if len(dst) == 0 {
		return done, nil
	}
	info, err := s.reference(dst)
	if err != nil {
		return nil, err
	}
	for k, i := range idx {
		// A blob the target lost (reclaimed, found corrupt) or that a
		// reclaim is removing is copied again from the source.
		if info[k].state == refOK && info[k].typ == BlobData {
			ext[i].ID = dst[k]
			done[i] = true
		}
	}
	return done, nil
}

// copyChunk makes one source data blob present in the target and returns
// its target id, whether it was written and its stored bytes.
func (c *copier) copyChunk(ctx context.Context, s *Session, srcID ID) (ID, bool, int, error) {
	data, err := c.src.loadBlob(ctx, srcID, nil)
	if err != nil {
		return ID{}, false, 0, err
	}
	c.mu.Lock()
	c.res.BlobsRead++
	c.mu.Unlock()
	dstID := c.dst.codec.id(data)
	added, n, err := s.put(BlobData, dstID, data)
	if err != nil {
		return ID{}, false, 0, err
	}
	if added && c.opts.Limit != nil {
		if err := c.opts.Limit.WaitN(ctx, n); err != nil {
			return ID{}, false, 0, err
		}
	}
	c.mu.Lock()
	c.ids[srcID] = dstID
	c.fresh[srcID] = dstID
	c.mu.Unlock()
	return dstID, added, n, nil
}
