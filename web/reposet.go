package web

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/vmconfig"
)

// JobTag is the restore point tag that names the job a point was made by.
const JobTag = "job"

// RepoSet implements Points and Repositories over the appliance's open
// repositories, by name. It does not own them: the caller closes them.
type RepoSet struct {
	names []string
	repos map[string]*repository.Repository
	// Maintenance, if set, adds the scheduler's maintenance progress to RepositoryInfo.
	Maintenance func(ctx context.Context) ([]policy.MaintenanceState, error)
	// StatsTTL is how long a repository's statistics (a walk of every
	// point) serve the dashboard and detail pages while its points do not
	// change; default 30s.
	StatsTTL time.Duration

	statsMu    sync.Mutex
	stats      map[string]statsEntry
	statsGroup singleflight.Group
	statsRuns  int // statistics computed (tests)
}

type statsEntry struct {
	sig string // the point ids the statistics were computed over
	at  time.Time
	st  *repository.Stats
}

// pointsSig identifies a set of points: statistics stay valid while it does.
func pointsSig(pts []repository.Point) string {
	h := sha256.New()
	for _, p := range pts {
		h.Write([]byte(p.ID))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// cachedStats returns r's statistics, computed at most once per StatsTTL
// for the same points, and once for concurrent callers. A point added or
// removed invalidates them at once.
func (s *RepoSet) cachedStats(ctx context.Context, name string, r *repository.Repository) (*repository.Stats, error) {
	pts, err := r.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("list points of %s: %w", name, err)
	}
	sig := pointsSig(pts)
	ttl := s.StatsTTL
	if ttl <= 0 {
		ttl = 30 * time.Second
	}
	s.statsMu.Lock()
	e, ok := s.stats[name]
	s.statsMu.Unlock()
	if ok && e.sig == sig && time.Since(e.at) < ttl {
		return e.st, nil
	}
	v, err, _ := s.statsGroup.Do(name+"\x00"+sig, func() (any, error) {
		st, err := r.Stats(ctx)
		if err != nil {
			return nil, err
		}
		s.statsMu.Lock()
		if s.stats == nil {
			s.stats = map[string]statsEntry{}
		}
		s.stats[name] = statsEntry{sig: sig, at: time.Now(), st: st}
		s.statsRuns++
		s.statsMu.Unlock()
		return st, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*repository.Stats), nil
}

// NewRepoSet returns a set over repos (name -> open repository).
func NewRepoSet(repos map[string]*repository.Repository) *RepoSet {
	s := &RepoSet{repos: repos}
	for n := range repos {
		s.names = append(s.names, n)
	}
	sort.Strings(s.names)
	return s
}

// Names returns the repository names, sorted.
func (s *RepoSet) Names() []string { return append([]string(nil), s.names...) }

// Has reports whether a repository of that name exists.
func (s *RepoSet) Has(name string) bool { _, ok := s.repos[name]; return ok }

func (s *RepoSet) repo(name string) (*repository.Repository, error) {
	r, ok := s.repos[name]
	if !ok {
		return nil, fmt.Errorf("repository %q: %w", name, ErrNotFound)
	}
	return r, nil
}

func toAPIPoint(repo string, p repository.Point) RestorePoint {
	rp := RestorePoint{
		ID: p.ID, Repository: repo, Job: p.Tags[JobTag],
		VM:   VMRef{Name: p.VM.Name, InstanceUUID: p.VM.InstanceUUID, MoRef: p.VM.MoRef},
		Time: p.Time, Parent: p.Parent, Consistency: p.Consistency, Partial: p.Partial, Locked: p.Locked,
		LogicalBytes: p.LogicalBytes, Warnings: p.Warnings, Tags: p.Tags,
		Disks: make([]PointDisk, len(p.Disks)),
	}
	for i, d := range p.Disks {
		rp.Disks[i] = PointDisk{Key: d.Key, Label: d.Label, Capacity: d.Capacity, Mode: d.Stats.Mode, BytesRead: d.Stats.BytesRead, NewBytes: d.Stats.NewBytes, Stored: d.Stats.StoredBytes}
	}
	return rp
}

// Points implements Points: newest first.
func (s *RepoSet) Points(ctx context.Context, f PointFilter) ([]RestorePoint, error) {
	var out []RestorePoint
	for _, name := range s.names {
		if f.Repository != "" && f.Repository != name {
			continue
		}
		pts, err := s.repos[name].List(ctx)
		if err != nil {
			return nil, fmt.Errorf("list points of %s: %w", name, err)
		}
		for _, p := range pts {
			switch {
			case f.VM != "" && p.VM.InstanceUUID != f.VM && p.VM.Name != f.VM,
				f.Job != "" && p.Tags[JobTag] != f.Job,
				!f.From.IsZero() && p.Time.Before(f.From),
				!f.To.IsZero() && !p.Time.Before(f.To):
				continue
			}
			out = append(out, toAPIPoint(name, p))
		}
	}
	if f.Repository != "" && !s.Has(f.Repository) {
		return nil, fmt.Errorf("repository %q: %w", f.Repository, ErrNotFound)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.After(out[j].Time) })
	return out, nil
}

// find returns the repository holding a point id.
func (s *RepoSet) find(ctx context.Context, id string) (string, repository.Point, error) {
	for _, name := range s.names {
		p, err := s.repos[name].Point(ctx, id)
		if errors.Is(err, repository.ErrNotFound) {
			continue
		}
		if err != nil {
			return "", repository.Point{}, err
		}
		return name, p, nil
	}
	return "", repository.Point{}, fmt.Errorf("restore point %s: %w", id, ErrNotFound)
}

// Locate returns the repository holding a restore point and its full id.
func (s *RepoSet) Locate(ctx context.Context, id string) (repo string, p repository.Point, err error) {
	return s.find(ctx, id)
}

// Repo returns an open repository by name.
func (s *RepoSet) Repo(name string) (*repository.Repository, error) { return s.repo(name) }

// Point implements Points.
func (s *RepoSet) Point(ctx context.Context, id string) (RestorePoint, error) {
	name, p, err := s.find(ctx, id)
	if err != nil {
		return RestorePoint{}, err
	}
	rp := toAPIPoint(name, p)
	rp.Config, err = s.pointConfig(ctx, name, p)
	if err != nil {
		rp.ConfigError = err.Error()
	}
	return rp, nil
}

// pointConfig reads and decodes a point's saved VM configuration; nil, nil
// when it has none.
func (s *RepoSet) pointConfig(ctx context.Context, repo string, p repository.Point) (*PointConfig, error) {
	b, err := s.repos[repo].LoadConfigBlob(ctx, p)
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

func configView(c vmconfig.VMConfig) *PointConfig {
	pc := &PointConfig{Name: c.Name, GuestID: c.GuestID, NumCPU: c.NumCPU, MemoryMB: c.MemoryMB, Firmware: c.Firmware,
		NICs: make([]PointNIC, len(c.NICs)), Disks: make([]PointConfigDisk, len(c.Disks))}
	for i, n := range c.NICs {
		pc.NICs[i] = PointNIC{Label: n.Label, Type: n.Type, Network: n.Network}
	}
	for i, d := range c.Disks {
		pc.Disks[i] = PointConfigDisk{Key: d.Key, Label: d.Label, Capacity: d.CapacityBytes, Datastore: d.Datastore, Skipped: d.Skipped}
	}
	return pc
}

// SetLocked implements Points.
func (s *RepoSet) SetLocked(ctx context.Context, id string, locked bool) error {
	name, p, err := s.find(ctx, id)
	if err != nil {
		return err
	}
	if locked {
		return s.repos[name].Lock(ctx, p.ID)
	}
	return s.repos[name].Unlock(ctx, p.ID)
}

// Delete implements Points; a locked point is refused (repository.ErrPointLocked).
func (s *RepoSet) Delete(ctx context.Context, id string) error {
	name, p, err := s.find(ctx, id)
	if err != nil {
		return err
	}
	return s.repos[name].Delete(ctx, p.ID)
}

func (s *RepoSet) info(ctx context.Context, name string, r *repository.Repository, withStats bool, ms map[string]policy.MaintenanceState) (RepositoryInfo, error) {
	cfg := r.Config()
	ri := RepositoryInfo{Name: name, Path: r.Dir(), Format: cfg.Version.String(), Encrypted: cfg.Encrypted}
	if m, ok := ms[name]; ok {
		ri.Maintenance = &m
	}
	if withStats {
		st, err := s.cachedStats(ctx, name, r)
		if err != nil {
			return ri, fmt.Errorf("stats of %s: %w", name, err)
		}
		ri.Stats = st
		ri.Points = st.Points
		return ri, nil
	}
	pts, err := r.List(ctx)
	if err != nil {
		return ri, fmt.Errorf("list points of %s: %w", name, err)
	}
	ri.Points = len(pts)
	return ri, nil
}

func (s *RepoSet) maintenance(ctx context.Context) map[string]policy.MaintenanceState {
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

// Repositories implements Repositories (without statistics: they walk every point).
func (s *RepoSet) Repositories(ctx context.Context) ([]RepositoryInfo, error) {
	ms := s.maintenance(ctx)
	out := make([]RepositoryInfo, 0, len(s.names))
	for _, n := range s.names {
		ri, err := s.info(ctx, n, s.repos[n], false, ms)
		if err != nil {
			return nil, err
		}
		out = append(out, ri)
	}
	return out, nil
}

// Repository implements Repositories.
func (s *RepoSet) Repository(ctx context.Context, name string) (RepositoryInfo, error) {
	r, err := s.repo(name)
	if err != nil {
		return RepositoryInfo{}, err
	}
	return s.info(ctx, name, r, true, s.maintenance(ctx))
}

// Check implements Repositories.
func (s *RepoSet) Check(ctx context.Context, name string, full bool, rep Reporter) (any, error) {
	r, err := s.repo(name)
	if err != nil {
		return nil, err
	}
	rep.Logf("check of %s started (read data: %v)", name, full)
	// The phase says which check runs: a full one (every blob read and
	// verified) must not look like a quick one in the task list.
	mode := "quick check: "
	if full {
		mode = "read and verify: "
	}
	report, err := r.Check(ctx, repository.CheckOptions{ReadData: full}, func(p repository.Progress) { rep.Progress(mode+p.Phase, p.Done, p.Total) })
	if err != nil {
		return nil, fmt.Errorf("check %s: %w", name, err)
	}
	for _, p := range report.Problems {
		rep.Logf("problem: %s", p.String())
	}
	return report, nil
}

// Reclaim implements Repositories.
func (s *RepoSet) Reclaim(ctx context.Context, name string, rep Reporter) (any, error) {
	r, err := s.repo(name)
	if err != nil {
		return nil, err
	}
	report, err := r.Reclaim(ctx, func(p repository.Progress) { rep.Progress(p.Phase, p.Done, p.Total) })
	if err != nil {
		return nil, fmt.Errorf("reclaim %s: %w", name, err)
	}
	rep.Logf("reclaim of %s freed %d bytes", name, report.BytesFreed)
	return report, nil
}
