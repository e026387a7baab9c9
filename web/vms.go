package web

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/vmvault/vmvault/service/vmstatus"
	"github.com/vmvault/vmvault/web/api"
)

// VMs: /vms, each VM with its protection status.

func vmKey(v VMRef) string { return api.VMKey(v) }

// VMStatus is a VM with its protection status.
type VMStatus struct {
	InstanceUUID string        `json:"instanceUuid"`
	Name         string        `json:"name"`
	MoRef        string        `json:"moref,omitempty"`
	InInventory  bool          `json:"inInventory"`         // false: known only from restore points
	Jobs         []string      `json:"jobs"`                // jobs whose selection matches it
	Tags         []string      `json:"tags"`                // tag ids (GET /tags names them); empty when not in the inventory
	Protected    bool          `json:"protected"`           // an enabled job selects it and its newest complete point is recent for that job
	AdHoc        bool          `json:"adHoc"`               // has a complete point, but no enabled job selects it
	Overdue      bool          `json:"overdue"`             // an enabled job selects it, its newest complete point is older than the job's last window
	LastPoint    *RestorePoint `json:"lastPoint,omitempty"` // newest complete point
	Points       int           `json:"points"`
}

// VMPointsSummary, when the Points service has it, sums up each VM's
// restore points without listing them (service/repos's index); without it GET
// /vms and the dashboard sum up the full list.
type VMPointsSummary interface {
	VMPoints(ctx context.Context) ([]api.VMPoints, error)
}

// VMsPage is GET /vms' answer to a paged request (limit or cursor).
type VMsPage struct {
	Items []VMStatus `json:"items"`
	// Next is the cursor of the following page; absent on the last.
	Next string `json:"next,omitempty"`
	// Total counts the VMs the filter keeps, on every page.
	Total int `json:"total"`
}

// vmStatusFilters are GET /vms?status= values, as the console's inventory
// names them.
var vmStatusFilters = map[string]func(VMStatus) bool{
	"protected":   func(v VMStatus) bool { return v.Protected },
	"unprotected": func(v VMStatus) bool { return !v.Protected },
	"missing":     func(v VMStatus) bool { return !v.InInventory },
}

func (s *Server) listVMs(c *gin.Context) (any, error) {
	keep := func(VMStatus) bool { return true }
	if st := c.Query("status"); st != "" {
		f, ok := vmStatusFilters[st]
		if !ok {
			return nil, badRequest("status", "protected, unprotected or missing")
		}
		keep = f
	}
	q := strings.ToLower(strings.TrimSpace(c.Query("q")))
	if len(q) > 256 {
		return nil, badRequest("q", "at most 256 bytes")
	}
	paged, limit, cursor, err := paging(c)
	if err != nil {
		return nil, err
	}
	offset := 0
	if cursor != "" {
		if offset, err = decodeOffsetCursor(cursor); err != nil {
			return nil, err
		}
	}
	all, _, err := s.vmStatuses(c.Request.Context(), true, s.judge(c))
	if err != nil {
		return nil, err
	}
	out := []VMStatus{}
	for _, v := range all {
		if keep(v) && (q == "" || vmMatches(v, q)) {
			out = append(out, v)
		}
	}
	if !paged {
		return out, nil
	}
	pg := VMsPage{Items: out[min(offset, len(out)):min(offset+limit, len(out))], Total: len(out)}
	if offset+limit < len(out) {
		pg.Next = encodeOffsetCursor(offset + limit)
	}
	return pg, nil
}

// vmMatches is the search of GET /vms?q=: part of the VM's name, or an
// instance UUID prefix (q in lower case).
func vmMatches(v VMStatus, q string) bool {
	return strings.Contains(strings.ToLower(v.Name), q) || strings.HasPrefix(strings.ToLower(v.InstanceUUID), q)
}

// GET /vms pages by position in its stable order (the inventory's, then
// VMs known only from points, newest first): the cursor is the offset.
func encodeOffsetCursor(n int) string {
	return base64.RawURLEncoding.EncodeToString([]byte("o:" + strconv.Itoa(n)))
}

func decodeOffsetCursor(v string) (int, error) {
	bad := badRequest("cursor", "not a cursor of this list (pass the previous page's next)")
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil || len(b) > 24 {
		return 0, bad
	}
	n, err := strconv.Atoi(strings.TrimPrefix(string(b), "o:"))
	if err != nil || n < 0 || !strings.HasPrefix(string(b), "o:") {
		return 0, bad
	}
	return n, nil
}

// pointSummaries returns each VM's point count and newest complete point,
// in order of each VM's newest point: of the points j allows (nil: all).
func (s *Server) pointSummaries(ctx context.Context, j *scopeJudge) ([]api.VMPoints, error) {
	if vs, ok := s.cfg.Points.(VMPointsSummary); ok && j == nil {
		return vs.VMPoints(ctx)
	}
	pts, err := s.cfg.Points.Points(ctx, PointFilter{})
	if err != nil {
		return nil, err
	}
	pts = filterPoints(j, pts)
	var out []api.VMPoints
	at := map[string]int{}
	for i := range pts { // newest first
		p := &pts[i]
		k := vmKey(p.VM)
		j, ok := at[k]
		if !ok {
			j = len(out)
			at[k] = j
			out = append(out, api.VMPoints{VM: p.VM})
		}
		out[j].Points++
		if !p.Partial && out[j].Last == nil {
			out[j].Last = p
		}
	}
	return out, nil
}

// vmStatuses joins the inventory (when withInventory), the jobs, the
// restore points and the scheduler's VM states under vmstatus's rules (the
// daily report reads the same). When the inventory cannot be read it
// returns an error wrapping ErrUnavailable. With a judge (a scoped
// principal) it counts only the points the scope allows and leaves out the
// VMs it does not.
func (s *Server) vmStatuses(ctx context.Context, withInventory bool, j *scopeJudge) ([]VMStatus, []vmstatus.Status, error) {
	in := vmstatus.Input{Now: s.now()}
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
	sums, err := s.pointSummaries(ctx, j)
	if err != nil {
		return nil, nil, err
	}
	in.Points = make([]vmstatus.VMPoints, len(sums))
	for i, sm := range sums {
		in.Points[i] = vmstatus.VMPoints{InstanceUUID: sm.VM.InstanceUUID, Name: sm.VM.Name, MoRef: sm.VM.MoRef, Points: sm.Points}
		if sm.Last != nil {
			in.Points[i].HasComplete, in.Points[i].LastComplete = true, sm.Last.Time
		}
	}
	if s.cfg.VMStates != nil {
		if in.States, err = s.cfg.VMStates.VMStates(ctx); err != nil {
			return nil, nil, err
		}
	}
	all := vmstatus.Compute(in)
	out := make([]VMStatus, 0, len(all))
	sts := all[:0:0]
	for _, st := range all {
		if !j.allowsVM(api.VMRef{InstanceUUID: st.Key, Name: st.Name, MoRef: st.MoRef}) {
			continue
		}
		sts = append(sts, st)
		v := VMStatus{InstanceUUID: st.Key, Name: st.Name, MoRef: st.MoRef, InInventory: st.InInventory, Jobs: st.Jobs, Tags: st.Tags, Points: st.Points, Protected: st.Protected(), AdHoc: st.AdHoc(), Overdue: st.Overdue()}
		if st.LastPoint >= 0 {
			v.LastPoint = sums[st.LastPoint].Last
		}
		out = append(out, v)
	}
	return out, sts, nil
}
