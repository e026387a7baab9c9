package verifyjob

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/service/verification"
	"github.com/vmvault/vmvault/web/api"
)

// call is one Verify the fake holds until the test sends its verdict.
type call struct {
	req     verification.Request
	release chan string
}

type fakeVerifier struct {
	calls chan call

	mu               sync.Mutex
	latest           map[string]verification.Result
	running, maxSeen int
}

func newFakeVerifier() *fakeVerifier {
	return &fakeVerifier{calls: make(chan call), latest: map[string]verification.Result{}}
}

func (f *fakeVerifier) Verify(ctx context.Context, req verification.Request, _ func(string)) (verification.Result, error) {
	f.mu.Lock()
	f.running++
	f.maxSeen = max(f.maxSeen, f.running)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.running--
		f.mu.Unlock()
	}()
	c := call{req: req, release: make(chan string)}
	select {
	case f.calls <- c:
	case <-ctx.Done():
		return verification.Result{}, ctx.Err()
	}
	var verdict string
	select {
	case verdict = <-c.release:
	case <-ctx.Done():
		return verification.Result{}, ctx.Err()
	}
	if verdict == "error" {
		return verification.Result{}, errors.New("point unreadable")
	}
	res := verification.Result{ID: "v-" + req.Point, Point: req.Point, Result: verdict, Reason: "fake " + verdict}
	f.mu.Lock()
	f.latest[req.Point] = res
	f.mu.Unlock()
	return res, nil
}

func (f *fakeVerifier) Latest(point string) (verification.Result, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.latest[point]
	return r, ok
}

type fakePoints []api.RestorePoint

func (p fakePoints) Points(context.Context, api.PointFilter) ([]api.RestorePoint, error) {
	return p, nil
}

// Friday 4 December 2026, 21:00 UTC; the window is Friday 22:00-23:00.
var t0 = time.Date(2026, 12, 4, 21, 0, 0, 0, time.UTC)

func fridayWindow(t *testing.T) policy.Window {
	t.Helper()
	r, err := policy.ParseRange("22:00-23:00")
	if err != nil {
		t.Fatal(err)
	}
	w := policy.Window{Location: time.UTC}
	w.Days[time.Friday] = []policy.Range{r}
	return w
}

func point(id, vm string, hoursAgo int, partial bool) api.RestorePoint {
	return api.RestorePoint{ID: id, VM: api.VMRef{Name: vm, InstanceUUID: "uuid-" + vm}, Time: t0.Add(-time.Duration(hoursAgo) * time.Hour), Partial: partial}
}

type env struct {
	clk    *clock.Fake
	store  *Store
	v      *fakeVerifier
	r      *Runner
	waits  chan struct{}
	events chan policy.Event
	stop   func()
}

func newEnv(t *testing.T, pts fakePoints, jobs ...Job) *env {
	t.Helper()
	st, err := OpenStore(filepath.Join(t.TempDir(), "verification-jobs"), true)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if err := st.Put(j); err != nil {
			t.Fatal(err)
		}
	}
	e := &env{clk: clock.NewFake(t0), store: st, v: newFakeVerifier(), waits: make(chan struct{}, 256), events: make(chan policy.Event, 16)}
	e.r = New(Config{Store: st, Points: pts, Verifier: e.v, Clock: e.clk,
		OnEvent: func(ev policy.Event) { e.events <- ev },
		waiting: func() { e.waits <- struct{}{} }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.r.Run(ctx) }()
	var once sync.Once
	e.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(e.stop)
	<-e.waits // the first look is done; the loop waits
	return e
}

func (e *env) next(t *testing.T) call {
	t.Helper()
	select {
	case c := <-e.v.calls:
		return c
	case <-time.After(10 * time.Second): // a hang guard, not synchronisation
		t.Fatal("no verification started")
		return call{}
	}
}

func (e *env) event(t *testing.T) policy.Event {
	t.Helper()
	select {
	case ev := <-e.events:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
		return policy.Event{}
	}
}

func (e *env) lastRun(t *testing.T, job string) Run {
	t.Helper()
	runs, err := e.store.Runs(job, 1)
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs of %s: %v %v", job, runs, err)
	}
	return runs[0]
}

