package web

import (
	"context"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/vmvault/vmvault/web/api"
)

// Restore points: /restore-points (list, search, detail, lock, delete).

// The restore point types are api's, shared with the services that fill them.
type (
	RestorePoint    = api.RestorePoint
	PointConfig     = api.PointConfig
	PointNIC        = api.PointNIC
	PointConfigDisk = api.PointConfigDisk
	VMRef           = api.VMRef
	PointDisk       = api.PointDisk
	PointFilter     = api.PointFilter
)

// Points lists and changes restore points across the appliance's repositories.
type Points interface {
	Points(ctx context.Context, f PointFilter) ([]RestorePoint, error)
	Point(ctx context.Context, id string) (RestorePoint, error)
	SetLocked(ctx context.Context, id string, locked bool) error
	Delete(ctx context.Context, id string) error
}

func (s *Server) listPoints(c *gin.Context) (any, error) {
	f := PointFilter{VM: c.Query("vm"), Repository: c.Query("repository"), Job: c.Query("job")}
	var err error
	if f.From, err = parseTimeParam(c, "from"); err != nil {
		return nil, err
	}
	if f.To, err = parseTimeParam(c, "to"); err != nil {
		return nil, err
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
		return nil, badRequest("to", "the end must be after the start (from)")
	}
	search := strings.ToLower(strings.TrimSpace(c.Query("q")))
	if len(search) > 256 {
		return nil, badRequest("q", "at most 256 bytes")
	}
	pts, err := s.cfg.Points.Points(c.Request.Context(), f)
	if err != nil {
		return nil, err
	}
	out := []RestorePoint{}
	for _, p := range pts {
		if search == "" || pointMatches(p, search) {
			out = append(out, p)
		}
	}
	return out, nil
}

// pointMatches is the search of GET /restore-points?q=: a point whose id
// starts with q, or whose VM's name, instance UUID or job contains it
// (q in lower case).
func pointMatches(p RestorePoint, q string) bool {
	return strings.HasPrefix(p.ID, q) ||
		strings.Contains(strings.ToLower(p.VM.Name), q) ||
		strings.HasPrefix(strings.ToLower(p.VM.InstanceUUID), q) ||
		strings.Contains(strings.ToLower(p.Job), q)
}

func (s *Server) getPoint(c *gin.Context) (any, error) {
	id, err := pointID(c)
	if err != nil {
		return nil, err
	}
	return s.cfg.Points.Point(c.Request.Context(), id)
}

func (s *Server) setLocked(c *gin.Context, locked bool) (any, error) {
	id, err := pointID(c)
	if err != nil {
		return nil, err
	}
	s.auditPoint(c, id)
	if err := s.cfg.Points.SetLocked(c.Request.Context(), id, locked); err != nil {
		return nil, err
	}
	return s.cfg.Points.Point(c.Request.Context(), id)
}

func (s *Server) lockPoint(c *gin.Context) (any, error) { return s.lockPointUntil(c) } // approvals.go

func (s *Server) unlockPoint(c *gin.Context) (any, error) { return s.setLocked(c, false) }

func (s *Server) deletePoint(c *gin.Context) (any, error) {
	id, err := pointID(c)
	if err != nil {
		return nil, err
	}
	s.auditPoint(c, id)
	if res, held, err := s.holdPointDelete(c, id); held { // approvals.go: a delay is configured
		return res, err
	}
	if err := s.cfg.Points.Delete(c.Request.Context(), id); err != nil {
		return nil, err
	}
	return withStatus(http.StatusNoContent, nil), nil
}
