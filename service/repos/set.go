package repos

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vmvault/vmvault/internal/cache"
	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/capacity"
	"github.com/vmvault/vmvault/vmconfig"
	"github.com/vmvault/vmvault/web/api"
)

// JobTag is the restore point tag that names the job a point was made by.
const JobTag = "job"

// DefaultStatsTTL is how long a repository's statistics serve while its
// points do not change.
const DefaultStatsTTL = 30 * time.Second

// Set implements web's Points and Repositories over the appliance's open
// repositories, by name. It does not own them: the caller closes them,
// and closes one Remove detached once Remove has returned it.
type Set struct {
	// mu guards names and repos, which Add and Remove replace (never
	// change in place): a reader takes both under the lock once, then
	// reads them without it. mu also guards ents and nextOp.
	mu    sync.RWMutex
	names []string
	repos map[string]*repository.Repository
	// ents holds, per repository, the calls and operations in flight on
	// it (remove.go): Remove refuses while an operation runs and waits for
	// the calls before it hands the repository back to be closed.
	ents   map[string]*entry
	nextOp uint64
	// Maintenance, if set, adds the scheduler's maintenance progress to RepositoryInfo.
	Maintenance func(ctx context.Context) ([]policy.MaintenanceState, error)
	// verification gives a point's latest verification (SetVerification).
	verification atomic.Pointer[func(point string) *api.PointVerification]

	// stats is keyed by repository name and the signature of its points:
	// a point added or removed makes a new key, so statistics are never
	// served for a set of points they were not computed over.
	stats *cache.TTL[statsKey, *api.RepoStats]

	clk       clock.Clock
	threshold capacity.Threshold
	bandwidth func(name string) *api.Bandwidth // nil: no limits shown

	// last is each repository's newest statistics and how long their walk
	// took: served, marked stale, while a slow walk over changed points
	// runs (staleAfter, staleWait).
	lastMu                sync.Mutex
	last                  map[string]lastStats
	staleAfter, staleWait time.Duration

	// idx is every repository's points in list order (index.go).
	idx indexCache

	// removing, set by this package's tests, is called by Remove once the
	// repository is detached, before it waits for the calls that hold it.
	removing func(name string)
}

type statsKey struct{ repo, sig string }

type lastStats struct {
	sig  string
	v    *api.RepoStats
	took time.Duration
}

// Defaults of WithStaleStats.
const (
	DefaultStaleAfter = time.Second
	DefaultStaleWait  = 250 * time.Millisecond
)

// Option changes a Set made by New.
type Option func(*options)

type options struct {
	ttl                   time.Duration
	clk                   clock.Clock
	threshold             capacity.Threshold
	staleAfter, staleWait time.Duration
	bandwidth             func(name string) *api.Bandwidth
}

// WithBandwidth makes RepositoryInfo show each repository's bandwidth
// limits (nil from f: none), which the daemon applies when it opens it.
func WithBandwidth(f func(name string) *api.Bandwidth) Option {
	return func(o *options) { o.bandwidth = f }
}

// WithStaleStats sets when a caller is served a repository's previous
// statistics (marked stale) instead of waiting for the walk over its
// changed points: when the previous walk took at least after and the new
// one has not ended within wait. A repository of 30,000 points takes
// seconds to walk, and a backup window commits a point every few seconds:
// without this every dashboard visit in a window waited for a walk.
// Defaults DefaultStaleAfter and DefaultStaleWait.
func WithStaleStats(after, wait time.Duration) Option {
	return func(o *options) { o.staleAfter, o.staleWait = after, wait }
}

// WithLowSpace sets when a repository's free space counts as low (default
// capacity.DefaultThreshold).
func WithLowSpace(t capacity.Threshold) Option { return func(o *options) { o.threshold = t } }

// WithStatsTTL sets how long statistics serve while the points do not
// change (default DefaultStatsTTL).
func WithStatsTTL(d time.Duration) Option { return func(o *options) { o.ttl = d } }

// WithClock sets the clock statistics age by (tests use clock.Fake).
func WithClock(c clock.Clock) Option { return func(o *options) { o.clk = c } }

