package web

import (
	"context"
	"net/http"

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
