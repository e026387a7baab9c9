package web

import (
	"context"
	"fmt"

	"github.com/gin-gonic/gin"

	"github.com/vmvault/vmvault/policy"
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
	return s.vmStatuses(c.Request.Context(), true)
}

// vmStatuses joins the inventory (when withInventory) with the restore
// points. When the inventory cannot be read it returns an error wrapping
// ErrUnavailable.
func (s *Server) vmStatuses(ctx context.Context, withInventory bool) ([]VMStatus, error) {
	var inv []policy.VM
	if s.cfg.Inventory != nil && withInventory {
		var err error
		if inv, err = s.cfg.Inventory.VMs(ctx); err != nil {
			return nil, fmt.Errorf("list inventory: %v: %w", err, ErrUnavailable)
		}
	}
	jobs, err := s.cfg.Jobs.Jobs(ctx)
	if err != nil {
		return nil, err
	}
	pts, err := s.cfg.Points.Points(ctx, PointFilter{})
	if err != nil {
		return nil, err
	}
	byKey := map[string]*VMStatus{}
	var order []string
	add := func(v *VMStatus) {
		byKey[v.InstanceUUID] = v
		order = append(order, v.InstanceUUID)
	}
	// One compiled matcher per job, not a scan of its VM list per VM.
	matches := make([]func(policy.VM) bool, len(jobs))
	for i, j := range jobs {
		matches[i] = j.Selection.Matcher()
	}
	for _, vm := range inv {
		st := &VMStatus{InstanceUUID: vm.InstanceUUID, Name: vm.Name, MoRef: vm.MoRef, InInventory: true, Jobs: []string{}, Tags: append([]string{}, vm.Tags...)}
		for i, j := range jobs {
			if matches[i](vm) {
				st.Jobs = append(st.Jobs, j.ID)
			}
		}
		add(st)
	}
	for i := range pts { // newest first
		p := &pts[i]
		k := vmKey(p.VM)
		st, ok := byKey[k]
		if !ok {
			st = &VMStatus{InstanceUUID: k, Name: p.VM.Name, MoRef: p.VM.MoRef, Jobs: []string{}, Tags: []string{}}
			add(st)
		}
		st.Points++
		if !p.Partial && st.LastPoint == nil {
			st.LastPoint = p
			st.Protected = true
		}
	}
	out := make([]VMStatus, 0, len(order))
	for _, k := range order {
		out = append(out, *byKey[k])
	}
	return out, nil
}
