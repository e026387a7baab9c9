package capacity

import "sync"

// Threshold is when free space counts as low: below Percent of the total,
// or below MinBytes (either may be 0 to disable it).
type Threshold struct {
	Percent  float64
	MinBytes int64
}

// DefaultThreshold warns below 10% free or 10 GiB, whichever comes first.
var DefaultThreshold = Threshold{Percent: 10, MinBytes: 10 << 30}

// Change is what one observation changed for a repository.
type Change int

const (
	Unchanged Change = iota
	BecameLow        // free space fell below the threshold: alert
	Recovered        // it is above the threshold again: say so once
)

// Watch turns periodic space readings into edge-triggered alerts: one when
// a repository's free space falls below the threshold, one when it
// recovers, none while it stays on one side. A margin of a tenth of the
// threshold keeps a repository hovering at the edge from alerting at every
// reading.
type Watch struct {
	T Threshold

	mu  sync.Mutex
	low map[string]bool
}

// Observe records a reading for repo and reports what changed.
func (w *Watch) Observe(repo string, total, free int64) Change {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.low == nil {
		w.low = map[string]bool{}
	}
	was := w.low[repo]
	t := w.T
	if was { // recover only clearly above the threshold
		t.Percent *= 1.1
		t.MinBytes += t.MinBytes / 10
	}
	now := Low(total, free, t.Percent, t.MinBytes)
	w.low[repo] = now
	switch {
	case now && !was:
		return BecameLow
	case !now && was:
		return Recovered
	}
	return Unchanged
}
