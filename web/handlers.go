package web

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/gin-gonic/gin"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/internal/task"
	"github.com/vmvault/vmvault/policy"
)

// pathID returns the :id parameter after checking it is a sane id.
func pathID(c *gin.Context) (string, error) {
	id := c.Param("id")
	if id == "" || len(id) > 128 || strings.IndexFunc(id, func(r rune) bool { return unicode.IsControl(r) || r == '/' }) >= 0 {
		return "", badRequest("id", "bad id %q", truncate(id, 40))
	}
	return id, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// pointID checks a restore point id (or unique prefix of at least 8): hex.
func pointID(c *gin.Context) (string, error) {
	id := strings.ToLower(c.Param("id"))
	if len(id) < 8 || len(id) > 64 || strings.Trim(id, "0123456789abcdef") != "" {
		return "", badRequest("id", "a restore point id is 8 to 64 hex digits")
	}
	return id, nil
}

func (s *Server) healthz(c *gin.Context) (any, error) {
	return gin.H{"status": "ok", "time": s.now().UTC()}, nil
}

// ---- jobs

type jobResponse struct {
	Job      policy.Job `json:"job"`
	Warnings []string   `json:"warnings,omitempty"`
}

func (s *Server) listJobs(c *gin.Context) (any, error) {
	jobs, err := s.cfg.Jobs.Jobs(c.Request.Context())
	if err != nil {
		return nil, err
	}
	if jobs == nil {
		jobs = []policy.Job{}
	}
	return jobs, nil
}

func (s *Server) getJob(c *gin.Context) (any, error) {
	id, err := pathID(c)
	if err != nil {
		return nil, err
	}
	return s.cfg.Jobs.Job(c.Request.Context(), id)
}

func (s *Server) validateJob(ctx context.Context, j policy.Job) ([]string, error) {
	known := s.cfg.KnownRepository
	if known == nil {
		repos, err := s.cfg.Repositories.Repositories(ctx)
		if err != nil {
			return nil, err
		}
		known = func(name string) bool {
			for _, r := range repos {
				if r.Name == name {
					return true
				}
			}
			return false
		}
	}
	return j.Validate(ctx, policy.ValidateEnv{KnownRepository: known, Inventory: s.cfg.Inventory})
}

func (s *Server) saveJob(c *gin.Context, j policy.Job, status int) (any, error) {
	ctx := c.Request.Context()
	warnings, err := s.validateJob(ctx, j)
	if err != nil {
		return nil, err
	}
	if err := s.cfg.Jobs.PutJob(ctx, j); err != nil {
		return nil, err
	}
	s.reload(ctx)
	return withStatus(status, jobResponse{Job: j, Warnings: warnings}), nil
}

func (s *Server) reload(ctx context.Context) {
	if s.cfg.Scheduler == nil {
		return
	}
	if err := s.cfg.Scheduler.Reload(ctx); err != nil {
		// The job is saved; the scheduler picks it up at its next reload or restart.
		s.cfg.Logger.Warn("scheduler reload after a job change failed", "err", err)
	}
}

func (s *Server) createJob(c *gin.Context) (any, error) {
	var j policy.Job
	if err := decodeStrict(c, &j); err != nil {
		return nil, err
	}
	if j.ID != "" {
		if _, err := s.cfg.Jobs.Job(c.Request.Context(), j.ID); err == nil {
			return nil, &apiError{status: http.StatusConflict, code: "conflict", msg: fmt.Sprintf("job %q exists; use PUT to change it", j.ID)}
		} else if !errors.Is(err, ErrNotFound) {
			return nil, err
		}
	}
	return s.saveJob(c, j, http.StatusCreated)
}

func (s *Server) putJob(c *gin.Context) (any, error) {
	id, err := pathID(c)
	if err != nil {
		return nil, err
	}
	var j policy.Job
	if err := decodeStrict(c, &j); err != nil {
		return nil, err
	}
	if j.ID == "" {
		j.ID = id
	}
	if j.ID != id {
		return nil, invalid("id", "must match the path (%q)", id)
	}
	if _, err := s.cfg.Jobs.Job(c.Request.Context(), id); err != nil {
		return nil, err
	}
	return s.saveJob(c, j, http.StatusOK)
}

func (s *Server) deleteJob(c *gin.Context) (any, error) {
	id, err := pathID(c)
	if err != nil {
		return nil, err
	}
	if err := s.cfg.Jobs.DeleteJob(c.Request.Context(), id); err != nil {
		return nil, err
	}
	s.reload(c.Request.Context())
	return withStatus(http.StatusNoContent, nil), nil
}

// PreviewDecision is one point's fate in a retention preview.
type PreviewDecision struct {
	Point   string    `json:"point"`
	VM      string    `json:"vm"`
	Time    time.Time `json:"time"`
	Keep    bool      `json:"keep"`
	Locked  bool      `json:"locked"`
	Bytes   int64     `json:"bytes"` // bytes only this point references (freed if removed)
	Reasons []string  `json:"reasons"`
}

// RetentionPreview is what the job's retention would do now.
type RetentionPreview struct {
	Keep       int               `json:"keep"`
	Remove     int               `json:"remove"`
	BytesFreed int64             `json:"bytesFreed"`
	Decisions  []PreviewDecision `json:"decisions"`
}

func (s *Server) retentionPreview(c *gin.Context) (any, error) {
	ctx := c.Request.Context()
	id, err := pathID(c)
	if err != nil {
		return nil, err
	}
	j, err := s.cfg.Jobs.Job(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.preview(ctx, PointFilter{Repository: j.Repository, Job: j.ID}, j.Retention)
}

func vmKey(v VMRef) string {
	if v.InstanceUUID != "" {
		return v.InstanceUUID
	}
	return v.Name
}

func (s *Server) runJob(c *gin.Context) (any, error) {
	id, err := pathID(c)
	if err != nil {
		return nil, err
	}
	if s.cfg.Scheduler == nil {
		return nil, fmt.Errorf("run job %s: the scheduler is not running: %w", id, ErrUnavailable)
	}
	if _, err := s.cfg.Jobs.Job(c.Request.Context(), id); err != nil {
		return nil, err
	}
	run, err := s.cfg.Scheduler.RunNow(c.Request.Context(), id)
	if err != nil {
		return nil, err
	}
	return withStatus(http.StatusAccepted, gin.H{"run": run}), nil
}

// ---- restore points

func parseTimeParam(c *gin.Context, name string) (time.Time, error) {
	v := c.Query(name)
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, badRequest(name, "want an RFC 3339 time, e.g. 2026-01-02T03:04:05Z")
	}
	return t, nil
}

func (s *Server) listPoints(c *gin.Context) (any, error) {
	f := PointFilter{VM: c.Query("vm"), Repository: c.Query("repository"), Job: c.Query("job")}
	var err error
	if f.From, err = parseTimeParam(c, "from"); err != nil {
		return nil, err
	}
	if f.To, err = parseTimeParam(c, "to"); err != nil {
		return nil, err
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
		return nil, badRequest("to", "the end must be after the start (from)")
	}
	search := strings.ToLower(strings.TrimSpace(c.Query("q")))
	if len(search) > 256 {
		return nil, badRequest("q", "at most 256 bytes")
	}
	pts, err := s.cfg.Points.Points(c.Request.Context(), f)
	if err != nil {
		return nil, err
	}
	out := []RestorePoint{}
	for _, p := range pts {
		if search == "" || pointMatches(p, search) {
			out = append(out, p)
		}
	}
	return out, nil
}

// pointMatches is the search of GET /restore-points?q=: a point whose id
// starts with q, or whose VM's name, instance UUID or job contains it
// (q in lower case).
func pointMatches(p RestorePoint, q string) bool {
	return strings.HasPrefix(p.ID, q) ||
		strings.Contains(strings.ToLower(p.VM.Name), q) ||
		strings.HasPrefix(strings.ToLower(p.VM.InstanceUUID), q) ||
		strings.Contains(strings.ToLower(p.Job), q)
}

func (s *Server) getPoint(c *gin.Context) (any, error) {
	id, err := pointID(c)
	if err != nil {
		return nil, err
	}
	return s.cfg.Points.Point(c.Request.Context(), id)
}

func (s *Server) setLocked(c *gin.Context, locked bool) (any, error) {
	id, err := pointID(c)
	if err != nil {
		return nil, err
	}
	s.auditPoint(c, id)
	if err := s.cfg.Points.SetLocked(c.Request.Context(), id, locked); err != nil {
		return nil, err
	}
	return s.cfg.Points.Point(c.Request.Context(), id)
}

func (s *Server) lockPoint(c *gin.Context) (any, error)   { return s.setLocked(c, true) }
func (s *Server) unlockPoint(c *gin.Context) (any, error) { return s.setLocked(c, false) }

func (s *Server) deletePoint(c *gin.Context) (any, error) {
	id, err := pointID(c)
	if err != nil {
		return nil, err
	}
	s.auditPoint(c, id)
	if err := s.cfg.Points.Delete(c.Request.Context(), id); err != nil {
		return nil, err
	}
	return withStatus(http.StatusNoContent, nil), nil
}

// ---- repositories

func (s *Server) listRepositories(c *gin.Context) (any, error) {
	rs, err := s.cfg.Repositories.Repositories(c.Request.Context())
	if err != nil {
		return nil, err
	}
	if rs == nil {
		rs = []RepositoryInfo{}
	}
	return rs, nil
}

// repoExists checks a repository name without computing its statistics.
func (s *Server) repoExists(ctx context.Context, name string) error {
	repos, err := s.cfg.Repositories.Repositories(ctx)
	if err != nil {
		return err
	}
	for _, r := range repos {
		if r.Name == name {
			return nil
		}
	}
	return fmt.Errorf("repository %q: %w", name, ErrNotFound)
}

type checkRequest struct {
	ReadData bool `json:"readData"`
}

// optionalBody decodes a body when one is sent (an empty body means defaults).
func optionalBody(c *gin.Context, v any) error {
	if c.Request.ContentLength == 0 {
		return nil
	}
	return decodeStrict(c, v)
}

func (s *Server) repoTask(c *gin.Context, kind string, fn func(ctx context.Context, name string, rep Reporter) (any, error)) (any, error) {
	id, err := pathID(c)
	if err != nil {
		return nil, err
	}
	if err := s.repoExists(c.Request.Context(), id); err != nil {
		return nil, err
	}
	noteAudit(c, id, "", id, "")
	info, err := s.startTask(c, kind, id, func(ctx context.Context, rep *task.Reporter) (any, error) { return fn(ctx, id, rep) })
	if err != nil {
		return nil, err
	}
	return withStatus(http.StatusAccepted, info), nil
}

func (s *Server) checkRepository(c *gin.Context) (any, error) {
	var req checkRequest
	if err := optionalBody(c, &req); err != nil {
		return nil, err
	}
	return s.repoTask(c, "check", func(ctx context.Context, name string, rep Reporter) (any, error) {
		return s.cfg.Repositories.Check(ctx, name, req.ReadData, rep)
	})
}

func (s *Server) reclaimRepository(c *gin.Context) (any, error) {
	return s.repoTask(c, "reclaim", s.cfg.Repositories.Reclaim)
}

// ---- tasks

func (s *Server) listTasks(c *gin.Context) (any, error) {
	limit := 100
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return nil, badRequest("limit", "an integer from 1 to 1000")
		}
		limit = n
	}
	ts, err := s.cfg.Tasks.List(c.Request.Context(), limit)
	if err != nil {
		return nil, err
	}
	if st := c.Query("state"); st != "" {
		kept := ts[:0]
		for _, t := range ts {
			if string(t.State) == st {
				kept = append(kept, t)
			}
		}
		ts = kept
	}
	if ts == nil {
		ts = []task.Info{}
	}
	return ts, nil
}

