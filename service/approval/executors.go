package approval

import (
	"context"
	"errors"
	"fmt"

	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/web/api"
)

// PointDeleter deletes restore points (repos.Set).
type PointDeleter interface {
	Delete(ctx context.Context, id string) error
}

// RepositoryRemover detaches repositories from the appliance (the daemon).
type RepositoryRemover interface {
	RemoveRepository(ctx context.Context, name string) (api.RemovedRepository, error)
}

// JobStore reads and saves jobs (records.Store).
type JobStore interface {
	Job(ctx context.Context, id string) (policy.Job, error)
	PutJob(ctx context.Context, j policy.Job) error
}

// DeletePoint executes delete-point actions: the point's time lock or lock,
// set while the action waited, still refuses it.
func DeletePoint(p PointDeleter) Executor {
	return func(ctx context.Context, a api.Approval) error { return p.Delete(ctx, a.Subject) }
}

// RemoveRepository executes remove-repository actions: the remover checks
// again what it checks at the request (no job uses the repository, no
// operation runs on it), since either may have changed while the action
// waited. A repository already gone fails harmlessly (not found).
func RemoveRepository(r RepositoryRemover) Executor {
	return func(ctx context.Context, a api.Approval) error {
		_, err := r.RemoveRepository(ctx, a.Subject)
		return err
	}
}

// ShortenRetention executes shorten-retention actions: the job as it is
// now gets the retention that was asked for (other changes made since
// stay); reload, if set, tells the scheduler.
func ShortenRetention(jobs JobStore, reload func(ctx context.Context) error) Executor {
	return func(ctx context.Context, a api.Approval) error {
		if a.Retention == nil {
			return errors.New("the action names no retention")
		}
		j, err := jobs.Job(ctx, a.Subject)
		if err != nil {
			return fmt.Errorf("job %s: %w", a.Subject, err)
		}
		if err := a.Retention.Validate(); err != nil {
			return fmt.Errorf("job %s: %w", a.Subject, err)
		}
		j.Retention = *a.Retention
		if err := jobs.PutJob(ctx, j); err != nil {
			return fmt.Errorf("save job %s: %w", a.Subject, err)
		}
		if reload != nil {
			// The job is saved; the scheduler reads it at its next reload.
			_ = reload(ctx)
		}
		return nil
	}
}

// The kinds, as api names them.
const (
	KindDeletePoint      = api.ApprovalDeletePoint
	KindShortenRetention = api.ApprovalShortenRetention
	KindRemoveRepository = api.ApprovalRemoveRepository
)
