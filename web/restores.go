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
)

// Restores: POST /restores and /restores/disk.

// RestoreRequest is the body of POST /restores.
type RestoreRequest struct {
	Point        string            `json:"point"`
	Mode         string            `json:"mode"`           // "new", "original" or "rehearsal"
	Name         string            `json:"name,omitempty"` // the new VM's name (mode new)
	Datacenter   string            `json:"datacenter,omitempty"`
	Folder       string            `json:"folder,omitempty"` // VM folder inventory path
	Cluster      string            `json:"cluster,omitempty"`
	ResourcePool string            `json:"resourcePool,omitempty"`
	Host         string            `json:"host,omitempty"` // at most one of cluster, resourcePool and host
	Datastore    string            `json:"datastore,omitempty"`
	Networks     map[string]string `json:"networks,omitempty"` // backed-up network -> target network
	Thin         bool              `json:"thin,omitempty"`
	PowerOn      bool              `json:"powerOn,omitempty"`
	PowerOff     bool              `json:"powerOff,omitempty"` // mode original: power the VM off first
}

// DiskRestoreRequest is the body of POST /restores/disk.
type DiskRestoreRequest struct {
	Point     string `json:"point"`
	Disk      int32  `json:"disk"`     // the disk's key in the restore point (RestorePoint.Disks[].Key)
	TargetVM  string `json:"targetVm"` // instance UUID of the VM to attach it to
	Datastore string `json:"datastore,omitempty"`
	Thin      bool   `json:"thin,omitempty"`
}

// Restores restores VMs and disks; the restore engine implements it.
type Restores interface {
	Restore(ctx context.Context, req RestoreRequest, rep Reporter) (*RestoreResult, error)
	RestoreDisk(ctx context.Context, req DiskRestoreRequest, rep Reporter) (*RestoreResult, error)
}

// RestoreResult is the result of a restore or restore-disk task.
type RestoreResult struct {
	Mode           string         `json:"mode"` // new, rehearsal, overwrite, attach
	RestorePoint   string         `json:"restorePoint"`
	VM             VMRef          `json:"vm"` // the VM restored, or the one the disk was attached to
	PoweredOn      bool           `json:"poweredOn"`
	Disks          []RestoredDisk `json:"disks"`
	BytesWritten   int64          `json:"bytesWritten"`
	Seconds        float64        `json:"seconds"`
	BytesPerSecond float64        `json:"bytesPerSecond"`
	Warnings       []string       `json:"warnings,omitempty"`
	RemoveCommand  string         `json:"removeCommand,omitempty"` // rehearsals: how to remove the VM
}

// RestoredDisk says what a restore wrote for one disk.
type RestoredDisk struct {
	Index        int     `json:"index"` // disk index in the restore point
	SourceKey    int32   `json:"sourceKey"`
	TargetKey    int32   `json:"targetKey,omitempty"`
	Label        string  `json:"label,omitempty"`
	Capacity     int64   `json:"capacity"`
	BytesWritten int64   `json:"bytesWritten"`
	SHA256       string  `json:"sha256"` // of the whole disk as restored
	Seconds      float64 `json:"seconds"`
	Target       string  `json:"target,omitempty"`
}

func (s *Server) checkPointField(ctx context.Context, id string) error {
	if len(id) < 8 || len(id) > 64 || strings.Trim(strings.ToLower(id), "0123456789abcdef") != "" {
		return invalid("point", "a restore point id is 8 to 64 hex digits")
	}
	if _, err := s.cfg.Points.Point(ctx, id); err != nil {
		if errors.Is(err, ErrNotFound) {
			return invalid("point", "no restore point %s", id)
		}
		return err
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
	if err := s.checkPointField(c.Request.Context(), req.Point); err != nil {
		return nil, err
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
	if err := s.checkPointField(c.Request.Context(), req.Point); err != nil {
		return nil, err
	}
	return s.startRestoreTask(c, "restore-disk", "disk restores", req.Point, func(ctx context.Context, rep *task.Reporter) (*RestoreResult, error) {
		return s.cfg.Restores.RestoreDisk(ctx, req, rep)
	})
}
