package copyjob

// The API's copy jobs: the store and runner behind web.CopyJobs.

import (
	"context"
	"time"

	"github.com/vmvault/vmvault/web/api"
)

// API implements web.CopyJobs. The API's types mirror
// copyjob's field for field, so they convert.
type API struct {
	store  *Store
	runner *Runner
	repos  Repos
	known  func(string) bool
}

// NewAPI returns the API over store and runner; repos lists the
// repositories' points (the dashboard's offsite copies) and known says
// whether a repository name exists (validation of a job's source and
// target).
func NewAPI(store *Store, runner *Runner, repos Repos, known func(string) bool) *API {
	return &API{store: store, runner: runner, repos: repos, known: known}
}

func (s *API) view(ctx context.Context, j Job) (api.CopyJobView, error) {
	v := api.CopyJobView{CopyJob: api.CopyJob(j)}
	if p, ok := s.runner.Progress(j.ID); ok {
		wp := api.CopyProgress(p)
		v.Running = &wp
	}
	runs, err := s.store.Runs(ctx, j.ID, 1)
	if err != nil {
		return v, err
	}
	if len(runs) == 1 {
		r := api.CopyRun(runs[0])
		v.LastRun = &r
	}
	return v, nil
}

func (s *API) CopyJobs(ctx context.Context) ([]api.CopyJobView, error) {
	jobs, err := s.store.Jobs(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]api.CopyJobView, 0, len(jobs))
	for _, j := range jobs {
		v, err := s.view(ctx, j)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (s *API) CopyJob(ctx context.Context, id string) (api.CopyJobView, error) {
	j, err := s.store.Job(ctx, id)
	if err != nil {
		return api.CopyJobView{}, err
	}
	return s.view(ctx, j)
}

func (s *API) PutCopyJob(ctx context.Context, j api.CopyJob) error {
	cj := Job(j)
	if err := cj.Validate(s.known); err != nil {
		return err
	}
	if err := s.store.PutJob(ctx, cj); err != nil {
		return err
	}
	s.runner.SetLimit(cj)
	s.runner.Reload()
	return nil
}

func (s *API) DeleteCopyJob(ctx context.Context, id string) error {
	if _, err := s.store.Job(ctx, id); err != nil {
		return err
	}
	s.runner.Deleted(id)
	if err := s.store.DeleteJob(ctx, id); err != nil {
		return err
	}
	s.runner.Reload()
	return nil
}

func (s *API) RunCopyJob(ctx context.Context, id string) (string, error) {
	return s.runner.RunNow(ctx, id)
}

func (s *API) CopyRuns(ctx context.Context, id string, limit int) ([]api.CopyRun, error) {
	if _, err := s.store.Job(ctx, id); err != nil {
		return nil, err
	}
	runs, err := s.store.Runs(ctx, id, limit)
	if err != nil {
		return nil, err
	}
	out := make([]api.CopyRun, len(runs))
	for i, r := range runs {
		out[i] = api.CopyRun(r)
	}
	return out, nil
}

func (s *API) OffsiteCopies(ctx context.Context) (map[string]time.Time, error) {
	jobs, err := s.store.Jobs(ctx)
	if err != nil {
		return nil, err
	}
	return OffsiteCopies(ctx, jobs, s.repos)
}
