package notify

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/policy"
)

// memSource is a Source over fixed records.
type memSource struct {
	mu      sync.Mutex
	jobs    []policy.Job
	runs    []policy.JobRun
	vms     []VMStatus
	events  []policy.Event
	repos   []RepoUsage
	calls   []string // "from..to" of each Runs call
	repoErr error
}

func (m *memSource) Jobs(context.Context) ([]policy.Job, error) { return m.jobs, nil }
func (m *memSource) Runs(_ context.Context, from, to time.Time) ([]policy.JobRun, error) {
	m.mu.Lock()
	m.calls = append(m.calls, from.UTC().Format(time.RFC3339)+".."+to.UTC().Format(time.RFC3339))
	m.mu.Unlock()
	var out []policy.JobRun
	for _, r := range m.runs {
		if r.Start.Before(to) && (r.End.IsZero() || !r.End.Before(from)) {
			out = append(out, r)
		}
	}
	return out, nil
}
func (m *memSource) VMs(context.Context) ([]VMStatus, error) { return m.vms, nil }
func (m *memSource) Events(_ context.Context, from, to time.Time) ([]policy.Event, error) {
	var out []policy.Event
	for _, e := range m.events {
		if !e.Time.Before(from) && e.Time.Before(to) {
			out = append(out, e)
		}
	}
	return out, nil
}
func (m *memSource) Repositories(context.Context) ([]RepoUsage, error) { return m.repos, m.repoErr }

type runningNotifier struct {
	n    *Notifier
	clk  *clock.Fake
	stop func()
}

func startNotifier(t *testing.T, ts *testServer, clk *clock.Fake, mut func(*Config)) *runningNotifier {
	t.Helper()
	s, _ := senderFor(t, ts, func(c *SMTPConfig) { c.Clock = clk })
	cfg := Config{Sender: s, Clock: clk, Alerts: true, Appliance: "vmvault-test", Source: &memSource{jobs: []policy.Job{{ID: "j1", Name: "Nightly"}, {ID: "j2", Name: "Weekly"}}}}
	if mut != nil {
		mut(&cfg)
	}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	rn := &runningNotifier{n: n, clk: clk}
	var once sync.Once
	rn.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Error("Run did not return")
			}
		})
	}
	t.Cleanup(rn.stop)
	return rn
}

// none asserts that the notifier mailed nothing: it waits for Run to
// handle everything the test did (events, clk moves), not for time to pass.
func (rn *runningNotifier) none(t *testing.T, ts *testServer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rn.n.settle(ctx); err != nil {
		t.Fatal(err)
	}
	ts.none(t)
}

// waitTimers waits until the notifier has armed n timers.
func waitTimers(t *testing.T, clk *clock.Fake, n int) {
	t.Helper()
	done := make(chan struct{})
	timer := time.AfterFunc(10*time.Second, func() { close(done) })
	defer timer.Stop()
	if !clk.BlockUntil(n, done) {
		t.Fatalf("the notifier did not arm %d timers", n)
	}
}

func failed(vm, job, msg string) policy.Event {
	return policy.Event{Severity: policy.SeverityError, Kind: policy.EventVMFailed, Subject: vm, Job: job, VM: "uuid-" + vm, Message: msg}
}

