package filerestore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/vmvault/vmvault/guestfs"
	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/filerestore/catalog"
)

// indexMaxDepth bounds the directories the indexer descends: a hostile
// file system must not make it recurse without end.
const indexMaxDepth = 256

// indexer keeps the catalogs: one open store per repository and one build
// at a time (one core at most, memory of one directory stack).
type indexer struct {
	s *Service

	mu     sync.Mutex
	stores map[string]*catalog.Store // by repository name
	kick   chan struct{}

	build sync.Mutex // one build at a time, daemon and on-demand alike
}

func (ix *indexer) init(s *Service) {
	ix.s = s
	ix.stores = map[string]*catalog.Store{}
	ix.kick = make(chan struct{}, 1)
}

func (ix *indexer) close() error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	var first error
	for n, st := range ix.stores {
		if err := st.Close(); err != nil && first == nil {
			first = err
		}
		delete(ix.stores, n)
	}
	return first
}

// store returns the catalog of a repository, opening it on first use. A
// catalog of another format version is a stale cache: it is deleted and
// started again.
func (ix *indexer) store(name string) (*catalog.Store, *repository.Repository, error) {
	if ix.s.cfg.CatalogDir == "" {
		return nil, nil, ErrNoCatalog
	}
	r, err := ix.s.cfg.Source.Repo(name)
	if err != nil {
		return nil, nil, err
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if st := ix.stores[name]; st != nil {
		return st, r, nil
	}
	p := CatalogPath(ix.s.cfg.CatalogDir, r)
	st, err := catalog.Open(p)
	if err != nil && !errors.Is(err, catalog.ErrInUse) {
		// Another version, or a file damaged by a crash or a full disk: it
		// is a cache, so it is put aside and built again.
		ix.s.cfg.Logf("catalog %s cannot be used (%v): rebuilding it", p, err)
		if rerr := os.Rename(p, p+".broken"); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			return nil, nil, fmt.Errorf("put the unusable catalog aside: %w", rerr)
		}
		st, err = catalog.Open(p)
	}
	if err != nil {
		return nil, nil, err
	}
	ix.stores[name] = st
	return st, r, nil
}

// CatalogPath is where a repository's catalog lives in dir.
func CatalogPath(dir string, r *repository.Repository) string {
	return filepath.Join(dir, r.Config().ID+".catalog")
}

// Kick asks the indexer to look for new points now (after a backup).
func (s *Service) Kick() {
	select {
	case s.idx.kick <- struct{}{}:
	default:
	}
}

// Run indexes points without a catalog and drops the catalogs of points
// that are gone, every IndexInterval and on Kick, until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	if s.cfg.CatalogDir == "" {
		<-ctx.Done()
		return nil
	}
	t := time.NewTicker(s.cfg.IndexInterval)
	defer t.Stop()
	for {
		if err := s.IndexPending(ctx, nil); err != nil && ctx.Err() == nil {
			s.cfg.Logf("file catalog: %v", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-s.idx.kick:
		}
	}
}

// Progress reports an indexing pass: the point being catalogued and the
// entries recorded so far.
type Progress func(repo, point string, files int64)

