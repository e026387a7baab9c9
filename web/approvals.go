package web

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/web/api"
)

// Immutability: time locks of restore points and destructive actions that
// wait for a delay or a second administrator (/approvals). The handlers of
// restore_points.go and jobs.go call in here at one line each.

// The pending-action types are api's, shared with package approval.
type (
	Approval        = api.Approval
	ApprovalRequest = api.ApprovalRequest
)

// Approvals holds destructive actions for a delay (package approval
// implements it). With Delay 0 the actions run at once, as before.
type Approvals interface {
	Delay() time.Duration
	Request(ctx context.Context, r ApprovalRequest) (Approval, error)
	List(ctx context.Context, status string) ([]Approval, error)
	Get(ctx context.Context, id string) (Approval, error)
	// Approve executes a pending action at once; the error is
	// auth.ErrForbidden for the administrator who asked for it.
	Approve(ctx context.Context, id, user string) (Approval, error)
	Cancel(ctx context.Context, id, user string) (Approval, error)
}

// TimeLocker sets time locks (repos.Set implements it beside Points).
type TimeLocker interface {
	LockUntil(ctx context.Context, id string, until time.Time) error
}

// MaxTimeLock is how far ahead a time lock may reach: nothing can shorten
// or remove one, so a mistyped year must not hold a point for a century.
const MaxTimeLock = 10 * 366 * 24 * time.Hour

// delayed reports whether destructive actions wait for approval.
func (s *Server) delayed() bool { return s.cfg.Approvals != nil && s.cfg.Approvals.Delay() > 0 }

// lockBody is POST /restore-points/{id}/lock's optional body.
type lockBody struct {
	Until string `json:"until"`
}

// lockPointUntil is POST /restore-points/{id}/lock: a plain lock without a
// body (or without until), a time lock with until (administrators only:
// nobody can take it back).
func (s *Server) lockPointUntil(c *gin.Context) (any, error) {
	raw, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, MaxBodyBytes))
	if err != nil {
		return nil, decodeError(err)
	}
	var body lockBody
	if len(bytes.TrimSpace(raw)) > 0 {
		c.Request.Body = io.NopCloser(bytes.NewReader(raw))
		if err := decodeStrict(c, &body); err != nil {
			return nil, err
		}
	}
	if body.Until == "" {
		return s.setLocked(c, true)
	}
	id, err := pointID(c)
	if err != nil {
		return nil, err
	}
	until, err := time.Parse(time.RFC3339, body.Until)
	if err != nil {
		return nil, badRequest("until", "not an RFC 3339 date-time (e.g. 2027-06-30T00:00:00Z): %q", body.Until)
	}
	now := s.now()
	switch {
	case !until.After(now.Add(time.Minute)):
		return nil, invalid("until", "must be in the future (now is %s)", now.UTC().Format(time.RFC3339))
	case until.After(now.Add(MaxTimeLock)):
		return nil, invalid("until", "at most ten years ahead: a time lock cannot be shortened or removed")
	}
	if p := principal(c); !p.Role.Allows(auth.RoleAdministrator) {
		return nil, forbidden(auth.RoleAdministrator, p.Role, "a time lock (until) cannot be undone")
	}
	tl, ok := s.cfg.Points.(TimeLocker)
	if !ok {
		return nil, fmt.Errorf("time locks: %w", ErrNotImplemented)
	}
	s.auditPoint(c, id)
	noteAudit(c, "", "", "", "until "+until.UTC().Format(time.RFC3339))
	if err := tl.LockUntil(c.Request.Context(), id, until); err != nil {
		return nil, err
	}
	return s.cfg.Points.Point(c.Request.Context(), id)
}

// holdPointDelete is DELETE /restore-points/{id} with a delay configured:
// 202 with the pending action instead of the deletion. held is false when
// the deletion should happen now (no delay).
func (s *Server) holdPointDelete(c *gin.Context, id string) (res any, held bool, err error) {
	if !s.delayed() {
		return nil, false, nil
	}
	ctx := c.Request.Context()
	p, err := s.cfg.Points.Point(ctx, id)
	if err != nil {
		return nil, true, err
	}
	// A locked point would only fail when due: say so now.
	if p.Locked {
		msg := fmt.Sprintf("restore point %s is locked: unlock it first", p.ID)
		if !p.LockedUntil.IsZero() {
			msg = fmt.Sprintf("restore point %s is locked until %s (time lock): no role can delete it before then", p.ID, p.LockedUntil.UTC().Format(time.RFC3339))
		}
		return nil, true, api.Kind(errors.New(msg), ErrPointLocked)
	}
	a, err := s.cfg.Approvals.Request(ctx, ApprovalRequest{Kind: api.ApprovalDeletePoint, Subject: p.ID, Repository: p.Repository,
		Summary:     fmt.Sprintf("delete restore point %s (VM %s, %s)", p.ID, p.VM.Name, p.Time.UTC().Format("2006-01-02 15:04:05 UTC")),
		RequestedBy: principal(c).User})
	if err != nil {
		return nil, true, err
	}
	s.auditRequested(c, a)
	return withStatus(http.StatusAccepted, a), true, nil
}

// pendingJobResponse is PUT /jobs/{id}'s 202: the job as saved now (its
// old retention kept) and the action that will shorten the retention.
type pendingJobResponse struct {
	Job      policy.Job `json:"job"`
	Warnings []string   `json:"warnings,omitempty"`
	Approval Approval   `json:"approval"`
}