func job(t *testing.T, id string, mut func(*Job)) Job {
	j := Job{ID: id, Enabled: true, Window: fridayWindow(t), VMs: []string{}}
	if mut != nil {
		mut(&j)
	}
	return j
}

func TestWindowVerifiesNewestUnverifiedPoints(t *testing.T) {
	pts := fakePoints{
		point("a1", "app-1", 30, false),
		point("a2", "app-1", 5, false), // app-1's newest complete
		point("a3", "app-1", 1, true),  // partial: never
		point("b1", "app-2", 3, false), // verified already: onlyNew skips it
		point("c1", "db-1", 2, false),  // not selected
	}
	e := newEnv(t, pts, job(t, "nightly", func(j *Job) { j.VMs = []string{"app-*"}; j.OnlyNew = true }))
	e.v.latest["b1"] = verification.Result{ID: "old", Point: "b1", Result: verification.Passed}

	select {
	case c := <-e.v.calls:
		t.Fatalf("verification %s started before the window opened", c.req.Point)
	default:
	}
	e.clk.Set(t0.Add(time.Hour)) // 22:00: open
	c := e.next(t)
	if c.req.Point != "a2" || c.req.Mode != verification.ModeWalk || !strings.Contains(c.req.By, "nightly") {
		t.Fatalf("verifying %+v, want a2 in walk mode by the job", c.req)
	}
	c.release <- verification.Failed
	ev := e.event(t)
	if ev.Kind != EventFinished || ev.Severity != policy.SeverityWarning {
		t.Errorf("event %+v: want a verification.finished warning (a point failed)", ev)
	}
	run := e.lastRun(t, "nightly")
	if run.State != RunFinished || run.Trigger != "window" || run.Points != 1 || run.Failed != 1 || run.Passed != 0 || run.Skipped != 0 || run.End.IsZero() {
		t.Errorf("run %+v", run)
	}
	if len(run.Results) != 1 || run.Results[0].Verification != "v-a2" || run.Results[0].Result != verification.Failed {
		t.Errorf("run results %+v", run.Results)
	}
	// The same opening is not run again, whatever the loop sees.
	e.r.Reload()
	<-e.waits
	select {
	case c := <-e.v.calls:
		t.Fatalf("verification %s started twice in one opening", c.req.Point)
	default:
	}
}

func TestOnlyNewFalseVerifiesNewestAgain(t *testing.T) {
	pts := fakePoints{point("b1", "app-2", 3, false)}
	e := newEnv(t, pts, job(t, "weekly", nil))
	e.v.latest["b1"] = verification.Result{ID: "old", Point: "b1", Result: verification.Passed}
	e.clk.Set(t0.Add(time.Hour))
	c := e.next(t)
	if c.req.Point != "b1" {
		t.Fatalf("verifying %s, want b1 again", c.req.Point)
	}
	c.release <- verification.Passed
	if ev := e.event(t); ev.Severity != policy.SeverityInfo {
		t.Errorf("event %+v: want info", ev)
	}
	if run := e.lastRun(t, "weekly"); run.Passed != 1 || run.Points != 1 {
		t.Errorf("run %+v", run)
	}
}

func TestMaxConcurrent(t *testing.T) {
	pts := fakePoints{point("p1", "vm-1", 1, false), point("p2", "vm-2", 1, false), point("p3", "vm-3", 1, false)}
	e := newEnv(t, pts, job(t, "two", func(j *Job) { j.MaxConcurrent = 2 }))
	e.clk.Set(t0.Add(time.Hour))
	first, second := e.next(t), e.next(t)
	first.release <- verification.Passed
	third := e.next(t)
	second.release <- verification.Passed
	third.release <- "error"
	e.event(t)
	e.v.mu.Lock()
	maxSeen := e.v.maxSeen
	e.v.mu.Unlock()
	if maxSeen != 2 {
		t.Errorf("%d verifications at once, want 2", maxSeen)
	}
	run := e.lastRun(t, "two")
	if run.Points != 2 || run.Passed != 2 || run.Errors != 1 || len(run.Results) != 3 {
		t.Errorf("run %+v", run)
	}
}