// IndexPending makes one pass over every repository: catalogs of points
// that no longer exist are dropped, then points without a complete catalog
// are indexed, newest first. A failing repository does not stop the others.
func (s *Service) IndexPending(ctx context.Context, progress Progress) error {
	var errs []error
	for _, name := range s.cfg.Source.Names() {
		if err := s.indexRepo(ctx, name, progress); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			errs = append(errs, fmt.Errorf("repository %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

func (s *Service) indexRepo(ctx context.Context, name string, progress Progress) error {
	st, r, err := s.idx.store(name)
	if err != nil {
		return err
	}
	pts, err := r.List(ctx)
	if err != nil {
		return err
	}
	have, err := st.Points()
	if err != nil {
		return err
	}
	live := map[string]bool{}
	for _, p := range pts {
		live[p.ID] = true
	}
	for id := range have {
		if !live[id] {
			if err := st.Drop(ctx, id); err != nil {
				return err
			}
		}
	}
	sort.Slice(pts, func(i, j int) bool { return pts[i].Time.After(pts[j].Time) })
	for _, p := range pts {
		if pi, ok := have[p.ID]; ok && pi.Complete {
			continue
		}
		if err := s.indexPoint(ctx, st, r, name, p, pts, progress); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			s.cfg.Logf("file catalog of %s: %v", p.ID, err)
		}
	}
	return nil
}

// indexPoint walks every browsable volume of a point into its catalog,
// resuming after the volumes a previous build finished.
func (s *Service) indexPoint(ctx context.Context, st *catalog.Store, r *repository.Repository, repo string, p repository.Point, all []repository.Point, progress Progress) error {
	s.idx.build.Lock()
	defer s.idx.build.Unlock()
	if pi, err := st.Point(p.ID); err == nil && pi.Complete {
		return nil // built by a concurrent pass meanwhile
	}
	info := catalog.PointInfo{ID: p.ID, VM: p.VM.Name, VMUUID: p.VM.InstanceUUID, Time: p.Time}
	// A point whose disks are another's (the same disk maps: an idle VM,
	// an unchanged image) holds the same files: that catalog is copied
	// instead of walking the file systems again.
	if src, ok := sameDisks(st, p, all); ok {
		if err := st.Clone(ctx, src, info); err == nil {
			return nil
		} else if ctx.Err() != nil {
			return err
		}
	}
	b, err := st.Build(info)
	if err != nil {
		return err
	}
	disks, readers, err := OpenDisks(ctx, r, p)
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		b.Error(err.Error())
		return b.Finish() // a point that cannot be opened is not retried forever
	}
	defer func() {
		for _, dr := range readers {
			dr.Close()
		}
	}()
	vols, err := guestfs.Volumes(ctx, disks)
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		b.Error(err.Error())
		return b.Finish()
	}
	bud := s.newBudget()
	for _, v := range vols {
		if !v.Browsable || b.VolumeDone(v.ID) {
			continue
		}
		fsys, err := guestfs.Open(ctx, disks, v.ID)
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			b.Error(fmt.Sprintf("volume %s: %v", v.ID, err))
		} else {
			err = walkVolume(ctx, fsys, b, v.ID, bud, func(n int64) {
				if progress != nil {
					progress(repo, p.ID, n)
				}
			})
			fsys.Close()
			if errors.Is(err, errBudget) {
				// Marked and finished: the catalog keeps what it has,
				// searches say it is partial, the next point goes on.
				b.Stop(fmt.Sprintf("volume %s: indexing stopped, %v: the catalog holds what was indexed before", v.ID, err))
				s.cfg.Logf("file catalog of %s: volume %s: %v; the point is marked partial and skipped", p.ID, v.ID, err)
				return b.Finish()
			}
			if err != nil {
				return err
			}
		}
		if err := b.FinishVolume(v.ID); err != nil {
			return err
		}
	}
	return b.Finish()
}

// sameDisks returns a point of pts with a complete catalog and the same
// disk maps as p, disk for disk (its parent when nothing changed, or its
// child: points are indexed newest first).
func sameDisks(st *catalog.Store, p repository.Point, pts []repository.Point) (string, bool) {
	if len(p.Disks) == 0 {
		return "", false
	}
	for _, o := range pts {
		if o.ID == p.ID || len(o.Disks) != len(p.Disks) {
			continue
		}
		same := true
		for i := range p.Disks {
			if p.Disks[i].Map != o.Disks[i].Map {
				same = false
				break
			}
		}
		if !same {
			continue
		}
		if pi, err := st.Point(o.ID); err == nil && pi.Complete {
			return o.ID, true
		}
	}
	return "", false
}

// errBudget: the point went over its entry or time budget; the walk
// stops, the catalog keeps what it has and says why.
var errBudget = errors.New("over the indexing budget")

// budget is what one point may still cost the indexer.
type budget struct {
	entries  int64 // left
	max      int64
	deadline time.Time
	maxTime  time.Duration
	clk      clock.Clock
}

func (s *Service) newBudget() *budget {
	c := s.cfg
	return &budget{entries: c.IndexMaxEntries, max: c.IndexMaxEntries, deadline: c.Clock.Now().Add(c.IndexMaxTime), maxTime: c.IndexMaxTime, clk: c.Clock}
}

