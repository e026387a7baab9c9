package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/web/api"
)

// Jobs: /jobs, a job's run now and its runs.

// JobStore keeps jobs; records.Store implements it over the state
// database. Job and DeleteJob return an error matching api.ErrNotFound for
// an unknown id.
type JobStore interface {
	Jobs(ctx context.Context) ([]policy.Job, error)
	Job(ctx context.Context, id string) (policy.Job, error)
	PutJob(ctx context.Context, j policy.Job) error
	DeleteJob(ctx context.Context, id string) error
}

// Scheduler is the part of policy.Scheduler the API drives.
type Scheduler interface {
	// RunNow starts a run of the job outside its window and returns the run id.
	RunNow(ctx context.Context, job string) (string, error)
	// Reload re-reads jobs after one was saved or deleted.
	Reload(ctx context.Context) error
}

// RunLog reads job runs; records.Store implements it.
type RunLog interface {
	// Runs returns up to limit runs of a job, newest first.
	Runs(ctx context.Context, job string, limit int) ([]policy.JobRun, error)
}

type jobResponse struct {
	Job      policy.Job `json:"job"`
	Warnings []string   `json:"warnings,omitempty"`
}

func (s *Server) listJobs(c *gin.Context) (any, error) {
	jobs, err := s.cfg.Jobs.Jobs(c.Request.Context())
	if err != nil {
		return nil, err
	}
	if jobs == nil {
		jobs = []policy.Job{}
	}
	return jobs, nil
}

func (s *Server) getJob(c *gin.Context) (any, error) {
	id, err := pathID(c)
	if err != nil {
		return nil, err
	}
	return s.cfg.Jobs.Job(c.Request.Context(), id)
}

func (s *Server) validateJob(ctx context.Context, j policy.Job) ([]string, error) {
	known := s.cfg.KnownRepository
	if known == nil {
		repos, err := s.cfg.Repositories.Repositories(ctx)
		if err != nil {
			return nil, err
		}
		known = func(name string) bool {
			for _, r := range repos {
				if r.Name == name {
					return true
				}
			}
			return false
		}
	}
	return j.Validate(ctx, policy.ValidateEnv{KnownRepository: known, Inventory: s.cfg.Inventory})
}

func (s *Server) saveJob(c *gin.Context, j policy.Job, status int) (any, error) {
	return s.saveJobFrom(c, nil, j, status)
}

// saveJobFrom saves j over prev (nil: a new job) and tells the audit event
// which job it was and, for a change, which fields the stored job changed.
func (s *Server) saveJobFrom(c *gin.Context, prev *policy.Job, j policy.Job, status int) (any, error) {
	ctx := c.Request.Context()
	noteObject(c, "job", j.ID, j.Name)
	warnings, err := s.validateJob(ctx, j)
	if err != nil {
		return nil, err
	}
	if err := s.cfg.Jobs.PutJob(ctx, j); err != nil {
		return nil, err
	}
	if prev != nil {
		after := j
		if stored, err := s.cfg.Jobs.Job(ctx, j.ID); err == nil {
			after = stored // as kept, defaults and all
		}
		noteChanges(c, *prev, after, nil)
	}
	s.reload(ctx)
	return withStatus(status, jobResponse{Job: j, Warnings: warnings}), nil
}

func (s *Server) reload(ctx context.Context) {
	if s.cfg.Scheduler == nil {
		return
	}
	if err := s.cfg.Scheduler.Reload(ctx); err != nil {
		// The job is saved; the scheduler picks it up at its next reload or restart.
		s.cfg.Logger.Warn("scheduler reload after a job change failed", "err", err)
	}
}

func (s *Server) createJob(c *gin.Context) (any, error) {
	var j policy.Job
	if err := decodeStrict(c, &j); err != nil {
		return nil, err
	}
	if j.ID != "" {
		if _, err := s.cfg.Jobs.Job(c.Request.Context(), j.ID); err == nil {
			return nil, &apiError{status: http.StatusConflict, code: "conflict", msg: fmt.Sprintf("job %q exists; use PUT to change it", j.ID)}
		} else if !errors.Is(err, ErrNotFound) {
			return nil, err
		}
	}
	return s.saveJob(c, j, http.StatusCreated)
}

