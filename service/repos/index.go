package repos

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/capacity"
	"github.com/vmvault/vmvault/web/api"
)

// The point index: every repository's points as the API shows them, in
// list order (api.PointLess), with each VM's summary, built once per change
// of the points. A page of GET /restore-points is then a binary search and
// a scan of the page, and GET /vms reads one summary per VM, instead of
// decoding, converting and sorting every point of every repository for
// every request (30,000 points: an 11 MB answer built per request).
//
// A repository tells no one when its points change (backups commit them
// from the engine, retention deletes them from the scheduler), so the index
// notices: a repository's catalog file (index.db under Dir) is written by
// every change of its points, and its modification time, size and inode
// are compared at each query — one stat. Because a file time has a coarse
// grain, a catalog written shortly before the index listed it is not
// trusted: the next query lists the points again and compares their
// signature (ids, lock and partial flags), so an unchanged set is not
// converted and sorted again. When the file cannot be stat'ed (a store
// with no such file) every query lists and compares signatures.

// racyWindow is how long after a catalog write a listing is not trusted to
// have seen every write of the same file time.
const racyWindow = 2 * time.Second

type pointIndex struct {
	pts []api.RestorePoint // list order
	// byVM holds, for each instance UUID and each name, the positions
	// in pts of the points of that VM, ascending, each once.
	byVM map[string][]int32
	// vms are the VM summaries in order of each VM's newest point.
	vms []api.VMPoints
}

// repoIndex is one repository's part of the index.
type repoIndex struct {
	listed  time.Time    // when the listing started
	tok     catalogToken // the catalog file when it was listed
	trusted bool         // tok can vouch that the points did not change
	sig     [32]byte
	pts     []api.RestorePoint // list order
	// samples are the repository's growth (space.go), oldest first.
	samples []capacity.Sample
}

type catalogToken struct {
	ok    bool
	mtime time.Time
	size  int64
	ino   uint64
}

type indexCache struct {
	mu     sync.Mutex
	repos  map[string]*repoIndex
	merged *pointIndex
	// parts is what merged was built from, to rebuild only on change.
	parts []*repoIndex
	// builds counts index builds (merges) and lists the listings of a
	// repository's points, for tests.
	builds, lists int
	real          clock.Clock
}

func catalogStat(r *repository.Repository) catalogToken {
	fi, err := os.Stat(filepath.Join(r.Dir(), "index.db"))
	if err != nil {
		return catalogToken{}
	}
	return catalogToken{ok: true, mtime: fi.ModTime(), size: fi.Size(), ino: inode(fi)}
}

