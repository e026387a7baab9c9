package policy_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/internal/state"
	"github.com/vmvault/vmvault/policy"
)

// The tests drive the scheduler with a fake clock and synchronise only on
// concrete signals: Sync (the loop has handled every ready input), the fake
// runner's call channel (a backup reached the runner) and recorded events.
// The real-time timeout in recv only turns a deadlock into a failure.

// Monday 2026-05-04 12:00 UTC.
var monday = time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)

func at(day, hour, minute int) time.Time { // day 0 = Monday 2026-05-04
	return time.Date(2026, 5, 4+day, hour, minute, 0, 0, time.UTC)
}

const guard = 20 * time.Second

type outcome struct {
	res policy.BackupResult
	err error
}

type call struct {
	Job, VM string
	ctx     context.Context
	result  chan outcome
}

// fakeRunner hands every backup to the test and checks the one-backup-per-VM rule.
type fakeRunner struct {
	calls chan *call

	mu        sync.Mutex
	active    map[string]bool
	violation string
}

func newFakeRunner() *fakeRunner {
	return &fakeRunner{calls: make(chan *call, 100), active: map[string]bool{}}
}

func (r *fakeRunner) RunBackup(ctx context.Context, job policy.Job, vm policy.VM, progress func(policy.Progress)) (policy.BackupResult, error) {
	r.mu.Lock()
	if r.active[vm.InstanceUUID] {
		r.violation = "VM " + vm.InstanceUUID + " backed up twice at once"
	}
	r.active[vm.InstanceUUID] = true
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.active, vm.InstanceUUID)
		r.mu.Unlock()
	}()
	progress(policy.Progress{Phase: "snapshot"})
	c := &call{Job: job.ID, VM: vm.InstanceUUID, ctx: ctx, result: make(chan outcome, 1)}
	r.calls <- c
	select {
	case o := <-c.result:
		return o.res, o.err
	case <-ctx.Done():
		return policy.BackupResult{}, fmt.Errorf("backup %s: %w", vm.Name, ctx.Err())
	}
}

// eventLog records events and lets a test wait for one.
type eventLog struct {
	mu      sync.Mutex
	events  []policy.Event
	changed chan struct{}
}

func newEventLog() *eventLog { return &eventLog{changed: make(chan struct{})} }

func (l *eventLog) add(e policy.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *eventLog) count(kind, vm string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.events {
		if e.Kind == kind && (vm == "" || e.VM == vm) {
			n++
		}
	}
	return n
}

