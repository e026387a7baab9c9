package daemon

// Copy jobs: package copyjob's store and runner behind the API's
// web.CopyJobs, and the daily report's copy runs.

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/vmvault/vmvault/service/copyjob"
	"github.com/vmvault/vmvault/service/notify"
	"github.com/vmvault/vmvault/web"
)

// copyJobService implements web.CopyJobs. The API's types mirror
// copyjob's field for field, so they convert.
type copyJobService struct {
	store  *copyjob.Store
	runner *copyjob.Runner
	repos  copyjob.Repos
	known  func(string) bool
}

var _ web.CopyJobs = (*copyJobService)(nil)

func (s *copyJobService) view(ctx context.Context, j copyjob.Job) (web.CopyJobView, error) {
	v := web.CopyJobView{CopyJob: web.CopyJob(j)}
	if p, ok := s.runner.Progress(j.ID); ok {
		wp := web.CopyProgress(p)
		v.Running = &wp
	}
	runs, err := s.store.Runs(ctx, j.ID, 1)
	if err != nil {
		return v, err
	}
	if len(runs) == 1 {
		r := web.CopyRun(runs[0])
		v.LastRun = &r
	}
	return v, nil
}

func (s *copyJobService) CopyJobs(ctx context.Context) ([]web.CopyJobView, error) {
	jobs, err := s.store.Jobs(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]web.CopyJobView, 0, len(jobs))
	for _, j := range jobs {
		v, err := s.view(ctx, j)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (s *copyJobService) CopyJob(ctx context.Context, id string) (web.CopyJobView, error) {
	j, err := s.store.Job(ctx, id)
	if err != nil {
		return web.CopyJobView{}, err
	}
	return s.view(ctx, j)
}

func (s *copyJobService) PutCopyJob(ctx context.Context, j web.CopyJob) error {
	cj := copyjob.Job(j)
	if err := cj.Validate(s.known); err != nil {
		return err
	}
	if err := s.store.PutJob(ctx, cj); err != nil {
		return err
	}
	s.runner.Reload()
	return nil
}

func (s *copyJobService) DeleteCopyJob(ctx context.Context, id string) error {
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

func (s *copyJobService) RunCopyJob(ctx context.Context, id string) (string, error) {
	return s.runner.RunNow(ctx, id)
}

func (s *copyJobService) CopyRuns(ctx context.Context, id string, limit int) ([]web.CopyRun, error) {
	if _, err := s.store.Job(ctx, id); err != nil {
		return nil, err
	}
	runs, err := s.store.Runs(ctx, id, limit)
	if err != nil {
		return nil, err
	}
	out := make([]web.CopyRun, len(runs))
	for i, r := range runs {
		out[i] = web.CopyRun(r)
	}
	return out, nil
}

func (s *copyJobService) OffsiteCopies(ctx context.Context) (map[string]time.Time, error) {
	jobs, err := s.store.Jobs(ctx)
	if err != nil {
		return nil, err
	}
	return copyjob.OffsiteCopies(ctx, jobs, s.repos)
}

// CopyRuns implements notify.CopySource for the daily report.
func (s *notifySource) CopyRuns(ctx context.Context, from, to time.Time) ([]notify.CopyRun, error) {
	if s.copies == nil {
		return nil, nil
	}
	jobs, err := s.copies.Jobs(ctx)
	if err != nil {
		return nil, err
	}
	byID := map[string]copyjob.Job{}
	for _, j := range jobs {
		byID[j.ID] = j
	}
	runs, err := s.copies.RunsSince(ctx, from)
	if err != nil {
		return nil, fmt.Errorf("copy runs: %w", err)
	}
	var out []notify.CopyRun
	for _, r := range runs {
		if !r.Start.Before(to) {
			continue
		}
		j := byID[r.Job]
		out = append(out, notify.CopyRun{Job: r.Job, Name: cmp.Or(j.Name, r.Job), Source: j.Source, Target: j.Target, State: r.State,
			Start: r.Start, End: r.End, PointsCopied: r.PointsCopied, PointsRemoved: r.PointsRemoved, BytesSent: r.BytesSent, Error: r.Error})
	}
	return out, nil
}