func pointSig(pts []repository.Point) [32]byte {
	h := sha256.New()
	var b [1]byte
	for _, p := range pts {
		h.Write([]byte(p.ID))
		b[0] = 0
		if p.Locked {
			b[0] |= 1
		}
		if p.Partial {
			b[0] |= 2
		}
		h.Write(b[:])
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// part returns repository name's part of the index, listing its points
// again unless its catalog vouches they did not change.
//
// A listing that started after the query arrived (asked) serves it too:
// concurrent queries while the catalog is being written share one listing.
func (c *indexCache) part(ctx context.Context, name string, r *repository.Repository, asked time.Time) (*repoIndex, error) {
	old := c.repos[name]
	if old != nil && !old.listed.Before(asked) {
		return old, nil
	}
	tok := catalogStat(r)
	if old != nil && old.trusted && tok.ok && tok == old.tok {
		return old, nil
	}
	start := c.real.Now()
	c.lists++
	pts, err := r.List(ctx)
	if err != nil {
		return nil, kind(fmt.Errorf("list points of %s: %w", name, err))
	}
	after := catalogStat(r)
	ri := &repoIndex{listed: start, tok: tok, sig: pointSig(pts),
		trusted: tok.ok && after == tok && tok.mtime.Before(start.Add(-racyWindow))}
	if old != nil && old.sig == ri.sig {
		ri.pts, ri.samples = old.pts, old.samples // same points: keep the converted, sorted list
	} else {
		ri.samples = growthSamples(pts)
		ri.pts = make([]api.RestorePoint, len(pts))
		for i, p := range pts {
			ri.pts[i] = PointView(name, p)
		}
		sort.SliceStable(ri.pts, func(i, j int) bool { return api.PointLess(ri.pts[i].Key(), ri.pts[j].Key()) })
	}
	c.repos[name] = ri
	return ri, nil
}

// part returns repository name's part of the index (listing its points
// only when its catalog changed).
func (s *Set) part(ctx context.Context, name string, r *repository.Repository) (*repoIndex, error) {
	c := &s.idx
	asked := c.real.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.part(ctx, name, r, asked)
}

// pointsSig returns the signature of repository name's points.
func (s *Set) pointsSig(ctx context.Context, name string, r *repository.Repository) (string, error) {
	p, err := s.part(ctx, name, r)
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(p.sig[:]), nil
}

// forget drops a repository's part: the set itself changed its points.
func (c *indexCache) forget(name string) {
	c.mu.Lock()
	delete(c.repos, name)
	c.mu.Unlock()
}

// index returns the current index of every repository's points.
func (s *Set) index(ctx context.Context) (*pointIndex, error) {
	c := &s.idx
	asked := c.real.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	names, repos, release := s.acquireAll()
	defer release()
	parts := make([]*repoIndex, len(names))
	same := c.merged != nil && len(c.parts) == len(parts)
	for i, name := range names {
		p, err := c.part(ctx, name, repos[name], asked)
		if err != nil {
			return nil, err
		}
		parts[i] = p
		if same && (c.parts[i] != p && !slicesSame(c.parts[i].pts, p.pts)) {
			same = false
		}
	}
	if same {
		c.parts = parts
		return c.merged, nil
	}
	c.merged, c.parts = buildIndex(parts), parts
	c.builds++
	return c.merged, nil
}

func slicesSame(a, b []api.RestorePoint) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// IndexStats reports how many times the point index was built and how
// many times a repository's points were listed for it.
func (s *Set) IndexStats() (builds, lists int) {
	s.idx.mu.Lock()
	defer s.idx.mu.Unlock()
	return s.idx.builds, s.idx.lists
}

func buildIndex(parts []*repoIndex) *pointIndex {
	n := 0
	for _, p := range parts {
		n += len(p.pts)
	}
	idx := &pointIndex{pts: make([]api.RestorePoint, 0, n), byVM: map[string][]int32{}}
	// Merge the sorted parts (few repositories: a linear pick is enough).
	pos := make([]int, len(parts))
	for len(idx.pts) < n {
		best := -1
		for i, p := range parts {
			if pos[i] < len(p.pts) && (best < 0 || api.PointLess(p.pts[pos[i]].Key(), parts[best].pts[pos[best]].Key())) {
				best = i
			}
		}
		idx.pts = append(idx.pts, parts[best].pts[pos[best]])
		pos[best]++
	}
	vmAt := map[string]int{}
	for i := range idx.pts {
		p := &idx.pts[i]
		if p.VM.InstanceUUID != "" {
			idx.byVM[p.VM.InstanceUUID] = append(idx.byVM[p.VM.InstanceUUID], int32(i))
		}
		if p.VM.Name != "" && p.VM.Name != p.VM.InstanceUUID {
			idx.byVM[p.VM.Name] = append(idx.byVM[p.VM.Name], int32(i))
		}
		k := api.VMKey(p.VM)
		j, ok := vmAt[k]
		if !ok {
			j = len(idx.vms)
			vmAt[k] = j
			idx.vms = append(idx.vms, api.VMPoints{VM: p.VM})
		}
		v := &idx.vms[j]
		v.Points++
		if !p.Partial && v.Last == nil {
			v.Last = p
		}
	}
	return idx
}

// PointsPage implements web's PointPager: one page of q, in list order.
func (s *Set) PointsPage(ctx context.Context, q api.PointQuery) (api.PointPage, error) {
	if q.Repository != "" && !s.Has(q.Repository) {
		return api.PointPage{}, fmt.Errorf("repository %q: %w", q.Repository, api.ErrNotFound)
	}
	idx, err := s.index(ctx)
	if err != nil {
		return api.PointPage{}, err
	}
	pg := idx.page(q)
	s.withVerification(pg.Items)
	return pg, nil
}

// page answers q from the index: the time bounds and the cursor are binary
// searches; a VM filter reads only that VM's positions.
func (idx *pointIndex) page(q api.PointQuery) api.PointPage {
	pts := idx.pts
	lo, hi := 0, len(pts)
	if !q.To.IsZero() { // newest first: the points before To start here
		lo = sort.Search(len(pts), func(i int) bool { return pts[i].Time.Before(q.To) })
	}
	if !q.From.IsZero() {
		hi = sort.Search(len(pts), func(i int) bool { return pts[i].Time.Before(q.From) })
	}
	start := lo
	if q.After != nil {
		start = max(lo, sort.Search(len(pts), func(i int) bool { return api.PointLess(*q.After, pts[i].Key()) }))
	}
	limit := max(q.Limit, 1)
	out := api.PointPage{Items: []api.RestorePoint{}}
	visit := func(i int) {
		p := &pts[i]
		if (q.Repository != "" && p.Repository != q.Repository) || (q.Job != "" && p.Job != q.Job) ||
			(q.Search != "" && !api.PointMatches(*p, q.Search)) {
			return
		}
		out.Total++
		if i < start {
			return
		}
		if len(out.Items) < limit {
			out.Items = append(out.Items, *p)
		} else {
			out.More = true
		}
	}
	if q.VM != "" {
		for _, i := range idx.byVM[q.VM] {
			if int(i) >= lo && int(i) < hi {
				visit(int(i))
			}
		}
		return out
	}
	for i := lo; i < hi; i++ {
		visit(i)
	}
	return out
}

// VMPoints implements web's VMPointsSummary: each VM known from the
// restore points with its count and newest complete point, in order of
// each VM's newest point.
func (s *Set) VMPoints(ctx context.Context) ([]api.VMPoints, error) {
	idx, err := s.index(ctx)
	if err != nil {
		return nil, err
	}
	return idx.vms, nil
}

func inode(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}