func (s *Server) putJob(c *gin.Context) (any, error) {
	id, err := pathID(c)
	if err != nil {
		return nil, err
	}
	var j policy.Job
	if err := decodeStrict(c, &j); err != nil {
		return nil, err
	}
	if j.ID == "" {
		j.ID = id
	}
	if j.ID != id {
		return nil, invalid("id", "must match the path (%q)", id)
	}
	prev, err := s.cfg.Jobs.Job(c.Request.Context(), id)
	if err != nil {
		return nil, err
	}
	noteObject(c, "job", id, prev.Name)
	// A change held for approval records what it asks for; a saved one
	// what the stored job became (saveJobFrom).
	noteChanges(c, prev, j, nil)
	if res, held, err := s.holdShorterRetention(c, prev, j); held { // approvals.go: a delay is configured
		return res, err
	}
	return s.saveJobFrom(c, &prev, j, http.StatusOK)
}

func (s *Server) deleteJob(c *gin.Context) (any, error) {
	id, err := pathID(c)
	if err != nil {
		return nil, err
	}
	if prev, err := s.cfg.Jobs.Job(c.Request.Context(), id); err == nil {
		noteObject(c, "job", id, prev.Name)
	} else {
		noteObject(c, "job", id, "")
	}
	if err := s.cfg.Jobs.DeleteJob(c.Request.Context(), id); err != nil {
		return nil, err
	}
	s.reload(c.Request.Context())
	return withStatus(http.StatusNoContent, nil), nil
}

func (s *Server) runJob(c *gin.Context) (any, error) {
	id, err := pathID(c)
	if err != nil {
		return nil, err
	}
	if s.cfg.Scheduler == nil {
		return nil, fmt.Errorf("run job %s: the scheduler is not running: %w", id, ErrUnavailable)
	}
	j, err := s.cfg.Jobs.Job(c.Request.Context(), id)
	if err != nil {
		return nil, err
	}
	noteObject(c, "job", id, j.Name)
	run, err := s.cfg.Scheduler.RunNow(c.Request.Context(), id)
	if err != nil {
		return nil, err
	}
	return withStatus(http.StatusAccepted, gin.H{"run": run}), nil
}

// RunVM is one VM's outcome in a job run.
type RunVM struct {
	VM           string    `json:"vm"` // the VM's name
	InstanceUUID string    `json:"instanceUuid"`
	MoRef        string    `json:"moref,omitempty"`
	State        string    `json:"state"` // pending, running, succeeded, failed, cancelled, interrupted, not-run
	RestorePoint string    `json:"restorePoint"`
	Error        string    `json:"error"`
	BytesRead    int64     `json:"bytesRead"`
	NewBytes     int64     `json:"newBytes"` // stored after deduplication and compression
	Attempts     int       `json:"attempts"`
	Started      time.Time `json:"started,omitzero"`
	Finished     time.Time `json:"finished,omitzero"`
}

// JobRunView is one run of a job as GET /jobs/{id}/runs shows it.
type JobRunView struct {
	ID       string     `json:"id"`
	Job      string     `json:"job"`
	Started  time.Time  `json:"started"`
	Finished *time.Time `json:"finished"` // null while running
	// State: running, succeeded, partial (some VMs failed), failed,
	// cancelled, missed, interrupted (the appliance stopped under it).
	State   string `json:"state"`
	Trigger string `json:"trigger"`          // "window", "manual", "resume" or "missed"
	Window  string `json:"window,omitempty"` // the window occurrence's id (its opening, RFC 3339)
	// ResumeOf is the interrupted run this one resumes; ResumedBy the run
	// that resumed this interrupted one.
	ResumeOf  string `json:"resumeOf,omitempty"`
	ResumedBy string `json:"resumedBy,omitempty"`
	// SlotCloses is, for a scheduled run still open, when its part of the
	// window (its slot) closes: the run stays open until then even when
	// every VM is done, retrying failed ones, and the job's next run
	// starts at the next slot. Absent for manual and finished runs.
	SlotCloses *time.Time `json:"slotCloses,omitempty"`
	VMs        []RunVM    `json:"vms"`
}

