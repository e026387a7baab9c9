package web

// Endpoints the console needs beyond the resources of the first API:
// inventory tree, restore targets, job runs, previews, usage, dashboard and
// connection tests.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/mail"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/vmvault/vmvault/internal/task"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/web/api"
)

// InvalidField returns the 422 validation error naming field, for services
// (a VCenterTester) that find a request field unacceptable.
func InvalidField(field, msg string) error { return invalid(field, "%s", msg) }

func (s *Server) topology() (Topology, error) {
	if s.cfg.Topology == nil {
		return nil, &apiError{status: http.StatusServiceUnavailable, code: "vcenter_not_configured", msg: "no vCenter is configured on this appliance"}
	}
	return s.cfg.Topology, nil
}

// ---- inventory and restore targets

// InventoryResponse is GET /inventory.
type InventoryResponse struct {
	Nodes []InventoryNode `json:"nodes"`
}

func (s *Server) inventoryTree(c *gin.Context) (any, error) {
	t, err := s.topology()
	if err != nil {
		return nil, err
	}
	nodes, err := t.Nodes(c.Request.Context())
	if err != nil {
		return nil, fmt.Errorf("read the vCenter inventory: %v: %w", err, ErrUnavailable)
	}
	if nodes == nil {
		nodes = []InventoryNode{}
	}
	s.tagNodes(c.Request.Context(), nodes)
	return InventoryResponse{Nodes: nodes}, nil
}

// tagNodes sets the tags of the VM nodes: from the tag source's cached
// reading when it offers VM tags (VMTagSource), else from the policy
// inventory (the reading the scheduler selects from). The tree matters
// more than its tags: when they cannot be read the nodes go without, and
// GET /tags says why.
func (s *Server) tagNodes(ctx context.Context, nodes []InventoryNode) {
	byRef := map[string][]string{}
	byUUID := map[string][]string{}
	if vt, ok := s.cfg.Tags.(VMTagSource); ok && vt != nil {
		m, err := vt.VMTags(ctx)
		if err != nil {
			s.cfg.Logger.Warn("inventory tree without tags", "err", err)
			return
		}
		byRef = m
	} else {
		if s.cfg.Inventory == nil {
			return
		}
		vms, err := s.cfg.Inventory.VMs(ctx)
		if err != nil {
			s.cfg.Logger.Warn("inventory tree without tags", "err", err)
			return
		}
		for _, v := range vms {
			if len(v.Tags) == 0 {
				continue
			}
			if v.MoRef != "" {
				byRef[v.MoRef] = v.Tags
			}
			byUUID[v.InstanceUUID] = v.Tags
		}
	}
	for i := range nodes {
		n := &nodes[i]
		if n.Type != NodeVM {
			continue
		}
		t, ok := byRef[n.ID]
		if !ok && n.InstanceUUID != "" {
			t = byUUID[n.InstanceUUID]
		}
		if len(t) > 0 {
			n.Tags = append([]string(nil), t...)
		}
	}
}

// listTags is GET /tags: vSphere's tags with their names and categories.
func (s *Server) listTags(c *gin.Context) (any, error) {
	if s.cfg.Tags == nil {
		return nil, &apiError{status: http.StatusServiceUnavailable, code: "vcenter_not_configured", msg: "no vCenter is configured on this appliance"}
	}
	tags, err := s.cfg.Tags.Tags(c.Request.Context())
	if err != nil {
		return nil, fmt.Errorf("read the vSphere tags: %v: %w", err, ErrUnavailable)
	}
	if tags == nil {
		tags = []Tag{}
	}
	return tags, nil
}

func (s *Server) restoreTargets(c *gin.Context) (any, error) {
	t, err := s.topology()
	if err != nil {
		return nil, err
	}
	rt, err := t.Targets(c.Request.Context())
	if err != nil {
		return nil, fmt.Errorf("read the vCenter restore targets: %v: %w", err, ErrUnavailable)
	}
	if rt.Datacenters == nil {
		rt.Datacenters = []TargetDatacenter{}
	}
	for i := range rt.Datacenters {
		d := &rt.Datacenters[i]
		if d.Folders == nil {
			d.Folders = []string{}
		}
		if d.Compute == nil {
			d.Compute = []TargetCompute{}
		}
		if d.Datastores == nil {
			d.Datastores = []TargetDatastore{}
		}
		if d.Networks == nil {
			d.Networks = []TargetNetwork{}
		}
	}
	return rt, nil
}

// ---- job runs