// New returns a set over repos (name -> open repository).
func New(repos map[string]*repository.Repository, opts ...Option) *Set {
	o := options{ttl: DefaultStatsTTL, clk: clock.Real(), threshold: capacity.DefaultThreshold,
		staleAfter: DefaultStaleAfter, staleWait: DefaultStaleWait}
	for _, f := range opts {
		f(&o)
	}
	if o.ttl <= 0 {
		o.ttl = DefaultStatsTTL
	}
	s := &Set{repos: maps.Clone(repos), ents: make(map[string]*entry, len(repos)), clk: o.clk, threshold: o.threshold,
		last: map[string]lastStats{}, staleAfter: o.staleAfter, staleWait: o.staleWait, bandwidth: o.bandwidth}
	for n, r := range repos {
		s.ents[n] = newEntry(r)
	}
	// The catalog's file times are the real clock's, whatever clock ages
	// the statistics.
	s.idx = indexCache{repos: map[string]*repoIndex{}, real: clock.Real()}
	for n := range repos {
		s.names = append(s.names, n)
	}
	sort.Strings(s.names)
	// A walk of a large repository's points takes minutes, not hours; the
	// bound only keeps a wedged walk from living forever.
	s.stats = cache.New(o.ttl, s.loadStats, cache.WithClock(o.clk), cache.WithTimeout(30*time.Minute))
	return s
}

// view returns the current names and repositories; neither may be changed.
func (s *Set) view() ([]string, map[string]*repository.Repository) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.names, s.repos
}

// Names returns the repository names, sorted.
func (s *Set) Names() []string { names, _ := s.view(); return append([]string(nil), names...) }

// Has reports whether a repository of that name exists.
func (s *Set) Has(name string) bool { _, repos := s.view(); _, ok := repos[name]; return ok }

// ErrExists is Add's answer for a name already in the set.
var ErrExists = errors.New("a repository of that name exists")

// Add puts an open repository into the set at runtime (a repository added
// from the console); the caller still owns and closes it.
func (s *Set) Add(name string, r *repository.Repository) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.repos[name]; ok {
		return fmt.Errorf("repository %q: %w", name, ErrExists)
	}
	repos := make(map[string]*repository.Repository, len(s.repos)+1)
	for n, x := range s.repos {
		repos[n] = x
	}
	repos[name] = r
	names := append(append(make([]string, 0, len(s.names)+1), s.names...), name)
	sort.Strings(names)
	s.names, s.repos = names, repos
	s.ents[name] = newEntry(r)
	return nil
}

// Repo returns an open repository by name. Its caller's use of it is
// not counted: Remove neither waits for it nor refuses because of it
// (Use is the counted form).
func (s *Set) Repo(name string) (*repository.Repository, error) { return s.repo(name) }

// StatsLoads reports how many statistics walks have finished.
func (s *Set) StatsLoads() int { return s.stats.Loads() }

// Wait blocks until no statistics walk is in flight or ctx ends; call it
// before closing the repositories.
func (s *Set) Wait(ctx context.Context) error { return s.stats.Wait(ctx) }

func (s *Set) repo(name string) (*repository.Repository, error) {
	_, repos := s.view()
	r, ok := repos[name]
	if !ok {
		return nil, fmt.Errorf("repository %q: %w", name, api.ErrNotFound)
	}
	return r, nil
}

// kind marks the repository's sentinel errors with api's kinds, in the
// order web's mapping has always tried them.
func kind(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, repository.ErrNotFound):
		return api.Kind(err, api.ErrNotFound)
	case errors.Is(err, repository.ErrAmbiguous):
		return api.Kind(err, api.ErrAmbiguous)
	case errors.Is(err, repository.ErrPointLocked):
		return api.Kind(err, api.ErrPointLocked)
	case errors.Is(err, repository.ErrBusy), errors.Is(err, repository.ErrLocked):
		return api.Kind(err, api.ErrBusy)
	}
	return err
}

func (s *Set) loadStats(ctx context.Context, k statsKey) (*api.RepoStats, error) {
	r, release, err := s.acquire(k.repo)
	if err != nil {
		return nil, err
	}
	defer release()
	start := s.idx.real.Now()
	st, err := r.Stats(ctx)
	if err != nil {
		return nil, err
	}
	v := StatsView(st)
	s.lastMu.Lock()
	s.last[k.repo] = lastStats{sig: k.sig, v: v, took: s.idx.real.Now().Sub(start)}
	s.lastMu.Unlock()
	return v, nil
}

