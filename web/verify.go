package web

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/gin-gonic/gin"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/internal/task"
	"github.com/vmvault/vmvault/web/api"
)

// Verification: POST /restore-points/{id}/verify.

// Verifier verifies restore points (service/verification implements it).
type Verifier interface {
	// CanBoot says whether boot mode is available (instant recovery and
	// a vCenter are configured).
	CanBoot() bool
	Verify(ctx context.Context, point string, req api.VerifyRequest, by string, rep Reporter) (*api.Verification, error)
}

// verifyRole: a walk reads the point like file-level restore does, which
// restore-only may; a boot starts a VM in vCenter, which needs an operator.
func verifyRole(req api.VerifyRequest) (auth.Role, string) {
	if req.Mode == "boot" || req.Mode == "both" {
		return auth.RoleOperator, "a boot verification runs a VM in vCenter"
	}
	return auth.RoleRestoreOnly, ""
}

func checkVerifyRequest(req api.VerifyRequest) error {
	booting := req.Mode == "boot" || req.Mode == "both"
	switch {
	case req.Mode != "" && req.Mode != "walk" && !booting:
		return invalid("mode", "want walk, boot or both")
	case req.TimeoutSeconds < 0 || req.TimeoutSeconds > 86400:
		return invalid("timeoutSeconds", "0 (default 600) to 86400")
	case req.ProbeTimeoutSeconds < 0 || req.ProbeTimeoutSeconds > 86400:
		return invalid("probeTimeoutSeconds", "0 (default 120) to 86400")
	case len(req.Ports) > 64:
		return invalid("ports", "at most 64")
	}
	if !booting {
		for field, set := range map[string]bool{"ports": len(req.Ports) > 0, "url": req.URL != "", "network": req.Network != ""} {
			if set {
				return invalid(field, "probes a booted VM: use mode boot or both")
			}
		}
	}
	seen := map[int]bool{}
	for _, p := range req.Ports {
		if p < 1 || p > 65535 || seen[p] {
			return invalid("ports", "each port once, 1 to 65535 (%d)", p)
		}
		seen[p] = true
	}
	if req.URL != "" {
		u, err := url.Parse(req.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			return invalid("url", "want http(s)://ANY-HOST[:PORT]/PATH (the host is replaced by the guest's address)")
		}
	}
	return nil
}

func (s *Server) verifyPoint(c *gin.Context) (any, error) {
	id, err := pointID(c)
	if err != nil {
		return nil, err
	}
	var req api.VerifyRequest
	if err := decodeStrict(c, &req); err != nil {
		return nil, err
	}
	mode := req.Mode
	if mode == "" {
		mode = "walk"
	}
	noteAudit(c, id, "", "", "verify mode="+mode)
	s.auditPoint(c, id)
	if s.cfg.Verifier == nil {
		return nil, fmt.Errorf("verification is not configured on this daemon: %w", ErrNotImplemented)
	}
	if err := checkVerifyRequest(req); err != nil {
		return nil, err
	}
	// The route lets restore-only in; the mode decides the rest.
	if need, why := verifyRole(req); !principal(c).Role.Allows(need) {
		return nil, forbidden(need, principal(c).Role, why)
	}
	if mode != "walk" && !s.cfg.Verifier.CanBoot() {
		return nil, fmt.Errorf("boot verification needs instant recovery (the instant section) and a vCenter; mode walk works without: %w", ErrNotImplemented)
	}
	rp, err := s.cfg.Points.Point(c.Request.Context(), id)
	if err != nil {
		return nil, err
	}
	by := principal(c).User
	info, err := s.startTask(c, "verify", rp.ID, func(ctx context.Context, rep *task.Reporter) (any, error) {
		v, err := s.cfg.Verifier.Verify(ctx, rp.ID, req, by, rep)
		if v == nil {
			return nil, err
		}
		return v, err
	})
	if err != nil {
		return nil, err
	}
	return withStatus(http.StatusAccepted, info), nil
}
