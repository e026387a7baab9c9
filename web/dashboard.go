package web

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/vmvault/vmvault/internal/task"
	"github.com/vmvault/vmvault/policy"
)

// The dashboard: GET /dashboard.

// SchedulerStatus is what the scheduler is doing now; *policy.Scheduler
// implements it. When Config.Scheduler implements it too, the dashboard and
// /stream show the scheduler's running backups and maintenance (which are
// not tasks of the registry).
type SchedulerStatus interface {
	Status() policy.Status
}

// VMStates reads the scheduler's per-VM memory; records.Store implements it.
type VMStates interface {
	// VMStates returns the last attempt and success of each VM per job
	// (the metrics' last success per job).
	VMStates(ctx context.Context) ([]policy.VMState, error)
}

// DashboardVMs counts VMs by protection.
type DashboardVMs struct {
	Protected   int `json:"protected"`   // a job covers it (vmstatus: enabled job, recent point), last attempt did not fail
	Failed      int `json:"failed"`      // the last backup attempt failed
	Unprotected int `json:"unprotected"` // in the inventory, not protected: no point, or an ad-hoc or overdue one
}

// NextWindow is the next (or current) backup window of an enabled job.
type NextWindow struct {
	Job   string    `json:"job"`
	Name  string    `json:"name"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	Open  bool      `json:"open"` // already open now
}

// DashboardRepository is one repository's usage on the dashboard.
type DashboardRepository struct {
	ID               string  `json:"id"`
	Name             string  `json:"name"`
	Points           int     `json:"points"`
	StoredBytes      int64   `json:"storedBytes"`
	LogicalBytes     int64   `json:"logicalBytes"`
	DedupRatio       float64 `json:"dedupRatio"`
	CompressionRatio float64 `json:"compressionRatio"`
	// StatsStale: the byte figures are those of an earlier set of points,
	// shown while a long walk over the current ones runs.
	StatsStale bool          `json:"statsStale,omitempty"`
	Damage     int           `json:"damage"` // findings of the last check
	LastCheck  *CheckSummary `json:"lastCheck"`
	Space      *Space        `json:"space,omitempty"` // the volume's space and forecast (absent on object stores)
}

// RunningBackup is a backup the scheduler runs now (job runs are not
// registry tasks): the VM, its job run and its progress.
type RunningBackup struct {
	Job          string    `json:"job"`
	Run          string    `json:"run"`
	VM           string    `json:"vm"` // the VM's name
	InstanceUUID string    `json:"instanceUuid"`
	Started      time.Time `json:"started"`
	Phase        string    `json:"phase"`
	Done         int64     `json:"done"`  // bytes
	Total        int64     `json:"total"` // bytes; 0 while unknown
	Rate         float64   `json:"rate"`  // bytes per second since it started
}

// RunningMaintenance is a repository maintenance task the scheduler runs now.
type RunningMaintenance struct {
	Repository string    `json:"repository"`
	Task       string    `json:"task"` // "reclaim", "quick-check", "full-check"
	Started    time.Time `json:"started"`
	// A full check's progress over the whole check (resumed across
	// maintenance windows): packs verified, packs in all, and the expected
	// end at this window's rate. Zero or absent while unknown.
	Done  int64      `json:"done"`
	Total int64      `json:"total"`
	ETA   *time.Time `json:"eta,omitempty"`
}

// Activity is what the scheduler is doing now.
type Activity struct {
	Backups     []RunningBackup      `json:"backups"`
	Maintenance []RunningMaintenance `json:"maintenance"`
}

// activity returns the scheduler's running work (empty without one).
func (s *Server) activity() Activity {
	a := Activity{Backups: []RunningBackup{}, Maintenance: []RunningMaintenance{}}
	ss, ok := s.cfg.Scheduler.(SchedulerStatus)
	if !ok || ss == nil {
		return a
	}
	st := ss.Status()
	now := s.now()
	for _, b := range st.Backups {
		rb := RunningBackup{Job: b.Job, Run: b.RunID, VM: b.Name, InstanceUUID: b.VM, Started: b.Started,
			Phase: b.Progress.Phase, Done: b.Progress.BytesDone, Total: b.Progress.BytesTotal}
		if el := now.Sub(b.Started).Seconds(); el > 0 && rb.Done > 0 {
			rb.Rate = float64(rb.Done) / el
		}
		a.Backups = append(a.Backups, rb)
	}
	for _, m := range st.Maintenance {
		rm := RunningMaintenance{Repository: m.Repository, Task: m.Task, Started: m.Started, Done: m.Done, Total: m.Total}
		if !m.ETA.IsZero() {
			eta := m.ETA
			rm.ETA = &eta
		}
		a.Maintenance = append(a.Maintenance, rm)
	}
	return a
}

// Dashboard is GET /dashboard.
type Dashboard struct {
	VMs          DashboardVMs `json:"vms"`
	RunningTasks []task.Info  `json:"runningTasks"`
	// Scheduler is the scheduler's running backups and maintenance, which
	// are not registry tasks (running_tasks holds API-started work).
	Scheduler    Activity              `json:"scheduler"`
	NextWindow   *NextWindow           `json:"nextWindow"`
	Repositories []DashboardRepository `json:"repositories"`
	RecentEvents []policy.Event        `json:"recentEvents"`
	Offsite      *DashboardOffsite     `json:"offsite,omitempty"`  // copy jobs' targets (absent without copy jobs)
	Warnings     []string              `json:"warnings,omitempty"` // parts that could not be computed
}

func (s *Server) dashboard(c *gin.Context) (any, error) {
	ctx := c.Request.Context()
	now := s.now()
	j := s.judge(c) // nil unless the principal is scoped: then every part keeps only what its scope allows
	d := Dashboard{RunningTasks: []task.Info{}, Repositories: []DashboardRepository{}, RecentEvents: []policy.Event{}, Scheduler: filterActivity(j, s.activity())}

	_, vms, err := s.vmStatuses(ctx, true, j)
	if errors.Is(err, ErrUnavailable) {
		// vCenter is down: count the VMs the restore points know.
		d.Warnings = append(d.Warnings, err.Error())
		_, vms, err = s.vmStatuses(ctx, false, j)
	}
	if err != nil {
		return nil, err
	}
	for _, v := range vms {
		switch {
		case v.Failed():
			d.VMs.Failed++
		case v.Protected():
			d.VMs.Protected++
		case v.InInventory:
			d.VMs.Unprotected++
		}
	}

	if d.Offsite, err = s.offsite(ctx, vms, now); err != nil {
		d.Warnings = append(d.Warnings, err.Error())
	}

	ts, err := s.cfg.Tasks.List(ctx, 1000)
	if err != nil {
		return nil, err
	}
	for _, t := range s.filterTasks(ctx, j, ts) {
		if t.State == task.Queued || t.State == task.Running {
			d.RunningTasks = append(d.RunningTasks, t)
		}
	}

	jobs, err := s.cfg.Jobs.Jobs(ctx)
	if err != nil {
		return nil, err
	}
	for _, j := range jobs {
		if !j.Enabled {
			continue
		}
		occ, ok := j.Window.Next(now)
		if !ok {
			continue
		}
		if d.NextWindow == nil || occ.Open.Before(d.NextWindow.Start) {
			d.NextWindow = &NextWindow{Job: j.ID, Name: j.Name, Start: occ.Open, End: occ.Close, Open: occ.Contains(now)}
		}
	}

	repos, err := s.cfg.Repositories.Repositories(ctx)
	if err != nil {
		return nil, err
	}
	for _, r := range repos {
		if !j.allowsRepository(r.Name) {
			continue
		}
		dr := DashboardRepository{ID: r.Name, Name: r.Name, Points: r.Points}
		det, err := s.repositoryDetail(ctx, r.Name)
		if err != nil {
			d.Warnings = append(d.Warnings, fmt.Sprintf("repository %s: %v", r.Name, err))
		} else {
			if st := det.Stats; st != nil {
				dr.StoredBytes, dr.LogicalBytes, dr.StatsStale = st.StoredBytes, st.LogicalBytes, st.Stale
				if !st.Stale {
					dr.Points = st.Points
				}
			}
			dr.DedupRatio, dr.CompressionRatio, dr.LastCheck, dr.Space = det.DedupRatio, det.CompressionRatio, det.LastCheck, det.Space
			if lc := det.LastCheck; lc != nil && !lc.OK {
				dr.Damage = max(len(lc.Findings), 1)
			}
		}
		d.Repositories = append(d.Repositories, dr)
	}

	if s.cfg.Events != nil {
		evs, err := s.cfg.Events.Events(ctx, EventQuery{From: now.Add(-24 * time.Hour), Limit: 100000})
		if err != nil {
			return nil, err
		}
		for i := len(evs) - 1; i >= 0 && len(d.RecentEvents) < 20; i-- {
			if evs[i].Outcome == OutcomeOK {
				continue // the audit trail of what users did lives on the Events page
			}
			if !j.allowsEvent(evs[i]) {
				continue
			}
			d.RecentEvents = append(d.RecentEvents, evs[i])
		}
	}
	return d, nil
}