// holdShorterRetention is PUT /jobs/{id} with a delay configured and a
// retention that keeps fewer points: the rest of the change is saved now,
// the retention waits (202). held is false when the job saves as usual.
func (s *Server) holdShorterRetention(c *gin.Context, prev, next policy.Job) (res any, held bool, err error) {
	if !s.delayed() {
		return nil, false, nil
	}
	fewer := shortened(prev.Retention, next.Retention)
	if len(fewer) == 0 {
		return nil, false, nil
	}
	ctx := c.Request.Context()
	warnings, err := s.validateJob(ctx, next)
	if err != nil {
		return nil, true, err
	}
	want := next.Retention
	now := next
	now.Retention = prev.Retention
	a, err := s.cfg.Approvals.Request(ctx, ApprovalRequest{Kind: api.ApprovalShortenRetention, Subject: next.ID, Repository: next.Repository,
		Retention: &want, Summary: fmt.Sprintf("shorten the retention of job %s (%s)", next.ID, strings.Join(fewer, ", ")),
		RequestedBy: principal(c).User})
	if err != nil {
		return nil, true, err
	}
	if err := s.cfg.Jobs.PutJob(ctx, now); err != nil {
		return nil, true, err
	}
	s.reload(ctx)
	s.auditRequested(c, a)
	return withStatus(http.StatusAccepted, pendingJobResponse{Job: now, Warnings: warnings, Approval: a}), true, nil
}

// shortened lists the rules of a retention that keep fewer points under
// next than under prev ("last 7 -> 3"): a non-empty answer makes a job
// change destructive (points the old retention keeps get removed). Each
// count is compared on its own: a rule that keeps more cannot make up for
// one that keeps fewer, because the rules select different points (the
// newest seven are not the monthly ones). The preset name is only a label.
func shortened(prev, next policy.Retention) []string {
	var out []string
	for _, r := range []struct {
		name      string
		old, next int
	}{
		{"last", prev.Last, next.Last}, {"daily", prev.Daily, next.Daily}, {"weekly", prev.Weekly, next.Weekly},
		{"monthly", prev.Monthly, next.Monthly}, {"quarterly", prev.Quarterly, next.Quarterly}, {"yearly", prev.Yearly, next.Yearly},
	} {
		if r.next < r.old {
			out = append(out, fmt.Sprintf("%s %d -> %d", r.name, r.old, r.next))
		}
	}
	return out
}

// auditRequested turns the request's audit event into approval.request.
func (s *Server) auditRequested(c *gin.Context, a Approval) {
	if au := auditOf(c); au != nil {
		au.kind = "approval.request"
		au.subject = a.ID
		au.detail = fmt.Sprintf("%s, effective %s unless approved or cancelled", a.Summary, a.EffectiveAt.UTC().Format(time.RFC3339))
	}
}

func (s *Server) approvals() (Approvals, error) {
	if s.cfg.Approvals == nil {
		return nil, fmt.Errorf("approvals: %w", ErrNotImplemented)
	}
	return s.cfg.Approvals, nil
}

var approvalStatuses = map[string]bool{api.ApprovalPending: true, api.ApprovalExecuting: true, api.ApprovalExecuted: true, api.ApprovalCancelled: true, api.ApprovalFailed: true}

func (s *Server) listApprovals(c *gin.Context) (any, error) {
	status := c.Query("status")
	if status != "" && !approvalStatuses[status] {
		return nil, badRequest("status", "one of pending, executing, executed, cancelled, failed")
	}
	if s.cfg.Approvals == nil {
		return []Approval{}, nil // no delay configured: nothing ever waits
	}
	ctx := c.Request.Context()
	as, err := s.cfg.Approvals.List(ctx, status)
	if err != nil {
		return nil, err
	}
	j := s.judge(c)
	if j == nil {
		return as, nil
	}
	kept := []Approval{}
	for _, a := range as {
		if a.Repository != "" && !j.allowsRepository(a.Repository) {
			continue
		}
		switch a.Kind {
		case api.ApprovalDeletePoint:
			if rp, err := s.cfg.Points.Point(ctx, a.Subject); err != nil || !j.allowsPoint(rp) {
				continue // a point outside the scope, or gone: not shown
			}
		case api.ApprovalRemoveRepository:
			if !j.allowsRepository(a.Subject) {
				continue
			}
		}
		kept = append(kept, a)
	}
	return kept, nil
}

func approvalID(c *gin.Context) (string, error) {
	id := c.Param("id")
	if len(id) != 16 || strings.Trim(id, "0123456789abcdef") != "" {
		return "", &apiError{status: http.StatusNotFound, code: "not_found", msg: fmt.Sprintf("approval %q not found", id)}
	}
	return id, nil
}

func (s *Server) decideApproval(c *gin.Context, approve bool) (any, error) {
	ap, err := s.approvals()
	if err != nil {
		return nil, err
	}
	id, err := approvalID(c)
	if err != nil {
		return nil, err
	}
	ctx := c.Request.Context()
	if a, err := ap.Get(ctx, id); err == nil {
		noteAudit(c, "", "", a.Repository, a.Summary)
	}
	user := principal(c).User
	if approve {
		return ap.Approve(ctx, id, user)
	}
	return ap.Cancel(ctx, id, user)
}

func (s *Server) approveAction(c *gin.Context) (any, error) { return s.decideApproval(c, true) }

func (s *Server) cancelAction(c *gin.Context) (any, error) { return s.decideApproval(c, false) }