func (l *eventLog) all(kind string) []policy.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []policy.Event
	for _, e := range l.events {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// waitCount waits until at least n events of kind (for vm, if set) exist.
func (l *eventLog) waitCount(t *testing.T, kind, vm string, n int) {
	t.Helper()
	deadline := time.After(guard)
	for {
		l.mu.Lock()
		ch := l.changed
		l.mu.Unlock()
		if l.count(kind, vm) >= n {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("timed out waiting for %d %s events for %q (have %d)", n, kind, vm, l.count(kind, vm))
		}
	}
}

type harness struct {
	t      *testing.T
	ctx    context.Context
	clk    *clock.Fake
	path   string
	db     *state.DB
	inv    *policy.MemInventory
	runner *fakeRunner
	maint  *fakeMaintainer
	mnt    policy.Maintainer // used when maint is nil
	events *eventLog
	cfg    policy.Config
	sched  *policy.Scheduler
	cancel context.CancelFunc
	done   chan error
}

func newHarness(t *testing.T, start time.Time, vms []policy.VM, jobs ...policy.Job) *harness {
	t.Helper()
	h := &harness{
		t: t, ctx: context.Background(), clk: clock.NewFake(start),
		path: filepath.Join(t.TempDir(), "state.db"), inv: policy.NewMemInventory(vms...),
		runner: newFakeRunner(), events: newEventLog(),
	}
	h.openDB()
	for _, j := range jobs {
		if _, err := j.Validate(h.ctx, policy.ValidateEnv{}); err != nil {
			t.Fatalf("job %s: %v", j.ID, err)
		}
		if err := h.db.PutJob(h.ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	h.cfg = policy.Config{
		Clock: h.clk, Inventory: h.inv, Runner: h.runner,
		MaxConcurrent: 4, RetryBackoff: 10 * time.Minute, MaxBackoff: time.Hour,
		OnEvent: h.events.add, Logf: t.Logf,
	}
	t.Cleanup(func() {
		h.stop()
		if h.runner.violation != "" {
			t.Error(h.runner.violation)
		}
		_ = h.db.Close()
	})
	return h
}

func (h *harness) openDB() {
	h.t.Helper()
	db, err := state.Open(h.path)
	if err != nil {
		h.t.Fatal(err)
	}
	h.db = db
}

func (h *harness) start() {
	h.t.Helper()
	cfg := h.cfg
	cfg.Store = h.db
	if h.maint != nil {
		cfg.Maintainer = h.maint
	} else if h.mnt != nil {
		cfg.Maintainer = h.mnt
	}
	s, err := policy.New(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(h.ctx)
	h.sched, h.cancel, h.done = s, cancel, make(chan error, 1)
	go func() { h.done <- s.Run(ctx) }()
	h.sync()
}

// stop shuts the scheduler down (running backups are interrupted) and waits.
func (h *harness) stop() {
	h.t.Helper()
	if h.cancel == nil {
		return
	}
	h.cancel()
	select {
	case err := <-h.done:
		if !errors.Is(err, context.Canceled) {
			h.t.Errorf("Run returned %v", err)
		}
	case <-time.After(guard):
		h.t.Fatal("scheduler did not stop")
	}
	h.cancel = nil
}

// restart stops the scheduler, closes and reopens the database file and starts a new scheduler.
func (h *harness) restart() {
	h.t.Helper()
	h.stop()
	if err := h.db.Close(); err != nil {
		h.t.Fatal(err)
	}
	h.openDB()
	h.start()
}

func (h *harness) sync() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(h.ctx, guard)
	defer cancel()
	if err := h.sched.Sync(ctx); err != nil {
		h.t.Fatalf("sync: %v", err)
	}
}

// set moves the fake clock (after the loop has armed its timer) and lets the loop react.
func (h *harness) set(t time.Time) {
	h.t.Helper()
	h.sync()
	h.clk.Set(t)
	h.sync()
}

// started receives the next n backups that reached the runner.
func (h *harness) started(n int) []*call {
	h.t.Helper()
	var out []*call
	for range n {
		select {
		case c := <-h.runner.calls:
			out = append(out, c)
		case <-time.After(guard):
			h.t.Fatalf("timed out waiting for backup %d of %d", len(out)+1, n)
		}
	}
	return out
}

func (h *harness) startedOne(vm string) *call {
	h.t.Helper()
	c := h.started(1)[0]
	if c.VM != vm {
		h.t.Fatalf("started %s/%s, want VM %s", c.Job, c.VM, vm)
	}
	return c
}

// running returns "job/vm" of every backup the scheduler has started and not seen finish.
func (h *harness) running() []string {
	var out []string
	for _, b := range h.sched.Status().Backups {
		out = append(out, b.Job+"/"+b.VM)
	}
	return out
}

func (h *harness) expectRunning(want ...string) {
	h.t.Helper()
	h.sync()
	got := h.running()
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		h.t.Fatalf("running %v, want %v", got, want)
	}
}

func terminal(l *eventLog, vm string) int {
	return l.count(policy.EventVMBackedUp, vm) + l.count(policy.EventVMFailed, vm) + l.count(policy.EventVMCancelled, vm) + l.count(policy.EventVMInterrupted, vm)
}

// finish completes a backup (err nil: success) and waits until the scheduler has recorded it.
func (h *harness) finish(c *call, err error) {
	h.t.Helper()
	n := terminal(h.events, c.VM)
	c.result <- outcome{res: policy.BackupResult{PointID: "pt-" + c.VM, Bytes: 100}, err: err}
	deadline := time.After(guard)
	for terminal(h.events, c.VM) <= n {
		h.events.mu.Lock()
		ch := h.events.changed
		h.events.mu.Unlock()
		if terminal(h.events, c.VM) > n {
			break
		}
		select {
		case <-ch:
		case <-deadline:
			h.t.Fatalf("backup of %s finished but no outcome was recorded", c.VM)
		}
	}
	h.sync()
}

func nightlyJob(id string, prio int, sel policy.Selection) policy.Job {
	w := policy.Window{Location: time.UTC}
	for d := range w.Days {
		w.Days[d] = []policy.Range{{Start: 22 * 60, End: 6 * 60}}
	}
	r, _ := policy.Preset("few")
	return policy.Job{ID: id, Name: "job " + id, Enabled: true, Repository: "repo1", Selection: sel, Window: w, Retention: r, Priority: prio}
}

func vms(ids ...string) []policy.VM {
	var out []policy.VM
	for _, id := range ids {
		out = append(out, policy.VM{InstanceUUID: id, Name: "vm-" + id})
	}
	return out
}

func TestSchedulerPriorityAndOldestFirst(t *testing.T) {
	a := nightlyJob("a", 1, policy.Selection{VMs: []string{"a1", "a2", "a3"}})
	b := nightlyJob("b", 5, policy.Selection{VMs: []string{"b1"}})
	h := newHarness(t, monday, vms("a1", "a2", "a3", "b1"), a, b)
	h.cfg.MaxConcurrent = 1
	for _, st := range []policy.VMState{
		{Job: "a", VM: "a1", Selected: true, LastSuccess: monday.Add(-72 * time.Hour)},
		{Job: "a", VM: "a3", Selected: true, LastSuccess: monday.Add(-24 * time.Hour)},
		{Job: "b", VM: "b1", Selected: true, LastSuccess: monday.Add(-time.Hour)},
	} {
		if err := h.db.PutVMState(h.ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	h.start()
	h.expectRunning() // window closed at noon
	h.set(at(0, 22, 0))
	var order []string
	for range 4 {
		c := h.started(1)[0]
		order = append(order, c.VM)
		h.expectRunning(c.Job + "/" + c.VM) // appliance-wide limit of 1
		if st := h.sched.Status(); st.Backups[0].Progress.Phase != "snapshot" || !st.Backups[0].Started.Equal(at(0, 22, 0)) {
			t.Fatalf("status %+v", st)
		}
		h.finish(c, nil)
	}
	// b has the higher priority; within a, never-protected a2 first, then the oldest success.
	if want := []string{"b1", "a2", "a1", "a3"}; !slices.Equal(order, want) {
		t.Fatalf("order %v, want %v", order, want)
	}
	h.expectRunning()
}

func TestSchedulerConcurrencyLimits(t *testing.T) {
	a := nightlyJob("a", 0, policy.Selection{VMs: []string{"a1", "a2", "a3", "a4", "shared"}})
	a.Concurrency = 2
	b := nightlyJob("b", 0, policy.Selection{VMs: []string{"b1", "b2", "shared"}})
	h := newHarness(t, monday, vms("a1", "a2", "a3", "a4", "b1", "b2", "shared"), a, b)
	h.cfg.MaxConcurrent = 3
	h.start()
	h.set(at(0, 22, 0))
	calls := h.started(3)
	// Both jobs' never-protected VMs sort by job then VM: a takes its limit of 2, b one.
	h.expectRunning("a/a1", "a/a2", "b/b1")
	byVM := map[string]*call{}
	for _, c := range calls {
		byVM[c.VM] = c
	}
	h.finish(byVM["a1"], nil)
	c := h.startedOne("a3")
	byVM["a3"] = c
	h.expectRunning("a/a2", "a/a3", "b/b1")
	h.finish(byVM["b1"], nil)
	byVM["b2"] = h.startedOne("b2")
	h.expectRunning("a/a2", "a/a3", "b/b2")
	// Drain everything; "shared" is in both jobs and must never run twice at once
	// (fakeRunner checks that).
	for running := h.running(); len(running) > 0; running = h.running() {
		// Finish one backup per pass: each finish may start the next.
		r := running[0]
		vm := r[strings.Index(r, "/")+1:]
		cc := byVM[vm]
		if cc == nil {
			cc = h.started(1)[0]
			byVM[cc.VM] = cc
		}
		h.finish(cc, nil)
		delete(byVM, vm)
	}
	if n := h.events.count(policy.EventVMBackedUp, "shared"); n != 2 {
		t.Fatalf("shared VM backed up %d times, want once per job", n)
	}
	if n := h.events.count(policy.EventVMBackedUp, ""); n != 8 {
		t.Fatalf("%d backups, want 8", n)
	}
}

func TestSchedulerRetriesAndAtMostOncePerWindow(t *testing.T) {
	h := newHarness(t, monday, vms("v1"), nightlyJob("a", 0, policy.Selection{VMs: []string{"v1"}}))
	h.start()
	h.set(at(0, 22, 0))
	h.finish(h.startedOne("v1"), errors.New("snapshot failed"))
	h.expectRunning()
	h.set(at(0, 22, 9)) // backoff is 10m
	h.expectRunning()
	h.set(at(0, 22, 10))
	h.finish(h.startedOne("v1"), errors.New("snapshot failed again"))
	h.set(at(0, 22, 29)) // second backoff doubles to 20m
	h.expectRunning()
	h.set(at(0, 22, 30))
	h.finish(h.startedOne("v1"), nil)
	h.set(at(1, 5, 59))
	h.expectRunning() // backed up once in this window: never again in it
	h.set(at(1, 6, 0))
	runs, err := h.db.Runs(h.ctx, "a", 0)
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs %+v %v", runs, err)
	}
	o := runs[0].VMs[0]
	if runs[0].End.IsZero() || o.Status != policy.OutcomeSucceeded || o.Attempts != 3 || o.Point != "pt-v1" {
		t.Fatalf("run after the window: %+v", runs[0])
	}
	h.set(at(1, 22, 0)) // the next window backs it up again
	h.finish(h.startedOne("v1"), nil)
	if n := h.events.count(policy.EventVMFailed, "v1"); n != 2 {
		t.Fatalf("%d failure events, want 2", n)
	}
}

func TestSchedulerMaxAttempts(t *testing.T) {
	j := nightlyJob("a", 0, policy.Selection{VMs: []string{"v1"}})
	j.MaxAttempts = 2
	h := newHarness(t, monday, vms("v1"), j)
	h.start()
	h.set(at(0, 22, 0))
	h.finish(h.startedOne("v1"), errors.New("boom"))
	h.set(at(0, 22, 10))
	h.finish(h.startedOne("v1"), errors.New("boom"))
	h.set(at(1, 5, 0))
	h.expectRunning()
	last := h.events.all(policy.EventVMFailed)
	if !strings.Contains(last[len(last)-1].Message, "no more retries") {
		t.Fatalf("last failure message %q", last[len(last)-1].Message)
	}
}

func TestSchedulerWindowCloseFinishOrCancel(t *testing.T) {
	fin := nightlyJob("fin", 0, policy.Selection{VMs: []string{"f1", "f2"}})
	cnl := nightlyJob("cnl", 0, policy.Selection{VMs: []string{"c1"}})
	cnl.OnWindowClose = policy.CloseCancel
	h := newHarness(t, monday, vms("f1", "f2", "c1"), fin, cnl)
	h.start()
	h.set(at(0, 22, 0))
	calls := h.started(2)
	h.expectRunning("cnl/c1", "fin/f1")
	h.set(at(1, 6, 0)) // the window closes
	h.events.waitCount(t, policy.EventVMCancelled, "c1", 1)
	h.expectRunning("fin/f1") // finishes; f2 never starts
	for _, c := range calls {
		if c.VM == "f1" {
			h.finish(c, nil)
		}
	}
	h.expectRunning()
	h.events.waitCount(t, policy.EventJobFinished, "", 2)
	runs, _ := h.db.Runs(h.ctx, "fin", 0)
	if len(runs) != 1 || runs[0].End.IsZero() {
		t.Fatalf("fin runs %+v", runs)
	}
	if f1, f2 := runs[0].Outcome("f1"), runs[0].Outcome("f2"); f1.Status != policy.OutcomeSucceeded || f2.Status != policy.OutcomeNotRun {
		t.Fatalf("outcomes f1=%s f2=%s", f1.Status, f2.Status)
	}
	if !runs[0].End.Equal(at(1, 6, 0)) {
		t.Fatalf("run ended at %v, want when f1 finished", runs[0].End)
	}
	runs, _ = h.db.Runs(h.ctx, "cnl", 0)
	if c1 := runs[0].Outcome("c1"); c1.Status != policy.OutcomeCancelled {
		t.Fatalf("c1 outcome %+v", c1)
	}
	if h.events.count(policy.EventVMNotBackedUp, "f2") != 1 {
		t.Fatal("f2 not reported as not backed up")
	}
}

func TestSchedulerRunNowIgnoresWindow(t *testing.T) {
	a := nightlyJob("a", 0, policy.Selection{VMs: []string{"v1", "v2"}})
	a.Concurrency = 2
	off := nightlyJob("off", 0, policy.Selection{VMs: []string{"v1"}})
	off.Enabled = false
	h := newHarness(t, monday, vms("v1", "v2"), a, off)
	h.start()
	id, err := h.sched.RunNow(h.ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	h.sync()
	calls := h.started(2)
	h.finish(calls[0], nil)
	h.finish(calls[1], errors.New("tools not running"))
	h.expectRunning() // a manual run tries each VM once
	run, err := h.db.Run(h.ctx, id)
	if err != nil || !run.Manual || run.End.IsZero() {
		t.Fatalf("manual run %+v %v", run, err)
	}
	if _, err := h.sched.RunNow(h.ctx, "off"); !errors.Is(err, policy.ErrJobDisabled) {
		t.Fatalf("run disabled job: %v", err)
	}
	if _, err := h.sched.RunNow(h.ctx, "nope"); !errors.Is(err, policy.ErrJobNotFound) {
		t.Fatalf("run unknown job: %v", err)
	}
	h.stop()
	if _, err := h.sched.RunNow(h.ctx, "a"); !errors.Is(err, policy.ErrSchedulerStopped) {
		t.Fatalf("run after stop: %v", err)
	}
}

func TestSchedulerRestartMidWindowRunsNothingTwice(t *testing.T) {
	h := newHarness(t, monday, vms("v1", "v2", "v3"), nightlyJob("a", 0, policy.Selection{VMs: []string{"v1", "v2", "v3"}}))
	h.start()
	h.set(at(0, 22, 0))
	h.finish(h.startedOne("v1"), nil)
	h.startedOne("v2") // running when the appliance stops
	open, _ := h.db.OpenRuns(h.ctx)
	if len(open) != 1 {
		t.Fatalf("open runs %+v", open)
	}
	first := open[0]
	h.stop()
	if h.events.count(policy.EventVMInterrupted, "v2") != 1 {
		t.Fatal("v2 not reported interrupted")
	}
	h.clk.Set(at(0, 23, 0))
	h.restart()
	// A resume run backs up v2 and v3; v1 (done in this window) is not redone.
	h.finish(h.startedOne("v2"), nil)
	c3 := h.startedOne("v3")

	// Now a crash: the state says v3 was running; nothing recorded its end.
	h.cancel()
	<-h.done
	h.cancel = nil
	open, _ = h.db.OpenRuns(h.ctx)
	if len(open) != 1 || open[0].ResumeOf != first.ID {
		t.Fatalf("open runs after the first restart %+v", open)
	}
	second := open[0]
	st := policy.VMState{Job: "a", VM: "v3", Name: "vm-v3", Selected: true, Running: true, Attempts: 1, WindowID: first.WindowID, RunningRunID: second.ID}
	if err := h.db.PutVMState(h.ctx, st); err != nil {
		t.Fatal(err)
	}
	_ = c3
	h.restart() // at the same instant: the second resume run still gets its own id
	h.events.waitCount(t, policy.EventVMInterrupted, "v3", 2)
	h.finish(h.startedOne("v3"), nil)
	h.set(at(1, 6, 0))
	h.expectRunning()
	runs, _ := h.db.Runs(h.ctx, "a", 0)
	if len(runs) != 3 {
		t.Fatalf("want the window run and two resume runs: %+v", runs)
	}
	byID := map[string]policy.JobRun{}
	for _, r := range runs {
		byID[r.ID] = r
		if r.End.IsZero() || r.WindowID != first.WindowID {
			t.Errorf("run %s: end %v window %s", r.ID, r.End, r.WindowID)
		}
	}
	r1, r2 := byID[first.ID], byID[second.ID]
	r3 := byID[r2.ResumedBy]
	want := []struct {
		run         policy.JobRun
		interrupted bool
		resumeOf    string
		outcomes    string
	}{
		{r1, true, "", "v1=succeeded v2=interrupted v3=interrupted"},
		{r2, true, r1.ID, "v2=succeeded v3=interrupted"},
		{r3, false, r2.ID, "v3=succeeded"},
	}
	for i, w := range want {
		var got []string
		for _, o := range w.run.VMs {
			got = append(got, o.VM+"="+string(o.Status))
		}
		if w.run.Interrupted != w.interrupted || w.run.ResumeOf != w.resumeOf || strings.Join(got, " ") != w.outcomes {
			t.Errorf("run %d %s: interrupted %v resumeOf %q outcomes %q, want %v %q %q", i+1, w.run.ID, w.run.Interrupted, w.run.ResumeOf, got, w.interrupted, w.resumeOf, w.outcomes)
		}
	}
	if r1.ResumedBy != r2.ID || r3.ResumedBy != "" {
		t.Errorf("resume chain %q -> %q -> %q", r1.ResumedBy, r2.ResumedBy, r3.ResumedBy)
	}
	for _, vm := range []string{"v1", "v2", "v3"} {
		if n := h.events.count(policy.EventVMBackedUp, vm); n != 1 {
			t.Errorf("%s backed up %d times in one window", vm, n)
		}
	}
}

// TestSchedulerResumeRule proves the resume rule (see recoverRun) with a fake
// clock: which runs an appliance stop leaves resumed, continued or closed,
// and which VMs a resume run backs up.
func TestSchedulerResumeRule(t *testing.T) {
	tests := []struct {
		name string
		// restartAt is when the appliance comes back (it stops at Monday 22:30).
		restartAt   time.Time
		maxAttempts int
		manual      bool
		disable     bool
		crash       bool // the states still say running, as a kill leaves them
		// wantResumed lists the VMs the resume run backs up ("" = no resume run).
		wantResumed string
		wantOld     string // outcomes of the interrupted run
		wantOpen    bool   // the old run is still open (continued, not interrupted)
	}{
		{name: "window open", restartAt: at(0, 23, 0), wantResumed: "v2 v3 v4",
			wantOld: "v1=succeeded v2=interrupted v3=failed v4=interrupted"},
		{name: "window closed", restartAt: at(1, 7, 0),
			wantOld: "v1=succeeded v2=interrupted v3=failed v4=interrupted"},
		{name: "next window already open", restartAt: at(1, 22, 30),
			wantOld: "v1=succeeded v2=interrupted v3=failed v4=interrupted"},
		{name: "retry limit reached for the failed VM", restartAt: at(0, 23, 0), maxAttempts: 1, wantResumed: "v2 v4",
			wantOld: "v1=succeeded v2=interrupted v3=failed v4=interrupted"},
		// A crash (not a clean stop) leaves the states running: those attempts
		// count, so with one attempt per window nothing is left to resume and
		// the run continues until its window closes.
		{name: "crash with the retry limit reached", restartAt: at(0, 23, 0), maxAttempts: 1, crash: true, wantOpen: true,
			wantOld: "v1=succeeded v2=interrupted v3=failed v4=interrupted"},
		{name: "crash, window open", restartAt: at(0, 23, 0), crash: true, wantResumed: "v2 v3 v4",
			wantOld: "v1=succeeded v2=interrupted v3=failed v4=interrupted"},
		{name: "job disabled while down", restartAt: at(0, 23, 0), disable: true,
			wantOld: "v1=succeeded v2=interrupted v3=failed v4=interrupted"},
		{name: "run now is not resumed", restartAt: at(0, 23, 0), manual: true,
			wantOld: "v1=succeeded v2=interrupted v3=failed v4=interrupted"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j := nightlyJob("a", 0, policy.Selection{VMs: []string{"v1", "v2", "v3", "v4"}})
			j.Concurrency, j.MaxAttempts = 2, tc.maxAttempts
			start := at(0, 22, 0)
			if tc.manual {
				start = at(0, 12, 0) // outside the window
			}
			h := newHarness(t, start, vms("v1", "v2", "v3", "v4"), j)
			h.start()
			if tc.manual {
				if _, err := h.sched.RunNow(h.ctx, "a"); err != nil {
					t.Fatal(err)
				}
			}
			c := h.started(2) // v1 and v2 (by id: none protected yet), in either order
			if c[0].VM != "v1" {
				c[0], c[1] = c[1], c[0]
			}
			if c[0].VM != "v1" || c[1].VM != "v2" {
				t.Fatalf("started %s and %s, want v1 and v2", c[0].VM, c[1].VM)
			}
			h.finish(c[0], nil)
			h.finish(h.startedOne("v3"), errors.New("snapshot failed")) // retried after the backoff
			h.startedOne("v4")                                          // in the slot v3 freed; v3 waits for its retry
			h.set(start.Add(30 * time.Minute))
			h.expectRunning("a/v2", "a/v4")
			h.stop()
			open, _ := h.db.OpenRuns(h.ctx)
			if len(open) != 1 {
				t.Fatalf("open runs before the restart: %+v", open)
			}
			old := open[0]
			if tc.crash {
				for _, vm := range []string{"v2", "v4"} {
					st := policy.VMState{Job: "a", VM: vm, Name: "vm-" + vm, Selected: true, Running: true, Attempts: 1,
						WindowID: old.WindowID, RunningRunID: old.ID, LastAttempt: start}
					if err := h.db.PutVMState(h.ctx, st); err != nil {
						t.Fatal(err)
					}
				}
			}
			if tc.disable {
				j.Enabled = false
				if err := h.db.PutJob(h.ctx, j); err != nil {
					t.Fatal(err)
				}
			}
			h.clk.Set(tc.restartAt)
			h.restart()
			rec, err := h.db.Run(h.ctx, old.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got := outcomes(rec); got != tc.wantOld {
				t.Errorf("interrupted run outcomes %q, want %q", got, tc.wantOld)
			}
			if rec.End.IsZero() == !tc.wantOpen || rec.Interrupted == tc.wantOpen {
				t.Errorf("old run end %v interrupted %v, want open=%v", rec.End, rec.Interrupted, tc.wantOpen)
			}
			if !tc.wantOpen && !rec.End.Equal(start.Add(30*time.Minute)) {
				t.Errorf("interrupted run ends %v, want the last checkpoint %v", rec.End, start.Add(30*time.Minute))
			}
			open, _ = h.db.OpenRuns(h.ctx)
			if tc.wantOpen {
				if len(open) != 1 || open[0].ID != old.ID {
					t.Fatalf("open runs %+v, want the old one continued", open)
				}
				h.set(at(1, 6, 0))
				h.expectRunning()
				rec, _ = h.db.Run(h.ctx, old.ID)
				if rec.End.IsZero() || rec.Interrupted || outcomes(rec) != tc.wantOld {
					t.Fatalf("continued run after its window: %+v", rec)
				}
				return
			}
			if tc.wantResumed == "" {
				if rec.ResumedBy != "" {
					t.Errorf("resumed by %s", rec.ResumedBy)
				}
				for _, r := range open {
					if r.ResumeOf != "" {
						t.Errorf("unexpected resume run %+v", r)
					}
				}
				if n := len(h.events.all(policy.EventJobFinished)); n != 1 || !strings.Contains(h.events.all(policy.EventJobFinished)[0].Message, "not resumed") {
					t.Errorf("finished events %+v", h.events.all(policy.EventJobFinished))
				}
				for vm, want := range map[string]int{"v1": 0, "v2": 1, "v3": 0, "v4": 1} {
					if n := h.events.count(policy.EventVMNotBackedUp, vm); n != want {
						t.Errorf("%s: %d not-backed-up events, want %d", vm, n, want)
					}
				}
				return
			}
			if len(open) != 1 || open[0].ResumeOf != old.ID || rec.ResumedBy != open[0].ID {
				t.Fatalf("resume run: %+v (old resumed by %q)", open, rec.ResumedBy)
			}
			var ids []string
			for _, o := range open[0].VMs {
				ids = append(ids, o.VM)
			}
			if strings.Join(ids, " ") != tc.wantResumed {
				t.Fatalf("resume run backs up %v, want %s", ids, tc.wantResumed)
			}
			// Each remaining VM is backed up once (v3's backoff has passed).
			var got []string
			for range ids {
				c := h.started(1)[0]
				got = append(got, c.VM)
				h.finish(c, nil)
			}
			slices.Sort(got)
			if strings.Join(got, " ") != tc.wantResumed {
				t.Errorf("backed up %v after the restart, want %s", got, tc.wantResumed)
			}
			h.set(at(1, 6, 0))
			h.expectRunning()
			if n := h.events.count(policy.EventVMBackedUp, "v1"); n != 1 {
				t.Errorf("v1 backed up %d times in one window", n)
			}
			res, _ := h.db.Run(h.ctx, open[0].ID)
			if res.End.IsZero() || res.Interrupted {
				t.Errorf("resume run after the window: %+v", res)
			}
		})
	}
}

func outcomes(r policy.JobRun) string {
	var out []string
	for _, o := range r.VMs {
		out = append(out, o.VM+"="+string(o.Status))
	}
	return strings.Join(out, " ")
}

func TestSchedulerReportsMissedWindows(t *testing.T) {
	h := newHarness(t, at(3, 12, 0), vms("v1"), nightlyJob("a", 0, policy.Selection{VMs: []string{"v1"}}))
	if err := h.db.SetCheckpoint(h.ctx, monday); err != nil { // last alive Monday noon, back Thursday noon
		t.Fatal(err)
	}
	h.start()
	if n := len(h.events.all(policy.EventWindowMissed)); n != 3 {
		t.Fatalf("%d missed windows reported, want Mon, Tue, Wed nights", n)
	}
	// A clock jump (suspend, NTP step) over two more nights is reported too.
	h.set(at(5, 12, 0))
	missed := h.events.all(policy.EventWindowMissed)
	if len(missed) != 5 || !strings.Contains(missed[4].Message, "Fri 2026-05-08 22:00") {
		t.Fatalf("missed %+v", missed)
	}
	runs, _ := h.db.Runs(h.ctx, "a", 0)
	if len(runs) != 5 || !runs[0].Missed || !runs[0].Start.Equal(at(4, 22, 0)) {
		t.Fatalf("missed runs %+v", runs)
	}
	// A window that was open when the appliance came back is not missed: it runs.
	h.stop()
	h.clk.Set(at(6, 2, 0))
	h.restart()
	h.finish(h.startedOne("v1"), nil)
	if n := len(h.events.all(policy.EventWindowMissed)); n != 5 {
		t.Fatalf("%d missed after resuming inside a window", n)
	}
}

func TestSchedulerSelectionChangesBetweenWindows(t *testing.T) {
	folder := policy.ContainerRef{Kind: policy.KindFolder, ID: "group-v5"}
	other := policy.ContainerRef{Kind: policy.KindFolder, ID: "group-v6"}
	in := func(id string, c policy.ContainerRef) policy.VM {
		return policy.VM{InstanceUUID: id, Name: "vm-" + id, Containers: []policy.ContainerRef{c}}
	}
	h := newHarness(t, monday, []policy.VM{in("v1", folder), in("v2", folder), in("v3", other)},
		nightlyJob("a", 0, policy.Selection{Containers: []policy.ContainerRef{folder}}))
	h.start()
	h.set(at(0, 22, 0))
	h.finish(h.startedOne("v1"), nil)
	h.finish(h.startedOne("v2"), nil)
	h.set(at(1, 12, 0))
	h.inv.Set(in("v1", folder), in("v2", other), in("v3", folder)) // v2 moved out, v3 moved in
	h.set(at(1, 22, 0))
	h.finish(h.startedOne("v3"), nil) // never protected: first
	h.finish(h.startedOne("v1"), nil)
	h.expectRunning()
	if h.events.count(policy.EventSelectionNew, "v3") != 1 || h.events.count(policy.EventSelectionVanished, "v2") != 1 {
		t.Fatalf("new/vanished not reported: new %+v vanished %+v", h.events.all(policy.EventSelectionNew), h.events.all(policy.EventSelectionVanished))
	}
	// An unreachable inventory is reported and retried while the window is open.
	h.set(at(2, 12, 0))
	h.inv.SetError(errors.New("vcenter unreachable"))
	h.set(at(2, 22, 0))
	if h.events.count(policy.EventSelectionFailed, "") != 1 {
		t.Fatal("selection failure not reported")
	}
	h.inv.SetError(nil)
	h.set(at(2, 22, 10))
	h.finish(h.startedOne("v1"), nil)
}

func TestSchedulerReloadDisablesJobMidWindow(t *testing.T) {
	j := nightlyJob("a", 0, policy.Selection{VMs: []string{"v1", "v2"}})
	h := newHarness(t, monday, vms("v1", "v2"), j)
	h.start()
	h.set(at(0, 22, 0))
	c := h.startedOne("v1")
	j.Enabled = false
	if err := h.db.PutJob(h.ctx, j); err != nil {
		t.Fatal(err)
	}
	if err := h.sched.Reload(h.ctx); err != nil {
		t.Fatal(err)
	}
	h.finish(c, nil)  // the running backup finishes (default close action)
	h.expectRunning() // v2 never starts
	if h.events.count(policy.EventVMNotBackedUp, "v2") != 1 {
		t.Fatal("v2 not reported")
	}
	runs, _ := h.db.Runs(h.ctx, "a", 0)
	if len(runs) != 1 || runs[0].End.IsZero() {
		t.Fatalf("run not closed: %+v", runs)
	}
	// Re-enabled later: windows that passed while it was disabled are not "missed".
	h.set(at(2, 12, 0))
	j.Enabled = true
	if err := h.db.PutJob(h.ctx, j); err != nil {
		t.Fatal(err)
	}
	if err := h.sched.Reload(h.ctx); err != nil {
		t.Fatal(err)
	}
	h.set(at(2, 22, 0))
	h.finish(h.startedOne("v2"), nil)
	if n := len(h.events.all(policy.EventWindowMissed)); n != 0 {
		t.Fatalf("%d missed windows reported for a disabled job", n)
	}
}

// TestSchedulerFollowsDSTWindows runs a Berlin 01:30-03:30 window on the
// spring-forward night (one hour long) and the fall-back night (three hours).
func TestSchedulerFollowsDSTWindows(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatalf("load zone (install tzdata): %v", err)
	}
	w := policy.Window{Location: berlin}
	for d := range w.Days {
		w.Days[d] = []policy.Range{{Start: 90, End: 210}}
	}
	j := nightlyJob("a", 0, policy.Selection{VMs: []string{"v1", "v2"}})
	j.Window, j.OnWindowClose = w, policy.CloseCancel
	utc := func(mo time.Month, d, h, m int) time.Time { return time.Date(2026, mo, d, h, m, 0, 0, time.UTC) }
	tests := []struct {
		name        string
		open, close time.Time
	}{
		{"spring forward", utc(3, 29, 0, 30), utc(3, 29, 1, 30)},
		{"fall back", utc(10, 24, 23, 30), utc(10, 25, 2, 30)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.open.Add(-12*time.Hour), vms("v1", "v2"), j)
			h.start()
			h.set(tc.open.Add(-time.Minute))
			h.expectRunning()
			h.set(tc.open)
			h.finish(h.startedOne("v1"), nil)
			c := h.startedOne("v2")
			h.set(tc.close.Add(-time.Minute))
			h.expectRunning("a/v2")
			h.set(tc.close)
			h.events.waitCount(t, policy.EventVMCancelled, "v2", 1)
			h.expectRunning()
			_ = c
			runs, _ := h.db.Runs(h.ctx, "a", 0)
			if len(runs) != 1 || !runs[0].Start.Equal(tc.open) || !runs[0].End.Equal(tc.close) {
				t.Fatalf("run %+v, want %v - %v", runs, tc.open, tc.close)
			}
		})
	}
}

func TestSchedulerClosesRunsWhoseWindowEndedWhileDown(t *testing.T) {
	h := newHarness(t, monday, vms("v1", "v2"), nightlyJob("a", 0, policy.Selection{VMs: []string{"v1", "v2"}}))
	h.start()
	h.set(at(0, 22, 0))
	h.startedOne("v1")
	h.set(at(0, 23, 0))
	h.stop() // down from 23:00 until Tuesday noon: the window closed meanwhile
	h.clk.Set(at(1, 12, 0))
	h.restart()
	runs, _ := h.db.Runs(h.ctx, "a", 0)
	if len(runs) != 1 || !runs[0].End.Equal(at(0, 23, 0)) {
		t.Fatalf("run %+v, want ended at the last checkpoint", runs)
	}
	if v1, v2 := runs[0].Outcome("v1"), runs[0].Outcome("v2"); v1.Status != policy.OutcomeInterrupted || v2.Status != policy.OutcomeInterrupted ||
		!runs[0].Interrupted || runs[0].ResumedBy != "" {
		t.Fatalf("run %+v: v1=%s v2=%s, want both interrupted and no resume", runs[0], v1.Status, v2.Status)
	}
	if open, _ := h.db.OpenRuns(h.ctx); len(open) != 0 {
		t.Fatalf("open runs left: %+v", open)
	}
	if n := len(h.events.all(policy.EventWindowMissed)); n != 0 {
		t.Fatalf("a window that opened while up is not missed (%d reported)", n)
	}
	h.set(at(1, 22, 0)) // the next window runs both (neither protected yet: by id)
	h.finish(h.startedOne("v1"), nil)
	h.finish(h.startedOne("v2"), nil)
}

func TestSchedulerRunNowSelectionFailureAndConfig(t *testing.T) {
	h := newHarness(t, monday, vms("v1"), nightlyJob("a", 0, policy.Selection{VMs: []string{"v1"}}))
	h.start()
	boom := errors.New("vcenter unreachable")
	h.inv.SetError(boom)
	if _, err := h.sched.RunNow(h.ctx, "a"); !errors.Is(err, boom) {
		t.Fatalf("run now with a failing inventory: %v", err)
	}
	if _, err := policy.New(policy.Config{Clock: h.clk}); err == nil {
		t.Fatal("New accepted a config without store, runner and inventory")
	}
}

// TestSchedulerResumesRunWithStaleRunningOutcome covers a crash between the
// two writes that end a backup: the run still says "running" while the VM
// state does not. The VM must still be backed up in that window.
func TestSchedulerResumesRunWithStaleRunningOutcome(t *testing.T) {
	h := newHarness(t, monday, vms("v1"), nightlyJob("a", 0, policy.Selection{VMs: []string{"v1"}}))
	h.start()
	h.set(at(0, 22, 0))
	h.startedOne("v1")
	h.stop()
	open, _ := h.db.OpenRuns(h.ctx)
	if len(open) != 1 {
		t.Fatalf("open runs %+v", open)
	}
	open[0].VMs[0].Status = policy.OutcomeRunning
	if err := h.db.PutRun(h.ctx, open[0]); err != nil {
		t.Fatal(err)
	}
	h.restart()
	h.finish(h.startedOne("v1"), nil)
	run, _ := h.db.Run(h.ctx, open[0].ID)
	if run.VMs[0].Status != policy.OutcomeInterrupted || run.ResumedBy == "" {
		t.Fatalf("interrupted run %+v", run)
	}
	resumed, _ := h.db.Run(h.ctx, run.ResumedBy)
	if resumed.VMs[0].Status != policy.OutcomeSucceeded || resumed.VMs[0].Attempts != 1 {
		t.Fatalf("resume run outcome %+v", resumed.VMs[0])
	}
	states, _ := h.db.VMStates(h.ctx)
	if len(states) != 1 || states[0].Attempts != 1 || !states[0].Done {
		t.Fatalf("state %+v: an attempt a clean stop interrupted is given back", states)
	}
}

// TestSchedulerClockMovesWithoutSync moves the clock while the loop may be
// between deciding and arming its timer (no Sync after the move): every
// window opening must still be seen.
func TestSchedulerClockMovesWithoutSync(t *testing.T) {
	h := newHarness(t, monday, vms("v1"), nightlyJob("a", 0, policy.Selection{VMs: []string{"v1"}}))
	h.start()
	for day := range 30 {
		h.clk.Set(at(day, 22, 0)) // no sync before or after
		h.finish(h.startedOne("v1"), nil)
		h.clk.Set(at(day+1, 6, 0))
		h.events.waitCount(t, policy.EventJobFinished, "", day+1)
	}
}

// TestSchedulerRecoversLaggingRunRecord: run records are written lazily
// (markRun), so a crash can leave a success in the VM's state and not yet in
// the run record. The restarted scheduler takes the state's word: the VM is
// recorded as succeeded with its point, not as interrupted, and not redone.
func TestSchedulerRecoversLaggingRunRecord(t *testing.T) {
	h := newHarness(t, monday, vms("v1", "v2"), nightlyJob("a", 0, policy.Selection{VMs: []string{"v1", "v2"}}))
	h.cfg.MaxConcurrent = 1
	h.start()
	h.set(at(0, 22, 0))
	h.finish(h.startedOne("v1"), nil)
	h.startedOne("v2")
	h.stop()
	open, _ := h.db.OpenRuns(h.ctx)
	if len(open) != 1 || open[0].VMs[0].VM != "v1" || open[0].VMs[0].Status != policy.OutcomeSucceeded {
		t.Fatalf("open runs %+v", open)
	}
	// What a crash before the record's write leaves: v1 still pending.
	open[0].VMs[0].Status, open[0].VMs[0].Point = policy.OutcomePending, ""
	if err := h.db.PutRun(h.ctx, open[0]); err != nil {
		t.Fatal(err)
	}
	h.restart()
	h.finish(h.startedOne("v2"), nil)
	run, _ := h.db.Run(h.ctx, open[0].ID)
	if o := run.VMs[0]; o.Status != policy.OutcomeSucceeded || o.Point != "pt-v1" {
		t.Fatalf("v1 in the interrupted run %+v, want succeeded with pt-v1", o)
	}
	resumed, _ := h.db.Run(h.ctx, run.ResumedBy)
	if len(resumed.VMs) != 1 || resumed.VMs[0].VM != "v2" || resumed.VMs[0].Status != policy.OutcomeSucceeded {
		t.Fatalf("resume run %+v: only v2 is redone", resumed.VMs)
	}
	if n := h.events.count(policy.EventVMBackedUp, "v1"); n != 1 {
		t.Fatalf("v1 backed up %d times", n)
	}
}
