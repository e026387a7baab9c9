package copyjob

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/internal/ratelimit"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/repos"
	"github.com/vmvault/vmvault/web/api"
)

// Repos resolves the appliance's repositories by name (repos.Set).
type Repos interface {
	Repo(name string) (*repository.Repository, error)
}

// Config wires a Runner.
type Config struct {
	Store *Store
	Repos Repos
	Clock clock.Clock // default the wall clock
	// Location is the calendar of the retention rules (default UTC).
	Location *time.Location
	// OnEvent receives copy.finished and copy.failed (stored and notified
	// by the caller).
	OnEvent func(policy.Event)
	Logger  *slog.Logger
	// Workers is repository.CopyOptions.Workers.
	Workers int
	// RetryAfter is how long a failed run waits before it is tried again
	// in the same window opening; default 30 minutes.
	RetryAfter time.Duration

	// hooks lets this package's tests wait for the loop and the window's
	// close instead of sleeping; nil in the daemon.
	hooks *hooks
}

// hooks are called from the Runner's goroutines as things happen.
type hooks struct {
	looking      func()           // Run is about to look at the jobs (tick)
	waiting      func()           // Run has armed its timer and waits
	windowClosed func(job string) // a window run was cancelled by its window's close
}

func (h *hooks) look() {
	if h != nil && h.looking != nil {
		h.looking()
	}
}

func (h *hooks) wait() {
	if h != nil && h.waiting != nil {
		h.waiting()
	}
}

func (h *hooks) closed(job string) {
	if h != nil && h.windowClosed != nil {
		h.windowClosed(job)
	}
}

// ErrNotRunning is returned by RunNow when the Runner's Run is not active.
var ErrNotRunning = api.Kind(errors.New("copy job runner is not running"), api.ErrUnavailable)

var (
	errWindowClosed = errors.New("the copy job's window closed")
	errJobDeleted   = errors.New("the copy job was deleted")
)

// Runner runs the copy jobs in their windows and on demand. Run owns every
// copy it starts and waits for them before it returns.
type Runner struct {
	cfg Config

	mu        sync.Mutex
	ctx       context.Context // Run's; nil when not running
	active    map[string]*active
	done      map[string]string    // job id -> window occurrence done (succeeded)
	retry     map[string]time.Time // job id -> no window run before
	lastStart map[string]time.Time
	targets   map[string]chan struct{} // target repository id -> lockTarget's
	wake      chan struct{}
	wg        sync.WaitGroup
	started   bool
}

type active struct {
	cancel context.CancelCauseFunc
	prog   Progress
	limit  *ratelimit.Limiter // the job's upload limit (SetLimit changes it mid-copy)
}

// New returns a Runner; call Run to start it.
func New(cfg Config) *Runner {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Location == nil {
		cfg.Location = time.UTC
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.RetryAfter = cmp.Or(cfg.RetryAfter, 30*time.Minute)
	return &Runner{cfg: cfg, active: map[string]*active{}, done: map[string]string{}, retry: map[string]time.Time{}, lastStart: map[string]time.Time{}, targets: map[string]chan struct{}{}, wake: make(chan struct{}, 1)}
}

// Reload makes Run re-read the jobs now (after one was saved or deleted).
func (r *Runner) Reload() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Deleted stops the job's running copy, if any, before its definition is
// deleted: the run ends cancelled without an event, and its record is not
// kept (what it copied stays in the target, tagged as copied).
func (r *Runner) Deleted(job string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a, ok := r.active[job]; ok {
		a.cancel(errJobDeleted)
	}
}

// SetLimit applies a saved job's upload limit to its running copy, if
// any: the copy goes on at the new rate.
func (r *Runner) SetLimit(j Job) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a, ok := r.active[j.ID]; ok {
		a.limit.SetSchedule(j.uploadLimit())
	}
}

// Progress returns the position of the job's running copy; false when none runs.
func (r *Runner) Progress(job string) (Progress, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a, ok := r.active[job]
	if !ok {
		return Progress{}, false
	}
	return a.prog, true
}