// TaskDetail is a task with its log.
type TaskDetail struct {
	task.Info
	Log []task.LogLine `json:"log"`
}

func (s *Server) getTask(c *gin.Context) (any, error) {
	id, err := pathID(c)
	if err != nil {
		return nil, err
	}
	info, err := s.cfg.Tasks.Get(c.Request.Context(), id)
	if err != nil {
		return nil, err
	}
	logs, _ := s.cfg.Tasks.Logs(id) // a task loaded from the store has no log in memory
	if logs == nil {
		logs = []task.LogLine{}
	}
	return TaskDetail{Info: info, Log: logs}, nil
}

func (s *Server) cancelTask(c *gin.Context) (any, error) {
	id, err := pathID(c)
	if err != nil {
		return nil, err
	}
	if err := s.cfg.Tasks.Cancel(id); err != nil {
		if errors.Is(err, task.ErrNotFound) {
			if _, gerr := s.cfg.Tasks.Get(c.Request.Context(), id); gerr == nil {
				return nil, fmt.Errorf("task %s: %w", id, task.ErrFinished)
			}
		}
		return nil, err
	}
	return withStatus(http.StatusAccepted, nil), nil
}

// ---- events

// eventQuery reads the filter of GET /events and /events/export; limit
// bounds its "limit" parameter and is its default.
func eventQuery(c *gin.Context, def, max int) (EventQuery, error) {
	q := EventQuery{Job: c.Query("job"), VM: c.Query("vm"), Kind: c.Query("kind"), User: c.Query("user"), Limit: def}
	var err error
	if q.From, err = parseTimeParam(c, "from"); err != nil {
		return q, err
	}
	if q.To, err = parseTimeParam(c, "to"); err != nil {
		return q, err
	}
	if !q.From.IsZero() && !q.To.IsZero() && !q.From.Before(q.To) {
		return q, badRequest("to", "the end must be after the start (from)")
	}
	switch sev := policy.Severity(c.Query("severity")); sev {
	case "", policy.SeverityInfo, policy.SeverityWarning, policy.SeverityError:
		q.MinSeverity = sev
	default:
		return q, badRequest("severity", "info, warning or error")
	}
	switch o := c.Query("outcome"); o {
	case "", OutcomeOK, OutcomeFailed:
		q.Outcome = o
	default:
		return q, badRequest("outcome", "ok or failed")
	}
	for name, v := range map[string]string{"kind": q.Kind, "user": q.User, "job": q.Job, "vm": q.VM} {
		if len(v) > 256 {
			return q, badRequest(name, "at most 256 bytes")
		}
	}
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > max {
			return q, badRequest("limit", "an integer from 1 to %d", max)
		}
		q.Limit = n
	}
	return q, nil
}

