package verifyjob

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/service/verification"
	"github.com/vmvault/vmvault/web/api"
)

// Points lists restore points (service/repos.Set).
type Points interface {
	Points(ctx context.Context, f api.PointFilter) ([]api.RestorePoint, error)
}

// Verifier verifies one point and knows each point's latest result
// (*verification.Manager).
type Verifier interface {
	Verify(ctx context.Context, req verification.Request, progress func(phase string)) (verification.Result, error)
	Latest(point string) (verification.Result, bool)
}

var _ Verifier = (*verification.Manager)(nil)

// ErrNotRunning is returned by RunNow when the Runner's Run is not active.
var ErrNotRunning = api.Kind(errors.New("verification job runner is not running"), api.ErrUnavailable)

// Config wires a Runner.
type Config struct {
	Store    *Store
	Points   Points
	Verifier Verifier
	Clock    clock.Clock // default the wall clock
	// OnEvent receives verification.finished and verification.failed.
	OnEvent func(policy.Event)
	Logger  *slog.Logger

	// waiting, when set (tests), is called each time Run has armed its
	// timer and waits, so a test advances a fake clock only then.
	waiting func()
}

// Runner runs the verification jobs in their windows and on demand. Run
// owns every run it starts and waits for them before it returns.
type Runner struct {
	cfg Config

	mu        sync.Mutex
	ctx       context.Context // Run's; nil when not running
	active    map[string]*Run // job id -> its running run (a copy kept current)
	cancels   map[string]context.CancelFunc
	done      map[string]string
	lastStart map[string]time.Time
	wake      chan struct{}
	wg        sync.WaitGroup
	started   bool
}

// New returns a Runner; call Run to start it.
func New(cfg Config) *Runner {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Runner{cfg: cfg, active: map[string]*Run{}, cancels: map[string]context.CancelFunc{}, done: map[string]string{}, lastStart: map[string]time.Time{}, wake: make(chan struct{}, 1)}
}

// Reload makes Run look at the jobs now (after one was saved or deleted).
func (r *Runner) Reload() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Deleted ends the job's running run, if any, as its definition is
// deleted: its verifications see their context end (a boot is torn down)
// and the run, its file gone, is neither recorded nor an event.
func (r *Runner) Deleted(job string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cancel, ok := r.cancels[job]; ok {
		cancel()
	}
}

// Running returns the job's running run; false when none runs.
func (r *Runner) Running(job string) (Run, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a, ok := r.active[job]
	if !ok {
		return Run{}, false
	}
	c := *a
	c.Results = append([]api.VerificationRunPoint{}, a.Results...)
	return c, true
}

// Run starts a run in each window opening of the enabled jobs until ctx
// ends, then waits for the running runs (their verifications see ctx end;
// the runs are recorded interrupted).
func (r *Runner) Run(ctx context.Context) error {
	r.mu.Lock()
	if r.started {
		r.mu.Unlock()
		return errors.New("verifyjob: Run called twice")
	}
	r.started = true
	r.mu.Unlock()
	if err := r.cfg.Store.markInterrupted(); err != nil {
		r.cfg.Logger.Error("verification jobs: mark interrupted runs", "err", err)
	}
	r.loadDone()
	r.mu.Lock()
	r.ctx = ctx
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.ctx = nil
		r.mu.Unlock()
		r.wg.Wait()
	}()
	for {
		next := r.tick()
		wait := min(next.Sub(r.cfg.Clock.Now()), time.Hour)
		t := r.cfg.Clock.NewTimer(max(wait, time.Second))
		if r.cfg.waiting != nil {
			r.cfg.waiting()
		}
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

// loadDone remembers the openings the last runs handled, so a restart
// inside a window does not verify again.
func (r *Runner) loadDone() {
	jobs, _ := r.cfg.Store.Jobs()
	for _, j := range jobs {
		runs, err := r.cfg.Store.Runs(j.ID, 1)
		if err == nil && len(runs) == 1 && runs[0].Window != "" && runs[0].State == RunFinished {
			r.done[j.ID] = runs[0].Window
		}
	}
}

// tick starts the runs due now and returns when to look again.
func (r *Runner) tick() time.Time {
	now := r.cfg.Clock.Now()
	next := now.Add(time.Hour)
	jobs, err := r.cfg.Store.Jobs()
	if err != nil {
		r.cfg.Logger.Error("verification jobs: read jobs", "err", err)
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
		r.mu.Lock()
		_, running := r.active[j.ID]
		handled := r.done[j.ID] == occ.ID()
		r.mu.Unlock()
		if !running && !handled {
			if _, err := r.start(j, "window", occ); err != nil {
				r.cfg.Logger.Error("verification job: start", "job", j.ID, "err", err)
			}
		}
		next = minTime(next, occ.Close)
	}
	return next
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// RunNow starts a run of the job outside its window (disabled jobs too)
// and returns the run id: every chosen point is verified, no window
// stops it. An unknown job matches api.ErrNotFound, one already running
// api.ErrBusy.
func (r *Runner) RunNow(ctx context.Context, id string) (string, error) {
	j, err := r.cfg.Store.Job(id)
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
		return "", fmt.Errorf("verification job %s is already running: %w", j.ID, api.ErrBusy)
	}
	now := r.cfg.Clock.Now()
	if last := r.lastStart[j.ID]; !now.After(last) {
		now = last.Add(time.Nanosecond)
	}
	r.lastStart[j.ID] = now
	run := Run{ID: fmt.Sprintf("%s/%020d", j.ID, now.UnixNano()), Job: j.ID, Trigger: trigger, Start: now, State: RunRunning, Results: []api.VerificationRunPoint{}}
	if trigger == "window" {
		run.Window = occ.ID()
	}
	if err := r.cfg.Store.PutRun(run); err != nil {
		return "", err
	}
	a := run
	r.active[j.ID] = &a
	ctx, cancel := context.WithCancel(r.ctx)
	r.cancels[j.ID] = cancel
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer cancel()
		r.finish(ctx, j, r.execute(ctx, j, run, occ))
	}()
	return run.ID, nil
}