// Run starts copies at each window opening of the enabled jobs until ctx
// ends, then cancels the running copies (their runs are recorded as
// interrupted; the next run resumes them) and waits for them. Runs left
// running by a previous process are marked interrupted first.
func (r *Runner) Run(ctx context.Context) error {
	r.mu.Lock()
	if r.started {
		r.mu.Unlock()
		return errors.New("copyjob: Run called twice")
	}
	r.started = true
	r.mu.Unlock()
	// Before any run can start: a run of this process must never be taken
	// for one the previous process left.
	if n, err := r.cfg.Store.markInterrupted(ctx, r.cfg.Clock.Now()); err != nil {
		r.cfg.Logger.Error("copy jobs: mark interrupted runs", "err", err)
	} else if n > 0 {
		r.cfg.Logger.Warn("copy runs interrupted by the previous stop were marked interrupted", "count", n)
	}
	r.loadDone(ctx)
	r.mu.Lock()
	r.ctx = ctx
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		for _, a := range r.active {
			a.cancel(nil)
		}
		r.ctx = nil
		r.mu.Unlock()
		r.wg.Wait()
	}()
	for {
		r.cfg.hooks.look()
		next := r.tick(ctx)
		wait := min(next.Sub(r.cfg.Clock.Now()), time.Hour)
		t := r.cfg.Clock.NewTimer(max(wait, time.Second))
		r.cfg.hooks.wait()
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-r.wake:
			t.Stop()
		case <-t.C():
		}
	}
}

// loadDone remembers the windows the last runs already completed, so a
// restart inside a window does not copy again.
func (r *Runner) loadDone(ctx context.Context) {
	jobs, err := r.cfg.Store.Jobs(ctx)
	if err != nil {
		r.cfg.Logger.Error("copy jobs: read jobs", "err", err)
		return
	}
	for _, j := range jobs {
		runs, err := r.cfg.Store.Runs(ctx, j.ID, 1)
		if err == nil && len(runs) == 1 && runs[0].State == RunSucceeded && runs[0].Window != "" {
			r.mu.Lock()
			r.done[j.ID] = runs[0].Window
			r.mu.Unlock()
		}
	}
}

// tick starts the copies due now and returns when to look again.
func (r *Runner) tick(ctx context.Context) time.Time {
	now := r.cfg.Clock.Now()
	next := now.Add(time.Hour)
	jobs, err := r.cfg.Store.Jobs(ctx)
	if err != nil {
		r.cfg.Logger.Error("copy jobs: read jobs", "err", err)
		return now.Add(time.Minute)
	}
	for _, j := range jobs {
		if !j.Enabled {
			continue
		}
		occ, ok := j.Window.Next(now)
		if !ok {
			continue
		}
		if occ.Open.After(now) {
			next = minTime(next, occ.Open)
			continue
		}
		// Open now.
		r.mu.Lock()
		_, running := r.active[j.ID]
		handled := r.done[j.ID] == occ.ID()
		retryAt := r.retry[j.ID]
		r.mu.Unlock()
		switch {
		case running || handled:
			next = minTime(next, occ.Close)
		case now.Before(retryAt):
			next = minTime(next, retryAt)
		default:
			if _, err := r.start(j, "window", occ); err != nil {
				r.cfg.Logger.Error("copy job: start", "job", j.ID, "err", err)
			}
			next = minTime(next, occ.Close)
		}
	}
	return next
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// RunNow starts a run of the job outside its window (disabled jobs too) and
// returns the run id. An unknown job matches api.ErrNotFound, one already
// copying api.ErrBusy.
func (r *Runner) RunNow(ctx context.Context, id string) (string, error) {
	j, err := r.cfg.Store.Job(ctx, id)
	if err != nil {
		return "", err
	}
	return r.start(j, "manual", policy.Occurrence{})
}

func (r *Runner) start(j Job, trigger string, occ policy.Occurrence) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctx == nil {
		return "", ErrNotRunning
	}
	if _, ok := r.active[j.ID]; ok {
		return "", fmt.Errorf("copy job %s is already copying: %w", j.ID, api.ErrBusy)
	}
	now := r.cfg.Clock.Now()
	// Run ids sort by start: two runs in one clock tick still get two ids.
	if last := r.lastStart[j.ID]; !now.After(last) {
		now = last.Add(time.Nanosecond)
	}
	r.lastStart[j.ID] = now
	run := Run{ID: NewRunID(j.ID, now), Job: j.ID, Trigger: trigger, Start: now, State: RunRunning}
	ctx, cancel := context.WithCancelCause(r.ctx)
	if err := r.cfg.Store.PutRun(ctx, run); err != nil {
		cancel(nil)
		return "", err
	}
	r.active[j.ID] = &active{cancel: cancel, prog: Progress{Run: run.ID, Started: now}, limit: ratelimit.NewScheduled(r.cfg.Clock, j.uploadLimit())}
	r.wg.Add(2)
	stop := make(chan struct{})
	go func() {
		// The window's close ends the copy (on the daemon's clock); the
		// next opening resumes it.
		defer r.wg.Done()
		if trigger != "window" {
			return
		}
		t := r.cfg.Clock.NewTimer(occ.Close.Sub(now))
		defer t.Stop()
		select {
		case <-t.C():
			cancel(errWindowClosed)
			r.cfg.hooks.closed(j.ID)
		case <-stop:
		}
	}()
	if trigger == "window" {
		run.Window = occ.ID()
	}
	go func() {
		defer r.wg.Done()
		defer cancel(nil)
		defer close(stop)
		r.finish(ctx, j, r.execute(ctx, j, &run))
	}()
	return run.ID, nil
}

