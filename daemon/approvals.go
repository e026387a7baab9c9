package daemon

import (
	"context"

	"github.com/vmvault/vmvault/approval"
	"github.com/vmvault/vmvault/records"
	"github.com/vmvault/vmvault/reposvc"
)

// newApprovals builds the holder of delayed destructive actions over the
// state database (its own bucket): deletions go through the repository
// set, so a lock set while one waited still refuses it; a shorter
// retention is saved into the job and the scheduler reloads it. Each
// execution is recorded like the daemon's own events.
func (d *Daemon) newApprovals(rs *reposvc.Set, rec *records.Store) (*approval.Manager, error) {
	reload := func(ctx context.Context) error {
		if d.sched == nil {
			return nil
		}
		return d.sched.Reload(ctx)
	}
	m, err := approval.New(approval.Config{
		DB: d.db.Bolt(), Delay: d.cfg.Approvals.delay(), Clock: d.clk,
		Executors: map[string]approval.Executor{
			approval.KindDeletePoint:      approval.DeletePoint(rs),
			approval.KindShortenRetention: approval.ShortenRetention(rec, reload),
		},
		OnEvent: d.record,
	})
	if err != nil {
		return nil, err
	}
	d.approvals = m
	if m.Delay() > 0 {
		d.log.Info("destructive actions wait for a second administrator", "delay", m.Delay())
	}
	return m, nil
}
