package policy_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/vmvault/vmvault/policy"
)

// packMaintainer is a repository of named packs whose full check reads one
// pack per token the test sends on step, resumes after the cursor it is
// given, and counts every pack read.
type packMaintainer struct {
	packs []string // sorted: the check's order
	step  chan struct{}
	read  chan string // each pack read, after its progress was reported

	mu      sync.Mutex
	reads   map[string]int
	resumes []string
}

func newPackMaintainer(n int) *packMaintainer {
	m := &packMaintainer{step: make(chan struct{}), read: make(chan string, 2*n), reads: map[string]int{}}
	for i := range n {
		m.packs = append(m.packs, fmt.Sprintf("pack-%03d", i))
	}
	return m
}

func (m *packMaintainer) Check(ctx context.Context, req policy.CheckRequest, progress func(policy.CheckProgress)) (policy.CheckResult, error) {
	if !req.Full {
		return policy.CheckResult{Summary: "quick"}, nil
	}
	m.mu.Lock()
	m.resumes = append(m.resumes, req.Resume)
	m.mu.Unlock()
	i := sort.Search(len(m.packs), func(i int) bool { return m.packs[i] > req.Resume })
	for ; i < len(m.packs); i++ {
		select {
		case <-m.step:
		case <-ctx.Done():
			return policy.CheckResult{}, fmt.Errorf("full check: %w", ctx.Err())
		}
		p := m.packs[i]
		m.mu.Lock()
		m.reads[p]++
		m.mu.Unlock()
		progress(policy.CheckProgress{Cursor: p, Done: int64(i + 1), Total: int64(len(m.packs))})
		m.read <- p
	}
	return policy.CheckResult{Summary: fmt.Sprintf("%d packs", len(m.packs))}, nil
}

func (m *packMaintainer) Points(context.Context, string) ([]policy.Point, error) { return nil, nil }
func (m *packMaintainer) RemovePoints(context.Context, string, []string) error   { return nil }
func (m *packMaintainer) Reclaim(context.Context, string) (int64, error)         { return 0, nil }

// readPacks lets the check read n more packs and returns the last one.
func (m *packMaintainer) readPacks(t *testing.T, n int) string {
	t.Helper()
	var last string
	for range n {
		select {
		case m.step <- struct{}{}:
		case <-time.After(guard):
			t.Fatal("the full check is not running")
		}
		select {
		case last = <-m.read:
		case <-time.After(guard):
			t.Fatal("the full check did not read its pack")
		}
	}
	return last
}

// TestMaintenanceBesideBackupsAndFullCheckOverTwoWindows: a backup window
// opening while the full check runs starts and finishes its backup without
// waiting; the check, cut by its window's close, resumes after a restart in
// the next window from the persisted cursor, reads every pack exactly once,
// and reports progress and an ETA meanwhile.
func TestMaintenanceBesideBackupsAndFullCheckOverTwoWindows(t *testing.T) {
	backupWindow := policy.Window{Location: time.UTC}
	maintWindow := policy.Window{Location: time.UTC}
	for d := range backupWindow.Days {
		backupWindow.Days[d] = []policy.Range{{Start: 23*60 + 30, End: 2 * 60}}
		maintWindow.Days[d] = []policy.Range{{Start: 23 * 60, End: 3 * 60}}
	}
	job := policy.Job{ID: "a", Name: "job a", Enabled: true, Repository: "repo1",
		Selection: policy.Selection{VMs: []string{"v1"}}, Window: backupWindow, Retention: policy.Retention{Last: 2}}
	h := newHarness(t, monday, vms("v1"), job)
	m := newPackMaintainer(10)
	h.mnt = m
	h.cfg.MaintenanceWindow = maintWindow
	h.start()

	// 23:00: reclaim, quick check, then the full check reads two packs.
	h.set(at(0, 23, 0))
	m.readPacks(t, 2)
	// 23:30: the backup window opens while the check holds the repository.
	h.set(at(0, 23, 30))
	c := h.startedOne("v1")
	h.finish(c, nil)
	if n := h.events.count(policy.EventVMBackedUp, "v1"); n != 1 {
		t.Fatalf("%d backups of v1 while the check ran, want 1", n)
	}
	if cur := m.readPacks(t, 2); cur != "pack-003" {
		t.Fatalf("cursor %q after four packs", cur)
	}
	h.sync()
	st := h.sched.Status().Maintenance
	// 4 packs in 30 minutes, 6 to go: 45 more minutes.
	if len(st) != 1 || st[0].Task != policy.TaskFullCheck || st[0].Cursor != "pack-003" || st[0].Done != 4 || st[0].Total != 10 ||
		!st[0].ETA.Equal(at(1, 0, 15)) {
		t.Fatalf("full check status %+v, want pack-003 4/10 ETA %s", st, at(1, 0, 15))
	}

	// 03:00: the window closes; the check pauses with its cursor stored.
	h.set(at(1, 3, 0))
	h.events.waitCount(t, policy.EventCheckPaused, "", 1)
	ms, err := h.db.Maintenance(h.ctx)
	if err != nil || len(ms) != 1 || ms[0].FullCheckCursor != "pack-003" || !ms[0].LastFullCheck.IsZero() {
		t.Fatalf("maintenance state after the first window %+v %v", ms, err)
	}

	// A restart, then the next window: the check goes on after pack-003.
	h.restart()
	h.set(at(1, 23, 0))
	if last := m.readPacks(t, 6); last != "pack-009" {
		t.Fatalf("last pack %q", last)
	}
	h.events.waitCount(t, policy.EventCheckClean, "", 3) // two quick checks and the full one
	h.sync()
	m.mu.Lock()
	defer m.mu.Unlock()
	total := 0
	for _, p := range m.packs {
		if m.reads[p] != 1 {
			t.Errorf("pack %s read %d times, want once", p, m.reads[p])
		}
		total += m.reads[p]
	}
	if total != len(m.packs) || len(m.resumes) != 2 || m.resumes[0] != "" || m.resumes[1] != "pack-003" {
		t.Fatalf("%d pack reads over resumes %q, want %d over [\"\" pack-003]", total, m.resumes, len(m.packs))
	}
	ms, _ = h.db.Maintenance(h.ctx)
	if ms[0].FullCheckCursor != "" || !ms[0].LastFullCheck.Equal(at(1, 23, 0)) || !ms[0].FullCheckStart.IsZero() {
		t.Fatalf("maintenance state after the full check %+v", ms[0])
	}
}