// RunVM is one VM's outcome in a job run.
type RunVM struct {
	VM           string    `json:"vm"` // the VM's name
	InstanceUUID string    `json:"instanceUuid"`
	MoRef        string    `json:"moref,omitempty"`
	State        string    `json:"state"` // pending, running, succeeded, failed, cancelled, interrupted, not-run
	RestorePoint string    `json:"restorePoint"`
	Error        string    `json:"error"`
	BytesRead    int64     `json:"bytesRead"`
	NewBytes     int64     `json:"newBytes"` // stored after deduplication and compression
	Attempts     int       `json:"attempts"`
	Started      time.Time `json:"started,omitzero"`
	Finished     time.Time `json:"finished,omitzero"`
}

// JobRunView is one run of a job as GET /jobs/{id}/runs shows it.
type JobRunView struct {
	ID       string     `json:"id"`
	Job      string     `json:"job"`
	Started  time.Time  `json:"started"`
	Finished *time.Time `json:"finished"` // null while running
	// State: running, succeeded, partial (some VMs failed), failed,
	// cancelled, missed, interrupted (the appliance stopped under it).
	State   string `json:"state"`
	Trigger string `json:"trigger"`          // "window", "manual", "resume" or "missed"
	Window  string `json:"window,omitempty"` // the window occurrence's id (its opening, RFC 3339)
	// ResumeOf is the interrupted run this one resumes; ResumedBy the run
	// that resumed this interrupted one.
	ResumeOf  string  `json:"resumeOf,omitempty"`
	ResumedBy string  `json:"resumedBy,omitempty"`
	VMs       []RunVM `json:"vms"`
}

func runView(r policy.JobRun) JobRunView {
	v := JobRunView{ID: r.ID, Job: r.Job, Started: r.Start, Window: r.WindowID, Trigger: "window", ResumeOf: r.ResumeOf, ResumedBy: r.ResumedBy,
		VMs: make([]RunVM, 0, len(r.VMs))}
	switch {
	case r.Missed:
		v.Trigger = "missed"
	case r.Manual:
		v.Trigger = "manual"
	case r.ResumeOf != "":
		v.Trigger = "resume"
	}
	if !r.End.IsZero() {
		end := r.End
		v.Finished = &end
	}
	ok, bad, cancelled := 0, 0, 0
	for _, o := range r.VMs {
		v.VMs = append(v.VMs, RunVM{VM: o.Name, InstanceUUID: o.VM, MoRef: o.MoRef, State: string(o.Status), RestorePoint: o.Point,
			Error: o.Error, BytesRead: o.Bytes, NewBytes: o.Stored, Attempts: o.Attempts, Started: o.Start, Finished: o.End})
		switch o.Status {
		case policy.OutcomeSucceeded:
			ok++
		case policy.OutcomeCancelled:
			cancelled++
		default:
			bad++
		}
	}
	switch {
	case r.Missed:
		v.State = "missed"
	case r.End.IsZero():
		v.State = "running"
	case r.Interrupted:
		v.State = "interrupted"
	case bad+cancelled == 0:
		v.State = "succeeded"
	case ok > 0:
		v.State = "partial"
	case bad == 0:
		v.State = "cancelled"
	default:
		v.State = "failed"
	}
	return v
}

func queryLimit(c *gin.Context, def, maxN int) (int, error) {
	v := c.Query("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxN {
		return 0, badRequest("limit", "an integer from 1 to %d", maxN)
	}
	return n, nil
}

func (s *Server) jobRuns(c *gin.Context) (any, error) {
	ctx := c.Request.Context()
	id, err := pathID(c)
	if err != nil {
		return nil, err
	}
	limit, err := queryLimit(c, 50, 1000)
	if err != nil {
		return nil, err
	}
	if _, err := s.cfg.Jobs.Job(ctx, id); err != nil {
		return nil, err
	}
	if s.cfg.Runs == nil {
		return []JobRunView{}, nil
	}
	runs, err := s.cfg.Runs.Runs(ctx, id, limit)
	if err != nil {
		return nil, err
	}
	out := make([]JobRunView, len(runs))
	for i, r := range runs {
		out[i] = runView(r)
	}
	return out, nil
}

// ---- retention preview of an unsaved retention

// RetentionPreviewRequest is the body of POST /retention-preview.
type RetentionPreviewRequest struct {
	Repository string           `json:"repository"`
	Retention  policy.Retention `json:"retention"`
	VM         string           `json:"vm,omitempty"`  // only this VM's points (instance UUID)
	Job        string           `json:"job,omitempty"` // only points made by this job (editing a saved job)
}

