package web

import (
	"context"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/internal/task"
	"github.com/vmvault/vmvault/web/api"
)

// Instant recoveries: GET/POST /instant-recoveries, GET /{id},
// POST /{id}/migrate and /{id}/stop.

// InstantRecoveries runs instant VM recovery sessions
// (service/instantvm implements it).
type InstantRecoveries interface {
	List(ctx context.Context) ([]api.InstantRecovery, error)
	Get(ctx context.Context, id string) (api.InstantRecovery, error)
	Start(ctx context.Context, req api.InstantRecoveryRequest, by string, rep Reporter) (*api.InstantRecovery, error)
	Migrate(ctx context.Context, id, datastore string, rep Reporter) (*api.InstantRecovery, error)
	Stop(ctx context.Context, id string, rep Reporter) (*api.InstantRecovery, error)
}

func (s *Server) instant() (InstantRecoveries, error) {
	if s.cfg.Instant == nil {
		return nil, fmt.Errorf("instant recovery: the daemon has no NFS export configured (instant.listen) or no vCenter: %w", ErrNotImplemented)
	}
	return s.cfg.Instant, nil
}

// visibleSession answers a session outside the caller's scope as one that
// does not exist.
func (s *Server) visibleSession(c *gin.Context, ir api.InstantRecovery) bool {
	p := principal(c)
	if !p.Scoped() {
		return true
	}
	rp, err := s.cfg.Points.Point(c.Request.Context(), ir.Point)
	return err == nil && s.judge(c).allowsPoint(rp)
}

func (s *Server) listInstant(c *gin.Context) (any, error) {
	in, err := s.instant()
	if err != nil {
		return nil, err
	}
	all, err := in.List(c.Request.Context())
	if err != nil {
		return nil, err
	}
	out := []api.InstantRecovery{}
	for _, ir := range all {
		if s.visibleSession(c, ir) {
			out = append(out, ir)
		}
	}
	return out, nil
}

func (s *Server) session(c *gin.Context) (InstantRecoveries, api.InstantRecovery, error) {
	in, err := s.instant()
	if err != nil {
		return nil, api.InstantRecovery{}, err
	}
	id := c.Param("id")
	ir, err := in.Get(c.Request.Context(), id)
	if err == nil && !s.visibleSession(c, ir) {
		err = fmt.Errorf("instant recovery %s: %w", id, ErrNotFound)
	}
	return in, ir, err
}

func (s *Server) getInstant(c *gin.Context) (any, error) {
	_, ir, err := s.session(c)
	if err != nil {
		return nil, err
	}
	return ir, nil
}

// instantRole: restore-only may run a point only into isolation (every
// NIC disconnected): a copy on the production network next to the
// original would clash with it, which needs an operator.
func instantRole(req api.InstantRecoveryRequest) (auth.Role, string) {
	if req.TargetVM != "" {
		return auth.RoleOperator, "attaching disks to an existing VM (targetVm) changes that VM"
	}
	if !req.Isolated {
		return auth.RoleOperator, "a VM on the network (isolated false) may clash with the original"
	}
	return auth.RoleRestoreOnly, ""
}

func (s *Server) startInstant(c *gin.Context) (any, error) {
	var req api.InstantRecoveryRequest
	if err := decodeStrict(c, &req); err != nil {
		return nil, err
	}
	noteAudit(c, req.Point, "", "", fmt.Sprintf("instant recovery isolated=%v", req.Isolated))
	s.auditPoint(c, req.Point)
	in, err := s.instant()
	if err != nil {
		return nil, err
	}
	if err := s.checkPointField(c, req.Point); err != nil {
		return nil, err
	}
	// The route lets restore-only in; what the request does decides the rest.
	if need, why := instantRole(req); !principal(c).Role.Allows(need) {
		return nil, forbidden(need, principal(c).Role, why)
	}
	if req.TargetVM != "" {
		if len(req.TargetVM) > 128 {
			return nil, invalid("targetVm", "bad instance UUID")
		}
		if j := s.judge(c); j != nil && !j.allowsVM(api.VMRef{InstanceUUID: req.TargetVM}) {
			return nil, invalid("targetVm", "no VM %s in the inventory", req.TargetVM)
		}
	}
	for i, d := range req.Disks {
		if d < 0 {
			return nil, invalid(fmt.Sprintf("disks[%d]", i), "a disk index of the point")
		}
	}
	if p := principal(c); !p.AllowsFolder(req.Folder) {
		if req.Folder == "" {
			return nil, invalid("folder", "name the VM folder: your scope limits VMs to some folders")
		}
		return nil, invalid("folder", "%s is outside your scope's folders", req.Folder)
	}
	by := principal(c).User
	info, err := s.startTask(c, "instant-recovery", req.Point, func(ctx context.Context, rep *task.Reporter) (any, error) {
		ir, err := in.Start(ctx, req, by, rep)
		if ir == nil {
			return nil, err
		}
		return ir, err
	})
	if err != nil {
		return nil, err
	}
	return withStatus(http.StatusAccepted, info), nil
}

func (s *Server) migrateInstant(c *gin.Context) (any, error) {
	var req api.InstantMigrateRequest
	if err := decodeStrict(c, &req); err != nil {
		return nil, err
	}
	if req.Datastore == "" {
		return nil, invalid("datastore", "required: the production datastore to move the VM to")
	}
	in, ir, err := s.session(c)
	if err != nil {
		return nil, err
	}
	noteAudit(c, ir.Point, "", "", "migrate instant recovery "+ir.ID+" to "+req.Datastore)
	return s.sessionTask(c, "instant-migrate", ir, func(ctx context.Context, rep *task.Reporter) (*api.InstantRecovery, error) {
		return in.Migrate(ctx, ir.ID, req.Datastore, rep)
	})
}

// sessionTask runs an action on a session as a task (202).
func (s *Server) sessionTask(c *gin.Context, kind string, ir api.InstantRecovery, run func(context.Context, *task.Reporter) (*api.InstantRecovery, error)) (any, error) {
	info, err := s.startTask(c, kind, ir.Point, func(ctx context.Context, rep *task.Reporter) (any, error) {
		out, err := run(ctx, rep)
		if out == nil {
			return nil, err
		}
		return out, err
	})
	if err != nil {
		return nil, err
	}
	return withStatus(http.StatusAccepted, info), nil
}

func (s *Server) stopInstant(c *gin.Context) (any, error) {
	in, ir, err := s.session(c)
	if err != nil {
		return nil, err
	}
	noteAudit(c, ir.Point, "", "", "stop instant recovery "+ir.ID)
	return s.sessionTask(c, "instant-stop", ir, func(ctx context.Context, rep *task.Reporter) (*api.InstantRecovery, error) {
		return in.Stop(ctx, ir.ID, rep)
	})
}