// finish records the run's end, emits the event and then releases the job
// (so whoever waits for the job to be free sees the event too), remembering
// the outcome for the window logic.
func (r *Runner) finish(ctx context.Context, j Job, run *Run) {
	run.End = r.cfg.Clock.Now()
	deleted := errors.Is(context.Cause(ctx), errJobDeleted)
	if !deleted {
		if err := r.cfg.Store.PutRun(context.Background(), *run); err != nil {
			r.cfg.Logger.Error("copy job: record run", "job", j.ID, "run", run.ID, "err", err)
		}
	}
	if run.State != RunInterrupted && !deleted && r.cfg.OnEvent != nil {
		r.cfg.OnEvent(runEvent(j, run))
	}
	r.mu.Lock()
	delete(r.active, j.ID)
	switch {
	case run.State == RunSucceeded && run.Window != "":
		r.done[j.ID] = run.Window
		delete(r.retry, j.ID)
	case run.State == RunFailed && run.Window != "":
		r.retry[j.ID] = run.End.Add(r.cfg.RetryAfter)
	}
	r.mu.Unlock()
	r.Reload()
}

// runEvent is the event of a finished run: copy.finished (a warning when
// retention could not remove a copy), or copy.failed, an error.
func runEvent(j Job, run *Run) policy.Event {
	e := policy.Event{Time: run.End, Subject: cmp.Or(j.Name, j.ID), Repository: j.Target}
	switch run.State {
	case RunSucceeded:
		e.Severity, e.Kind = policy.SeverityInfo, EventCopyFinished
		e.Message = fmt.Sprintf("copy job %s: %d restore points copied from %s to %s (%d bytes sent), %d already there, %d removed by retention",
			j.ID, run.PointsCopied, j.Source, j.Target, run.BytesSent, run.PointsSkipped, run.PointsRemoved)
		if len(run.Warnings) > 0 {
			e.Severity = policy.SeverityWarning
			e.Message += "; " + strings.Join(run.Warnings, "; ")
		}
	default:
		e.Severity, e.Kind = policy.SeverityError, EventCopyFailed
		e.Message = fmt.Sprintf("copy job %s from %s to %s %s after %d restore points (%d bytes sent): %s",
			j.ID, j.Source, j.Target, run.State, run.PointsCopied, run.BytesSent, run.Error)
	}
	return e
}

