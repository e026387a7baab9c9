package policy_test

import (
	"errors"
	"testing"
	"time"

	"github.com/vmvault/vmvault/policy"
)

func TestJobSlots(t *testing.T) {
	weekend := policy.DefaultWindow(time.UTC) // Fri 18:00 .. Mon 06:00 is one opening
	fri := func(h int) time.Time { return time.Date(2026, 5, 8, h, 0, 0, 0, time.UTC) }
	nightly := nightlyJob("n", 0, policy.Selection{}).Window
	tests := []struct {
		name      string
		window    policy.Window
		every     int
		at        time.Time
		open      bool
		wantOpen  time.Time
		wantClose time.Time
	}{
		{"a night is one slot", nightly, 0, at(0, 23, 0), true, at(0, 22, 0), at(1, 6, 0)},
		{"every 4 h: the second slot", nightly, 4, at(1, 3, 0), true, at(1, 2, 0), at(1, 6, 0)},
		{"every 3 h: the last slot is cut at the close", nightly, 3, at(1, 5, 0), true, at(1, 4, 0), at(1, 6, 0)},
		{"the weekend's first day", weekend, 0, fri(20), true, fri(18), fri(18).Add(24 * time.Hour)},
		{"Saturday evening starts a new day", weekend, 0, fri(18).Add(25 * time.Hour), true, fri(18).Add(24 * time.Hour), fri(18).Add(48 * time.Hour)},
		{"Monday morning: the short last slot", weekend, 0, fri(18).Add(59 * time.Hour), true, fri(18).Add(48 * time.Hour), fri(18).Add(60 * time.Hour)},
		{"outside the window", nightly, 4, at(0, 12, 0), false, time.Time{}, time.Time{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j := policy.Job{Window: tc.window, EveryHours: tc.every}
			s, ok := j.Slot(tc.at)
			if ok != tc.open {
				t.Fatalf("Slot(%v) open = %v, want %v", tc.at, ok, tc.open)
			}
			if ok && (!s.Open.Equal(tc.wantOpen) || !s.Close.Equal(tc.wantClose)) {
				t.Fatalf("Slot(%v) = %v..%v, want %v..%v", tc.at, s.Open, s.Close, tc.wantOpen, tc.wantClose)
			}
		})
	}
}

func TestJobNextSlotAndBetween(t *testing.T) {
	j := nightlyJob("n", 0, policy.Selection{})
	j.EveryHours = 4
	s, ok := j.NextSlot(at(0, 12, 0))
	if !ok || !s.Open.Equal(at(0, 22, 0)) || !s.Close.Equal(at(1, 2, 0)) {
		t.Fatalf("NextSlot before the window = %v..%v %v", s.Open, s.Close, ok)
	}
	// The night of Monday has slots at 22:00 and 02:00; a span that starts
	// inside the opening still sees the slot that opens in it.
	got := j.SlotsBetween(at(0, 23, 0), at(1, 12, 0))
	if len(got) != 1 || !got[0].Open.Equal(at(1, 2, 0)) {
		t.Fatalf("SlotsBetween = %v, want the 02:00 slot only", got)
	}
	if got := j.SlotsBetween(at(0, 12, 0), at(2, 12, 0)); len(got) != 4 {
		t.Fatalf("two nights every 4 h: %d slots, want 4", len(got))
	}
}

func TestJobEveryHoursValidated(t *testing.T) {
	for _, n := range []int{-1, policy.MaxEveryHours + 1} {
		j := nightlyJob("n", 0, policy.Selection{VMs: []string{"v1"}})
		j.EveryHours = n
		_, err := j.Validate(t.Context(), policy.ValidateEnv{})
		var ve *policy.ValidationError
		if !errors.As(err, &ve) || ve.Field != "everyHours" {
			t.Errorf("everyHours %d: %v, want a field error on everyHours", n, err)
		}
	}
}

// Every 4 hours inside the window: each slot backs the VM up once, and a
// backup still running when its slot ends finishes even on a job that
// cancels at the window's close (only the window's close cancels).
func TestSchedulerEveryHoursInsideWindow(t *testing.T) {
	j := nightlyJob("a", 0, policy.Selection{VMs: []string{"v1"}})
	j.EveryHours = 4
	j.OnWindowClose = policy.CloseCancel
	h := newHarness(t, monday, vms("v1"), j)
	h.start()
	h.set(at(0, 22, 0))
	h.finish(h.startedOne("v1"), nil)
	h.set(at(1, 1, 59))
	h.expectRunning() // once per slot
	h.set(at(1, 2, 0))
	c := h.startedOne("v1")
	h.set(at(1, 6, 0)) // the window closes: this one is cancelled
	h.events.waitCount(t, policy.EventVMCancelled, "v1", 1)
	_ = c
	runs, err := h.db.Runs(h.ctx, "a", 0)
	if err != nil || len(runs) != 2 {
		t.Fatalf("runs %d %v, want one per slot (2)", len(runs), err)
	}

	// A backup that outlives its slot is not cancelled at the boundary.
	h.set(at(1, 22, 0))
	long := h.startedOne("v1")
	h.set(at(2, 2, 0))
	h.expectRunning("a/v1")
	if n := h.events.count(policy.EventVMCancelled, "v1"); n != 1 {
		t.Fatalf("%d cancellations, want still 1: a slot boundary cancelled a backup", n)
	}
	h.finish(long, nil)
	// The 02:00 slot's run backs the VM up once it is free.
	h.finish(h.startedOne("v1"), nil)
}

