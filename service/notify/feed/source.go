package feed

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/vmvault/vmvault/internal/state"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/service/copyjob"
	"github.com/vmvault/vmvault/service/notify"
	"github.com/vmvault/vmvault/service/repos"
	"github.com/vmvault/vmvault/service/vmstatus"
	"github.com/vmvault/vmvault/web/api"
)

// Source is the daily report's view of the appliance.
type Source struct {
	DB        *state.DB
	Repos     *repos.Set
	Inventory policy.Inventory
	Log       *slog.Logger
	Copies    *copyjob.Store // nil: no copy runs listed
}

// runsPerJob bounds the runs read per job (a job runs about once a day;
// manual runs add a few).
const runsPerJob = 100

func (s *Source) Jobs(ctx context.Context) ([]policy.Job, error) { return s.DB.Jobs(ctx) }

func (s *Source) Runs(ctx context.Context, from, to time.Time) ([]policy.JobRun, error) {
	jobs, err := s.DB.Jobs(ctx)
	if err != nil {
		return nil, err
	}
	var out []policy.JobRun
	for _, j := range jobs {
		runs, err := s.DB.Runs(ctx, j.ID, runsPerJob)
		if err != nil {
			return nil, fmt.Errorf("runs of job %s: %w", j.ID, err)
		}
		for _, r := range runs {
			if r.Start.Before(to) && (r.End.IsZero() || !r.End.Before(from)) {
				out = append(out, r)
			}
		}
	}
	return out, nil
}

func (s *Source) Events(ctx context.Context, from, to time.Time) ([]policy.Event, error) {
	return s.DB.Events(ctx, state.EventQuery{From: from, To: to, MinSeverity: policy.SeverityWarning, Limit: 1000})
}

func (s *Source) Repositories(ctx context.Context) ([]notify.RepoUsage, error) {
	var out []notify.RepoUsage
	for _, n := range s.Repos.Names() {
		u := notify.RepoUsage{Name: n}
		ri, err := s.Repos.Repository(ctx, n)
		switch {
		case err != nil:
			u.Err = err.Error()
		case ri.Stats == nil:
			u.Points = ri.Points
		default:
			u.Points, u.LogicalBytes, u.StoredBytes = ri.Stats.Points, ri.Stats.LogicalBytes, ri.Stats.StoredBytes
		}
		out = append(out, u)
	}
	return out, nil
}

// VMs: the statuses of vmstatus (the API's VM list and dashboard read the
// same rules), with the report's one choice: with a vCenter, only the
// inventory's VMs count (a VM removed from vCenter no longer does); without
// one, the VMs known from restore points and job states. Jobs are named,
// enabled ones only.
func (s *Source) VMs(ctx context.Context) ([]notify.VMStatus, error) {
	in := vmstatus.Input{}
	var err error
	if in.Jobs, err = s.DB.Jobs(ctx); err != nil {
		return nil, err
	}
	jobName := map[string]string{}
	for _, j := range in.Jobs {
		jobName[j.ID] = j.Name
	}
	if s.Inventory != nil {
		vms, err := s.Inventory.VMs(ctx)
		if err != nil {
			s.Log.Warn("daily report: inventory unavailable, counting VMs from restore points", "err", err)
		} else {
			in.Inventory, in.HaveInventory = vms, true
		}
	}
	pts, err := s.Repos.Points(ctx, api.PointFilter{})
	if err != nil {
		return nil, err
	}
	list := make([]vmstatus.Point, len(pts))
	for i, p := range pts {
		list[i] = vmstatus.Point{InstanceUUID: p.VM.InstanceUUID, Name: p.VM.Name, MoRef: p.VM.MoRef, Time: p.Time, Partial: p.Partial}
	}
	in.Points = vmstatus.Summarize(list)
	if in.States, err = s.DB.VMStates(ctx); err != nil {
		return nil, err
	}
	// Without an inventory, a VM's jobs are the ones whose state names it.
	stateJobs := map[string][]string{}
	if !in.HaveInventory {
		for _, st := range in.States {
			if st.Selected && jobName[st.Job] != "" && !slices.Contains(stateJobs[st.VM], jobName[st.Job]) {
				stateJobs[st.VM] = append(stateJobs[st.VM], jobName[st.Job])
			}
		}
	}
	var out []notify.VMStatus
	for _, st := range vmstatus.Compute(in) {
		if in.HaveInventory && !st.InInventory {
			continue
		}
		v := notify.VMStatus{ID: st.Key, Name: st.Name, LastError: st.LastError, AdHoc: st.AdHoc()}
		for _, id := range st.EnabledJobs {
			v.Jobs = append(v.Jobs, jobName[id])
		}
		if !in.HaveInventory {
			v.Jobs = stateJobs[st.Key]
		}
		if st.LastPoint >= 0 {
			v.LastPoint = in.Points[st.LastPoint].LastComplete
		}
		out = append(out, v)
	}
	return out, nil
}

// CopyRuns implements notify.CopySource for the daily report.
func (s *Source) CopyRuns(ctx context.Context, from, to time.Time) ([]notify.CopyRun, error) {
	if s.Copies == nil {
		return nil, nil
	}
	jobs, err := s.Copies.Jobs(ctx)
	if err != nil {
		return nil, err
	}
	byID := map[string]copyjob.Job{}
	for _, j := range jobs {
		byID[j.ID] = j
	}
	runs, err := s.Copies.RunsSince(ctx, from)
	if err != nil {
		return nil, fmt.Errorf("copy runs: %w", err)
	}
	var out []notify.CopyRun
	for _, r := range runs {
		if !r.Start.Before(to) {
			continue
		}
		j := byID[r.Job]
		out = append(out, notify.CopyRun{Job: r.Job, Name: cmp.Or(j.Name, r.Job), Source: j.Source, Target: j.Target, State: r.State,
			Start: r.Start, End: r.End, PointsCopied: r.PointsCopied, PointsRemoved: r.PointsRemoved, BytesSent: r.BytesSent, Error: r.Error})
	}
	return out, nil
}