// cachedStats returns r's statistics, computed at most once per TTL for
// the same points, and once for concurrent callers. A point added or
// removed invalidates them at once; while a slow walk over the new points
// runs, callers get the previous statistics marked stale (WithStaleStats).
func (s *Set) cachedStats(ctx context.Context, name string, r *repository.Repository) (*api.RepoStats, error) {
	// The point index's signature of r's points (ids, lock and partial
	// flags), without listing them again while its catalog is at rest.
	sig, err := s.pointsSig(ctx, name, r)
	if err != nil {
		return nil, err
	}
	key := statsKey{repo: name, sig: sig}
	s.lastMu.Lock()
	prev, ok := s.last[name]
	s.lastMu.Unlock()
	if !ok || prev.sig == sig || prev.took < s.staleAfter {
		return s.stats.Get(ctx, key)
	}
	wctx, cancel := context.WithTimeout(ctx, s.staleWait)
	defer cancel()
	st, err := s.stats.Get(wctx, key) // the walk goes on for the next caller
	if err == nil || ctx.Err() != nil || wctx.Err() == nil {
		return st, err
	}
	stale := *prev.v
	stale.Stale = true
	return &stale, nil
}

// StatsView is the API's copy of a repository's statistics.
func StatsView(st *repository.Stats) *api.RepoStats {
	if st == nil {
		return nil
	}
	v := &api.RepoStats{Points: st.Points, LogicalBytes: st.LogicalBytes, UniqueBytes: st.UniqueBytes, StoredBytes: st.StoredBytes,
		DiskBytes: st.DiskBytes, DeadBytes: st.DeadBytes, Packs: st.Packs, Blobs: st.Blobs,
		DedupRatio: st.DedupRatio, CompressionRatio: st.CompressionRatio}
	if st.PerPoint != nil {
		v.PerPoint = make([]api.PointStats, len(st.PerPoint))
		for i, p := range st.PerPoint {
			v.PerPoint[i] = api.PointStats{ID: p.ID, LogicalBytes: p.LogicalBytes, UniqueBytes: p.UniqueBytes}
		}
	}
	return v
}

// PointView is the API's view of a restore point of repository repo.
func PointView(repo string, p repository.Point) api.RestorePoint {
	rp := api.RestorePoint{
		ID: p.ID, Repository: repo, Job: p.Tags[JobTag],
		VM:   api.VMRef{Name: p.VM.Name, InstanceUUID: p.VM.InstanceUUID, MoRef: p.VM.MoRef},
		Time: p.Time, Parent: p.Parent, Consistency: p.Consistency, Partial: p.Partial, Locked: p.Locked, LockedUntil: p.LockedUntil,
		LogicalBytes: p.LogicalBytes, Warnings: p.Warnings, Tags: p.Tags,
		Disks: make([]api.PointDisk, len(p.Disks)),
	}
	if q, ok := vmconfig.QuiesceFromTags(p.Consistency, p.Tags); ok {
		rp.Quiesce = &api.PointQuiesce{Requested: q.Requested, VSSType: q.VSSType, Obtained: q.Obtained, Reason: q.Reason,
			Detail: q.Detail, Spec: q.Spec, ToolsVersion: q.ToolsVersion, ToolsStatus: q.ToolsStatus}
	}
	for i, d := range p.Disks {
		rp.Disks[i] = api.PointDisk{Key: d.Key, Label: d.Label, Capacity: d.Capacity, Mode: d.Stats.Mode, BytesRead: d.Stats.BytesRead, NewBytes: d.Stats.NewBytes, Stored: d.Stats.StoredBytes}
	}
	return rp
}

// Points implements web.Points: newest first (api.PointLess), from the
// point index.
func (s *Set) Points(ctx context.Context, f api.PointFilter) ([]api.RestorePoint, error) {
	if f.Repository != "" && !s.Has(f.Repository) {
		return nil, fmt.Errorf("repository %q: %w", f.Repository, api.ErrNotFound)
	}
	idx, err := s.index(ctx)
	if err != nil {
		return nil, err
	}
	pg := idx.page(api.PointQuery{PointFilter: f, Limit: len(idx.pts)})
	if len(pg.Items) == 0 {
		return nil, nil
	}
	s.withVerification(pg.Items)
	return pg.Items, nil
}

// withVerification fills each point's latest verification. The items
// are copies of the index's (page copies them), so the index keeps none.
func (s *Set) withVerification(pts []api.RestorePoint) {
	f := s.verification.Load()
	if f == nil {
		return
	}
	for i := range pts {
		pts[i].Verification = (*f)(pts[i].ID)
	}
}

// SetVerification makes every point the Set answers show its latest
// verification: f gives it by full point id (nil: never verified);
// service/verification keeps them in memory, so no file is read per
// point. Safe while the Set serves.
func (s *Set) SetVerification(f func(point string) *api.PointVerification) {
	if f == nil {
		s.verification.Store(nil)
		return
	}
	s.verification.Store(&f)
}