// The default window's weekend is one 60-hour opening; it backs up on each
// of its days, not once on Friday.
func TestSchedulerWeekendBacksUpEveryDay(t *testing.T) {
	r, _ := policy.Preset("few")
	j := policy.Job{ID: "w", Name: "weekend", Enabled: true, Repository: "repo1",
		Selection: policy.Selection{VMs: []string{"v1"}}, Window: policy.DefaultWindow(time.UTC), Retention: r}
	fri := time.Date(2026, 5, 8, 12, 0, 0, 0, time.UTC)
	h := newHarness(t, fri, vms("v1"), j)
	h.start()
	for day := range 3 { // Fri 18:00, Sat 18:00, Sun 18:00
		h.set(fri.Add(6*time.Hour + time.Duration(day)*24*time.Hour))
		h.finish(h.startedOne("v1"), nil)
	}
	if n := h.events.count(policy.EventVMBackedUp, "v1"); n != 3 {
		t.Fatalf("%d backups over the weekend, want 3", n)
	}
}

// "Run now" while the window's run still has the VM to do answers with that
// run instead of starting a second one (which made two points in a second).
func TestSchedulerRunNowJoinsBusyRun(t *testing.T) {
	h := newHarness(t, monday, vms("v1"), nightlyJob("a", 0, policy.Selection{VMs: []string{"v1"}}))
	h.start()
	h.set(at(0, 22, 0))
	c := h.startedOne("v1")
	runs, _ := h.db.Runs(h.ctx, "a", 0)
	if len(runs) != 1 {
		t.Fatalf("%d runs", len(runs))
	}
	id, err := h.sched.RunNow(h.ctx, "a")
	if err != nil || id != runs[0].ID {
		t.Fatalf("RunNow inside the busy window run = %q, %v; want %q", id, err, runs[0].ID)
	}
	h.finish(c, nil)
	h.expectRunning()
	// With nothing left to do in the window, "Run now" starts a run of its own.
	id2, err := h.sched.RunNow(h.ctx, "a")
	if err != nil || id2 == runs[0].ID {
		t.Fatalf("RunNow after the window run's work = %q, %v; want a new manual run", id2, err)
	}
	h.finish(h.startedOne("v1"), nil)
	if n := h.events.count(policy.EventVMBackedUp, "v1"); n != 2 {
		t.Fatalf("%d backups, want 2", n)
	}
}

// A window run whose VMs are all backed up ends then (it read as "running"
// until the window closed), and no other run opens in its slot, before or
// after a restart; the next night opens one again.
func TestSchedulerRunEndsWhenEveryVMIsDone(t *testing.T) {
	h := newHarness(t, monday, vms("v1", "v2"), nightlyJob("a", 0, policy.Selection{VMs: []string{"v1", "v2"}}))
	h.cfg.MaxConcurrent = 1
	h.start()
	h.set(at(0, 22, 0))
	c := h.started(1)[0]
	h.finish(c, errors.New("snapshot failed")) // a failure keeps the run open for its retry
	if runs, _ := h.db.Runs(h.ctx, "a", 0); len(runs) != 1 || !runs[0].End.IsZero() {
		t.Fatalf("after a failure: %+v, want the run still open", runs)
	}
	h.finish(h.started(1)[0], nil)
	h.set(at(0, 22, 10)) // the retry
	h.finish(h.started(1)[0], nil)
	runs, _ := h.db.Runs(h.ctx, "a", 0)
	if len(runs) != 1 || runs[0].End.IsZero() || !runs[0].End.Before(at(1, 6, 0)) {
		t.Fatalf("every VM backed up: runs %+v, want one run ended before the window closes", runs)
	}
	h.set(at(0, 23, 0))
	h.restart()
	h.set(at(1, 1, 0))
	h.expectRunning()
	if runs, _ := h.db.Runs(h.ctx, "a", 0); len(runs) != 1 {
		t.Fatalf("%d runs in one slot (after a restart), want 1", len(runs))
	}
	h.set(at(1, 22, 0))
	h.started(1) // one at a time (MaxConcurrent 1)
	if runs, _ := h.db.Runs(h.ctx, "a", 0); len(runs) != 2 {
		t.Fatalf("the next night: %d runs, want 2", len(runs))
	}
}
