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

// alertAfterDebounce waits for the alert timer, fires it and returns the mail.
func alertAfterDebounce(t *testing.T, ts *testServer, clk *clock.Fake) parsed {
	t.Helper()
	waitTimers(t, clk, 1)
	clk.Advance(time.Minute)
	return parseMail(t, ts.next(t).Data)
}

// A VM the scheduler keeps retrying (15 min doubling to 2 h) mails once per
// streak; failures of other VMs still mail; once RepeatAfter has passed
// since the last mail the next failure mails again, saying how many were
// not mailed; a success ends the streak so the next failure mails at once.
func TestAlertStreakSuppression(t *testing.T) {
	ts := startServer(t, serverOpts{STARTTLS: true, User: "backup", Pass: "s3cret-Pa55"})
	clk := clock.NewFake(time.Date(2026, 5, 4, 22, 0, 0, 0, time.UTC))
	rn := startNotifier(t, ts, clk, nil) // RepeatAfter: the 6 h default

	fail := func() { rn.n.ObserveEvent(failed("web-01", "j1", "create snapshot: FileFault")) }
	fail() // 22:00
	p := alertAfterDebounce(t, ts, clk)
	if s := p.subject(t); s != "[vmvault] FAILED backup: job Nightly, VM web-01" {
		t.Errorf("first mail: subject %q", s)
	}
	if strings.Contains(p.Parts["text/plain"], "times since") {
		t.Errorf("first failure counted as a repeat:\n%s", p.Parts["text/plain"])
	}
	// Retries at 22:15, 22:45, 23:45, 01:45: a streak of 5 failures, 1 mail.
	for _, at := range []time.Time{
		time.Date(2026, 5, 4, 22, 15, 0, 0, time.UTC),
		time.Date(2026, 5, 4, 22, 45, 0, 0, time.UTC),
		time.Date(2026, 5, 4, 23, 45, 0, 0, time.UTC),
		time.Date(2026, 5, 5, 1, 45, 0, 0, time.UTC),
	} {
		clk.Set(at)
		fail()
	}
	clk.Advance(10 * time.Minute)
	rn.none(t, ts)

	// Another VM of the same job is its own streak: mailed.
	rn.n.ObserveEvent(failed("db-02", "j1", "disk full"))
	p = alertAfterDebounce(t, ts, clk)
	if s := p.subject(t); s != "[vmvault] FAILED backup: job Nightly, VM db-02" {
		t.Errorf("other VM: subject %q", s)
	}

	// 03:45 still within 6 h of the 22:00 mail; 05:45 is not.
	clk.Set(time.Date(2026, 5, 5, 3, 45, 0, 0, time.UTC))
	fail()
	rn.none(t, ts)
	clk.Set(time.Date(2026, 5, 5, 5, 45, 0, 0, time.UTC))
	fail()
	p = alertAfterDebounce(t, ts, clk)
	if s := p.subject(t); s != "[vmvault] STILL FAILING backup: job Nightly, VM web-01" {
		t.Errorf("repeat mail: subject %q", s)
	}
	for _, part := range []string{"text/plain", "text/html"} {
		if want := "failed 7 times since 2026-05-04 22:00 (5 of them not mailed)"; !strings.Contains(p.Parts[part], want) {
			t.Errorf("%s part lacks %q:\n%s", part, want, p.Parts[part])
		}
	}

	// A success ends the streak: the next failure mails at once, as a first.
	rn.n.ObserveEvent(policy.Event{Severity: policy.SeverityInfo, Kind: policy.EventVMBackedUp, Subject: "web-01", Job: "j1"})
	clk.Advance(time.Hour)
	fail()
	p = alertAfterDebounce(t, ts, clk)
	if s := p.subject(t); s != "[vmvault] FAILED backup: job Nightly, VM web-01" {
		t.Errorf("after a success: subject %q", s)
	}
	if strings.Contains(p.Parts["text/plain"], "times since") {
		t.Errorf("new streak counted the old one:\n%s", p.Parts["text/plain"])
	}
	// A success of another job's backup of the same VM does not end it.
	rn.n.ObserveEvent(policy.Event{Severity: policy.SeverityInfo, Kind: policy.EventVMBackedUp, Subject: "web-01", Job: "j2"})
	clk.Advance(time.Hour)
	fail()
	rn.none(t, ts)
}