// Failures within the debounce interval share one mail; the next failure
// starts a new one. Info and warning events send nothing.
func TestAlertDebounce(t *testing.T) {
	ts := startServer(t, serverOpts{STARTTLS: true, User: "backup", Pass: "s3cret-Pa55"})
	clk := clock.NewFake(time.Date(2026, 5, 4, 22, 0, 0, 0, time.UTC))
	rn := startNotifier(t, ts, clk, nil)

	rn.n.ObserveEvent(policy.Event{Severity: policy.SeverityInfo, Kind: policy.EventVMBackedUp, Subject: "ok-vm"})
	rn.n.ObserveEvent(policy.Event{Severity: policy.SeverityWarning, Kind: policy.EventWindowMissed, Subject: "Nightly"})
	rn.n.ObserveEvent(failed("web-01", "j1", "backup failed (attempt 1): create snapshot: FileFault"))
	waitTimers(t, clk, 1)
	clk.Advance(20 * time.Second)
	rn.n.ObserveEvent(failed("db-02", "j1", "backup failed (attempt 1): create snapshot: FileFault"))
	clk.Advance(39 * time.Second)
	rn.none(t, ts)
	clk.Advance(time.Second) // one minute after the first failure
	p := parseMail(t, ts.next(t).Data)
	if s := p.subject(t); s != "[vmvault] FAILED backup: job Nightly, 2 VMs (web-01, db-02)" {
		t.Errorf("subject %q", s)
	}
	for _, part := range []string{"text/plain", "text/html"} {
		body := p.Parts[part]
		for _, want := range []string{"web-01", "db-02", "Nightly", "FileFault", "vmvault-test"} {
			if !strings.Contains(body, want) {
				t.Errorf("%s part lacks %q:\n%s", part, want, body)
			}
		}
	}
	if d, _ := p.Header.Date(); !d.Equal(clk.Now().Truncate(time.Second)) {
		t.Errorf("Date %v, want the clock's %v", d, clk.Now())
	}
	rn.none(t, ts)

	// A later failure: its own mail, a minute later.
	rn.n.Fail(Failure{Operation: "restore", VM: "web-01", Message: "restore failed: datastore full"})
	waitTimers(t, clk, 1)
	clk.Advance(time.Minute)
	p = parseMail(t, ts.next(t).Data)
	if s := p.subject(t); s != "[vmvault] FAILED restore: VM web-01" {
		t.Errorf("subject %q", s)
	}
}

// Alerts off: failures send nothing; a failure gathering when Run stops is
// still sent.
func TestAlertsOffAndFlushOnStop(t *testing.T) {
	ts := startServer(t, serverOpts{STARTTLS: true, User: "backup", Pass: "s3cret-Pa55"})
	clk := clock.NewFake(time.Date(2026, 5, 4, 22, 0, 0, 0, time.UTC))
	off := startNotifier(t, ts, clk, func(c *Config) { c.Alerts = false })
	off.n.ObserveEvent(failed("web-01", "j1", "boom"))
	off.n.Fail(Failure{Operation: "restore", VM: "x"})
	clk.Advance(time.Hour)
	off.none(t, ts)
	off.stop()
	ts.none(t) // Run returned

	on := startNotifier(t, ts, clk, nil)
	on.n.ObserveEvent(failed("web-01", "j1", "boom"))
	waitTimers(t, clk, 1)
	on.stop() // before the debounce ends
	p := parseMail(t, ts.next(t).Data)
	if s := p.subject(t); s != "[vmvault] FAILED backup: job Nightly, VM web-01" {
		t.Errorf("subject %q", s)
	}
}

// The alert lists at most MaxListed failures and counts the rest.
func TestAlertBounded(t *testing.T) {
	ts := startServer(t, serverOpts{STARTTLS: true, User: "backup", Pass: "s3cret-Pa55"})
	clk := clock.NewFake(time.Date(2026, 5, 4, 22, 0, 0, 0, time.UTC))
	rn := startNotifier(t, ts, clk, func(c *Config) { c.MaxListed = 3 })
	for _, vm := range []string{"a", "b", "c", "d", "e"} {
		rn.n.ObserveEvent(failed(vm, "j2", "boom"))
	}
	waitTimers(t, clk, 1)
	clk.Advance(time.Minute)
	p := parseMail(t, ts.next(t).Data)
	if s := p.subject(t); s != "[vmvault] FAILED backup: job Weekly, 3 VMs (a, b, c)" {
		t.Errorf("subject %q", s)
	}
	if !strings.Contains(p.Parts["text/plain"], "and 2 more failures") {
		t.Errorf("body %s", p.Parts["text/plain"])
	}
}

