package feed

import (
	"context"
	"fmt"
	"strings"

	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/notify"
	"github.com/vmvault/vmvault/service/repos"
	"github.com/vmvault/vmvault/web/api"
)

// The services the wrappers alert for: web's Backups, Restores and
// Repositories, as feed needs them (it must not import web).
type (
	// Backups is web.Backups.
	Backups interface {
		Backup(ctx context.Context, req api.BackupRequest, rep api.Reporter) ([]api.BackupOutcome, error)
	}
	// Restores is web.Restores.
	Restores interface {
		Restore(ctx context.Context, req api.RestoreRequest, rep api.Reporter) (*api.RestoreResult, error)
		RestoreDisk(ctx context.Context, req api.DiskRestoreRequest, rep api.Reporter) (*api.RestoreResult, error)
	}
	// Repositories is web.Repositories.
	Repositories interface {
		Repositories(ctx context.Context) ([]api.RepositoryInfo, error)
		Repository(ctx context.Context, name string) (api.RepositoryInfo, error)
		Check(ctx context.Context, name string, full bool, rep api.Reporter) (any, error)
		Reclaim(ctx context.Context, name string, rep api.Reporter) (any, error)
	}
)

// AlertingBackups alerts on the failed VMs of POST /backups (the
// scheduler's own backups alert through its events).
type AlertingBackups struct {
	Backups
	Alerter Alerter
}

func (a AlertingBackups) Backup(ctx context.Context, req api.BackupRequest, rep api.Reporter) ([]api.BackupOutcome, error) {
	res, err := a.Backups.Backup(ctx, req, rep)
	outs := res
	for _, o := range outs {
		if o.Error == "" && o.RestorePoint != "" { // backed up: ends the VM's streak
			a.Alerter.Succeeded(notify.Failure{Operation: "backup", Job: req.Job, VM: outcomeLabel(o)})
		}
	}
	if err == nil || ctx.Err() != nil {
		return res, err // a cancelled backup is not a failure to alert on
	}
	listed := false
	for _, o := range outs {
		if o.Error == "" {
			continue
		}
		a.Alerter.Fail(notify.Failure{Operation: "backup", Job: req.Job, VM: outcomeLabel(o), Repository: req.Repository, Message: o.Error})
		listed = true
	}
	if !listed {
		a.Alerter.Fail(notify.Failure{Operation: "backup", Job: req.Job, VM: strings.Join(req.VMs, ", "), Repository: req.Repository, Message: err.Error()})
	}
	return res, err
}

// outcomeLabel names the VM as alerts do: its name, else its id.
func outcomeLabel(o api.BackupOutcome) string {
	if o.Name != "" {
		return o.Name
	}
	return o.VM
}

// AlertingRestores alerts on failed restores.
type AlertingRestores struct {
	Restores
	Alerter Alerter
	Repos   *repos.Set
}

func (a AlertingRestores) fail(ctx context.Context, point, what string, err error) {
	f := notify.Failure{Operation: "restore", Message: what + " from restore point " + point + ": " + err.Error()}
	if p, perr := a.Repos.Point(context.WithoutCancel(ctx), point); perr == nil {
		f.VM, f.Repository = p.VM.Name, p.Repository
	}
	a.Alerter.Fail(f)
}

// succeeded ends the VM's restore streak.
func (a AlertingRestores) succeeded(ctx context.Context, point string) {
	if p, err := a.Repos.Point(context.WithoutCancel(ctx), point); err == nil {
		a.Alerter.Succeeded(notify.Failure{Operation: "restore", VM: p.VM.Name, Repository: p.Repository})
	}
}

func (a AlertingRestores) Restore(ctx context.Context, req api.RestoreRequest, rep api.Reporter) (*api.RestoreResult, error) {
	res, err := a.Restores.Restore(ctx, req, rep)
	switch {
	case err == nil:
		a.succeeded(ctx, req.Point)
	case ctx.Err() == nil:
		a.fail(ctx, req.Point, "restore ("+req.Mode+")", err)
	}
	return res, err
}

func (a AlertingRestores) RestoreDisk(ctx context.Context, req api.DiskRestoreRequest, rep api.Reporter) (*api.RestoreResult, error) {
	res, err := a.Restores.RestoreDisk(ctx, req, rep)
	switch {
	case err == nil:
		a.succeeded(ctx, req.Point)
	case ctx.Err() == nil:
		a.fail(ctx, req.Point, fmt.Sprintf("disk %d restore", req.Disk), err)
	}
	return res, err
}

// AlertingRepositories alerts when a check started through the API fails
// or finds damage.
type AlertingRepositories struct {
	Inner   Repositories
	Alerter Alerter
}

func (a AlertingRepositories) Repositories(ctx context.Context) ([]api.RepositoryInfo, error) {
	return a.Inner.Repositories(ctx)
}

func (a AlertingRepositories) Repository(ctx context.Context, name string) (api.RepositoryInfo, error) {
	return a.Inner.Repository(ctx, name)
}

func (a AlertingRepositories) Reclaim(ctx context.Context, name string, rep api.Reporter) (any, error) {
	return a.Inner.Reclaim(ctx, name, rep)
}

func (a AlertingRepositories) Check(ctx context.Context, name string, full bool, rep api.Reporter) (any, error) {
	res, err := a.Inner.Check(ctx, name, full, rep)
	switch {
	case err != nil && ctx.Err() == nil:
		a.Alerter.Fail(notify.Failure{Operation: "check", Repository: name, Message: err.Error()})
	case err == nil:
		r, ok := res.(*repository.CheckReport)
		if !ok || len(r.Problems) == 0 {
			a.Alerter.Succeeded(notify.Failure{Operation: "check", Repository: name})
		}
		if ok && len(r.Problems) > 0 {
			msg := fmt.Sprintf("check found %d problems", len(r.Problems))
			for i, p := range r.Problems {
				if i == 5 {
					msg += "; ..."
					break
				}
				msg += "; " + p.String()
			}
			a.Alerter.Fail(notify.Failure{Operation: "check", Repository: name, Message: msg})
		}
	}
	return res, err
}
