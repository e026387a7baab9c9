package policy

import (
	"context"
	"fmt"
	"time"
)

// Replacing the maintenance window of a running scheduler (the console's
// settings): the Run goroutine owns the configuration, so the change goes
// through its request channel like Reload.

type maintSetting struct {
	window    Window
	fullCheck time.Duration
}

// SetMaintenance replaces the maintenance window and the full check
// interval (0: 7 days). An empty window stops scheduled maintenance; a
// task running outside the new window is cancelled at once, as at a
// window's close, and one due inside it starts at once. It needs a
// Maintainer in Config and waits for Run to take the change.
func (s *Scheduler) SetMaintenance(ctx context.Context, w Window, fullCheck time.Duration) error {
	if s.cfg.Maintainer == nil {
		return fmt.Errorf("set maintenance window: the scheduler has no Maintainer")
	}
	if !w.IsEmpty() {
		if err := w.Validate(); err != nil {
			return fmt.Errorf("set maintenance window: %w", err)
		}
	}
	_, err := s.call(ctx, request{kind: reqSetMaintenance, maint: &maintSetting{window: w, fullCheck: fullCheck}})
	return err
}

// setMaintenance applies a SetMaintenance on the Run goroutine.
func (s *Scheduler) setMaintenance(m maintSetting) {
	s.cfg.MaintenanceWindow = m.window
	s.cfg.FullCheckInterval = m.fullCheck
	if s.cfg.FullCheckInterval <= 0 {
		s.cfg.FullCheckInterval = 7 * 24 * time.Hour
	}
	if m.window.IsEmpty() {
		// stepMaintenance no longer runs: cancel what runs now.
		for _, t := range s.maint {
			t.cancel()
		}
	}
}
