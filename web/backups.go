package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/vmvault/vmvault/internal/task"
	"github.com/vmvault/vmvault/web/api"
)

// Backups: POST /backups.

// The backup types are api's, shared with the service that fills them.
type (
	BackupRequest = api.BackupRequest
	BackupOutcome = api.BackupOutcome
)

// Backups backs up VMs now; the backup engine implements it (cmd wires it).
// Backup runs inside a task: it honours ctx and reports through rep.
type Backups interface {
	// Backup returns one outcome per requested VM, also when it fails
	// part way (the outcomes so far).
	Backup(ctx context.Context, req BackupRequest, rep Reporter) ([]BackupOutcome, error)
}

func (s *Server) startBackup(c *gin.Context) (any, error) {
	var req BackupRequest
	if err := decodeStrict(c, &req); err != nil {
		return nil, err
	}
	if len(req.VMs) == 0 {
		return nil, invalid("vms", "at least one VM instance UUID")
	}
	for i, v := range req.VMs {
		if v == "" || len(v) > 128 {
			return nil, invalid(fmt.Sprintf("vms[%d]", i), "bad instance UUID")
		}
	}
	// A scoped caller backs up only VMs its scope allows, into a
	// repository it allows (named, when its scope lists repositories).
	if j := s.judge(c); j != nil {
		for i, v := range req.VMs {
			if !j.allowsVM(api.VMRef{InstanceUUID: v}) {
				return nil, invalid(fmt.Sprintf("vms[%d]", i), "no VM %s in the inventory", v)
			}
		}
		if !j.allowsRepository(req.Repository) {
			if req.Repository == "" {
				return nil, invalid("repository", "name the repository: your scope limits repositories")
			}
			return nil, invalid("repository", "unknown repository %q", req.Repository)
		}
	}
	if req.Repository != "" {
		if err := s.repoExists(c.Request.Context(), req.Repository); err != nil {
			if errors.Is(err, ErrNotFound) {
				return nil, invalid("repository", "unknown repository %q", req.Repository)
			}
			return nil, err
		}
	}
	if s.cfg.Backups == nil {
		return nil, fmt.Errorf("backups through the API: the backup engine is not wired into this daemon yet: %w", ErrNotImplemented)
	}
	noteAudit(c, strings.Join(req.VMs, ", "), req.VMs[0], req.Repository, "")
	info, err := s.startTask(c, "backup", strings.Join(req.VMs, ","), func(ctx context.Context, rep *task.Reporter) (any, error) {
		outs, err := s.cfg.Backups.Backup(ctx, req, rep)
		if outs == nil {
			return nil, err
		}
		return outs, err
	})
	if err != nil {
		return nil, err
	}
	return withStatus(http.StatusAccepted, info), nil
}