func TestWindowCloseStartsNothingNew(t *testing.T) {
	pts := fakePoints{point("p1", "vm-1", 1, false), point("p2", "vm-2", 1, false), point("p3", "vm-3", 1, false)}
	e := newEnv(t, pts, job(t, "short", nil))
	e.clk.Set(t0.Add(time.Hour))
	c := e.next(t)
	if c.req.Point != "p1" {
		t.Fatalf("first %s, want p1 (VM name order)", c.req.Point)
	}
	e.clk.Set(t0.Add(2 * time.Hour)) // 23:00: closed while p1 runs
	c.release <- verification.Passed // p1 ends as it would
	ev := e.event(t)
	run := e.lastRun(t, "short")
	if run.Points != 1 || run.Passed != 1 || run.Skipped != 2 || run.State != RunFinished {
		t.Errorf("run %+v: want p1 verified, 2 left", run)
	}
	if !strings.Contains(ev.Message, "2 left when the window closed") || ev.Severity != policy.SeverityWarning {
		t.Errorf("event %+v", ev)
	}
	select {
	case c := <-e.v.calls:
		t.Fatalf("verification %s started after the window closed", c.req.Point)
	default:
	}
}

func TestRunNowOutsideWindow(t *testing.T) {
	pts := fakePoints{point("p1", "vm-1", 1, false)}
	e := newEnv(t, pts, job(t, "off", func(j *Job) {
		j.Enabled = false
		j.Mode = verification.ModeBoth
		j.Network = "isolated"
		j.Ports = []int{22}
	}))
	id, err := e.r.RunNow(context.Background(), "off")
	if err != nil {
		t.Fatal(err)
	}
	c := e.next(t)
	if c.req.Mode != verification.ModeBoth || c.req.Network != "isolated" || len(c.req.Ports) != 1 {
		t.Errorf("request %+v: want the job's boot settings", c.req)
	}
	if _, err := e.r.RunNow(context.Background(), "off"); !errors.Is(err, api.ErrBusy) {
		t.Errorf("second run now: %v, want ErrBusy", err)
	}
	if r, ok := e.r.Running("off"); !ok || r.ID != id || r.State != RunRunning {
		t.Errorf("running %+v %v", r, ok)
	}
	e.clk.Set(t0.Add(5 * 24 * time.Hour)) // no window bounds a manual run
	c.release <- verification.Passed
	e.event(t)
	run := e.lastRun(t, "off")
	if run.ID != id || run.Trigger != "manual" || run.Passed != 1 {
		t.Errorf("run %+v", run)
	}
	if _, err := e.r.RunNow(context.Background(), "nope"); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("unknown job: %v", err)
	}
}

func TestStopInterruptsAndRestartMarks(t *testing.T) {
	pts := fakePoints{point("p1", "vm-1", 1, false)}
	e := newEnv(t, pts, job(t, "j", nil))
	e.clk.Set(t0.Add(time.Hour))
	e.next(t) // never released: the stop ends it
	e.stop()
	run := e.lastRun(t, "j")
	if run.State != RunInterrupted {
		t.Errorf("run %+v: want interrupted", run)
	}
	select {
	case ev := <-e.events:
		t.Errorf("event %+v for an interrupted run", ev)
	default:
	}
}

func TestValidate(t *testing.T) {
	tests := map[string]struct {
		mut   func(*Job)
		field string // "" valid
	}{
		"valid walk": {nil, ""},
		"valid boot": {func(j *Job) {
			j.Mode = "boot"
			j.Ports = []int{22, 443}
			j.URL = "http://guest:8080/health"
			j.Network = "iso"
		}, ""},
		"bad id":            {func(j *Job) { j.ID = "Bad ID" }, "id"},
		"long name":         {func(j *Job) { j.Name = strings.Repeat("x", 201) }, "name"},
		"empty window":      {func(j *Job) { j.Window = policy.Window{} }, "window"},
		"empty vm":          {func(j *Job) { j.VMs = []string{"a", ""} }, "vms[1]"},
		"bad mode":          {func(j *Job) { j.Mode = "reboot" }, "mode"},
		"ports in walk":     {func(j *Job) { j.Ports = []int{22} }, "ports"},
		"url in walk":       {func(j *Job) { j.URL = "http://x/" }, "url"},
		"network in walk":   {func(j *Job) { j.Network = "iso" }, "network"},
		"bad port":          {func(j *Job) { j.Mode = "boot"; j.Ports = []int{0} }, "ports[0]"},
		"twice port":        {func(j *Job) { j.Mode = "both"; j.Ports = []int{22, 22} }, "ports[1]"},
		"bad url":           {func(j *Job) { j.Mode = "boot"; j.URL = "ftp://x/" }, "url"},
		"negative parallel": {func(j *Job) { j.MaxConcurrent = -1 }, "maxConcurrent"},
		"too many parallel": {func(j *Job) { j.MaxConcurrent = MaxConcurrentLimit + 1 }, "maxConcurrent"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			j := job(t, "ok", tt.mut)
			err := Validate(j)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("valid job: %v", err)
				}
				return
			}
			if !errors.Is(err, policy.ErrInvalid) {
				t.Fatalf("err %v: want policy.ErrInvalid", err)
			}
			var ve *policy.ValidationError
			found := false
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				if errors.As(e, &ve) && ve.Field == tt.field {
					found = true
				}
			}
			if !found {
				t.Errorf("err %v: no error of field %s", err, tt.field)
			}
		})
	}
}