// execute copies and applies the retention; it fills run and returns it.
func (r *Runner) execute(ctx context.Context, j Job, run *Run) *Run {
	fail := func(err error) *Run {
		switch {
		case r.stopping():
			run.State = RunInterrupted
			run.Error = "the appliance stopped during the copy; the next run resumes it"
		case errors.Is(context.Cause(ctx), errWindowClosed):
			run.State = RunCancelled
			run.Error = "the window closed before the copy ended; the next window resumes it"
		case errors.Is(context.Cause(ctx), errJobDeleted):
			run.State = RunCancelled
			run.Error = errJobDeleted.Error()
		default:
			run.State = RunFailed
			run.Error = err.Error()
		}
		return run
	}
	src, err := r.cfg.Repos.Repo(j.Source)
	if err != nil {
		return fail(fmt.Errorf("source repository %s: %w", j.Source, err))
	}
	dst, err := r.cfg.Repos.Repo(j.Target)
	if err != nil {
		return fail(fmt.Errorf("target repository %s: %w", j.Target, err))
	}
	p, err := planCopy(ctx, j, src, dst, r.cfg.Location)
	if err != nil {
		return fail(err)
	}
	run.PointsSkipped = p.present
	if len(p.copy) > 0 {
		opts := repository.CopyOptions{Points: p.copy, Workers: r.cfg.Workers}
		r.mu.Lock()
		if a := r.active[j.ID]; a != nil {
			opts.Limit = a.limit
		}
		r.mu.Unlock()
		opts.Progress = func(cp repository.CopyProgress) {
			r.mu.Lock()
			if a := r.active[j.ID]; a != nil {
				a.prog.Point, a.prog.VM, a.prog.PointsDone, a.prog.PointsTotal, a.prog.BytesSent = cp.Point, cp.VM, cp.PointsDone, cp.PointsTotal, cp.BytesSent
			}
			r.mu.Unlock()
		}
		res, err := repository.Copy(ctx, src, dst, opts)
		if res != nil {
			run.PointsCopied, run.BytesSent, run.BlobsSent = res.PointsCopied, res.BytesSent, res.BlobsSent
			run.PointsSkipped += res.PointsSkipped
		}
		if err != nil {
			return fail(err)
		}
	}
	// Only after the copies landed: a failed copy never thins the target.
	if err := r.remove(ctx, j, dst, p.remove, run); err != nil {
		return fail(err)
	}
	run.State = RunSucceeded
	return run
}

// remove deletes from dst the points of ids (the job's retention rejects
// them) that no other copy job into dst keeps, counting them in run. A
// point kept elsewhere stays silently: the target holds the union of the
// jobs' keep sets. If that union cannot be read, nothing is removed and
// the run warns: a copy is removed only when no job is proven to keep it.
func (r *Runner) remove(ctx context.Context, j Job, dst *repository.Repository, ids []string, run *Run) error {
	if len(ids) == 0 {
		return nil
	}
	unlock, err := r.lockTarget(ctx, dst.Config().ID)
	if err != nil {
		return err
	}
	defer unlock()
	held, err := r.heldByOthers(ctx, j, dst)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		run.Warnings = append(run.Warnings, fmt.Sprintf("retention removed nothing: what the other copy jobs into %s keep is unknown: %v", j.Target, err))
		return nil
	}
	warned := map[string]bool{}
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return err
		}
		if h, ok := held[id]; ok {
			r.cfg.Logger.Info("copy retention: kept for another copy job", "job", j.ID, "point", id, "keptBy", h.job)
			if h.unsure != "" && !warned[h.job] {
				warned[h.job] = true
				run.Warnings = append(run.Warnings, fmt.Sprintf("retention kept the copies copy job %s selects: %s", h.job, h.unsure))
			}
			continue
		}
		if err := dst.Delete(ctx, id); err != nil {
			if errors.Is(err, repository.ErrNotFound) {
				continue
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			run.Warnings = append(run.Warnings, fmt.Sprintf("retention kept %s: %v", id, err))
			continue
		}
		run.PointsRemoved++
	}
	return nil
}

func (r *Runner) stopping() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ctx == nil || r.ctx.Err() != nil
}

