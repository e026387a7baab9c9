package policy

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"
)

// Maintenance task names, in the order they run within a maintenance window.
const (
	TaskReclaim    = "reclaim"     // apply every job's retention, then reclaim space
	TaskQuickCheck = "quick-check" // daily: structure plus what is new
	TaskFullCheck  = "full-check"  // every FullCheckInterval: read all data; resumable
)

func (s *Scheduler) maintenanceEnabled() bool {
	return s.cfg.Maintainer != nil && !s.cfg.MaintenanceWindow.IsEmpty()
}

// repositories lists the repositories that jobs use.
func (s *Scheduler) repositories() []string {
	set := map[string]bool{}
	for _, j := range s.jobs {
		set[j.Repository] = true
	}
	out := make([]string, 0, len(set))
	for r := range set {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

// stepMaintenance cancels maintenance outside the maintenance window and,
// inside it, starts the next due task on each repository, whether or not
// backups use it. Within one window: reclaim (after retention), quick
// check, then the full check when it is due or unfinished.
func (s *Scheduler) stepMaintenance(now time.Time) {
	if !s.maintenanceEnabled() {
		return
	}
	occ, open := s.cfg.MaintenanceWindow.At(now)
	if !open {
		for _, m := range s.maint {
			m.cancel()
		}
		return
	}
	for _, repo := range s.repositories() {
		if s.maint[repo] != nil {
			continue
		}
		ms := s.mstate[repo]
		ms.Repository = repo
		failed := func(task string) bool { return s.maintFailed[repo+"\x00"+task] == occ.ID() }
		var task string
		switch {
		case ms.LastReclaim.Before(occ.Open) && !failed(TaskReclaim):
			task = TaskReclaim
		case ms.LastQuickCheck.Before(occ.Open) && !failed(TaskQuickCheck):
			task = TaskQuickCheck
		case (ms.FullCheckCursor != "" || now.Sub(ms.LastFullCheck) >= s.cfg.FullCheckInterval) && !failed(TaskFullCheck):
			task = TaskFullCheck
		default:
			continue
		}
		s.startMaintenance(repo, task, occ.ID(), ms, now)
	}
}

func (s *Scheduler) startMaintenance(repo, task, occID string, ms MaintenanceState, now time.Time) {
	ctx, cancel := context.WithCancel(s.runCtx)
	t := &maintTask{repo: repo, kind: task, occID: occID, cancel: cancel}
	s.maint[repo] = t
	s.mu.Lock()
	s.mstat[repo] = &RunningMaintenance{Repository: repo, Task: task, Started: now, Cursor: ms.FullCheckCursor}
	s.mu.Unlock()
	// The task gets copies: the retention of every job writing to repo, and
	// its own MaintenanceState, which the loop does not touch until it ends.
	retention := map[string]Retention{}
	for _, j := range s.jobs {
		if j.Repository == repo {
			retention[j.ID] = j.Retention
		}
	}
	loc := s.cfg.Location
	m := s.cfg.Maintainer
	store := s.cfg.Store
	pctx := s.pctx
	if task == TaskFullCheck && ms.FullCheckCursor == "" {
		ms.FullCheckStart = now
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		d := maintDone{task: t, ms: ms}
		switch task {
		case TaskReclaim:
			d.removed, d.bytes, d.freed, d.err = reclaim(ctx, m, repo, retention, loc)
		case TaskQuickCheck:
			d.check, d.err = m.Check(ctx, CheckRequest{Repository: repo, Since: ms.LastQuickCheck}, func(CheckProgress) {})
		case TaskFullCheck:
			eta := etaFrom(now)
			d.check, d.err = m.Check(ctx, CheckRequest{Repository: repo, Full: true, Resume: ms.FullCheckCursor}, func(p CheckProgress) {
				// Persisted as it goes, so a stop or crash resumes here.
				if p.Cursor != d.ms.FullCheckCursor {
					d.ms.FullCheckCursor = p.Cursor
					if err := store.PutMaintenance(pctx, d.ms); err != nil {
						s.logf("scheduler: save full check cursor of %s: %v", repo, err)
					}
				}
				end := eta(p, s.now())
				s.mu.Lock()
				if r := s.mstat[repo]; r != nil {
					r.Cursor, r.Done, r.Total, r.ETA = p.Cursor, p.Done, p.Total, end
				}
				s.mu.Unlock()
			})
		}
		cancel()
		s.results <- d
	}()
}

// etaFrom returns an estimator of a check's end at the rate it has had
// since start in this run (not counting what an earlier window verified).
// It is called from the check's goroutine only.
func etaFrom(start time.Time) func(p CheckProgress, now time.Time) time.Time {
	first := int64(-1)
	return func(p CheckProgress, now time.Time) time.Time {
		if first < 0 {
			first = p.Done - 1 // the first report is one unit done in this run
			if first < 0 {
				first = 0
			}
		}
		done, el := p.Done-first, now.Sub(start)
		if p.Total <= 0 || done <= 0 || el <= 0 || p.Done > p.Total {
			return time.Time{}
		}
		return now.Add(time.Duration(float64(el) / float64(done) * float64(p.Total-p.Done)))
	}
}

// PlanRetention is the dry run for one job: what its retention would remove
// from its points in its repository now, with the reasons and the bytes that
// would be freed. It changes nothing.
func PlanRetention(ctx context.Context, m Maintainer, j Job, loc *time.Location) (Plan, error) {
	points, err := m.Points(ctx, j.Repository)
	if err != nil {
		return Plan{}, fmt.Errorf("list points of %s: %w", j.Repository, err)
	}
	return j.Retention.DryRun(pointsOf(points, j.ID), loc), nil
}

func pointsOf(points []Point, job string) []Point {
	var out []Point
	for _, p := range points {
		if p.Job == job && !p.Foreign { // another appliance's job of the same name is not ours
			out = append(out, p)
		}
	}
	return out
}

// reclaim applies each job's retention to that job's points in the
// repository (points of jobs that no longer exist are kept), removes what
// retention rejects, then reclaims space.
func reclaim(ctx context.Context, m Maintainer, repo string, retention map[string]Retention, loc *time.Location) (removed int, bytes, freed int64, err error) {
	points, err := m.Points(ctx, repo)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("list points of %s: %w", repo, err)
	}
	jobs := make([]string, 0, len(retention))
	for j := range retention {
		jobs = append(jobs, j)
	}
	sort.Strings(jobs)
	var ids []string
	for _, j := range jobs {
		plan := retention[j].DryRun(pointsOf(points, j), loc)
		for _, p := range plan.Removals() {
			ids = append(ids, p.ID)
		}
		bytes += plan.BytesFreed
	}
	if len(ids) > 0 {
		if err := m.RemovePoints(ctx, repo, ids); err != nil {
			return 0, 0, 0, fmt.Errorf("remove %d points from %s: %w", len(ids), repo, err)
		}
	}
	freed, err = m.Reclaim(ctx, repo)
	if err != nil {
		return len(ids), bytes, 0, fmt.Errorf("reclaim %s: %w", repo, err)
	}
	return len(ids), bytes, freed, nil
}

func (s *Scheduler) maintFinished(d maintDone) {
	now := s.now()
	t := d.task
	delete(s.maint, t.repo)
	s.mu.Lock()
	delete(s.mstat, t.repo)
	s.mu.Unlock()
	ms := d.ms
	ev := Event{Subject: t.repo, Repository: t.repo}
	cancelled := d.err != nil && errors.Is(d.err, context.Canceled)
	switch {
	case cancelled && t.kind == TaskFullCheck:
		ev.Severity, ev.Kind = SeverityInfo, EventCheckPaused
		ev.Message = fmt.Sprintf("full check paused at %q; it resumes in the next maintenance window", ms.FullCheckCursor)
	case cancelled:
		ev = Event{} // a reclaim or quick check simply runs again next window
	case d.err != nil:
		s.maintFailed[t.repo+"\x00"+t.kind] = t.occID
		ev.Severity, ev.Kind = SeverityError, EventMaintenanceFailed
		ev.Message = fmt.Sprintf("%s failed: %v", t.kind, d.err)
	case t.kind == TaskReclaim:
		ms.LastReclaim = now
		if d.removed > 0 {
			s.emit(Event{Severity: SeverityInfo, Kind: EventRetentionRemoved, Subject: t.repo, Repository: t.repo,
				Message: fmt.Sprintf("retention removed %d restore points (%d bytes)", d.removed, d.bytes)})
		}
		ev.Severity, ev.Kind = SeverityInfo, EventReclaimDone
		ev.Message = fmt.Sprintf("reclaim freed %d bytes", d.freed)
	default:
		if t.kind == TaskQuickCheck {
			ms.LastQuickCheck = now
		} else {
			ms.LastFullCheck, ms.FullCheckCursor, ms.FullCheckStart = now, "", time.Time{}
		}
		if d.check.Damaged > 0 {
			ev.Severity, ev.Kind = SeverityError, EventCheckDamage
			ev.Message = fmt.Sprintf("%s found %d damaged items: %s", t.kind, d.check.Damaged, d.check.Summary)
		} else {
			ev.Severity, ev.Kind = SeverityInfo, EventCheckClean
			ev.Message = fmt.Sprintf("%s clean: %s", t.kind, d.check.Summary)
		}
	}
	s.mstate[t.repo] = ms
	if err := s.cfg.Store.PutMaintenance(s.pctx, ms); err != nil {
		s.logf("scheduler: save maintenance state of %s: %v", t.repo, err)
	}
	if ev.Kind != "" {
		s.emit(ev)
	}
}
