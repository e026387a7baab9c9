package verifyjob

// The API's verification jobs: the store and runner behind
// web.VerificationJobs.

import (
	"context"

	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/service/verification"
	"github.com/vmvault/vmvault/web/api"
)

// API implements web.VerificationJobs.
type API struct {
	Store  *Store
	Runner *Runner
	// CanBoot says whether boot mode is available (Manager.CanBoot); a
	// boot job is refused without it, since it could never pass.
	CanBoot func() bool
}

func (a API) view(j Job) (api.VerificationJobView, error) {
	v := api.VerificationJobView{VerificationJob: j}
	if r, ok := a.Runner.Running(j.ID); ok {
		v.Running = &r
	}
	runs, err := a.Store.Runs(j.ID, 1)
	if err != nil {
		return v, err
	}
	if len(runs) == 1 && runs[0].State != RunRunning {
		v.LastRun = &runs[0]
	}
	return v, nil
}

func (a API) VerificationJobs(ctx context.Context) ([]api.VerificationJobView, error) {
	jobs, err := a.Store.Jobs()
	if err != nil && len(jobs) == 0 {
		return nil, err
	}
	out := make([]api.VerificationJobView, 0, len(jobs))
	for _, j := range jobs {
		v, err := a.view(j)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (a API) VerificationJob(ctx context.Context, id string) (api.VerificationJobView, error) {
	j, err := a.Store.Job(id)
	if err != nil {
		return api.VerificationJobView{}, err
	}
	return a.view(j)
}

// errBootUnavailable is the mode field's error when boot mode cannot run.
var errBootUnavailable = &policy.ValidationError{Field: "mode", Msg: "boot verification needs instant recovery (the instant section) and a vCenter", Err: verification.ErrBootUnavailable}

func (a API) PutVerificationJob(ctx context.Context, j api.VerificationJob) error {
	if err := Validate(j); err != nil {
		return err
	}
	if m := modeOf(j); m != verification.ModeWalk && a.CanBoot != nil && !a.CanBoot() {
		return errBootUnavailable
	}
	if err := a.Store.Put(j); err != nil {
		return err
	}
	a.Runner.Reload()
	return nil
}

func (a API) DeleteVerificationJob(ctx context.Context, id string) error {
	if err := a.Store.Delete(id); err != nil {
		return err
	}
	a.Runner.Deleted(id)
	a.Runner.Reload()
	return nil
}

func (a API) RunVerificationJob(ctx context.Context, id string) (string, error) {
	return a.Runner.RunNow(ctx, id)
}