// Operations the scheduler does not see: Succeeded ends their streaks;
// checks keyed by repository; the selection streak ends when a run starts.
func TestAlertStreakSucceededAndKinds(t *testing.T) {
	ts := startServer(t, serverOpts{STARTTLS: true, User: "backup", Pass: "s3cret-Pa55"})
	clk := clock.NewFake(time.Date(2026, 5, 4, 22, 0, 0, 0, time.UTC))
	rn := startNotifier(t, ts, clk, func(c *Config) { c.RepeatAfter = 2 * time.Hour })

	restore := Failure{Operation: "restore", VM: "web-01", Repository: "main", Message: "datastore full"}
	rn.n.Fail(restore)
	alertAfterDebounce(t, ts, clk)
	rn.n.Fail(restore)
	clk.Advance(time.Minute)
	rn.none(t, ts)
	rn.n.Succeeded(Failure{Operation: "restore", VM: "web-01"})
	rn.n.Fail(restore)
	if s := alertAfterDebounce(t, ts, clk).subject(t); s != "[vmvault] FAILED restore: VM web-01" {
		t.Errorf("restore after success: %q", s)
	}

	for _, tc := range []struct {
		name    string
		fail    policy.Event
		success policy.Event
	}{
		{"check", policy.Event{Severity: policy.SeverityError, Kind: policy.EventCheckDamage, Subject: "main", Repository: "main", Message: "2 damaged"},
			policy.Event{Severity: policy.SeverityInfo, Kind: policy.EventCheckClean, Subject: "main", Repository: "main"}},
		{"maintenance", policy.Event{Severity: policy.SeverityError, Kind: policy.EventMaintenanceFailed, Subject: "main", Repository: "main", Message: "reclaim failed"},
			policy.Event{Severity: policy.SeverityInfo, Kind: policy.EventReclaimDone, Subject: "main", Repository: "main"}},
		{"selection", policy.Event{Severity: policy.SeverityError, Kind: policy.EventSelectionFailed, Subject: "Nightly", Job: "j1", Message: "vCenter down"},
			policy.Event{Severity: policy.SeverityInfo, Kind: policy.EventJobStarted, Subject: "Nightly", Job: "j1"}},
	} {
		rn.n.ObserveEvent(tc.fail)
		alertAfterDebounce(t, ts, clk)
		rn.n.ObserveEvent(tc.fail)
		clk.Advance(time.Minute)
		rn.none(t, ts)
		rn.n.ObserveEvent(tc.success)
		rn.n.ObserveEvent(tc.fail)
		if s := alertAfterDebounce(t, ts, clk).subject(t); !strings.HasPrefix(s, "[vmvault] FAILED ") {
			t.Errorf("%s: after its success: %q", tc.name, s)
		}
	}
}

// RepeatAfter < 0 mails every failure.
func TestAlertStreakOff(t *testing.T) {
	ts := startServer(t, serverOpts{STARTTLS: true, User: "backup", Pass: "s3cret-Pa55"})
	clk := clock.NewFake(time.Date(2026, 5, 4, 22, 0, 0, 0, time.UTC))
	rn := startNotifier(t, ts, clk, func(c *Config) { c.RepeatAfter = -1 })
	for range 3 {
		rn.n.ObserveEvent(failed("web-01", "j1", "boom"))
		alertAfterDebounce(t, ts, clk)
		clk.Advance(15 * time.Minute)
	}
}

// A mail that could not be sent does not count as mailed: the streak's
// next failure is mailed, counting the lost one.
func TestAlertStreakSendFailure(t *testing.T) {
	ts := startServer(t, serverOpts{STARTTLS: true, User: "backup", Pass: "s3cret-Pa55", FailMail: []int{550}})
	clk := clock.NewFake(time.Date(2026, 5, 4, 22, 0, 0, 0, time.UTC))
	rn := startNotifier(t, ts, clk, nil)
	rn.n.ObserveEvent(failed("web-01", "j1", "boom"))
	waitTimers(t, clk, 1)
	clk.Advance(time.Minute) // refused with 550: not mailed
	rn.none(t, ts)
	clk.Advance(15 * time.Minute)
	rn.n.ObserveEvent(failed("web-01", "j1", "boom"))
	p := alertAfterDebounce(t, ts, clk)
	if !strings.Contains(p.Parts["text/plain"], "failed 2 times since 22:00 (1 of them not mailed)") {
		t.Errorf("body:\n%s", p.Parts["text/plain"])
	}
}

// The daily report says how often a streak failed and how many failures
// were not mailed.
func TestDailyReportListsRepeatedFailures(t *testing.T) {
	ts := startServer(t, serverOpts{STARTTLS: true, User: "backup", Pass: "s3cret-Pa55"})
	clk := clock.NewFake(time.Date(2026, 5, 4, 22, 0, 0, 0, time.UTC))
	rn := startNotifier(t, ts, clk, nil)
	rn.n.ObserveEvent(failed("web-01", "j1", "create snapshot: FileFault"))
	alertAfterDebounce(t, ts, clk)
	for _, m := range []int{15, 45} {
		clk.Set(time.Date(2026, 5, 4, 22, m, 0, 0, time.UTC))
		rn.n.ObserveEvent(failed("web-01", "j1", "create snapshot: FileFault"))
	}
	clk.Set(time.Date(2026, 5, 5, 7, 0, 0, 0, time.UTC))
	if err := rn.n.SendDailyReport(context.Background(), clk.Now()); err != nil {
		t.Fatal(err)
	}
	p := parseMail(t, ts.next(t).Data)
	for _, part := range []string{"text/plain", "text/html"} {
		want := "backup job Nightly VM web-01: failed 3 times since 2026-05-04 22:00 UTC, last at 2026-05-04 22:45 UTC (2 not mailed): create snapshot: FileFault"
		if !strings.Contains(p.Parts[part], want) {
			t.Errorf("%s part lacks %q:\n%s", part, want, p.Parts[part])
		}
	}
}

