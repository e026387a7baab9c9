package records

import (
	"context"
	"errors"

	"github.com/vmvault/vmvault/internal/state"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/web/api"
)

// Store serves the records of a state database the caller owns.
type Store struct{ db *state.DB }

// New returns a Store over db.
func New(db *state.DB) *Store { return &Store{db: db} }

// kind marks state's not-found error with api's.
func kind(err error) error {
	if errors.Is(err, state.ErrNotFound) {
		return api.Kind(err, api.ErrNotFound)
	}
	return err
}

// Jobs returns every job.
func (s *Store) Jobs(ctx context.Context) ([]policy.Job, error) {
	js, err := s.db.Jobs(ctx)
	return js, kind(err)
}

// Job returns one job; an unknown id matches api.ErrNotFound.
func (s *Store) Job(ctx context.Context, id string) (policy.Job, error) {
	j, err := s.db.Job(ctx, id)
	return j, kind(err)
}

// PutJob creates or replaces a job.
func (s *Store) PutJob(ctx context.Context, j policy.Job) error { return kind(s.db.PutJob(ctx, j)) }

// DeleteJob deletes a job; an unknown id matches api.ErrNotFound.
func (s *Store) DeleteJob(ctx context.Context, id string) error { return kind(s.db.DeleteJob(ctx, id)) }

// Runs returns up to limit runs of a job, newest first.
func (s *Store) Runs(ctx context.Context, job string, limit int) ([]policy.JobRun, error) {
	rs, err := s.db.Runs(ctx, job, limit)
	return rs, kind(err)
}

// Events returns the events q selects, oldest first.
func (s *Store) Events(ctx context.Context, q api.EventQuery) ([]policy.Event, error) {
	evs, err := s.db.Events(ctx, state.EventQuery(q))
	return evs, kind(err)
}

// AddEvent records an event (web records audit events, downloads and
// login lockouts through it).
func (s *Store) AddEvent(ctx context.Context, e policy.Event) error { return s.db.AddEvent(ctx, e) }

// VMStates returns each VM's last attempt and success per job.
func (s *Store) VMStates(ctx context.Context) ([]policy.VMState, error) { return s.db.VMStates(ctx) }