// preview runs retention's dry run over the points f selects.
func (s *Server) preview(ctx context.Context, f PointFilter, ret policy.Retention) (RetentionPreview, error) {
	pts, err := s.cfg.Points.Points(ctx, f)
	if err != nil {
		return RetentionPreview{}, err
	}
	unique := map[string]int64{}
	if len(pts) > 0 {
		if ri, err := s.cfg.Repositories.Repository(ctx, f.Repository); err == nil && ri.Stats != nil {
			for _, ps := range ri.Stats.PerPoint {
				unique[ps.ID] = ps.UniqueBytes
			}
		}
	}
	pp := make([]policy.Point, len(pts))
	for i, p := range pts {
		st := policy.PointComplete
		if p.Partial {
			st = policy.PointPartial
		}
		pp[i] = policy.Point{ID: p.ID, Repository: p.Repository, VM: vmKey(p.VM), Job: p.Job, Time: p.Time, Status: st, Locked: p.Locked, Bytes: unique[p.ID]}
	}
	plan := ret.DryRun(pp, s.location(ctx))
	out := RetentionPreview{Keep: plan.Keep, Remove: plan.Remove, BytesFreed: plan.BytesFreed, Decisions: make([]PreviewDecision, len(plan.Decisions))}
	for i, d := range plan.Decisions {
		out.Decisions[i] = PreviewDecision{Point: d.Point.ID, VM: d.Point.VM, Time: d.Point.Time, Keep: d.Keep, Locked: d.Point.Locked, Bytes: d.Point.Bytes, Reasons: d.Reasons}
	}
	return out, nil
}

func (s *Server) retentionPreviewUnsaved(c *gin.Context) (any, error) {
	ctx := c.Request.Context()
	var req RetentionPreviewRequest
	if err := decodeStrict(c, &req); err != nil {
		return nil, err
	}
	if req.Repository == "" {
		return nil, invalid("repository", "required")
	}
	if len(req.VM) > 128 {
		return nil, invalid("vm", "at most 128 characters")
	}
	if len(req.Job) > 128 {
		return nil, invalid("job", "at most 128 characters")
	}
	if err := req.Retention.Validate(); err != nil {
		return nil, err
	}
	if err := s.repoExists(ctx, req.Repository); err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, invalid("repository", "unknown repository %q", req.Repository)
		}
		return nil, err
	}
	return s.preview(ctx, PointFilter{Repository: req.Repository, VM: req.VM, Job: req.Job}, req.Retention)
}

// ---- repositories: details and usage over time

// CheckSummary is the last check of a repository.
type CheckSummary struct {
	Time     time.Time `json:"time"`
	OK       bool      `json:"ok"`
	Source   string    `json:"source"`         // "task" (run from the API) or "maintenance" (the scheduler's)
	Task     string    `json:"task,omitempty"` // the check task's id
	Findings []string  `json:"findings"`
}

// RepositoryDetail is GET /repositories/{id}: the repository with its
// statistics, ratios, last check and an estimate of what reclaim frees.
type RepositoryDetail struct {
	RepositoryInfo
	DedupRatio       float64       `json:"dedupRatio"`
	CompressionRatio float64       `json:"compressionRatio"`
	LastCheck        *CheckSummary `json:"lastCheck"`
	// ReclaimableBytes estimates what reclaim frees: the stored bytes of
	// blobs no restore point references. Null when unknown.
	ReclaimableBytes *int64 `json:"reclaimableBytes"`
}