// find returns the repository holding a point id.
func (s *Set) find(ctx context.Context, id string) (string, repository.Point, error) {
	names, repos, release := s.acquireAll()
	defer release()
	for _, name := range names {
		p, err := repos[name].Point(ctx, id)
		if errors.Is(err, repository.ErrNotFound) {
			continue
		}
		if err != nil {
			return "", repository.Point{}, kind(err)
		}
		return name, p, nil
	}
	return "", repository.Point{}, fmt.Errorf("restore point %s: %w", id, api.ErrNotFound)
}

// Locate returns the repository holding a restore point (id or unique
// prefix) and the point.
func (s *Set) Locate(ctx context.Context, id string) (repo string, p repository.Point, err error) {
	return s.find(ctx, id)
}

// Point implements web.Points.
func (s *Set) Point(ctx context.Context, id string) (api.RestorePoint, error) {
	name, p, err := s.find(ctx, id)
	if err != nil {
		return api.RestorePoint{}, err
	}
	rp := PointView(name, p)
	if f := s.verification.Load(); f != nil {
		rp.Verification = (*f)(p.ID)
	}
	rp.Config, err = s.pointConfig(ctx, name, p)
	if err != nil {
		rp.ConfigError = err.Error()
	}
	return rp, nil
}

// pointConfig reads and decodes a point's saved VM configuration; nil, nil
// when it has none.
func (s *Set) pointConfig(ctx context.Context, repo string, p repository.Point) (*api.PointConfig, error) {
	r, release, err := s.acquire(repo)
	if err != nil {
		return nil, err
	}
	defer release()
	b, err := r.LoadConfigBlob(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("read the VM configuration: %w", err)
	}
	if len(b) == 0 {
		return nil, nil
	}
	c, err := vmconfig.Decode(b)
	if err != nil {
		return nil, err
	}
	return configView(c), nil
}

func configView(c vmconfig.VMConfig) *api.PointConfig {
	pc := &api.PointConfig{Name: c.Name, GuestID: c.GuestID, NumCPU: c.NumCPU, MemoryMB: c.MemoryMB, Firmware: c.Firmware,
		NICs: make([]api.PointNIC, len(c.NICs)), Disks: make([]api.PointConfigDisk, len(c.Disks))}
	for i, n := range c.NICs {
		pc.NICs[i] = api.PointNIC{Label: n.Label, Type: n.Type, Network: n.Network}
	}
	for i, d := range c.Disks {
		pc.Disks[i] = api.PointConfigDisk{Key: d.Key, Label: d.Label, Capacity: d.CapacityBytes, Datastore: d.Datastore, Skipped: d.Skipped}
	}
	return pc
}

// change finds the point id (a unique prefix) for a change: its
// repository and record, and done, which the caller runs once the change
// is made so the point index lists that repository again.
func (s *Set) change(ctx context.Context, id string) (*repository.Repository, repository.Point, func(), error) {
	name, p, err := s.find(ctx, id)
	if err != nil {
		return nil, repository.Point{}, nil, err
	}
	r, release, err := s.acquire(name)
	if err != nil {
		return nil, repository.Point{}, nil, err
	}
	return r, p, func() { s.idx.forget(name); release() }, nil
}

// SetLocked implements web.Points.
func (s *Set) SetLocked(ctx context.Context, id string, locked bool) error {
	r, p, done, err := s.change(ctx, id)
	if err != nil {
		return err
	}
	defer done()
	if locked {
		return kind(r.Lock(ctx, p.ID))
	}
	// The repository keeps a time lock whatever the record's flag says;
	// clearing the flag would answer "unlocked" for a point that stays
	// locked, so an unlock before the date is refused for every caller.
	if !p.LockedUntil.IsZero() {
		return kind(fmt.Errorf("unlock %s: no role can remove a time lock before its date: %w", p.ID,
			&repository.PointLockedError{Point: p.ID, Until: p.LockedUntil, By: "time lock"}))
	}
	return kind(r.Unlock(ctx, p.ID))
}

// LockUntil implements web.TimeLocker: a time lock until the date (kept
// to the second; extended, never shortened).
func (s *Set) LockUntil(ctx context.Context, id string, until time.Time) error {
	r, p, done, err := s.change(ctx, id)
	if err != nil {
		return err
	}
	defer done()
	return kind(r.LockUntil(ctx, p.ID, until))
}