func runView(r policy.JobRun) JobRunView {
	v := JobRunView{ID: r.ID, Job: r.Job, Started: r.Start, Window: r.WindowID, Trigger: "window", ResumeOf: r.ResumeOf, ResumedBy: r.ResumedBy,
		VMs: make([]RunVM, 0, len(r.VMs))}
	switch {
	case r.Missed:
		v.Trigger = "missed"
	case r.Manual:
		v.Trigger = "manual"
	case r.ResumeOf != "":
		v.Trigger = "resume"
	}
	if !r.End.IsZero() {
		end := r.End
		v.Finished = &end
	}
	ok, bad, cancelled := 0, 0, 0
	for _, o := range r.VMs {
		v.VMs = append(v.VMs, RunVM{VM: o.Name, InstanceUUID: o.VM, MoRef: o.MoRef, State: string(o.Status), RestorePoint: o.Point,
			Error: o.Error, BytesRead: o.Bytes, NewBytes: o.Stored, Attempts: o.Attempts, Started: o.Start, Finished: o.End})
		switch o.Status {
		case policy.OutcomeSucceeded:
			ok++
		case policy.OutcomeCancelled:
			cancelled++
		default:
			bad++
		}
	}
	switch {
	case r.Missed:
		v.State = "missed"
	case r.End.IsZero():
		v.State = "running"
	case r.Interrupted:
		v.State = "interrupted"
	case bad+cancelled == 0:
		v.State = "succeeded"
	case ok > 0:
		v.State = "partial"
	case bad == 0:
		v.State = "cancelled"
	default:
		v.State = "failed"
	}
	return v
}

func (s *Server) jobRuns(c *gin.Context) (any, error) {
	ctx := c.Request.Context()
	id, err := pathID(c)
	if err != nil {
		return nil, err
	}
	limit, err := queryLimit(c, 50, 1000)
	if err != nil {
		return nil, err
	}
	job, err := s.cfg.Jobs.Job(ctx, id)
	if err != nil {
		return nil, err
	}
	if s.cfg.Runs == nil {
		return []JobRunView{}, nil
	}
	runs, err := s.cfg.Runs.Runs(ctx, id, limit)
	if err != nil {
		return nil, err
	}
	out := make([]JobRunView, len(runs))
	jd := s.judge(c)
	for i, r := range runs {
		if jd != nil {
			// A scoped caller sees the outcomes of the VMs its scope allows.
			var vms []policy.VMOutcome
			for _, o := range r.VMs {
				if jd.allowsRepository(job.Repository) && jd.allowsVM(api.VMRef{InstanceUUID: o.VM, Name: o.Name, MoRef: o.MoRef}) {
					vms = append(vms, o)
				}
			}
			r.VMs = vms
		}
		out[i] = runView(r)
		out[i].SlotCloses = slotCloses(job, r)
	}
	return out, nil
}

// slotCloses returns when the slot of an open scheduled run closes, or nil
// (a manual, missed or finished run, or a window changed since the run
// started so that its slot no longer exists).
func slotCloses(j policy.Job, r policy.JobRun) *time.Time {
	if !r.End.IsZero() || r.Manual || r.Missed || r.WindowID == "" {
		return nil
	}
	open, err := time.Parse(time.RFC3339, r.WindowID)
	if err != nil {
		return nil
	}
	slot, ok := j.Slot(open)
	if !ok || slot.ID() != r.WindowID {
		return nil
	}
	c := slot.Close
	return &c
}
