package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/vmvault/vmvault/service/vmstatus"
	"github.com/vmvault/vmvault/web/api"
)

// Copy jobs: /copy-jobs, a copy job's run now and its runs, and the
// dashboard's offsite copies.

// The copy job types are api's, shared with the service that fills them.
type (
	CopyJob      = api.CopyJob
	CopyRun      = api.CopyRun
	CopyProgress = api.CopyProgress
	CopyJobView  = api.CopyJobView
)

// CopyJobs keeps and runs copy jobs (the daemon wires package copyjob).
// CopyJob, DeleteCopyJob, RunCopyJob and CopyRuns return an error matching
// ErrNotFound for an unknown id; PutCopyJob validates (policy's
// ValidationError for a bad field) and saves; RunCopyJob returns ErrBusy
// while the job copies.
type CopyJobs interface {
	CopyJobs(ctx context.Context) ([]CopyJobView, error)
	CopyJob(ctx context.Context, id string) (CopyJobView, error)
	PutCopyJob(ctx context.Context, j CopyJob) error
	DeleteCopyJob(ctx context.Context, id string) error
	RunCopyJob(ctx context.Context, id string) (string, error)
	CopyRuns(ctx context.Context, id string, limit int) ([]CopyRun, error)
	// OffsiteCopies returns, per VM (instance UUID and name), the time of
	// its newest restore point in the target of a copy job.
	OffsiteCopies(ctx context.Context) (map[string]time.Time, error)
}

func (s *Server) copyJobs() (CopyJobs, error) {
	if s.cfg.CopyJobs == nil {
		return nil, fmt.Errorf("copy jobs are not configured in this daemon: %w", ErrNotImplemented)
	}
	return s.cfg.CopyJobs, nil
}

func (s *Server) listCopyJobs(c *gin.Context) (any, error) {
	cj, err := s.copyJobs()
	if err != nil {
		return nil, err
	}
	jobs, err := cj.CopyJobs(c.Request.Context())
	if jobs == nil && err == nil {
		jobs = []CopyJobView{}
	}
	return jobs, err
}

func (s *Server) getCopyJob(c *gin.Context) (any, error) {
	cj, id, err := s.copyJobOf(c)
	if err != nil {
		return nil, err
	}
	return cj.CopyJob(c.Request.Context(), id)
}

func (s *Server) createCopyJob(c *gin.Context) (any, error) {
	cj, err := s.copyJobs()
	if err != nil {
		return nil, err
	}
	var j CopyJob
	if err := decodeStrict(c, &j); err != nil {
		return nil, err
	}
	ctx := c.Request.Context()
	noteObject(c, "copyjob", j.ID, j.Name)
	if j.ID != "" {
		if _, err := cj.CopyJob(ctx, j.ID); err == nil {
			return nil, &apiError{status: http.StatusConflict, code: "conflict", msg: fmt.Sprintf("copy job %q exists; use PUT to change it", j.ID)}
		} else if !errors.Is(err, ErrNotFound) {
			return nil, err
		}
	}
	if err := cj.PutCopyJob(ctx, j); err != nil {
		return nil, err
	}
	return withStatus(http.StatusCreated, j), nil
}

// copyJobOf returns the copy-job service and the id in the path.
func (s *Server) copyJobOf(c *gin.Context) (CopyJobs, string, error) {
	cj, err := s.copyJobs()
	if err != nil {
		return nil, "", err
	}
	id, err := pathID(c)
	if err != nil {
		return nil, "", err
	}
	return cj, id, nil
}

func (s *Server) putCopyJob(c *gin.Context) (any, error) {
	cj, id, err := s.copyJobOf(c)
	if err != nil {
		return nil, err
	}
	var j CopyJob
	if err := decodeStrict(c, &j); err != nil {
		return nil, err
	}
	if j.ID == "" {
		j.ID = id
	}
	if j.ID != id {
		return nil, invalid("id", "must match the path (%q)", id)
	}
	ctx := c.Request.Context()
	prev, err := cj.CopyJob(ctx, id)
	if err != nil {
		return nil, err
	}
	noteObject(c, "copyjob", id, j.Name)
	if err := cj.PutCopyJob(ctx, j); err != nil {
		return nil, err
	}
	after := j
	if stored, err := cj.CopyJob(ctx, id); err == nil {
		after = stored.CopyJob
	}
	noteChanges(c, prev.CopyJob, after, nil)
	return j, nil
}

func (s *Server) deleteCopyJob(c *gin.Context) (any, error) {
	cj, id, err := s.copyJobOf(c)
	if err != nil {
		return nil, err
	}
	s.noteCopyJob(c, cj, id)
	if err := cj.DeleteCopyJob(c.Request.Context(), id); err != nil {
		return nil, err
	}
	return withStatus(http.StatusNoContent, nil), nil
}

func (s *Server) runCopyJob(c *gin.Context) (any, error) {
	cj, id, err := s.copyJobOf(c)
	if err != nil {
		return nil, err
	}
	s.noteCopyJob(c, cj, id)
	run, err := cj.RunCopyJob(c.Request.Context(), id)
	if err != nil {
		return nil, err
	}
	return withStatus(http.StatusAccepted, gin.H{"run": run}), nil
}

func (s *Server) copyJobRuns(c *gin.Context) (any, error) {
	cj, id, err := s.copyJobOf(c)
	if err != nil {
		return nil, err
	}
	limit, err := queryLimit(c, 50, 1000)
	if err != nil {
		return nil, err
	}
	runs, err := cj.CopyRuns(c.Request.Context(), id, limit)
	if runs == nil && err == nil {
		runs = []CopyRun{}
	}
	return runs, err
}

// OffsiteWindow is how recent a VM's copy in a copy job's target must be to
// count on the dashboard.
const OffsiteWindow = 24 * time.Hour

// DashboardOffsite counts the protected VMs with a copy less than
// OffsiteWindow old in a copy job's target.
type DashboardOffsite struct {
	Protected int `json:"protected"` // the protected VMs (as in vms.protected)
	Copied    int `json:"copied"`    // of those, with a recent copy offsite
	// Missing names protected VMs without a recent copy (at most 20).
	Missing []string `json:"missing"`
}

// offsite is the dashboard's offsite section; nil without copy jobs.
func (s *Server) offsite(ctx context.Context, vms []vmstatus.Status, now time.Time) (*DashboardOffsite, error) {
	if s.cfg.CopyJobs == nil {
		return nil, nil
	}
	jobs, err := s.cfg.CopyJobs.CopyJobs(ctx)
	if err != nil || len(jobs) == 0 {
		return nil, err
	}
	copies, err := s.cfg.CopyJobs.OffsiteCopies(ctx)
	if err != nil {
		return nil, fmt.Errorf("offsite copies: %w", err)
	}
	o := &DashboardOffsite{Missing: []string{}}
	for _, v := range vms {
		if v.Failed() || !v.Protected() {
			continue
		}
		o.Protected++
		t, ok := copies[v.Key]
		if !ok {
			t = copies[v.Name]
		}
		if !t.IsZero() && now.Sub(t) < OffsiteWindow {
			o.Copied++
		} else if len(o.Missing) < 20 {
			o.Missing = append(o.Missing, v.Name)
		}
	}
	return o, nil
}

// noteCopyJob names the copy job id, with its name when it exists, in the
// request's audit event.
func (s *Server) noteCopyJob(c *gin.Context, cj CopyJobs, id string) {
	name := ""
	if j, err := cj.CopyJob(c.Request.Context(), id); err == nil {
		name = j.Name
	}
	noteObject(c, "copyjob", id, name)
}
