package policy_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmvault/vmvault/policy"
)

// fakeMaintainer is an in-memory repository for maintenance: it holds
// points, records what was asked, and lets the test hold a full check open.
type fakeMaintainer struct {
	mu       sync.Mutex
	points   []policy.Point
	removed  []string
	log      []string
	resumes  []string
	damaged  int
	fullGate chan struct{} // a full check reports progress, then waits for this (or cancellation)
	atGate   chan string   // receives the cursor when a full check reaches the gate
}

func (m *fakeMaintainer) record(s string) {
	m.mu.Lock()
	m.log = append(m.log, s)
	m.mu.Unlock()
}

func (m *fakeMaintainer) calls() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.log)
}

func (m *fakeMaintainer) Check(ctx context.Context, req policy.CheckRequest, progress func(policy.CheckProgress)) (policy.CheckResult, error) {
	if !req.Full {
		m.record("quick " + req.Repository)
		return policy.CheckResult{Damaged: m.damaged, Summary: "quick"}, nil
	}
	m.mu.Lock()
	m.resumes = append(m.resumes, req.Resume)
	gate := m.fullGate
	m.mu.Unlock()
	m.record("full " + req.Repository + " from " + fmt.Sprintf("%q", req.Resume))
	progress(policy.CheckProgress{Cursor: req.Resume + "+1"})
	progress(policy.CheckProgress{Cursor: req.Resume + "+2"})
	m.atGate <- req.Resume + "+2"
	select {
	case <-gate:
		return policy.CheckResult{Summary: "full"}, nil
	case <-ctx.Done():
		return policy.CheckResult{}, fmt.Errorf("full check: %w", ctx.Err())
	}
}

func (m *fakeMaintainer) Points(ctx context.Context, repo string) ([]policy.Point, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.points), nil
}

func (m *fakeMaintainer) RemovePoints(ctx context.Context, repo string, ids []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.removed = append(m.removed, ids...)
	m.points = slices.DeleteFunc(m.points, func(p policy.Point) bool { return slices.Contains(ids, p.ID) })
	m.log = append(m.log, fmt.Sprintf("remove %d from %s", len(ids), repo))
	return nil
}

func (m *fakeMaintainer) Reclaim(ctx context.Context, repo string) (int64, error) {
	m.record("reclaim " + repo)
	return 4096, nil
}