// lastCheck finds the newest finished check of a repository among the
// tasks (checks run from the API, with their findings) and the scheduler's
// maintenance checks (their event, found around the time the maintenance
// state records, so no walk through every event).
func (s *Server) lastCheck(ctx context.Context, ri RepositoryInfo) *CheckSummary {
	repo := ri.Name
	var best *CheckSummary
	if ts, err := s.cfg.Tasks.List(ctx, 1000); err == nil {
		for _, t := range ts { // newest first
			if t.Kind != "check" || t.Subject != repo || !t.State.Final() || t.State == task.Cancelled {
				continue
			}
			cs := &CheckSummary{Time: t.Ended, Source: "task", Task: t.ID, Findings: []string{}}
			if t.State == task.Succeeded {
				var rep api.CheckReport
				if b, err := json.Marshal(t.Result); err == nil && json.Unmarshal(b, &rep) == nil {
					for _, p := range rep.Problems {
						cs.Findings = append(cs.Findings, p.String())
					}
				}
				cs.OK = len(cs.Findings) == 0
			} else {
				cs.Findings = append(cs.Findings, "the check did not complete: "+t.Error)
			}
			best = cs
			break
		}
	}
	var at time.Time
	if m := ri.Maintenance; m != nil {
		at = m.LastQuickCheck
		if m.LastFullCheck.After(at) {
			at = m.LastFullCheck
		}
	}
	if s.cfg.Events == nil || at.IsZero() || (best != nil && best.Time.After(at.Add(time.Minute))) {
		return best
	}
	// The scheduler stamps the state and records the event in the same step.
	evs, err := s.cfg.Events.Events(ctx, EventQuery{From: at.Add(-time.Minute), To: at.Add(time.Minute), Limit: 10000})
	if err != nil {
		return best
	}
	for i := len(evs) - 1; i >= 0; i-- {
		e := evs[i]
		if e.Repository != repo || (e.Kind != policy.EventCheckClean && e.Kind != policy.EventCheckDamage) {
			continue
		}
		if best == nil || e.Time.After(best.Time) {
			best = &CheckSummary{Time: e.Time, OK: e.Kind == policy.EventCheckClean, Source: "maintenance", Findings: []string{}}
			if !best.OK {
				best.Findings = append(best.Findings, e.Message)
			}
		}
		break
	}
	return best
}

func (s *Server) repositoryDetail(ctx context.Context, id string) (RepositoryDetail, error) {
	ri, err := s.cfg.Repositories.Repository(ctx, id)
	if err != nil {
		return RepositoryDetail{}, err
	}
	d := RepositoryDetail{RepositoryInfo: ri, LastCheck: s.lastCheck(ctx, ri)}
	if st := ri.Stats; st != nil {
		d.DedupRatio, d.CompressionRatio = st.DedupRatio, st.CompressionRatio
		// Only blobs no point references are reclaimable: the index, the
		// configuration and pack headers stay (they made "would free 137
		// KiB" with nothing deleted).
		r := st.DeadBytes
		d.ReclaimableBytes = &r
	}
	return d, nil
}

func (s *Server) getRepository(c *gin.Context) (any, error) {
	id, err := pathID(c)
	if err != nil {
		return nil, err
	}
	return s.repositoryDetail(c.Request.Context(), id)
}

// UsageSample is the repository's size after the points made up to Time.
type UsageSample struct {
	Time         time.Time `json:"time"`
	Points       int       `json:"points"`
	LogicalBytes int64     `json:"logicalBytes"`
	StoredBytes  int64     `json:"storedBytes"` // sum of the points' new stored bytes
}

func (s *Server) repositoryUsage(c *gin.Context) (any, error) {
	ctx := c.Request.Context()
	id, err := pathID(c)
	if err != nil {
		return nil, err
	}
	per := c.DefaultQuery("per", "day")
	if per != "day" && per != "point" {
		return nil, badRequest("per", "day or point")
	}
	if err := s.repoExists(ctx, id); err != nil {
		return nil, err
	}
	pts, err := s.cfg.Points.Points(ctx, PointFilter{Repository: id})
	if err != nil {
		return nil, err
	}
	sort.SliceStable(pts, func(i, j int) bool { return pts[i].Time.Before(pts[j].Time) })
	loc := s.location(ctx)
	out := []UsageSample{}
	var cur UsageSample
	for i, p := range pts {
		cur.Points++
		cur.LogicalBytes += p.LogicalBytes
		for _, d := range p.Disks {
			cur.StoredBytes += d.Stored
		}
		cur.Time = p.Time
		last := i == len(pts)-1
		if per == "day" && !last {
			y1, m1, d1 := p.Time.In(loc).Date()
			y2, m2, d2 := pts[i+1].Time.In(loc).Date()
			if y1 == y2 && m1 == m2 && d1 == d2 {
				continue
			}
		}
		out = append(out, cur)
	}
	return out, nil
}

// ---- dashboard

// DashboardVMs counts VMs by protection.
type DashboardVMs struct {
	Protected   int `json:"protected"`   // newest complete point exists, last attempt did not fail
	Failed      int `json:"failed"`      // the last backup attempt failed
	Unprotected int `json:"unprotected"` // in the inventory without any complete point
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
	ID               string        `json:"id"`
	Name             string        `json:"name"`
	Points           int           `json:"points"`
	StoredBytes      int64         `json:"storedBytes"`
	LogicalBytes     int64         `json:"logicalBytes"`
	DedupRatio       float64       `json:"dedupRatio"`
	CompressionRatio float64       `json:"compressionRatio"`
	Damage           int           `json:"damage"` // findings of the last check
	LastCheck        *CheckSummary `json:"lastCheck"`
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
	now := time.Now()
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
	Warnings     []string              `json:"warnings,omitempty"` // parts that could not be computed
}