func TestAlertSubjects(t *testing.T) {
	tests := []struct {
		fs   []Failure
		want string
	}{
		{[]Failure{{Operation: "backup", JobName: "Nightly", VM: "web"}}, "[vmvault] FAILED backup: job Nightly, VM web"},
		{[]Failure{{Operation: "backup", VM: "web"}}, "[vmvault] FAILED backup: VM web"},
		{[]Failure{{Operation: "check", Repository: "main"}}, "[vmvault] FAILED check: repository main"},
		{[]Failure{{Operation: "backup", Job: "j1", VM: "a"}, {Operation: "backup", JobName: "Weekly", VM: "b"}}, "[vmvault] FAILED backup: jobs j1, Weekly, 2 VMs (a, b)"},
		{[]Failure{{Operation: "backup", JobName: "N", VM: "a"}, {Operation: "check", Repository: "r"}}, "[vmvault] FAILED backup, check: job N, VM a"},
		{[]Failure{{Operation: "backup", JobName: "N", VM: "a"}, {Operation: "backup", JobName: "N", VM: "b"}, {Operation: "backup", JobName: "N", VM: "c"}, {Operation: "backup", JobName: "N", VM: "d"}}, "[vmvault] FAILED backup: job N, 4 VMs (a, b, c and 1 more)"},
	}
	for _, tc := range tests {
		if got := alertMessage(tc.fs, 0, "h", time.UTC).Subject; got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
	for _, e := range []policy.Event{
		{Severity: policy.SeverityError, Kind: policy.EventCheckDamage, Subject: "main", Repository: "main", Message: "2 damaged"},
		{Severity: policy.SeverityError, Kind: policy.EventMaintenanceFailed, Subject: "main", Repository: "main"},
		{Severity: policy.SeverityError, Kind: policy.EventSelectionFailed, Subject: "Nightly", Job: "j1"},
	} {
		f, ok := FailureFromEvent(e)
		if !ok || f.Operation == "" || (f.Repository == "" && f.JobName == "") {
			t.Errorf("%s: %+v %v", e.Kind, f, ok)
		}
	}
	if _, ok := FailureFromEvent(policy.Event{Severity: policy.SeverityWarning, Kind: policy.EventVMInterrupted}); ok {
		t.Error("a warning became an alert")
	}
}

// The daily report fires at the configured local time, also across both DST
// changes (23- and 25-hour days), covers the 24 hours before, and says what
// a person needs: VM counts, runs with per-VM outcome and bytes,
// repositories, failures and warnings.
func TestDailyReportAtLocalTimeAcrossDST(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, serverOpts{STARTTLS: true, User: "backup", Pass: "s3cret-Pa55"})
	at := func(y int, m time.Month, d, h, min int) time.Time { return time.Date(y, m, d, h, min, 0, 0, paris) }
	src := &memSource{
		jobs: []policy.Job{{ID: "j1", Name: "Nightly"}},
		runs: []policy.JobRun{{ID: "r1", Job: "j1", Start: at(2026, 3, 28, 22, 0), End: at(2026, 3, 28, 23, 0), VMs: []policy.VMOutcome{
			{VM: "u1", Name: "web-01", Status: policy.OutcomeSucceeded, Attempts: 1, Bytes: 3 << 30, Stored: 512 << 20},
			{VM: "u2", Name: "db-02", Status: policy.OutcomeFailed, Attempts: 3, Error: "create snapshot: FileFault"},
		}}},
		vms: []VMStatus{
			{ID: "u1", Name: "web-01", Jobs: []string{"Nightly"}, LastPoint: at(2026, 3, 28, 22, 30)},
			{ID: "u2", Name: "db-02", Jobs: []string{"Nightly"}, LastError: "create snapshot: FileFault"},
			{ID: "u3", Name: "test-vm"},
		},
		events: []policy.Event{
			{Time: at(2026, 3, 28, 22, 40), Severity: policy.SeverityError, Kind: policy.EventVMFailed, Subject: "db-02", Message: "backup failed: create snapshot: FileFault"},
			{Time: at(2026, 3, 28, 22, 41), Severity: policy.SeverityInfo, Kind: policy.EventVMBackedUp, Subject: "web-01", Message: "info-only-event"},
		},
		repos: []RepoUsage{{Name: "main", Points: 12, LogicalBytes: 40 << 30, StoredBytes: 9 << 30}},
	}
	clk := clock.NewFake(at(2026, 3, 27, 12, 0))
	tod := TimeOfDay{7, 0}
	rn := startNotifier(t, ts, clk, func(c *Config) { c.Location, c.DailyAt, c.Source, c.Alerts = paris, &tod, src, false })

	// expect moves the clock to just before want and checks that the
	// notifier's timer is due exactly at want, then to want, and returns the mail.
	expect := func(want time.Time) parsed {
		t.Helper()
		waitTimers(t, clk, 1)
		for {
			next, _ := clk.NextDeadline()
			if !next.Before(want) {
				break
			}
			clk.Set(next) // the timer is capped at an hour: walk the re-arms
			rn.none(t, ts)
			waitTimers(t, clk, 1)
		}
		if next, _ := clk.NextDeadline(); !next.Equal(want) {
			t.Fatalf("daily report due at %v, want %v", next.In(paris), want)
		}
		clk.Set(want)
		return parseMail(t, ts.next(t).Data)
	}
	expect(at(2026, 3, 28, 7, 0)) // CET, 06:00 UTC
	p := expect(at(2026, 3, 29, 7, 0))
	if got := at(2026, 3, 29, 7, 0).Sub(at(2026, 3, 28, 7, 0)); got != 23*time.Hour {
		t.Fatalf("spring-forward day lasts %v", got)
	}
	if s := p.subject(t); s != "[vmvault] daily report: 1 protected, 1 failed, 1 unprotected" {
		t.Errorf("subject %q", s)
	}
	if p.Header.Get("X-Vmvault-Report") != "daily" {
		t.Errorf("kind %q", p.Header.Get("X-Vmvault-Report"))
	}
	for _, part := range []string{"text/plain", "text/html"} {
		body := p.Parts[part]
		for _, want := range []string{"web-01", "db-02", "test-vm", "Nightly", "3.0 GiB", "512.0 MiB", "FileFault", "main", "9.0 GiB", "12", "2026-03-28 07:00 CET", "2026-03-29 07:00 CEST"} {
			if !strings.Contains(body, want) {
				t.Errorf("%s part lacks %q:\n%s", part, want, body)
			}
		}
		if strings.Contains(body, "info-only-event") {
			t.Errorf("%s part lists info events", part)
		}
	}
	src.mu.Lock()
	if last := src.calls[len(src.calls)-1]; last != "2026-03-28T06:00:00Z..2026-03-29T05:00:00Z" {
		t.Errorf("period %s", last)
	}
	src.mu.Unlock()

	// The wall clock jumps months ahead (a suspended machine): the overdue
	// report is sent once, at once, then the schedule resumes.
	waitTimers(t, clk, 1)
	clk.Set(at(2026, 10, 24, 12, 0))
	p = parseMail(t, ts.next(t).Data)
	if !strings.Contains(p.Parts["text/plain"], "to 2026-03-30 07:00 CEST") {
		t.Errorf("overdue report: %s", p.Parts["text/plain"])
	}
	// Autumn: 2026-10-25 has 25 hours; the report stays at 07:00 local.
	expect(at(2026, 10, 25, 7, 0))
	expect(at(2026, 10, 26, 7, 0))
}

