package policy_test

import (
	"context"
	"fmt"
	"slices"
	"sync"

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
	onStart  func(task string)
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

func (m *fakeMaintainer) Check(ctx context.Context, req policy.CheckRequest, progress func(string)) (policy.CheckResult, error) {
	if !req.Full {
		m.record("quick " + req.Repository)
		return policy.CheckResult{Damaged: m.damaged, Summary: "quick"}, nil
	}
	m.mu.Lock()
	m.resumes = append(m.resumes, req.Resume)
	gate := m.fullGate
	m.mu.Unlock()
	m.record("full " + req.Repository + " from " + fmt.Sprintf("%q", req.Resume))
	progress(req.Resume + "+1")
	progress(req.Resume + "+2")
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
