package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/internal/task"
	"github.com/vmvault/vmvault/web/api"
)

// Restores: POST /restores and /restores/disk.

// The restore types are api's, shared with the service that fills them.
type (
	RestoreRequest     = api.RestoreRequest
	DiskRestoreRequest = api.DiskRestoreRequest
	RestoreResult      = api.RestoreResult
	RestoredDisk       = api.RestoredDisk
)

// Restores restores VMs and disks; the restore engine implements it.
type Restores interface {
	Restore(ctx context.Context, req RestoreRequest, rep Reporter) (*RestoreResult, error)
	RestoreDisk(ctx context.Context, req DiskRestoreRequest, rep Reporter) (*RestoreResult, error)
}

// checkPointField checks the point a restore names: it exists and the
// caller's scope allows it (a point outside the scope answers exactly as
// one that does not exist).
func (s *Server) checkPointField(c *gin.Context, id string) error {
	if len(id) < 8 || len(id) > 64 || strings.Trim(strings.ToLower(id), "0123456789abcdef") != "" {
		return invalid("point", "a restore point id is 8 to 64 hex digits")
	}
	rp, err := s.cfg.Points.Point(c.Request.Context(), id)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return invalid("point", "no restore point %s", id)
		}
		return err
	}
	if !s.judge(c).allowsPoint(rp) {
		return invalid("point", "no restore point %s", id)
	}
	return nil
}

// restoreRole is the least role a VM restore needs, and why. Roles apply
// per action, not per route: restore-only may create VMs (a new one, a
// rehearsal), but overwriting the original VM or powering an existing VM
// off destroys or interrupts production, which needs an operator. The
// OpenAPI document states the same rules (x-role-rules of POST /restores);
// TestRoleMatrix checks the two agree.
func restoreRole(req RestoreRequest) (auth.Role, string) {
	switch {
	case req.Mode == "original":
		return auth.RoleOperator, "mode original overwrites the original VM"
	case req.PowerOff:
		return auth.RoleOperator, "powerOff powers an existing VM off"
	}
	return auth.RoleRestoreOnly, ""
}

func (s *Server) startRestore(c *gin.Context) (any, error) {
	var req RestoreRequest
	if err := decodeStrict(c, &req); err != nil {
		return nil, err
	}
	noteAudit(c, req.Point, "", "", "mode "+req.Mode)
	s.auditPoint(c, req.Point)
	switch req.Mode {
	case "new", "rehearsal", "original":
	default:
		return nil, invalid("mode", "new, original or rehearsal")
	}
	// The route lets restore-only in; what the request does decides the rest.
	if need, why := restoreRole(req); !principal(c).Role.Allows(need) {
		return nil, forbidden(need, principal(c).Role, why)
	}
	if req.PowerOff && req.Mode != "original" {
		return nil, invalid("powerOff", "only with mode original (it powers the original VM off before overwriting it)")
	}
	placements := 0
	for _, v := range []string{req.Cluster, req.ResourcePool, req.Host} {
		if v != "" {
			placements++
		}
	}
	if placements > 1 {
		return nil, invalid("host", "give at most one of cluster, resourcePool and host")
	}
	if err := s.checkPointField(c, req.Point); err != nil {
		return nil, err
	}
	// A caller whose scope lists folders creates VMs only inside them.
	if p := principal(c); req.Mode != "original" && !p.AllowsFolder(req.Folder) {
		if req.Folder == "" {
			return nil, invalid("folder", "name the VM folder: your scope limits VMs to some folders")
		}
		return nil, invalid("folder", "%s is outside your scope's folders", req.Folder)
	}
	return s.startRestoreTask(c, "restore", "restores", req.Point, func(ctx context.Context, rep *task.Reporter) (*RestoreResult, error) {
		return s.cfg.Restores.Restore(ctx, req, rep)
	})
}

// startRestoreTask runs a restore of point as a task of kind, answering 202
// with the task (501, naming what, without a restore engine).
func (s *Server) startRestoreTask(c *gin.Context, kind, what, point string, run func(context.Context, *task.Reporter) (*RestoreResult, error)) (any, error) {
	if s.cfg.Restores == nil {
		return nil, fmt.Errorf("%s through the API: the restore engine is not wired into this daemon yet: %w", what, ErrNotImplemented)
	}
	info, err := s.startTask(c, kind, point, func(ctx context.Context, rep *task.Reporter) (any, error) {
		res, err := run(ctx, rep)
		if res == nil {
			return nil, err // a typed nil would be recorded as "result": null
		}
		return res, err
	})
	if err != nil {
		return nil, err
	}
	return withStatus(http.StatusAccepted, info), nil
}

func (s *Server) startDiskRestore(c *gin.Context) (any, error) {
	var req DiskRestoreRequest
	if err := decodeStrict(c, &req); err != nil {
		return nil, err
	}
	noteAudit(c, req.Point, "", "", "to VM "+req.TargetVM)
	s.auditPoint(c, req.Point)
	if req.TargetVM == "" {
		return nil, invalid("targetVm", "required")
	}
	if err := s.checkPointField(c, req.Point); err != nil {
		return nil, err
	}
	// A scoped caller attaches disks only to VMs its scope allows.
	if j := s.judge(c); j != nil && !j.allowsVM(api.VMRef{InstanceUUID: req.TargetVM}) {
		return nil, invalid("targetVm", "no VM %s in the inventory", req.TargetVM)
	}
	return s.startRestoreTask(c, "restore-disk", "disk restores", req.Point, func(ctx context.Context, rep *task.Reporter) (*RestoreResult, error) {
		return s.cfg.Restores.RestoreDisk(ctx, req, rep)
	})
}