func TestSchedulerMaintenance(t *testing.T) {
	backupWindow := policy.Window{Location: time.UTC}
	maintWindow := policy.Window{Location: time.UTC}
	for d := range backupWindow.Days {
		backupWindow.Days[d] = []policy.Range{{Start: 18 * 60, End: 22 * 60}}
		maintWindow.Days[d] = []policy.Range{{Start: 23 * 60, End: 3 * 60}}
	}
	job := policy.Job{ID: "a", Name: "job a", Enabled: true, Repository: "repo1",
		Selection: policy.Selection{VMs: []string{"v1"}}, Window: backupWindow, Retention: policy.Retention{Last: 2}}
	h := newHarness(t, monday, vms("v1"), job)
	var points []policy.Point
	for i := range 5 {
		points = append(points, policy.Point{ID: fmt.Sprintf("p%d", i), Repository: "repo1", VM: "v1", Job: "a",
			Time: monday.AddDate(0, 0, -10+i), Status: policy.PointComplete, Bytes: 1000})
	}
	points = append(points, policy.Point{ID: "orphan", Repository: "repo1", VM: "v9", Job: "deleted-job", Time: monday.AddDate(-1, 0, 0), Status: policy.PointComplete})
	h.maint = &fakeMaintainer{points: points, fullGate: make(chan struct{}), atGate: make(chan string)}
	plan, err := policy.PlanRetention(h.ctx, h.maint, job, time.UTC)
	if err != nil || plan.Remove != 3 || plan.BytesFreed != 3000 || len(plan.Decisions) != 5 {
		t.Fatalf("dry run %+v %v", plan, err)
	}
	h.cfg.MaintenanceWindow = maintWindow
	h.start()

	// A backup still running at 23:00 does not hold maintenance back.
	h.set(at(0, 22, 59))
	if _, err := h.sched.RunNow(h.ctx, "a"); err != nil {
		t.Fatal(err)
	}
	h.sync()
	c := h.startedOne("v1")
	h.set(at(0, 23, 0))

	// Then: retention + reclaim, quick check, full check (never done yet).
	h.events.waitCount(t, policy.EventReclaimDone, "", 1)
	h.events.waitCount(t, policy.EventCheckClean, "", 1)
	if cur := <-h.maint.atGate; cur != "+2" {
		t.Fatalf("full check cursor %q", cur)
	}
	h.expectRunning("a/v1")
	h.finish(c, nil)
	if want := []string{"remove 3 from repo1", "reclaim repo1", "quick repo1", `full repo1 from ""`}; !slices.Equal(h.maint.calls(), want) {
		t.Fatalf("calls %q, want %q", h.maint.calls(), want)
	}
	h.maint.mu.Lock()
	removed := slices.Clone(h.maint.removed)
	h.maint.mu.Unlock()
	if !slices.Equal(removed, []string{"p2", "p1", "p0"}) {
		t.Fatalf("retention removed %v (the orphan of a deleted job must stay)", removed)
	}
	if ev := h.events.all(policy.EventRetentionRemoved); len(ev) != 1 || !strings.Contains(ev[0].Message, "3 restore points (3000 bytes)") {
		t.Fatalf("retention event %+v", ev)
	}

	// A backup starts, and finishes, on a repository under maintenance.
	if _, err := h.sched.RunNow(h.ctx, "a"); err != nil {
		t.Fatal(err)
	}
	h.finish(h.startedOne("v1"), nil)
	if m := h.sched.Status().Maintenance; len(m) != 1 || m[0].Task != policy.TaskFullCheck {
		t.Fatalf("the full check did not run on beside the backup: %+v", m)
	}

	// The maintenance window closes: the full check pauses where it was.
	h.set(at(1, 3, 0))
	h.events.waitCount(t, policy.EventCheckPaused, "", 1)
	ms, _ := h.db.Maintenance(h.ctx)
	if len(ms) != 1 || ms[0].FullCheckCursor != "+2" || !ms[0].LastFullCheck.IsZero() {
		t.Fatalf("maintenance state after pause %+v", ms)
	}

	// Next night it resumes from the cursor and completes. A restart in
	// between must not lose the cursor.
	h.restart()
	h.set(at(1, 23, 0))
	h.events.waitCount(t, policy.EventReclaimDone, "", 2)
	if cur := <-h.maint.atGate; cur != "+2+2" {
		t.Fatalf("resumed full check cursor %q", cur)
	}
	close(h.maint.fullGate)
	h.events.waitCount(t, policy.EventCheckClean, "", 3)
	h.sync()
	ms, _ = h.db.Maintenance(h.ctx)
	if ms[0].FullCheckCursor != "" || !ms[0].LastFullCheck.Equal(at(1, 23, 0)) {
		t.Fatalf("maintenance state after full check %+v", ms[0])
	}

	// The third night: no full check (weekly), and damage is reported.
	h.maint.mu.Lock()
	h.maint.damaged = 2
	h.maint.mu.Unlock()
	before := len(h.maint.calls())
	h.set(at(2, 23, 0))
	h.events.waitCount(t, policy.EventCheckDamage, "", 1)
	h.sync()
	if got := h.maint.calls()[before:]; !slices.Equal(got, []string{"reclaim repo1", "quick repo1"}) {
		t.Fatalf("third night calls %q", got)
	}
	if ev := h.events.all(policy.EventCheckDamage); ev[0].Severity != policy.SeverityError {
		t.Fatalf("damage severity %s", ev[0].Severity)
	}
}
