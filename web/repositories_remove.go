package web

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/vmvault/vmvault/web/api"
)

// DELETE /repositories/{id}: detach a repository from the appliance. Its
// data is never deleted: the files (or the bucket's objects) stay and POST
// /repositories with mode open brings it back.

// RepositoryRemover detaches repositories added at runtime (the daemon).
type RepositoryRemover interface {
	// CanRemove answers what RemoveRepository would refuse now (409
	// naming the jobs, copy jobs or running operations that use it, or
	// saying it comes from the configuration file; 404), so a delayed
	// removal is refused at the request rather than when it falls due.
	CanRemove(ctx context.Context, name string) error
	// RemoveRepository checks again and detaches it: it is forgotten by
	// the appliance's state and closed once the calls reading it end.
	RemoveRepository(ctx context.Context, name string) (api.RemovedRepository, error)
}

// holdRepositoryRemoval is DELETE /repositories/{id} with a delay
// configured: 202 with the pending action. held is false when the removal
// should happen now.
func (s *Server) holdRepositoryRemoval(c *gin.Context, name string) (res any, held bool, err error) {
	if !s.delayed() {
		return nil, false, nil
	}
	ctx := c.Request.Context()
	path := ""
	if list, err := s.cfg.Repositories.Repositories(ctx); err == nil {
		for _, ri := range list {
			if ri.Name == name {
				path = ri.Path
			}
		}
	}
	where := ""
	if path != "" {
		where = " (" + path + ")"
	}
	a, err := s.cfg.Approvals.Request(ctx, ApprovalRequest{Kind: api.ApprovalRemoveRepository, Subject: name, Repository: name,
		Summary:     fmt.Sprintf("remove repository %s%s from the appliance; its data is kept and can be opened again", name, where),
		RequestedBy: principal(c).User})
	if err != nil {
		return nil, true, err
	}
	s.auditRequested(c, a)
	return withStatus(http.StatusAccepted, a), true, nil
}

func (s *Server) removeRepository(c *gin.Context) (any, error) {
	id, err := pathID(c)
	if err != nil {
		return nil, err
	}
	noteAudit(c, id, "", id, "")
	noteObject(c, "repository", id, "")
	if s.cfg.RemoveRepository == nil {
		return nil, &apiError{status: http.StatusNotImplemented, code: "not_implemented", msg: "this appliance cannot remove repositories at runtime"}
	}
	ctx := c.Request.Context()
	if err := s.cfg.RemoveRepository.CanRemove(ctx, id); err != nil {
		return nil, err
	}
	if res, held, err := s.holdRepositoryRemoval(c, id); held {
		return res, err
	}
	// The removal waits for the calls reading the repository; a caller
	// that hangs up must not leave it detached but open.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Minute)
	defer cancel()
	res, err := s.cfg.RemoveRepository.RemoveRepository(rctx, id)
	if err != nil {
		return nil, err
	}
	noteAudit(c, "", "", "", "data kept at "+res.Path)
	return res, nil
}