// A time that does not exist on the spring-forward day (02:30) is sent
// once, an hour later; on the autumn day the repeated 02:30 sends once.
func TestDailyReportNonexistentAndRepeatedTime(t *testing.T) {
	paris, _ := time.LoadLocation("Europe/Paris")
	ts := startServer(t, serverOpts{STARTTLS: true, User: "backup", Pass: "s3cret-Pa55"})
	clk := clock.NewFake(time.Date(2026, 3, 28, 12, 0, 0, 0, paris))
	tod := TimeOfDay{2, 30}
	rn := startNotifier(t, ts, clk, func(c *Config) { c.Location, c.DailyAt, c.Source, c.Alerts = paris, &tod, &memSource{}, false })
	n := rn.n
	for _, tc := range []struct{ now, want time.Time }{
		{time.Date(2026, 3, 28, 12, 0, 0, 0, paris), time.Date(2026, 3, 29, 1, 30, 0, 0, time.UTC)},    // 03:30 CEST
		{time.Date(2026, 3, 29, 1, 30, 0, 0, time.UTC), time.Date(2026, 3, 30, 0, 30, 0, 0, time.UTC)}, // 02:30 CEST
	} {
		if got := n.nextDaily(tc.now, ""); !got.Equal(tc.want) {
			t.Errorf("after %v: %v, want %v", tc.now, got.UTC(), tc.want)
		}
	}
	// Autumn: 02:30 happens twice on 2026-10-25 (00:30 and 01:30 UTC).
	first := n.nextDaily(time.Date(2026, 10, 24, 12, 0, 0, 0, paris), "")
	if first.In(paris).Day() != 25 || first.In(paris).Hour() != 2 {
		t.Fatalf("first %v", first.In(paris))
	}
	again := n.nextDaily(first, first.In(paris).Format(time.DateOnly))
	if again.In(paris).Day() != 26 {
		t.Fatalf("after the first 02:30 the next report is %v, want the 26th", again.In(paris))
	}
}