// plan is what one run does: source points to copy, target points to remove.
type plan struct {
	copy    []string // source point ids
	remove  []string // target point ids
	keep    []string // target point ids the job's retention keeps
	present int      // selected points already in the target
}

// planCopy applies the job's retention to the copies already in the target
// and the selected source points not yet there, together, per VM: the
// target keeps what retention keeps, whether it was copied already or not.
// So a point retention rejects is never sent, and a copy retention removed
// is not sent again by the next run (it is still rejected). The removals
// are the job's own wish: execute still drops those another copy job into
// the target keeps (heldByOthers).
func planCopy(ctx context.Context, j Job, src, dst *repository.Repository, loc *time.Location) (plan, error) {
	sp, err := src.List(ctx)
	if err != nil {
		return plan{}, fmt.Errorf("list source %s: %w", j.Source, err)
	}
	tp, err := dst.List(ctx)
	if err != nil {
		return plan{}, fmt.Errorf("list target %s: %w", j.Target, err)
	}
	return planPoints(j, src.Config().ID, sp, dst.Config().ID, tp, loc), nil
}

// planPoints is planCopy over listings: sp of the source (repository id
// srcID), tp of the target (dstID). Only the target's copies of srcID's
// points that j selects are the job's to keep or remove: original backups
// in the target (no CopySourceTag) and copies from other repositories are
// never candidates, so no copy retention removes them.
func planPoints(j Job, srcID string, sp []repository.Point, dstID string, tp []repository.Point, loc *time.Location) plan {
	var p plan
	prefix := srcID + ":"
	have := map[string]bool{}      // source ids copied already
	originals := map[string]bool{} // target ids (a source point may be a copy of one)
	var cands []policy.Point
	for _, t := range tp {
		originals[t.ID] = true
		sid, ok := strings.CutPrefix(t.Tags[repository.CopySourceTag], prefix)
		if !ok || !j.selects(t.VM.Name, t.VM.InstanceUUID, t.Tags[repos.JobTag]) {
			continue
		}
		have[sid] = true
		cands = append(cands, retentionPoint(t, "t:"+t.ID, t.Locked))
	}
	dprefix := dstID + ":"
	for _, s := range sp {
		if !j.selects(s.VM.Name, s.VM.InstanceUUID, s.Tags[repos.JobTag]) {
			continue
		}
		if have[s.ID] {
			p.present++
			continue
		}
		if orig, ok := strings.CutPrefix(s.Tags[repository.CopySourceTag], dprefix); ok && originals[orig] {
			continue // a copy of a target point: the original is there
		}
		// The target's own policy decides; a lock of the source does not.
		cands = append(cands, retentionPoint(s, "s:"+s.ID, false))
	}
	for _, d := range j.Retention.Apply(cands, loc) {
		kind, id, _ := strings.Cut(d.Point.ID, ":")
		switch {
		case kind == "s" && d.Keep:
			p.copy = append(p.copy, id)
		case kind == "t" && d.Keep:
			p.keep = append(p.keep, id)
		case kind == "t" && !d.Keep:
			p.remove = append(p.remove, id)
		}
	}
	return p
}

// holder is why a target point is kept for another copy job.
type holder struct {
	job string
	// unsure is set when the job's keep set could not be computed (its
	// source cannot be opened or listed): then it holds every copy it
	// might cover, and the run says so.
	unsure string
}

