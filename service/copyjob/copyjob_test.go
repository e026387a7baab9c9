package copyjob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/internal/failpoint"
	"github.com/vmvault/vmvault/internal/state"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/repos"
	"github.com/vmvault/vmvault/web/api"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// commitPoint stores one small restore point of vm written by backup job job.
func commitPoint(t testing.TB, r *repository.Repository, vm, job string, at time.Time) repository.Point {
	t.Helper()
	ctx := context.Background()
	s, err := r.NewSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Abort()
	data := bytes.Repeat([]byte(vm+at.String()), 8192)
	id, _, _, err := s.PutChunk(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	root, err := s.PutDisk(ctx, int64(len(data)), []repository.Extent{{Offset: 0, Length: int64(len(data)), ID: id}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Commit(ctx, repository.NewPoint{
		VM: repository.VMIdentity{Name: vm, InstanceUUID: "uuid-" + vm}, Time: at, Consistency: "crash",
		Tags:  map[string]string{repos.JobTag: job},
		Disks: []repository.NewDisk{{Key: 2000, Label: "Hard disk 1", Capacity: int64(len(data)), Map: root}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type fixture struct {
	src, dst *repository.Repository
	second   *repository.Repository // another source ("second")
	store    *Store
	runner   *Runner
	clk      *clock.Fake
	mu       sync.Mutex
	events   []policy.Event
	cancel   context.CancelFunc
	done     chan error
	loop     loopWatch
	closed   chan string // windowClosed hook: the job whose window run was cancelled
}

// loopWatch follows the Runner's loop through its hooks: how many times it
// began to look at the jobs, how many times it then armed its timer and
// waited, and which look the last wait followed.
type loopWatch struct {
	mu       sync.Mutex
	looks    int
	waits    int
	lastLook int           // the look the last wait followed
	changed  chan struct{} // closed and replaced at every hook call
}

func (w *loopWatch) hook(wait bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if wait {
		w.waits++
		w.lastLook = w.looks
	} else {
		w.looks++
	}
	close(w.changed)
	w.changed = make(chan struct{})
}

func (w *loopWatch) state() (looks, waits, lastLook int, changed <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.looks, w.waits, w.lastLook, w.changed
}

// waitLoop waits until ok holds of the loop's state, or fails the test
// after 10 seconds (a bound on a broken runner, not a synchronisation).
func (f *fixture) waitLoop(t *testing.T, what string, ok func(looks, waits, lastLook int) bool) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		l, w, last, ch := f.loop.state()
		if ok(l, w, last) {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("runner loop: %s: did not happen in 10s", what)
		}
	}
}

// idleAfter waits for the loop to wait again after a look that began
// after the look count n (read before what the test waits for).
func (f *fixture) idleAfter(t *testing.T, n int) {
	t.Helper()
	f.waitLoop(t, "a new look at the jobs", func(_, _, last int) bool { return last > n })
}

// looks is how many times the loop began to look at the jobs.
func (f *fixture) looks() int { l, _, _, _ := f.loop.state(); return l }

// reload makes the loop look at the jobs again and waits until that look
// is done and the loop waits: whatever it started is recorded.
func (f *fixture) reload(t *testing.T) {
	t.Helper()
	n := f.looks()
	f.runner.Reload()
	f.idleAfter(t, n)
}

// waitFor waits until cond holds. Every end of a run is followed by a look
// of the loop (finish reloads it), so cond is tested again after each
// wait of the loop, never on a timer; it fails the test after 10 seconds.
func (f *fixture) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		_, w, _, ch := f.loop.state()
		if cond() {
			return
		}
		for {
			select {
			case <-ch:
			case <-deadline.C:
				t.Fatalf("%s: did not happen in 10s", what)
			}
			var w2 int
			_, w2, _, ch = f.loop.state()
			if w2 > w {
				break
			}
		}
	}
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	db, err := state.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	st, err := NewStore(db)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{src: repository.TestRepository(t), dst: repository.TestRepository(t, repository.WithPassword("other")),
		second: repository.TestRepository(t, repository.WithPassword("third")), store: st, clk: clock.NewFake(t0),
		loop: loopWatch{changed: make(chan struct{})}, closed: make(chan string, 10)}
	set := repos.New(map[string]*repository.Repository{"main": f.src, "offsite": f.dst, "second": f.second})
	f.runner = New(Config{Store: st, Repos: set, Clock: f.clk, OnEvent: func(e policy.Event) {
		f.mu.Lock()
		f.events = append(f.events, e)
		f.mu.Unlock()
	}, hooks: &hooks{
		looking:      func() { f.loop.hook(false) },
		waiting:      func() { f.loop.hook(true) },
		windowClosed: func(job string) { f.closed <- job },
	}})
	return f
}

func (f *fixture) start(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel, f.done = cancel, make(chan error, 1)
	n := f.looks()
	go func() { f.done <- f.runner.Run(ctx) }()
	t.Cleanup(f.stop)
	// Run has started (set its context, looked at the jobs once, started
	// what is due) once it waits after a look of its own.
	f.idleAfter(t, n)
}

func (f *fixture) stop() {
	if f.cancel != nil {
		f.cancel()
		<-f.done
		f.cancel = nil
	}
}

func (f *fixture) eventsOf(kind string) []policy.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []policy.Event
	for _, e := range f.events {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// waitRun waits for the run to end and returns it.
func (f *fixture) waitRun(t *testing.T, job, id string) Run {
	t.Helper()
	var got Run
	f.waitFor(t, "run "+id+" ends", func() bool {
		runs, err := f.store.Runs(context.Background(), job, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range runs {
			if r.ID == id && r.State != RunRunning {
				if _, busy := f.runner.Progress(job); !busy {
					got = r
					return true
				}
			}
		}
		return false
	})
	return got
}

// runs returns the job's runs, newest first.
func (f *fixture) runs(t *testing.T, job string) []Run {
	t.Helper()
	runs, err := f.store.Runs(context.Background(), job, 0)
	if err != nil {
		t.Fatal(err)
	}
	return runs
}

// waitRuns waits until the job has n runs, none running, and none busy.
func (f *fixture) waitRuns(t *testing.T, job string, n int) []Run {
	t.Helper()
	var runs []Run
	f.waitFor(t, fmt.Sprintf("%d runs of %s ended", n, job), func() bool {
		runs = f.runs(t, job)
		_, busy := f.runner.Progress(job)
		return len(runs) >= n && runs[0].State != RunRunning && !busy
	})
	return runs
}

func (f *fixture) runNow(t *testing.T, job string) Run {
	t.Helper()
	id, err := f.runner.RunNow(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	return f.waitRun(t, job, id)
}

// copies returns the target's copies by source point id.
func (f *fixture) copies(t *testing.T) map[string]repository.Point {
	t.Helper()
	pts, err := f.dst.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]repository.Point{}
	prefix := f.src.Config().ID + ":"
	for _, p := range pts {
		if s := p.Tags[repository.CopySourceTag]; len(s) > len(prefix) {
			out[s[len(prefix):]] = p
		}
	}
	return out
}

func job(id string, mod func(*Job)) Job {
	j := Job{ID: id, Name: "Offsite " + id, Source: "main", Target: "offsite", Window: policy.AlwaysOpen(time.UTC),
		Retention: policy.Retention{Last: 10}}
	if mod != nil {
		mod(&j)
	}
	return j
}

func put(t *testing.T, f *fixture, j Job) {
	t.Helper()
	if err := j.Validate(func(n string) bool { return n == "main" || n == "offsite" || n == "second" }); err != nil {
		t.Fatal(err)
	}
	if err := f.store.PutJob(context.Background(), j); err != nil {
		t.Fatal(err)
	}
}

// A run copies the points of the selected backup job only; a second run
// sends nothing; both are recorded and reported.
func TestRunNowCopiesSelectionIdempotent(t *testing.T) {
	f := newFixture(t)
	web1 := commitPoint(t, f.src, "web", "nightly", t0.Add(-3*time.Hour))
	web2 := commitPoint(t, f.src, "web", "nightly", t0.Add(-2*time.Hour))
	db1 := commitPoint(t, f.src, "db", "weekly", t0.Add(-time.Hour))
	put(t, f, job("c1", func(j *Job) { j.Jobs = []string{"nightly"} }))
	f.start(t)
	r1 := f.runNow(t, "c1")
	if r1.State != RunSucceeded || r1.PointsCopied != 2 || r1.BytesSent == 0 || r1.Trigger != "manual" {
		t.Fatalf("first run %+v", r1)
	}
	c := f.copies(t)
	if len(c) != 2 || c[web1.ID].ID == "" || c[web2.ID].ID == "" {
		t.Fatalf("copies %v", c)
	}
	if _, ok := c[db1.ID]; ok {
		t.Fatal("a point of another backup job was copied")
	}
	r2 := f.runNow(t, "c1")
	if r2.State != RunSucceeded || r2.PointsCopied != 0 || r2.BytesSent != 0 || r2.PointsSkipped != 2 {
		t.Fatalf("second run %+v", r2)
	}
	if ev := f.eventsOf(EventCopyFinished); len(ev) != 2 || ev[0].Severity != policy.SeverityInfo || ev[0].Repository != "offsite" {
		t.Fatalf("events %+v", ev)
	}
	runs, err := f.store.Runs(context.Background(), "c1", 0)
	if err != nil || len(runs) != 2 || runs[0].ID != r2.ID {
		t.Fatalf("runs newest first: %+v %v", runs, err)
	}
	// VM selection by name or instance UUID.
	put(t, f, job("c2", func(j *Job) { j.VMs = []string{"uuid-db"} }))
	if r := f.runNow(t, "c2"); r.PointsCopied != 1 || f.copies(t)[db1.ID].ID == "" {
		t.Fatalf("by VM: %+v", r)
	}
}

// The target's retention: a point it rejects is never sent, a copy it
// rejects later is removed, and a removed copy is not sent again.
func TestTargetRetention(t *testing.T) {
	f := newFixture(t)
	old := commitPoint(t, f.src, "web", "nightly", t0.Add(-48*time.Hour))
	mid := commitPoint(t, f.src, "web", "nightly", t0.Add(-24*time.Hour))
	put(t, f, job("c", func(j *Job) { j.Retention = policy.Retention{Last: 1} }))
	f.start(t)
	r := f.runNow(t, "c")
	c := f.copies(t)
	if r.PointsCopied != 1 || len(c) != 1 || c[mid.ID].ID == "" {
		t.Fatalf("run %+v copies %v", r, c)
	}
	if _, ok := c[old.ID]; ok {
		t.Fatal("a point the target's retention rejects was sent")
	}
	// The source's own retention differs: old and mid stay there.
	next := commitPoint(t, f.src, "web", "nightly", t0)
	r = f.runNow(t, "c")
	c = f.copies(t)
	if r.PointsCopied != 1 || r.PointsRemoved != 1 || len(c) != 1 || c[next.ID].ID == "" {
		t.Fatalf("run %+v copies %v", r, c)
	}
	r = f.runNow(t, "c")
	if r.PointsCopied != 0 || r.PointsRemoved != 0 || r.BytesSent != 0 {
		t.Fatalf("a removed copy came back: %+v", r)
	}
}

// A copy that fails in the middle is a copy.failed error event; the next
// run resumes: what landed is not sent again.
func TestFailureReportedAndResumed(t *testing.T) {
	f := newFixture(t)
	for i := range 3 {
		commitPoint(t, f.src, fmt.Sprintf("vm%d", i), "nightly", t0.Add(time.Duration(i)*time.Minute))
	}
	put(t, f, job("c", nil))
	f.start(t)
	t.Setenv(failpoint.EnvVar, "copy.commit=eio@2")
	if err := failpoint.Reload(); err != nil {
		t.Fatal(err)
	}
	r := f.runNow(t, "c")
	t.Setenv(failpoint.EnvVar, "")
	if err := failpoint.Reload(); err != nil {
		t.Fatal(err)
	}
	if r.State != RunFailed || r.PointsCopied != 1 || r.Error == "" {
		t.Fatalf("failed run %+v", r)
	}
	ev := f.eventsOf(EventCopyFailed)
	if len(ev) != 1 || ev[0].Severity != policy.SeverityError {
		t.Fatalf("events %+v", ev)
	}
	r = f.runNow(t, "c")
	if r.State != RunSucceeded || r.PointsCopied != 2 || r.PointsSkipped != 1 {
		t.Fatalf("resumed run %+v", r)
	}
}

// A window run starts at the opening, once per opening, and a missing
// target repository is an error event.
func TestWindowRun(t *testing.T) {
	f := newFixture(t)
	commitPoint(t, f.src, "web", "nightly", t0.Add(-time.Hour))
	w := policy.Window{Location: time.UTC}
	for d := range w.Days {
		w.Days[d] = []policy.Range{{Start: 13 * 60, End: 14 * 60}} // 13:00-14:00, t0 is 12:00
	}
	put(t, f, job("c", func(j *Job) { j.Window = w; j.Enabled = true }))
	f.start(t) // the loop has looked at the job once and waits
	if runs := f.runs(t, "c"); len(runs) != 0 {
		t.Fatalf("ran before the window opened: %+v", runs)
	}
	f.clk.Advance(time.Hour + time.Minute) // fires the loop's timer, armed for 13:00
	runs := f.waitRuns(t, "c", 1)
	if len(runs) != 1 || runs[0].State != RunSucceeded || runs[0].Trigger != "window" || runs[0].Window != "2026-11-30T13:00:00Z" || runs[0].PointsCopied != 1 {
		t.Fatalf("window runs %+v", runs)
	}
	f.reload(t)
	if runs = f.runs(t, "c"); len(runs) != 1 {
		t.Fatalf("ran twice in one window: %d runs", len(runs))
	}
	// A restart inside the same window does not copy again.
	f.stop()
	r2 := New(f.runner.cfg)
	f.runner = r2
	f.start(t) // the new runner has looked at the jobs once
	if runs = f.runs(t, "c"); len(runs) != 1 {
		t.Fatalf("restart ran again in the same window: %d runs", len(runs))
	}

	// A repository removed from the configuration after the job was saved.
	if err := f.store.PutJob(context.Background(), job("broken", func(j *Job) { j.Target = "gone" })); err != nil {
		t.Fatal(err)
	}
	r := f.runNow(t, "broken")
	if r.State != RunFailed {
		t.Fatalf("run %+v", r)
	}
	if ev := f.eventsOf(EventCopyFailed); len(ev) != 1 || ev[0].Severity != policy.SeverityError {
		t.Fatalf("events %+v", ev)
	}
}

// Runs left running by a killed process are interrupted at the next start.
func TestInterruptedRunsMarked(t *testing.T) {
	f := newFixture(t)
	put(t, f, job("c", func(j *Job) { j.Enabled = false }))
	stale := Run{ID: NewRunID("c", t0.Add(-time.Hour)), Job: "c", Trigger: "window", Start: t0.Add(-time.Hour), State: RunRunning}
	if err := f.store.PutRun(context.Background(), stale); err != nil {
		t.Fatal(err)
	}
	f.start(t)
	runs, err := f.store.Runs(context.Background(), "c", 0)
	if err != nil || len(runs) != 1 || runs[0].State != RunInterrupted || runs[0].End.IsZero() {
		t.Fatalf("runs %+v %v", runs, err)
	}
}

func TestRunNowErrors(t *testing.T) {
	f := newFixture(t)
	if _, err := f.runner.RunNow(context.Background(), "nope"); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("unknown job: %v", err)
	}
	put(t, f, job("c", nil))
	if _, err := f.runner.RunNow(context.Background(), "c"); !errors.Is(err, api.ErrUnavailable) {
		t.Fatalf("runner not running: %v", err)
	}
}

func TestValidate(t *testing.T) {
	known := func(n string) bool { return n == "main" || n == "offsite" }
	for name, tc := range map[string]struct {
		mod   func(*Job)
		field string
	}{
		"ok":           {func(*Job) {}, ""},
		"bad id":       {func(j *Job) { j.ID = "Has Space" }, "id"},
		"no source":    {func(j *Job) { j.Source = "" }, "source"},
		"unknown":      {func(j *Job) { j.Target = "x" }, "target"},
		"same":         {func(j *Job) { j.Target = "main" }, "target"},
		"empty window": {func(j *Job) { j.Window = policy.Window{} }, "window"},
		"keeps none":   {func(j *Job) { j.Retention = policy.Retention{} }, "retention"},
		"empty vm":     {func(j *Job) { j.VMs = []string{""} }, "vms[0]"},
		"limit":        {func(j *Job) { j.UploadLimitMBps = -1 }, "uploadLimitMBps"},
		"sched rate":   {func(j *Job) { j.UploadSchedule = []policy.RateWindow{{Window: policy.AlwaysOpen(time.UTC), MBps: 1e9}} }, "uploadSchedule[0].mbps"},
		"sched window": {func(j *Job) { j.UploadSchedule = []policy.RateWindow{{MBps: 1}} }, "uploadSchedule[0].window"},
		"limited ok": {func(j *Job) {
			j.UploadLimitMBps = 5
			j.UploadSchedule = []policy.RateWindow{{Window: policy.AlwaysOpen(time.UTC), MBps: 1}}
		}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			err := job("c", tc.mod).Validate(known)
			if tc.field == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			found := false
			for _, fe := range policy.FieldErrors(err) {
				found = found || fe.Field == tc.field
			}
			if !found || !errors.Is(err, policy.ErrInvalid) {
				t.Fatalf("want a %s error, got %v", tc.field, err)
			}
		})
	}
}

func TestStoreRunsPruneAndSince(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for i := range KeepRuns + 5 {
		at := t0.Add(time.Duration(i) * time.Minute)
		if err := f.store.PutRun(ctx, Run{ID: NewRunID("a", at), Job: "a", Start: at, State: RunSucceeded}); err != nil {
			t.Fatal(err)
		}
	}
	_ = f.store.PutRun(ctx, Run{ID: NewRunID("b", t0), Job: "b", Start: t0})
	runs, _ := f.store.Runs(ctx, "a", 0)
	if len(runs) != KeepRuns || !runs[0].Start.Equal(t0.Add(time.Duration(KeepRuns+4)*time.Minute)) {
		t.Fatalf("%d runs, newest %v", len(runs), runs[0].Start)
	}
	if r, _ := f.store.Runs(ctx, "a", 3); len(r) != 3 {
		t.Fatalf("limit: %d", len(r))
	}
	since, _ := f.store.RunsSince(ctx, t0.Add(time.Duration(KeepRuns+3)*time.Minute))
	if len(since) != 2 {
		t.Fatalf("since: %d", len(since))
	}
	if r, _ := f.store.Runs(ctx, "b", 0); len(r) != 1 {
		t.Fatalf("b: %d", len(r))
	}
}

// gatedRepos holds the first lookup of the target until the test opens the gate.
type gatedRepos struct {
	Repos
	target string
	gate   chan struct{}
	once   sync.Once
	held   chan struct{}
}

func (g *gatedRepos) Repo(name string) (*repository.Repository, error) {
	if name == g.target {
		g.once.Do(func() {
			close(g.held)
			<-g.gate
		})
	}
	return g.Repos.Repo(name)
}

// The window's close (on the daemon's clock) cancels a window run: it is
// recorded as cancelled, reported as copy.failed, and the next opening
// copies what it did not.
func TestWindowCloseCancels(t *testing.T) {
	f := newFixture(t)
	commitPoint(t, f.src, "web", "nightly", t0.Add(-time.Hour))
	g := &gatedRepos{Repos: f.runner.cfg.Repos, target: "offsite", gate: make(chan struct{}), held: make(chan struct{})}
	cfg := f.runner.cfg
	cfg.Repos = g
	f.runner = New(cfg)
	w := policy.Window{Location: time.UTC}
	for d := range w.Days {
		w.Days[d] = []policy.Range{{Start: 11 * 60, End: 13 * 60}} // open at t0 (12:00) until 13:00
	}
	put(t, f, job("c", func(j *Job) { j.Window = w; j.Enabled = true }))
	f.start(t)
	select {
	case <-g.held:
	case <-time.After(10 * time.Second):
		t.Fatal("the window run did not start")
	}
	// Past 13:00: the run's window timer fires (or, armed after this,
	// fires at once) and cancels the run before the gate lets it copy.
	f.clk.Advance(61 * time.Minute)
	select {
	case job := <-f.closed:
		if job != "c" {
			t.Fatalf("window closed for job %s", job)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the window's close did not cancel the run")
	}
	close(g.gate)
	runs := f.waitRuns(t, "c", 1)
	if len(runs) != 1 || runs[0].State != RunCancelled || runs[0].PointsCopied != 0 || !strings.Contains(runs[0].Error, "window closed") {
		t.Fatalf("runs %+v", runs)
	}
	ev := f.eventsOf(EventCopyFailed) // emitted before the job is released
	if len(ev) != 1 || ev[0].Severity != policy.SeverityError {
		t.Fatalf("events %+v", ev)
	}
	if len(f.copies(t)) != 0 {
		t.Fatal("a cancelled run copied")
	}
	// The next opening (tomorrow 11:00) copies it.
	f.clk.Set(t0.Add(23*time.Hour + time.Minute))
	f.runner.Reload()
	runs = f.waitRuns(t, "c", 2)
	if len(runs) != 2 || runs[0].State != RunSucceeded || runs[0].PointsCopied != 1 {
		t.Fatalf("next window: %+v", runs)
	}
}

// Deleting a job while it copies stops the copy: no event, no run record
// left under the deleted job.
func TestDeletedWhileCopying(t *testing.T) {
	f := newFixture(t)
	commitPoint(t, f.src, "web", "nightly", t0.Add(-time.Hour))
	g := &gatedRepos{Repos: f.runner.cfg.Repos, target: "offsite", gate: make(chan struct{}), held: make(chan struct{})}
	cfg := f.runner.cfg
	cfg.Repos = g
	f.runner = New(cfg)
	put(t, f, job("c", nil))
	f.start(t)
	if _, err := f.runner.RunNow(context.Background(), "c"); err != nil {
		t.Fatal(err)
	}
	<-g.held
	f.runner.Deleted("c")
	if err := f.store.DeleteJob(context.Background(), "c"); err != nil {
		t.Fatal(err)
	}
	close(g.gate)
	f.waitFor(t, "the deleted job's copy stops", func() bool { _, busy := f.runner.Progress("c"); return !busy })
	if _, busy := f.runner.Progress("c"); busy {
		t.Fatal("the copy of a deleted job still runs")
	}
	if runs, _ := f.store.Runs(context.Background(), "c", 0); len(runs) != 0 {
		t.Fatalf("runs of a deleted job: %+v", runs)
	}
	f.mu.Lock()
	n := len(f.events)
	f.mu.Unlock()
	if n != 0 || len(f.copies(t)) != 0 {
		t.Fatalf("%d events, %d copies after the deletion", n, len(f.copies(t)))
	}
}

// A copy job's upload limit holds its copy back (on the daemon's clock,
// here a fake one that does not move: the copy waits for its first
// bytes), and saving the job with another limit applies to the copy that
// runs: unlimited, it finishes.
func TestUploadLimitAppliesAndChangesMidCopy(t *testing.T) {
	f := newFixture(t)
	commitPoint(t, f.src, "web", "nightly", t0.Add(-time.Hour))
	j := job("c1", func(j *Job) { j.UploadLimitMBps = 0.0001 }) // 100 bytes/s
	put(t, f, j)
	f.start(t)
	a := NewAPI(f.store, f.runner, nil, func(n string) bool { return n == "main" || n == "offsite" })
	pending := f.clk.Pending()
	id, err := f.runner.RunNow(context.Background(), "c1")
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	if !f.clk.BlockUntil(pending+1, stop) {
		t.Fatal("the copy never waited for its limit")
	}
	at, _ := f.clk.NextDeadline()
	if wait := at.Sub(f.clk.Now()); wait < 500*time.Millisecond { // a blob of ~100 stored bytes
		t.Fatalf("the limited copy waits %v for its first blob at 100 bytes/s", wait)
	}
	if _, busy := f.runner.Progress("c1"); !busy {
		t.Fatal("the copy is not running while it waits")
	}
	v, err := a.CopyJob(context.Background(), "c1")
	if err != nil || v.UploadLimitMBps != 0.0001 {
		t.Fatalf("the API shows %+v, %v", v.CopyJob, err)
	}
	j.UploadLimitMBps = 0
	if err := a.PutCopyJob(context.Background(), api.CopyJob(j)); err != nil {
		t.Fatal(err)
	}
	if r := f.waitRun(t, "c1", id); r.State != RunSucceeded || r.PointsCopied != 1 || r.BytesSent == 0 {
		t.Fatalf("run after the limit was lifted: %+v", r)
	}
}
