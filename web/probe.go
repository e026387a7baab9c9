package web

import (
	"context"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/vmvault/vmvault/internal/task"
	"github.com/vmvault/vmvault/web/api"
)

// TransportProber answers which transports (HotAdd, network, NFC) can
// read a VM's disks (service/backups implements it).
type TransportProber interface {
	ProbeTransports(ctx context.Context, vm string, rep Reporter) (*api.TransportProbeResult, error)
}

// startProbe: POST /transport-probes, a task (it snapshots the VM).
func (s *Server) startProbe(c *gin.Context) (any, error) {
	var req api.TransportProbeRequest
	if err := decodeStrict(c, &req); err != nil {
		return nil, err
	}
	if req.VM == "" || len(req.VM) > 128 {
		return nil, invalid("vm", "a VM instance UUID")
	}
	if j := s.judge(c); j != nil && !j.allowsVM(api.VMRef{InstanceUUID: req.VM}) {
		return nil, invalid("vm", "no VM %s in the inventory", req.VM)
	}
	if s.cfg.Prober == nil {
		return nil, fmt.Errorf("transport probes: no vCenter connection on this daemon: %w", ErrNotImplemented)
	}
	noteAudit(c, req.VM, req.VM, "", "")
	info, err := s.startTask(c, "transport-probe", req.VM, func(ctx context.Context, rep *task.Reporter) (any, error) {
		res, err := s.cfg.Prober.ProbeTransports(ctx, req.VM, rep)
		if res == nil {
			return nil, err
		}
		return res, err
	})
	if err != nil {
		return nil, err
	}
	return withStatus(http.StatusAccepted, info), nil
}