// heldByOthers returns the points of dst that another copy job into the
// same target keeps, read now from the store's jobs (disabled ones too: a
// disabled job still stands by what it copied; a deleted one is gone from
// the store and protects nothing) and from the repositories' current
// listings. A job's keep set is what its own run would keep (planPoints):
// the target holds the union of the keep sets of its copy jobs. A job into
// the same target whose keep set cannot be computed holds every copy its
// selection covers rather than let it go unproven.
func (r *Runner) heldByOthers(ctx context.Context, j Job, dst *repository.Repository) (map[string]holder, error) {
	jobs, err := r.cfg.Store.Jobs(ctx)
	if err != nil {
		return nil, err
	}
	dstID := dst.Config().ID
	var tp []repository.Point
	held := map[string]holder{}
	type listing struct {
		id  string
		pts []repository.Point
		err error
	}
	sources := map[string]listing{} // by repository name
	for _, k := range jobs {
		if k.ID == j.ID || !r.sameTarget(k, j, dstID) {
			continue
		}
		if tp == nil {
			if tp, err = dst.List(ctx); err != nil {
				return nil, fmt.Errorf("list target %s: %w", j.Target, err)
			}
		}
		l, ok := sources[k.Source]
		if !ok {
			src, err := r.cfg.Repos.Repo(k.Source)
			if err != nil {
				l.err = fmt.Errorf("its source %s cannot be opened: %w", k.Source, err)
			} else {
				l.id = src.Config().ID
				if l.pts, err = src.List(ctx); err != nil {
					if ctx.Err() != nil {
						return nil, ctx.Err()
					}
					l.err = fmt.Errorf("its source %s cannot be listed: %w", k.Source, err)
				}
			}
			sources[k.Source] = l
		}
		if l.id == dstID {
			continue // copies nothing into its own source
		}
		if l.err != nil {
			reason := l.err.Error()
			for _, t := range tp {
				tag := t.Tags[repository.CopySourceTag]
				if tag == "" || (l.id != "" && !strings.HasPrefix(tag, l.id+":")) ||
					!k.selects(t.VM.Name, t.VM.InstanceUUID, t.Tags[repos.JobTag]) {
					continue
				}
				if _, ok := held[t.ID]; !ok {
					held[t.ID] = holder{job: k.ID, unsure: reason}
				}
			}
			continue
		}
		for _, id := range planPoints(k, l.id, l.pts, dstID, tp, r.cfg.Location).keep {
			if h, ok := held[id]; !ok || h.unsure != "" {
				held[id] = holder{job: k.ID}
			}
		}
	}
	return held, nil
}

// sameTarget reports whether k copies into j's target (dstID): by name,
// or by the repository's id when a second name opens the same repository.
func (r *Runner) sameTarget(k, j Job, dstID string) bool {
	if k.Target == j.Target {
		return true
	}
	t, err := r.cfg.Repos.Repo(k.Target)
	return err == nil && t.Config().ID == dstID
}

// lockTarget serialises the removals of the copy jobs into one target, so
// a job decides what the others keep from a target no other removal is
// changing. It waits for ctx; the caller calls the returned unlock.
func (r *Runner) lockTarget(ctx context.Context, dstID string) (func(), error) {
	r.mu.Lock()
	l, ok := r.targets[dstID]
	if !ok {
		l = make(chan struct{}, 1)
		r.targets[dstID] = l
	}
	r.mu.Unlock()
	select {
	case l <- struct{}{}:
		return func() { <-l }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func retentionPoint(p repository.Point, id string, locked bool) policy.Point {
	status := policy.PointComplete
	if p.Partial {
		status = policy.PointPartial
	}
	return policy.Point{ID: id, Repository: "target", VM: cmp.Or(p.VM.InstanceUUID, p.VM.Name), Time: p.Time, Status: status, Locked: locked}
}

// OffsiteCopies returns, per VM (instance UUID, or name for points without
// one), the time of its newest restore point copied into the target of any
// of the given jobs.
func OffsiteCopies(ctx context.Context, jobs []Job, set Repos) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	seen := map[string]bool{}
	for _, j := range jobs {
		if seen[j.Target] {
			continue
		}
		seen[j.Target] = true
		dst, err := set.Repo(j.Target)
		if err != nil {
			return nil, fmt.Errorf("copy target %s: %w", j.Target, err)
		}
		pts, err := dst.List(ctx)
		if err != nil {
			return nil, fmt.Errorf("list copy target %s: %w", j.Target, err)
		}
		for _, p := range pts {
			if p.Tags[repository.CopySourceTag] == "" || p.Partial {
				continue
			}
			for _, k := range []string{p.VM.InstanceUUID, p.VM.Name} {
				if k != "" && p.Time.After(out[k]) {
					out[k] = p.Time
				}
			}
		}
	}
	return out, nil
}
