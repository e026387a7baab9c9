package policy_test

import (
	"slices"
	"testing"
	"time"

	"github.com/vmvault/vmvault/policy"
)

// A window set on a running scheduler takes effect at once: maintenance
// that did not run without one runs inside the new one; clearing the
// window cancels the full check in progress.
func TestSetMaintenanceLive(t *testing.T) {
	backupWindow := policy.Window{Location: time.UTC}
	maintWindow := policy.Window{Location: time.UTC}
	for d := range backupWindow.Days {
		backupWindow.Days[d] = []policy.Range{{Start: 18 * 60, End: 22 * 60}}
		maintWindow.Days[d] = []policy.Range{{Start: 23 * 60, End: 3 * 60}}
	}
	job := policy.Job{ID: "a", Name: "job a", Enabled: true, Repository: "repo1",
		Selection: policy.Selection{VMs: []string{"v1"}}, Window: backupWindow, Retention: policy.Retention{Last: 2}}
	h := newHarness(t, monday, vms("v1"), job)
	h.maint = &fakeMaintainer{fullGate: make(chan struct{}), atGate: make(chan string)}
	h.start() // no window: no maintenance

	h.set(at(0, 23, 30))
	h.sync()
	if c := h.maint.calls(); len(c) != 0 {
		t.Fatalf("maintenance ran without a window: %q", c)
	}
	if err := h.sched.SetMaintenance(h.ctx, maintWindow, 0); err != nil {
		t.Fatal(err)
	}
	h.events.waitCount(t, policy.EventReclaimDone, "", 1)
	if cur := <-h.maint.atGate; cur != "+2" {
		t.Fatalf("full check cursor %q", cur)
	}
	if want := []string{"reclaim repo1", "quick repo1", `full repo1 from ""`}; !slices.Equal(h.maint.calls(), want) {
		t.Fatalf("calls %q, want %q", h.maint.calls(), want)
	}
	// Clearing the window stops the full check where it was.
	if err := h.sched.SetMaintenance(h.ctx, policy.Window{}, 0); err != nil {
		t.Fatal(err)
	}
	h.events.waitCount(t, policy.EventCheckPaused, "", 1)
	h.sync()
	if m := h.sched.Status().Maintenance; len(m) != 0 {
		t.Fatalf("maintenance still running after the window was cleared: %+v", m)
	}
	// A window that does not validate is refused before it reaches Run.
	bad := policy.Window{Location: time.UTC}
	bad.Days[1] = []policy.Range{{Start: 60, End: 60}}
	if err := h.sched.SetMaintenance(h.ctx, bad, 0); err == nil {
		t.Fatal("an empty range was accepted")
	}
}
