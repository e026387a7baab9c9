package daemon

import (
	"context"

	"github.com/vmvault/vmvault/service/approval"
	"github.com/vmvault/vmvault/service/records"
	"github.com/vmvault/vmvault/service/repos"
	"github.com/vmvault/vmvault/web/api"
)

// appRemover reaches the console's repository remover, built after the
// approvals (the web configuration needs both).
type appRemover struct{ d *Daemon }

func (r appRemover) RemoveRepository(ctx context.Context, name string) (api.RemovedRepository, error) {
	return r.d.app.RemoveRepository(ctx, name)
}

// newApprovals builds the holder of delayed destructive actions over the
// state database (its own bucket): deletions go through the repository
// set, so a lock set while one waited still refuses it; a removal of a
// repository checks again that nothing uses it; a shorter
// retention is saved into the job and the scheduler reloads it. Each
// execution is recorded like the daemon's own events.
func (d *Daemon) newApprovals(rs *repos.Set, rec *records.Store) (*approval.Manager, error) {
	reload := func(ctx context.Context) error {
		if d.sched == nil {
			return nil
		}
		return d.sched.Reload(ctx)
	}
	m, err := approval.New(approval.Config{
		DB: d.db, Delay: d.cfg.Approvals.delay(), Clock: d.clk,
		Executors: map[string]approval.Executor{
			approval.KindDeletePoint:      approval.DeletePoint(rs),
			approval.KindShortenRetention: approval.ShortenRetention(rec, reload),
			// d.app exists once New is done, before Run executes anything.
			approval.KindRemoveRepository: approval.RemoveRepository(appRemover{d}),
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
