package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/vmvault/vmvault/web/api"
)

// Verification jobs: /verification-jobs and a job's run now.

// VerificationJobs keeps and runs verification jobs (the daemon wires
// package verifyjob). VerificationJob, DeleteVerificationJob and
// RunVerificationJob return an error matching ErrNotFound for an unknown
// id; PutVerificationJob validates (policy's ValidationError for a bad
// field) and saves; RunVerificationJob returns ErrBusy while the job runs.
type VerificationJobs interface {
	VerificationJobs(ctx context.Context) ([]api.VerificationJobView, error)
	VerificationJob(ctx context.Context, id string) (api.VerificationJobView, error)
	PutVerificationJob(ctx context.Context, j api.VerificationJob) error
	DeleteVerificationJob(ctx context.Context, id string) error
	RunVerificationJob(ctx context.Context, id string) (string, error)
}

func (s *Server) verificationJobs() (VerificationJobs, error) {
	if s.cfg.VerificationJobs == nil {
		return nil, fmt.Errorf("verification jobs are not configured in this daemon: %w", ErrNotImplemented)
	}
	return s.cfg.VerificationJobs, nil
}

// verificationJobOf returns the service and the id in the path.
func (s *Server) verificationJobOf(c *gin.Context) (VerificationJobs, string, error) {
	vj, err := s.verificationJobs()
	if err != nil {
		return nil, "", err
	}
	id, err := pathID(c)
	if err != nil {
		return nil, "", err
	}
	return vj, id, nil
}

func (s *Server) listVerificationJobs(c *gin.Context) (any, error) {
	vj, err := s.verificationJobs()
	if err != nil {
		return nil, err
	}
	jobs, err := vj.VerificationJobs(c.Request.Context())
	if jobs == nil && err == nil {
		jobs = []api.VerificationJobView{}
	}
	return jobs, err
}

func (s *Server) getVerificationJob(c *gin.Context) (any, error) {
	vj, id, err := s.verificationJobOf(c)
	if err != nil {
		return nil, err
	}
	return vj.VerificationJob(c.Request.Context(), id)
}

func (s *Server) createVerificationJob(c *gin.Context) (any, error) {
	vj, err := s.verificationJobs()
	if err != nil {
		return nil, err
	}
	var j api.VerificationJob
	if err := decodeStrict(c, &j); err != nil {
		return nil, err
	}
	ctx := c.Request.Context()
	noteObject(c, "verificationjob", j.ID, j.Name)
	if j.ID != "" {
		if _, err := vj.VerificationJob(ctx, j.ID); err == nil {
			return nil, &apiError{status: http.StatusConflict, code: "conflict", msg: fmt.Sprintf("verification job %q exists; use PUT to change it", j.ID)}
		} else if !errors.Is(err, ErrNotFound) {
			return nil, err
		}
	}
	if err := vj.PutVerificationJob(ctx, j); err != nil {
		return nil, err
	}
	return withStatus(http.StatusCreated, storedVerificationJob(ctx, vj, j)), nil
}

// storedVerificationJob is j as saved (defaults filled), j when it cannot
// be read back.
func storedVerificationJob(ctx context.Context, vj VerificationJobs, j api.VerificationJob) api.VerificationJob {
	if v, err := vj.VerificationJob(ctx, j.ID); err == nil {
		return v.VerificationJob
	}
	return j
}

func (s *Server) putVerificationJob(c *gin.Context) (any, error) {
	vj, id, err := s.verificationJobOf(c)
	if err != nil {
		return nil, err
	}
	var j api.VerificationJob
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
	prev, err := vj.VerificationJob(ctx, id)
	if err != nil {
		return nil, err
	}
	noteObject(c, "verificationjob", id, j.Name)
	if err := vj.PutVerificationJob(ctx, j); err != nil {
		return nil, err
	}
	after := storedVerificationJob(ctx, vj, j)
	noteChanges(c, prev.VerificationJob, after, nil)
	return after, nil
}

func (s *Server) deleteVerificationJob(c *gin.Context) (any, error) {
	vj, id, err := s.verificationJobOf(c)
	if err != nil {
		return nil, err
	}
	s.noteVerificationJob(c, vj, id)
	if err := vj.DeleteVerificationJob(c.Request.Context(), id); err != nil {
		return nil, err
	}
	return withStatus(http.StatusNoContent, nil), nil
}

func (s *Server) runVerificationJob(c *gin.Context) (any, error) {
	vj, id, err := s.verificationJobOf(c)
	if err != nil {
		return nil, err
	}
	s.noteVerificationJob(c, vj, id)
	run, err := vj.RunVerificationJob(c.Request.Context(), id)
	if err != nil {
		return nil, err
	}
	return withStatus(http.StatusAccepted, gin.H{"run": run}), nil
}

// noteVerificationJob names the job, with its name when it exists, in the
// request's audit event.
func (s *Server) noteVerificationJob(c *gin.Context, vj VerificationJobs, id string) {
	name := ""
	if j, err := vj.VerificationJob(c.Request.Context(), id); err == nil {
		name = j.Name
	}
	noteObject(c, "verificationjob", id, name)
}