func TestMatch(t *testing.T) {
	for _, tt := range []struct {
		pattern, s string
		want       bool
	}{
		{"web-1", "web-1", true}, {"web-1", "web-10", false}, {"web-*", "web-10", true}, {"*-db", "pg-db", true},
		{"*-db", "pg-db2", false}, {"a*b*c", "axxbyyc", true}, {"a*b*c", "acb", false}, {"*", "", true}, {"ab*ba", "aba", false},
	} {
		if got := match(tt.pattern, tt.s); got != tt.want {
			t.Errorf("match(%q, %q) = %v", tt.pattern, tt.s, got)
		}
	}
}

func TestStoreRoundTripAndDelete(t *testing.T) {
	dir := t.TempDir()
	st, err := OpenStore(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	j := job(t, "one", func(j *Job) { j.Name = "One" })
	if err := st.Put(j); err != nil {
		t.Fatal(err)
	}
	if err := st.PutRun(Run{ID: "one/1", Job: "one", State: RunFinished}); err != nil {
		t.Fatal(err)
	}
	j.Name = "Changed"
	if err := st.Put(j); err != nil {
		t.Fatal(err)
	}
	got, err := st.Job("one")
	if err != nil || got.Name != "Changed" {
		t.Fatalf("job %+v %v", got, err)
	}
	if runs, _ := st.Runs("one", 0); len(runs) != 1 {
		t.Errorf("a change lost the runs: %+v", runs)
	}
	if bad := st.Put(job(t, "Bad", nil)); !errors.Is(bad, policy.ErrInvalid) {
		t.Errorf("invalid job saved: %v", bad)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 || ents[0].Name() != "one.json" {
		t.Errorf("files %v: want one.json only (no temp file left)", ents)
	}
	if err := st.Delete("one"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Job("one"); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("deleted job: %v", err)
	}
	if err := st.Delete("one"); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("delete twice: %v", err)
	}
	if err := st.PutRun(Run{ID: "one/2", Job: "one"}); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("run of a deleted job: %v", err)
	}
}

func TestDeleteEndsRunningRun(t *testing.T) {
	pts := fakePoints{point("p1", "vm-1", 1, false), point("p2", "vm-2", 1, false)}
	e := newEnv(t, pts, job(t, "gone", nil))
	a := API{Store: e.store, Runner: e.r}
	if _, err := a.RunVerificationJob(context.Background(), "gone"); err != nil {
		t.Fatal(err)
	}
	e.next(t) // held: only the delete ends it
	if err := a.DeleteVerificationJob(context.Background(), "gone"); err != nil {
		t.Fatal(err)
	}
	// The run's end wakes the loop (finish reloads): wait for the loop's
	// turns until it has ended, the stop not yet asked.
	for {
		if _, ok := e.r.Running("gone"); !ok {
			break
		}
		select {
		case <-e.waits:
		case <-time.After(10 * time.Second): // a hang guard
			t.Fatal("the deleted job's run still runs")
		}
	}
	select {
	case ev := <-e.events:
		t.Errorf("event %+v for a deleted job's run", ev)
	default:
	}
	if _, err := e.store.Job("gone"); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("the run brought the job back: %v", err)
	}
}