// memReportLog is a ReportLog in memory (the daemon's over bbolt is tested
// in cmd/appliance).
type memReportLog struct {
	mu   sync.Mutex
	last time.Time
	sets int
	err  error
}

func (m *memReportLog) LastReport(context.Context) (time.Time, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last, m.err
}

func (m *memReportLog) SetLastReport(_ context.Context, t time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.last, m.sets = t, m.sets+1
	return nil
}

func (m *memReportLog) get() (time.Time, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last, m.sets
}

// A daily report that fell due while the daemon was down is sent exactly
// once at start, covering the time since the last one; a restart after
// that, or after a regular report, sends none; nothing recorded (a first
// start) sends none.
func TestDailyReportCatchUp(t *testing.T) {
	ts := startServer(t, serverOpts{STARTTLS: true, User: "backup", Pass: "s3cret-Pa55"})
	at := func(d, h, m int) time.Time { return time.Date(2026, 5, d, h, m, 0, 0, time.UTC) }
	tod := TimeOfDay{7, 0}
	rlog := &memReportLog{}
	clk := clock.NewFake(at(2, 12, 0))
	start := func() *runningNotifier {
		t.Helper()
		return startNotifier(t, ts, clk, func(c *Config) { c.DailyAt, c.ReportLog, c.Alerts = &tod, rlog, false })
	}

	// First start: nothing recorded, nothing sent.
	rn := start()
	waitTimers(t, clk, 1)
	rn.none(t, ts)
	rn.stop()

	// Down from May 2 07:00 (last report) to May 5 12:00: one late report
	// at start, from the last one to May 5 07:00.
	rlog.mu.Lock()
	rlog.last = at(2, 7, 0)
	rlog.mu.Unlock()
	clk.Set(at(5, 12, 0))
	rn = start()
	p := parseMail(t, ts.next(t).Data)
	body := p.Parts["text/plain"]
	for _, want := range []string{"daily report for 2026-05-02 07:00 UTC to 2026-05-05 07:00 UTC", "This report is late: it fell due at 2026-05-05 07:00 UTC"} {
		if !strings.Contains(body, want) {
			t.Errorf("late report lacks %q:\n%s", want, body)
		}
	}
	waitTimers(t, clk, 1)
	rn.none(t, ts) // exactly one
	if last, _ := rlog.get(); !last.Equal(at(5, 7, 0)) {
		t.Fatalf("recorded %v, want the due time", last)
	}
	rn.stop()

	// Restart the same day: none.
	clk.Set(at(5, 12, 5))
	rn = start()
	waitTimers(t, clk, 1)
	rn.none(t, ts)

	// The regular report of May 6 07:00 is recorded; a restart right after
	// it sends none.
	for {
		next, _ := clk.NextDeadline()
		clk.Set(next)
		if !next.Before(at(6, 7, 0)) {
			break
		}
		waitTimers(t, clk, 1)
	}
	p = parseMail(t, ts.next(t).Data)
	if body := p.Parts["text/plain"]; !strings.Contains(body, "2026-05-05 07:00 UTC to 2026-05-06 07:00 UTC") || strings.Contains(body, "late") {
		t.Errorf("regular report:\n%s", body)
	}
	waitTimers(t, clk, 1)
	if last, _ := rlog.get(); !last.Equal(at(6, 7, 0)) {
		t.Fatalf("regular report recorded as %v", last)
	}
	rn.stop()
	clk.Set(at(6, 7, 1))
	rn = start()
	waitTimers(t, clk, 1)
	rn.none(t, ts)
	rn.stop()

	// Down for a month: the late report covers at most a week.
	clk.Set(at(30, 8, 0))
	rn = start()
	p = parseMail(t, ts.next(t).Data)
	if body := p.Parts["text/plain"]; !strings.Contains(body, "daily report for 2026-05-23 07:00 UTC to 2026-05-30 07:00 UTC") {
		t.Errorf("long downtime report:\n%s", body)
	}
	waitTimers(t, clk, 1)
	rn.none(t, ts)
	rn.stop()

	// The log cannot be read: no catch-up, the schedule goes on.
	rlog.mu.Lock()
	rlog.err, rlog.last = errors.New("disk gone"), at(1, 7, 0)
	rlog.mu.Unlock()
	rn = start()
	waitTimers(t, clk, 1)
	rn.none(t, ts)
}