// candidate is one point a run verifies.
type candidate struct{ point, vm string }

// choose lists, per selected VM, its newest complete point (with onlyNew,
// only one not verified yet), oldest VM name first.
func (r *Runner) choose(ctx context.Context, j Job) ([]candidate, error) {
	pts, err := r.cfg.Points.Points(ctx, api.PointFilter{})
	if err != nil {
		return nil, fmt.Errorf("list restore points: %w", err)
	}
	newest := map[string]api.RestorePoint{} // VM key -> newest point
	for _, p := range pts {
		if p.Partial || !selects(j, p.VM.Name, p.VM.InstanceUUID) {
			continue
		}
		k := cmp.Or(p.VM.InstanceUUID, p.VM.Name)
		if cur, ok := newest[k]; !ok || p.Time.After(cur.Time) {
			newest[k] = p
		}
	}
	var out []candidate
	for _, p := range newest {
		if j.OnlyNew {
			if _, ok := r.cfg.Verifier.Latest(p.ID); ok {
				continue
			}
		}
		out = append(out, candidate{point: p.ID, vm: p.VM.Name})
	}
	sort.Slice(out, func(a, b int) bool {
		return cmp.Or(cmp.Compare(out[a].vm, out[b].vm), cmp.Compare(out[a].point, out[b].point)) < 0
	})
	return out, nil
}

// execute verifies the chosen points, at most maxConcurrent at once,
// starting none once a window run's window has closed.
func (r *Runner) execute(ctx context.Context, j Job, run Run, occ policy.Occurrence) Run {
	cands, err := r.choose(ctx, j)
	if err != nil {
		run.State, run.Error = RunFailed, err.Error()
		return run
	}
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		sem = make(chan struct{}, maxConcurrent(j))
	)
	record := func(rp api.VerificationRunPoint) {
		mu.Lock()
		defer mu.Unlock()
		run.Results = append(run.Results, rp)
		switch rp.Result {
		case verification.Passed:
			run.Points++
			run.Passed++
		case verification.Failed:
			run.Points++
			run.Failed++
		default:
			run.Errors++
		}
		r.mu.Lock()
		if a, ok := r.active[j.ID]; ok {
			*a = run
			a.Results = append([]api.VerificationRunPoint{}, run.Results...)
		}
		r.mu.Unlock()
	}
	for i, c := range cands {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		// The slot (or the end) came: the window may have closed meanwhile.
		if ctx.Err() != nil || (run.Trigger == "window" && !r.cfg.Clock.Now().Before(occ.Close)) {
			if ctx.Err() == nil {
				<-sem
			}
			mu.Lock()
			run.Skipped = len(cands) - i
			mu.Unlock()
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			req := verification.Request{Point: c.point, Mode: modeOf(j), Network: j.Network, Ports: j.Ports, URL: j.URL, By: "verification job " + j.ID}
			res, err := r.cfg.Verifier.Verify(ctx, req, nil)
			rp := api.VerificationRunPoint{Point: c.point, VM: c.vm, Verification: res.ID, Result: res.Result, Reason: res.Reason}
			if res.ID == "" {
				rp.Result = ""
			}
			if err != nil {
				rp.Error = err.Error()
				if res.ID == "" {
					rp.Reason = ""
				}
			}
			record(rp)
		}()
	}
	wg.Wait()
	switch {
	case ctx.Err() != nil:
		run.State, run.Error = RunInterrupted, "the appliance stopped during the run"
	default:
		run.State = RunFinished
	}
	return run
}

// finish records the run's end and emits its event, then releases the
// job.
func (r *Runner) finish(ctx context.Context, j Job, run Run) {
	run.End = r.cfg.Clock.Now()
	if err := r.cfg.Store.PutRun(run); err != nil && !errors.Is(err, api.ErrNotFound) {
		r.cfg.Logger.Error("verification job: record run", "job", j.ID, "run", run.ID, "err", err)
	}
	if run.State != RunInterrupted && r.cfg.OnEvent != nil {
		r.cfg.OnEvent(runEvent(j, run))
	}
	r.mu.Lock()
	delete(r.active, j.ID)
	delete(r.cancels, j.ID)
	if run.Window != "" && run.State != RunInterrupted {
		r.done[j.ID] = run.Window
	}
	r.mu.Unlock()
	r.Reload()
}

// runEvent is a finished run's event: verification.finished (info; a
// warning when a point failed, could not be verified or was skipped) or
// verification.failed (an error: the run could not choose its points).
func runEvent(j Job, run Run) policy.Event {
	e := policy.Event{Time: run.End, Subject: cmp.Or(j.Name, j.ID)}
	if run.State == RunFailed {
		e.Severity, e.Kind = policy.SeverityError, EventFailed
		e.Message = fmt.Sprintf("verification job %s failed: %s", j.ID, run.Error)
		return e
	}
	e.Severity, e.Kind = policy.SeverityInfo, EventFinished
	e.Message = fmt.Sprintf("verification job %s: %d restore points verified, %d passed, %d failed", j.ID, run.Points, run.Passed, run.Failed)
	if run.Errors > 0 {
		e.Message += fmt.Sprintf(", %d could not be verified", run.Errors)
	}
	if run.Skipped > 0 {
		e.Message += fmt.Sprintf(", %d left when the window closed", run.Skipped)
	}
	if run.Failed > 0 || run.Errors > 0 || run.Skipped > 0 {
		e.Severity = policy.SeverityWarning
	}
	return e
}
