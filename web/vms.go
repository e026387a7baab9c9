package web

import (
	"context"
	"fmt"

	"github.com/gin-gonic/gin"

	"github.com/vmvault/vmvault/vmstatus"
)

// VMs: /vms, each VM with its protection status.

func vmKey(v VMRef) string {
	if v.InstanceUUID != "" {
		return v.InstanceUUID
	}
	return v.Name
}

// VMStatus is a VM with its protection status.
type VMStatus struct {
	InstanceUUID string        `json:"instanceUuid"`
	Name         string        `json:"name"`
	MoRef        string        `json:"moref,omitempty"`
	InInventory  bool          `json:"inInventory"`         // false: known only from restore points
	Jobs         []string      `json:"jobs"`                // jobs whose selection matches it
	Tags         []string      `json:"tags"`                // tag ids (GET /tags names them); empty when not in the inventory
	Protected    bool          `json:"protected"`           // has a complete restore point
	LastPoint    *RestorePoint `json:"lastPoint,omitempty"` // newest complete point
	Points       int           `json:"points"`
}

func (s *Server) listVMs(c *gin.Context) (any, error) {
	vms, _, err := s.vmStatuses(c.Request.Context(), true)
	return vms, err
}

// vmStatuses joins the inventory (when withInventory), the jobs, the
// restore points and the scheduler's VM states under vmstatus's rules (the
// daily report reads the same). When the inventory cannot be read it
// returns an error wrapping ErrUnavailable.
func (s *Server) vmStatuses(ctx context.Context, withInventory bool) ([]VMStatus, []vmstatus.Status, error) {
	in := vmstatus.Input{}
	if s.cfg.Inventory != nil && withInventory {
		var err error
		if in.Inventory, err = s.cfg.Inventory.VMs(ctx); err != nil {
			return nil, nil, fmt.Errorf("list inventory: %v: %w", err, ErrUnavailable)
		}
		in.HaveInventory = true
	}
	var err error
	if in.Jobs, err = s.cfg.Jobs.Jobs(ctx); err != nil {
		return nil, nil, err
	}
	pts, err := s.cfg.Points.Points(ctx, PointFilter{})
	if err != nil {
		return nil, nil, err
	}
	in.Points = make([]vmstatus.Point, len(pts))
	for i, p := range pts {
		in.Points[i] = vmstatus.Point{InstanceUUID: p.VM.InstanceUUID, Name: p.VM.Name, MoRef: p.VM.MoRef, Time: p.Time, Partial: p.Partial}
	}
	if s.cfg.VMStates != nil {
		if in.States, err = s.cfg.VMStates.VMStates(ctx); err != nil {
			return nil, nil, err
		}
	}
	sts := vmstatus.Compute(in)
	out := make([]VMStatus, 0, len(sts))
	for _, st := range sts {
		v := VMStatus{InstanceUUID: st.Key, Name: st.Name, MoRef: st.MoRef, InInventory: st.InInventory, Jobs: st.Jobs, Tags: st.Tags, Points: st.Points, Protected: st.Protected()}
		if st.LastPoint >= 0 {
			v.LastPoint = &pts[st.LastPoint]
		}
		out = append(out, v)
	}
	return out, sts, nil
}