func TestSendTestMail(t *testing.T) {
	ts := startServer(t, serverOpts{STARTTLS: true, User: "backup", Pass: "s3cret-Pa55", FailMail: []int{451}})
	clk := clock.NewFake(time.Date(2026, 5, 4, 22, 0, 0, 0, time.UTC))
	rn := startNotifier(t, ts, clk, nil)
	// One attempt only: the 451 comes back to the person at once.
	if err := rn.n.SendTest(context.Background(), "someone@example.net"); !errors.Is(err, ErrTemporary) || !strings.Contains(err.Error(), "451") {
		t.Fatalf("err %v", err)
	}
	if err := rn.n.SendTest(context.Background(), "someone@example.net"); err != nil {
		t.Fatal(err)
	}
	got := ts.next(t)
	if strings.Join(got.To, ",") != "someone@example.net" {
		t.Fatalf("to %v", got.To)
	}
	p := parseMail(t, got.Data)
	if p.subject(t) != "[vmvault] test mail from vmvault-test" || p.Header.Get("X-Vmvault-Report") != "test" || !strings.Contains(p.Parts["text/html"], "<p>This is a test mail") {
		t.Fatalf("test mail %q %q", p.subject(t), p.Parts)
	}
	if err := rn.n.SendTest(context.Background(), "bad address"); err == nil {
		t.Fatal("bad address accepted")
	}
	if err := rn.n.SendTest(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	if got := ts.next(t); len(got.To) != 2 {
		t.Fatalf("default recipients: %v", got.To)
	}
	var nilN *Notifier
	if err := nilN.SendTest(context.Background(), ""); err == nil || !strings.Contains(err.Error(), "not configured") {
		t.Fatalf("nil notifier: %v", err)
	}
}

func TestParseTimeOfDay(t *testing.T) {
	for s, ok := range map[string]bool{"07:00": true, "00:00": true, "23:59": true, "24:00": false, "7:00": false, "07:60": false, "07-00": false, "": false, "+7:00": false, "07:0x": false} {
		_, err := ParseTimeOfDay(s)
		if (err == nil) != ok {
			t.Errorf("%q: %v", s, err)
		}
	}
}

func FuzzParseTimeOfDay(f *testing.F) {
	for _, s := range []string{"07:00", "23:59", "24:00", "7:0", "", "::", "-1:-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tod, err := ParseTimeOfDay(s)
		if err != nil {
			return
		}
		if tod.String() != s {
			t.Fatalf("%q parsed as %v", s, tod)
		}
	})
}

// A VM's state in the daily report follows vmstatus: a point makes it
// protected only when a job covers it (not ad hoc); a failure wins.
func TestVMStatusState(t *testing.T) {
	at := time.Date(2026, 12, 1, 22, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		v    VMStatus
		want string
	}{
		{VMStatus{}, "unprotected"},
		{VMStatus{LastPoint: at}, "protected"},
		{VMStatus{LastPoint: at, AdHoc: true}, "unprotected"},
		{VMStatus{LastPoint: at, LastError: "snapshot failed"}, "failed"},
	} {
		if got := c.v.State(); got != c.want {
			t.Errorf("%+v: %s, want %s", c.v, got, c.want)
		}
	}
}