func (s *Server) events(c *gin.Context, def, max int) ([]policy.Event, error) {
	q, err := eventQuery(c, def, max)
	if err != nil {
		return nil, err
	}
	if s.cfg.Events == nil {
		return []policy.Event{}, nil
	}
	evs, err := s.cfg.Events.Events(c.Request.Context(), q)
	if err != nil {
		return nil, err
	}
	if evs == nil {
		evs = []policy.Event{}
	}
	return evs, nil
}

func (s *Server) listEvents(c *gin.Context) (any, error) {
	return s.events(c, 500, 10000)
}

// exportEventsMax bounds one export (about 30 MB of JSON).
const exportEventsMax = 100000

// exportEvents writes the matching events, oldest first, as a CSV or JSON
// download: the audit trail for an auditor or a SIEM.
func (s *Server) exportEvents(c *gin.Context) (any, error) {
	format := c.DefaultQuery("format", "json")
	if format != "csv" && format != "json" {
		return nil, badRequest("format", "csv or json")
	}
	evs, err := s.events(c, exportEventsMax, exportEventsMax)
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("vmvault-events-%s.%s", s.now().UTC().Format("20060102-150405"), format)
	c.Header("Content-Disposition", `attachment; filename="`+name+`"`)
	if format == "json" {
		c.JSON(http.StatusOK, evs)
		return nil, nil
	}
	c.Header("Content-Type", "text/csv; charset=utf-8")
	c.Status(http.StatusOK)
	w := csv.NewWriter(c.Writer)
	_ = w.Write([]string{"time", "severity", "kind", "user", "address", "outcome", "error", "subject", "job", "vm", "repository", "message"})
	for _, e := range evs {
		_ = w.Write([]string{e.Time.UTC().Format(time.RFC3339Nano), string(e.Severity), e.Kind, csvSafe(e.User), e.Address, e.Outcome,
			csvSafe(e.Error), csvSafe(e.Subject), e.Job, e.VM, e.Repository, csvSafe(e.Message)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		// Mid-download: the client got a cut file; no error body can follow.
		s.cfg.Logger.Warn("export events", "err", err)
	}
	return nil, nil
}

// csvSafe keeps a spreadsheet from running a cell as a formula: a user
// name or message starting with = + - @ gets a leading quote (OWASP CSV
// injection).
func csvSafe(v string) string {
	if v != "" && strings.ContainsRune("=+-@\t\r", rune(v[0])) {
		return "'" + v
	}
	return v
}

// ---- vms

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

// ---- settings

func (s *Server) settings(ctx context.Context) (Settings, error) {
	if s.cfg.Settings == nil {
		return s.cfg.DefaultSettings, nil
	}
	st, ok, err := s.cfg.Settings.Settings(ctx)
	if err != nil {
		return Settings{}, err
	}
	if !ok {
		return s.cfg.DefaultSettings, nil
	}
	return st, nil
}

func (s *Server) getSettings(c *gin.Context) (any, error) { return s.settings(c.Request.Context()) }

func (s *Server) putSettings(c *gin.Context) (any, error) {
	var st Settings
	if err := decodeStrict(c, &st); err != nil {
		return nil, err
	}
	if _, err := time.LoadLocation(st.TimeZone); err != nil || st.TimeZone == "" {
		return nil, invalid("timeZone", "unknown time zone %q (an IANA name such as Europe/Paris)", st.TimeZone)
	}
	if st.EventRetentionDays < 1 || st.EventRetentionDays > 3650 {
		return nil, invalid("eventRetentionDays", "from 1 to 3650")
	}
	if s.cfg.Settings == nil {
		return nil, fmt.Errorf("settings store: %w", ErrNotImplemented)
	}
	if err := s.cfg.Settings.PutSettings(c.Request.Context(), st); err != nil {
		return nil, err
	}
	return st, nil
}

// ---- backups and restores

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
	if s.cfg.Restores == nil {
		return nil, fmt.Errorf("restores through the API: the restore engine is not wired into this daemon yet: %w", ErrNotImplemented)
	}
	info, err := s.startTask(c, "restore", req.Point, func(ctx context.Context, rep *task.Reporter) (any, error) {
		res, err := s.cfg.Restores.Restore(ctx, req, rep)
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
	if s.cfg.Restores == nil {
		return nil, fmt.Errorf("disk restores through the API: the restore engine is not wired into this daemon yet: %w", ErrNotImplemented)
	}
	info, err := s.startTask(c, "restore-disk", req.Point, func(ctx context.Context, rep *task.Reporter) (any, error) {
		res, err := s.cfg.Restores.RestoreDisk(ctx, req, rep)
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