// spend takes one entry; every 1024 it also looks at the clock.
func (b *budget) spend() error {
	b.entries--
	if b.entries < 0 {
		return fmt.Errorf("%w: more than %d entries", errBudget, b.max)
	}
	if b.entries%1024 == 0 && b.clk.Now().After(b.deadline) {
		return fmt.Errorf("%w: longer than %v", errBudget, b.maxTime)
	}
	return nil
}

// walkVolume records every entry of a volume, depth first. An unreadable
// directory is noted in the catalog and skipped. A directory reached a
// second time (a hard link to a directory, or a loop a hostile image
// planted: two links to the root expand into 2^depth paths) is recorded
// as an entry but not entered again.
func walkVolume(ctx context.Context, fsys guestfs.FS, b *catalog.Builder, vol string, bud *budget, progress func(int64)) error {
	var n int64
	seen := map[uint64]bool{}
	if fi, err := fsys.Stat("."); err == nil {
		if id, ok := guestfs.FileID(fi); ok {
			seen[id] = true
		}
	}
	var walk func(dir string, depth int) error
	walk = func(dir string, depth int) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		ents, err := fsys.ReadDir(dir)
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return cerr
			}
			b.Error(fmt.Sprintf("volume %s: /%s: %v", vol, dir, err))
			return nil
		}
		for _, e := range ents {
			fi, err := e.Info()
			p := path.Join(dir, e.Name())
			if err != nil {
				b.Error(fmt.Sprintf("volume %s: /%s: %v", vol, p, err))
				continue
			}
			if err := bud.spend(); err != nil {
				return err
			}
			en := entryOf(e.Name(), fi)
			if err := b.Add(vol, p, en.Type, en.Size, en.Mtime); err != nil {
				return err
			}
			if n++; n%10000 == 0 && progress != nil {
				progress(n)
			}
			if en.Type != "dir" {
				continue
			}
			if id, ok := guestfs.FileID(fi); ok {
				if seen[id] {
					b.Error(fmt.Sprintf("volume %s: /%s: the same directory as one already indexed (a directory hard link or loop): not entered again", vol, p))
					continue
				}
				seen[id] = true
			}
			if depth < indexMaxDepth {
				if err := walk(p, depth+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	err := walk(".", 0)
	if progress != nil {
		progress(n)
	}
	return err
}

// Search finds paths matching q in the catalogs of every repository,
// versions side by side. Points not catalogued yet are listed in Pending
// and the indexer is kicked; versions of points that no longer exist are
// left out (their catalogs are dropped by the next pass).
func (s *Service) Search(ctx context.Context, q catalog.Query) (catalog.Result, error) {
	if s.cfg.CatalogDir == "" {
		return catalog.Result{}, ErrNoCatalog
	}
	var out catalog.Result
	out.Hits = []catalog.Hit{}
	stale := false
	for _, name := range s.cfg.Source.Names() {
		st, r, err := s.idx.store(name)
		if err != nil {
			return catalog.Result{}, err
		}
		pts, err := r.List(ctx)
		if err != nil {
			return catalog.Result{}, err
		}
		have, err := st.Points()
		if err != nil {
			return catalog.Result{}, err
		}
		live := map[string]bool{}
		for _, p := range pts {
			live[p.ID] = true
			pi, ok := have[p.ID]
			if q.VM != "" && q.VM != p.VM.Name && q.VM != p.VM.InstanceUUID {
				continue
			}
			switch {
			case !ok || !pi.Complete:
				out.Pending = append(out.Pending, p.ID)
			case pi.Partial != "":
				out.Partial = append(out.Partial, catalog.PartialPoint{RestorePoint: p.ID, Reason: pi.Partial})
			}
		}
		if len(have) > len(live) {
			stale = true
		}
		res, err := st.Search(ctx, q)
		if err != nil {
			return catalog.Result{}, err
		}
		out.Scanned += res.Scanned
		out.Truncated = out.Truncated || res.Truncated
		for _, h := range res.Hits {
			vs := h.Versions[:0]
			for _, v := range h.Versions {
				if live[v.RestorePoint] {
					v.Repository = name
					vs = append(vs, v)
				} else {
					stale = true
				}
			}
			if len(vs) > 0 {
				h.Versions = vs
				out.Hits = append(out.Hits, h)
			}
		}
	}
	if len(out.Pending) > 0 || stale {
		s.Kick()
	}
	return out, nil
}