// Delete implements web.Points; a locked point is refused (api.ErrPointLocked).
func (s *Set) Delete(ctx context.Context, id string) error {
	r, p, done, err := s.change(ctx, id)
	if err != nil {
		return err
	}
	defer done()
	return kind(r.Delete(ctx, p.ID))
}

func (s *Set) info(ctx context.Context, name string, r *repository.Repository, withStats bool, ms map[string]policy.MaintenanceState) (api.RepositoryInfo, error) {
	cfg := r.Config()
	ri := api.RepositoryInfo{Name: name, Path: r.Dir(), Format: cfg.Version.String(), Encrypted: cfg.Encrypted}
	if s.bandwidth != nil {
		ri.Bandwidth = s.bandwidth(name)
	}
	if m, ok := ms[name]; ok {
		ri.Maintenance = &m
	}
	if withStats {
		st, err := s.cachedStats(ctx, name, r)
		if err != nil {
			return ri, kind(fmt.Errorf("stats of %s: %w", name, err))
		}
		ri.Stats = st
		ri.Points = st.Points
		if st.Stale {
			part, err := s.part(ctx, name, r)
			if err != nil {
				return ri, err
			}
			ri.Points = len(part.pts)
		}
		sp, err := s.space(ctx, name, r)
		if err != nil {
			return ri, kind(fmt.Errorf("space of %s: %w", name, err))
		}
		ri.Space = sp
		return ri, nil
	}
	part, err := s.part(ctx, name, r)
	if err != nil {
		return ri, err
	}
	ri.Points = len(part.pts)
	return ri, nil
}

func (s *Set) maintenance(ctx context.Context) map[string]policy.MaintenanceState {
	out := map[string]policy.MaintenanceState{}
	if s.Maintenance == nil {
		return out
	}
	ms, err := s.Maintenance(ctx)
	if err != nil {
		return out // maintenance progress is decoration; the listing still answers
	}
	for _, m := range ms {
		out[m.Repository] = m
	}
	return out
}

// Repositories implements web.Repositories (without statistics: they walk every point).
func (s *Set) Repositories(ctx context.Context) ([]api.RepositoryInfo, error) {
	ms := s.maintenance(ctx)
	names, repos, release := s.acquireAll()
	defer release()
	out := make([]api.RepositoryInfo, 0, len(names))
	for _, n := range names {
		ri, err := s.info(ctx, n, repos[n], false, ms)
		if err != nil {
			return nil, err
		}
		out = append(out, ri)
	}
	return out, nil
}

// Repository implements web.Repositories.
func (s *Set) Repository(ctx context.Context, name string) (api.RepositoryInfo, error) {
	r, release, err := s.acquire(name)
	if err != nil {
		return api.RepositoryInfo{}, err
	}
	defer release()
	return s.info(ctx, name, r, true, s.maintenance(ctx))
}

// Check implements web.Repositories; the report is a *repository.CheckReport.
func (s *Set) Check(ctx context.Context, name string, full bool, rep api.Reporter) (any, error) {
	r, done, err := s.Use(name, "check")
	if err != nil {
		return nil, err
	}
	defer done()
	rep.Logf("check of %s started (read data: %v)", name, full)
	// The phase says which check runs: a full one (every blob read and
	// verified) must not look like a quick one in the task list.
	mode := "quick check: "
	if full {
		mode = "read and verify: "
	}
	report, err := r.Check(ctx, repository.CheckOptions{ReadData: full}, func(p repository.Progress) { rep.Progress(mode+p.Phase, p.Done, p.Total) })
	if err != nil {
		return nil, kind(fmt.Errorf("check %s: %w", name, err))
	}
	for _, p := range report.Problems {
		rep.Logf("problem: %s", p.String())
	}
	return report, nil
}

// Reclaim implements web.Repositories; the report is a *repository.ReclaimReport.
func (s *Set) Reclaim(ctx context.Context, name string, rep api.Reporter) (any, error) {
	r, done, err := s.Use(name, "reclaim")
	if err != nil {
		return nil, err
	}
	defer done()
	report, err := r.Reclaim(ctx, func(p repository.Progress) { rep.Progress(p.Phase, p.Done, p.Total) })
	if err != nil {
		return nil, kind(fmt.Errorf("reclaim %s: %w", name, err))
	}
	rep.Logf("reclaim of %s freed %d bytes", name, report.BytesFreed)
	return report, nil
}