func (s *Server) dashboard(c *gin.Context) (any, error) {
	ctx := c.Request.Context()
	now := s.now()
	d := Dashboard{RunningTasks: []task.Info{}, Repositories: []DashboardRepository{}, RecentEvents: []policy.Event{}, Scheduler: s.activity()}

	vms, err := s.vmStatuses(ctx, true)
	if errors.Is(err, ErrUnavailable) {
		// vCenter is down: count the VMs the restore points know.
		d.Warnings = append(d.Warnings, err.Error())
		vms, err = s.vmStatuses(ctx, false)
	}
	if err != nil {
		return nil, err
	}
	failed := map[string]bool{}
	if s.cfg.VMStates != nil {
		if failed, err = s.cfg.VMStates.FailedVMs(ctx); err != nil {
			return nil, err
		}
	}
	for _, v := range vms {
		switch {
		case failed[v.InstanceUUID]:
			d.VMs.Failed++
		case v.Protected:
			d.VMs.Protected++
		case v.InInventory:
			d.VMs.Unprotected++
		}
	}

	ts, err := s.cfg.Tasks.List(ctx, 1000)
	if err != nil {
		return nil, err
	}
	for _, t := range ts {
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
		dr := DashboardRepository{ID: r.Name, Name: r.Name, Points: r.Points}
		det, err := s.repositoryDetail(ctx, r.Name)
		if err != nil {
			d.Warnings = append(d.Warnings, fmt.Sprintf("repository %s: %v", r.Name, err))
		} else {
			if st := det.Stats; st != nil {
				dr.Points, dr.StoredBytes, dr.LogicalBytes = st.Points, st.StoredBytes, st.LogicalBytes
			}
			dr.DedupRatio, dr.CompressionRatio, dr.LastCheck = det.DedupRatio, det.CompressionRatio, det.LastCheck
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
			d.RecentEvents = append(d.RecentEvents, evs[i])
		}
	}
	return d, nil
}

// ---- connection tests

func (s *Server) testVCenter(c *gin.Context) (any, error) {
	var req VCenterTest
	if err := optionalBody(c, &req); err != nil {
		return nil, err
	}
	if req.URL != "" {
		u, err := url.Parse(req.URL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || len(req.URL) > 2048 {
			return nil, invalid("url", "an https:// URL of a vCenter or ESXi host")
		}
	}
	for _, f := range []struct{ name, v string }{{"username", req.Username}, {"password", req.Password}, {"thumbprint", req.Thumbprint}} {
		if len(f.v) > 1024 || strings.ContainsAny(f.v, "\x00\r\n") {
			return nil, invalid(f.name, "at most 1024 characters, no line breaks")
		}
	}
	if req.Thumbprint != "" && req.Insecure {
		return nil, invalid("insecure", "contradicts thumbprint: pin the certificate or skip verification, not both")
	}
	if s.cfg.VCenter == nil {
		return nil, fmt.Errorf("vCenter connection test: %w", ErrNotImplemented)
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), 30*time.Second)
	defer cancel()
	return s.cfg.VCenter.TestVCenter(ctx, req)
}

type smtpTestRequest struct {
	To string `json:"to"`
}

func (s *Server) testSMTP(c *gin.Context) (any, error) {
	var req smtpTestRequest
	if err := decodeStrict(c, &req); err != nil {
		return nil, err
	}
	if req.To == "" {
		return nil, invalid("to", "required")
	}
	a, err := mail.ParseAddress(req.To)
	if err != nil || a.Name != "" || a.Address != req.To || len(req.To) > 254 {
		return nil, invalid("to", "one e-mail address such as ops@example.com")
	}
	if s.cfg.Mailer == nil {
		return nil, &apiError{status: http.StatusConflict, code: "smtp_not_configured", msg: "SMTP is not configured on this appliance (smtp in the configuration file)"}
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), 30*time.Second)
	defer cancel()
	if err := s.cfg.Mailer.SendTest(ctx, req.To); err != nil {
		return nil, &apiError{status: http.StatusBadGateway, code: "smtp_failed", msg: "sending the test mail failed: " + err.Error()}
	}
	return gin.H{"ok": true}, nil
}
