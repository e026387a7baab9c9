package web

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/internal/task"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/service/repos"
)

// Every response — API, errors, unknown routes — carries the console's
// security headers.
func TestSecurityHeaders(t *testing.T) {
	f := newFixture(t, nil)
	for _, tc := range []struct {
		method, path string
		opts         []reqOpt
		status       int
	}{
		{"GET", "/healthz", nil, 200},
		{"GET", "/api/v1/jobs", []reqOpt{bearer(f.tokens[auth.RoleRestoreOnly])}, 200},
		{"GET", "/api/v1/jobs", nil, 401},
		{"GET", "/api/v1/no/such/route", nil, 404},
		{"GET", "/", nil, 200}, // the console's index
		{"DELETE", "/healthz", nil, 405},
	} {
		r := f.do(tc.method, tc.path, nil, tc.opts...)
		if r.status != tc.status {
			t.Fatalf("%s %s: %d", tc.method, tc.path, r.status)
		}
		for h, want := range map[string]string{"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"} {
			if got := r.header.Get(h); got != want {
				t.Errorf("%s %s: %s = %q, want %q", tc.method, tc.path, h, got, want)
			}
		}
		// The console's files may tighten the policy, never loosen it.
		csp := r.header.Get("Content-Security-Policy")
		for _, dir := range strings.Split(ConsoleCSP, "; ") {
			if !strings.Contains(csp, dir) {
				t.Errorf("%s %s: CSP %q lacks %q", tc.method, tc.path, csp, dir)
			}
		}
	}
	if !strings.Contains(ConsoleCSP, "frame-ancestors 'none'") || strings.Contains(ConsoleCSP, "unsafe-inline") {
		t.Fatalf("CSP %q", ConsoleCSP)
	}
}

type staticTopology struct {
	nodes   []InventoryNode
	targets RestoreTargets
	err     error
}

func (s staticTopology) Nodes(ctx context.Context) ([]InventoryNode, error) { return s.nodes, s.err }
func (s staticTopology) Targets(ctx context.Context) (RestoreTargets, error) {
	return s.targets, s.err
}

func TestInventoryAndRestoreTargets(t *testing.T) {
	topo := staticTopology{
		nodes: []InventoryNode{
			{ID: "datacenter-2", Type: NodeDatacenter, Name: "DC0", Path: "/DC0"},
			{ID: "group-4", Type: NodeFolder, Name: "vm", Parent: "datacenter-2", Path: "/DC0/vm"},
			{ID: "vm-42", Type: NodeVM, Name: "web01", Parent: "group-4", Path: "/DC0/vm/web01", InstanceUUID: testVM.InstanceUUID},
		},
		targets: RestoreTargets{Datacenters: []TargetDatacenter{{Name: "DC0", Folders: []string{"/DC0/vm"},
			Datastores: []TargetDatastore{{Name: "LocalDS_0", Capacity: 100, Free: 40}}}}},
	}
	ro := bearer("")
	tests := []struct {
		name   string
		topo   Topology
		path   string
		status int
		code   string
	}{
		{"no vCenter: inventory", nil, "/api/v1/inventory", 503, "vcenter_not_configured"},
		{"no vCenter: targets", nil, "/api/v1/restore-targets", 503, "vcenter_not_configured"},
		{"vCenter down", staticTopology{err: errors.New("connection refused")}, "/api/v1/inventory", 503, "unavailable"},
		{"inventory", topo, "/api/v1/inventory", 200, ""},
		{"targets", topo, "/api/v1/restore-targets", 200, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(c *Config) { c.Topology = tc.topo })
			ro = bearer(f.tokens[auth.RoleRestoreOnly])
			r := f.do("GET", tc.path, nil, ro)
			if r.status != tc.status {
				t.Fatalf("status %d %s", r.status, r.body)
			}
			if tc.code != "" {
				if got := r.errBody(t).Code; got != tc.code {
					t.Fatalf("code %q", got)
				}
				return
			}
			if strings.HasSuffix(tc.path, "inventory") {
				var inv InventoryResponse
				r.json(t, &inv)
				if len(inv.Nodes) != 3 || inv.Nodes[2].InstanceUUID != testVM.InstanceUUID || inv.Nodes[2].Parent != "group-4" {
					t.Fatalf("inventory %s", r.body)
				}
				return
			}
			// Empty lists are [] (the console iterates them), never null.
			if !strings.Contains(string(r.body), `"compute":[]`) || !strings.Contains(string(r.body), `"free":40`) {
				t.Fatalf("targets %s", r.body)
			}
		})
	}
}

func TestJobRuns(t *testing.T) {
	f := newFixture(t, nil)
	if r := f.admin("POST", "/api/v1/jobs", validJob("nightly")); r.status != 201 {
		t.Fatalf("create job: %d %s", r.status, r.body)
	}
	ctx := context.Background()
	base := time.Date(2026, 11, 20, 22, 0, 0, 0, time.UTC)
	runs := []policy.JobRun{
		{ID: "nightly/1", Job: "nightly", WindowID: "w1", Start: base, End: base.Add(time.Hour), VMs: []policy.VMOutcome{
			{VM: testVM.InstanceUUID, Name: "web01", Status: policy.OutcomeSucceeded, Attempts: 1, Bytes: 100, Stored: 10, Point: "abc"}}},
		{ID: "nightly/2", Job: "nightly", Manual: true, Start: base.Add(24 * time.Hour), End: base.Add(25 * time.Hour), VMs: []policy.VMOutcome{
			{VM: testVM.InstanceUUID, Name: "web01", Status: policy.OutcomeSucceeded},
			{VM: "other", Name: "db01", Status: policy.OutcomeFailed, Error: "snapshot failed"}}},
		{ID: "nightly/3", Job: "nightly", Missed: true, Start: base.Add(48 * time.Hour), End: base.Add(49 * time.Hour)},
		{ID: "nightly/4", Job: "nightly", Start: base.Add(72 * time.Hour), VMs: []policy.VMOutcome{{VM: "other", Name: "db01", Status: policy.OutcomeRunning}}},
		{ID: "other/1", Job: "other", Start: base, End: base.Add(time.Hour)},
		{ID: "nightly/0a", Job: "nightly", Interrupted: true, ResumedBy: "nightly/0b", Start: base.Add(-48 * time.Hour), End: base.Add(-47 * time.Hour)},
		{ID: "nightly/0b", Job: "nightly", ResumeOf: "nightly/0a", Start: base.Add(-46 * time.Hour), End: base.Add(-45 * time.Hour)},
	}
	for _, r := range runs {
		if err := f.db.PutRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	ro := bearer(f.tokens[auth.RoleRestoreOnly])
	r := f.do("GET", "/api/v1/jobs/nightly/runs", nil, ro)
	if r.status != 200 {
		t.Fatalf("runs: %d %s", r.status, r.body)
	}
	var got []JobRunView
	r.json(t, &got)
	want := []struct{ id, state, trigger string }{
		{"nightly/4", "running", "window"}, {"nightly/3", "missed", "missed"}, {"nightly/2", "partial", "manual"}, {"nightly/1", "succeeded", "window"},
		{"nightly/0b", "succeeded", "resume"}, {"nightly/0a", "interrupted", "window"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d runs: %s", len(got), r.body)
	}
	for i, w := range want {
		if got[i].ID != w.id || got[i].State != w.state || got[i].Trigger != w.trigger {
			t.Errorf("run %d: %+v, want %+v", i, got[i], w)
		}
	}
	if got[0].Finished != nil || got[3].Finished == nil {
		t.Fatalf("finished: %v %v", got[0].Finished, got[3].Finished)
	}
	v := got[3].VMs[0]
	if v.VM != "web01" || v.InstanceUUID != testVM.InstanceUUID || v.State != "succeeded" || v.RestorePoint != "abc" || v.BytesRead != 100 || v.NewBytes != 10 {
		t.Fatalf("vm outcome %+v", v)
	}
	if !strings.Contains(string(r.body), `"finished":null`) || !strings.Contains(string(r.body), `"restorePoint":`) {
		t.Fatalf("contract fields: %s", r.body)
	}
	r = f.do("GET", "/api/v1/jobs/nightly/runs?limit=1", nil, ro)
	r.json(t, &got)
	if len(got) != 1 || got[0].ID != "nightly/4" {
		t.Fatalf("limit 1: %s", r.body)
	}
	for _, tc := range []struct {
		path   string
		status int
		field  string
	}{
		{"/api/v1/jobs/nightly/runs?limit=0", 400, "limit"},
		{"/api/v1/jobs/nightly/runs?limit=x", 400, "limit"},
		{"/api/v1/jobs/nightly/runs?limit=1001", 400, "limit"},
		{"/api/v1/jobs/nope/runs", 404, ""},
	} {
		r := f.do("GET", tc.path, nil, ro)
		if r.status != tc.status {
			t.Errorf("%s: %d %s", tc.path, r.status, r.body)
			continue
		}
		if tc.field != "" {
			r.fieldNamed(t, tc.field)
		} else {
			r.errBody(t)
		}
	}
}

func TestRetentionPreviewUnsaved(t *testing.T) {
	f := newFixture(t, nil)
	ro := bearer(f.tokens[auth.RoleRestoreOnly])
	bad := []struct {
		name, body string
		status     int
		field      string
	}{
		{"unknown field", `{"repository":"main","retention":{"last":1},"delete":true}`, 400, "delete"},
		{"wrong type", `{"repository":"main","retention":{"last":"1"}}`, 400, "retention.last"},
		{"no repository", `{"retention":{"last":1}}`, 422, "repository"},
		{"unknown repository", `{"repository":"nope","retention":{"last":1}}`, 422, "repository"},
		{"negative", `{"repository":"main","retention":{"last":-1}}`, 422, "retention.last"},
		{"keeps nothing", `{"repository":"main","retention":{}}`, 422, "retention"},
		{"no retention", `{"repository":"main"}`, 422, "retention"},
		{"unknown preset", `{"repository":"main","retention":{"preset":"all","last":1}}`, 422, "retention.preset"},
		{"huge", `{"repository":"` + strings.Repeat("x", MaxBodyBytes) + `"}`, 413, ""},
		{"empty", ``, 400, ""},
	}
	for _, tc := range bad {
		r := f.do("POST", "/api/v1/retention-preview", tc.body, ro)
		if r.status != tc.status {
			t.Errorf("%s: %d %s", tc.name, r.status, truncate(string(r.body), 200))
			continue
		}
		if tc.field != "" {
			r.fieldNamed(t, tc.field)
		} else {
			r.errBody(t)
		}
	}
	tests := []struct {
		name         string
		body         map[string]any
		keep, remove int
	}{
		{"all points, keep 1 per VM", map[string]any{"repository": "main", "retention": map[string]any{"last": 1}}, 2, 1},
		{"one VM", map[string]any{"repository": "main", "retention": map[string]any{"last": 1}, "vm": testVM.InstanceUUID}, 1, 1},
		{"one job", map[string]any{"repository": "main", "retention": map[string]any{"last": 2}, "job": "nightly"}, 2, 0},
		{"preset", map[string]any{"repository": "main", "retention": map[string]any{"preset": "few", "last": 7, "weekly": 4, "monthly": 3}}, 3, 0},
	}
	for _, tc := range tests {
		r := f.do("POST", "/api/v1/retention-preview", tc.body, ro)
		if r.status != 200 {
			t.Fatalf("%s: %d %s", tc.name, r.status, r.body)
		}
		var p RetentionPreview
		r.json(t, &p)
		if p.Keep != tc.keep || p.Remove != tc.remove || len(p.Decisions) != tc.keep+tc.remove {
			t.Errorf("%s: keep %d remove %d: %s", tc.name, p.Keep, p.Remove, r.body)
		}
		for _, d := range p.Decisions {
			if len(d.Reasons) == 0 {
				t.Errorf("%s: decision without reasons %+v", tc.name, d)
			}
		}
	}
	// A preview removes nothing.
	var pts []RestorePoint
	f.do("GET", "/api/v1/restore-points", nil, ro).json(t, &pts)
	if len(pts) != len(f.points) {
		t.Fatalf("points after previews: %d, want %d", len(pts), len(f.points))
	}
}

func TestRepositoryUsageAndDetail(t *testing.T) {
	f := newFixture(t, nil)
	ro := bearer(f.tokens[auth.RoleRestoreOnly])
	// Two more points on the day of the newest: one sample per day merges them.
	commitPoint(t, f.repo, testVM, "nightly", time.Date(2026, 11, 28, 23, 30, 0, 0, time.UTC))
	var perDay, perPoint []UsageSample
	r := f.do("GET", "/api/v1/repositories/main/usage", nil, ro)
	if r.status != 200 {
		t.Fatalf("usage: %d %s", r.status, r.body)
	}
	r.json(t, &perDay)
	f.do("GET", "/api/v1/repositories/main/usage?per=point", nil, ro).json(t, &perPoint)
	if len(perPoint) != 4 || len(perDay) != 3 {
		t.Fatalf("samples per point %d, per day %d", len(perPoint), len(perDay))
	}
	for i, s := range perPoint {
		if s.Points != i+1 || (i > 0 && (s.Time.Before(perPoint[i-1].Time) || s.LogicalBytes <= perPoint[i-1].LogicalBytes || s.StoredBytes < perPoint[i-1].StoredBytes)) || s.StoredBytes <= 0 {
			t.Fatalf("sample %d: %+v", i, s)
		}
	}
	if last := perDay[len(perDay)-1]; last != perPoint[len(perPoint)-1] {
		t.Fatalf("last day %+v != last point %+v", last, perPoint[len(perPoint)-1])
	}
	for _, tc := range []struct {
		path   string
		status int
	}{{"/api/v1/repositories/nope/usage", 404}, {"/api/v1/repositories/main/usage?per=hour", 400}} {
		if r := f.do("GET", tc.path, nil, ro); r.status != tc.status {
			t.Errorf("%s: %d", tc.path, r.status)
		} else {
			r.errBody(t)
		}
	}

	var det RepositoryDetail
	r = f.do("GET", "/api/v1/repositories/main", nil, ro)
	r.json(t, &det)
	if det.DedupRatio <= 0 || det.CompressionRatio <= 0 || det.LastCheck != nil || det.ReclaimableBytes == nil || det.Stats == nil {
		t.Fatalf("detail %s", r.body)
	}
	if !strings.Contains(string(r.body), `"lastCheck":null`) {
		t.Fatalf("lastCheck must be null before any check: %s", r.body)
	}
	// After a check task, its outcome is the last check.
	r = f.do("POST", "/api/v1/repositories/main/check", nil, bearer(f.tokens[auth.RoleOperator]))
	var info task.Info
	r.json(t, &info)
	waitTask(t, f, info.ID)
	f.do("GET", "/api/v1/repositories/main", nil, ro).json(t, &det)
	if det.LastCheck == nil || !det.LastCheck.OK || det.LastCheck.Task != info.ID || det.LastCheck.Findings == nil {
		t.Fatalf("last check %+v", det.LastCheck)
	}
	// A later maintenance check of the scheduler (its state and its event) takes over.
	at := time.Now().Add(time.Minute)
	if err := f.db.AddEvent(context.Background(), policy.Event{Time: at, Severity: policy.SeverityError, Kind: policy.EventCheckDamage, Repository: "main", Message: "pack 1234 is missing"}); err != nil {
		t.Fatal(err)
	}
	f.do("GET", "/api/v1/repositories/main", nil, ro).json(t, &det)
	if det.LastCheck == nil || det.LastCheck.Source != "task" {
		t.Fatalf("an event without maintenance state is not a check: %+v", det.LastCheck)
	}
	if err := f.db.PutMaintenance(context.Background(), policy.MaintenanceState{Repository: "main", LastQuickCheck: at}); err != nil {
		t.Fatal(err)
	}
	f.do("GET", "/api/v1/repositories/main", nil, ro).json(t, &det)
	if det.LastCheck == nil || det.LastCheck.OK || det.LastCheck.Source != "maintenance" || len(det.LastCheck.Findings) != 1 {
		t.Fatalf("last check after the damage event %+v", det.LastCheck)
	}
}

func waitTask(t *testing.T, f *fixture, id string) task.Info {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		info, err := f.tasks.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Final() {
			return info
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("task %s did not finish", id)
	return task.Info{}
}

func TestDashboard(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	ro := bearer(f.tokens[auth.RoleRestoreOnly])
	// Empty-ish appliance: web01 has points, a second inventory VM has none.
	f.inv.Set(testVM, policy.VM{InstanceUUID: "4210a1b2-0000-0000-0000-000000000002", Name: "db01", MoRef: "vm-43"})
	var d Dashboard
	r := f.do("GET", "/api/v1/dashboard", nil, ro)
	if r.status != 200 {
		t.Fatalf("dashboard: %d %s", r.status, r.body)
	}
	r.json(t, &d)
	// Without a job, web01's points are ad hoc: not protected.
	if d.VMs != (DashboardVMs{Protected: 0, Unprotected: 2}) || d.NextWindow != nil || len(d.RunningTasks) != 0 || len(d.Repositories) != 1 {
		t.Fatalf("dashboard %s", r.body)
	}
	if !strings.Contains(string(r.body), `"nextWindow":null`) || !strings.Contains(string(r.body), `"recentEvents":[]`) {
		t.Fatalf("contract nulls and empty lists: %s", r.body)
	}
	rep := d.Repositories[0]
	if rep.ID != "main" || rep.StoredBytes <= 0 || rep.LogicalBytes <= 0 || rep.DedupRatio <= 0 || rep.Damage != 0 {
		t.Fatalf("repository %+v", rep)
	}

	// A job with a window, a failed VM, a running task, events.
	if r := f.admin("POST", "/api/v1/jobs", validJob("nightly")); r.status != 201 {
		t.Fatal(r.status)
	}
	now := f.clk.Now()
	if err := f.db.PutVMState(ctx, policy.VMState{Job: "nightly", VM: testVM.InstanceUUID, Name: "web01", Selected: true, LastAttempt: now.Add(-time.Hour), LastSuccess: now.Add(-48 * time.Hour), LastError: "snapshot failed"}); err != nil {
		t.Fatal(err)
	}
	for i, e := range []policy.Event{
		{Time: now.Add(-48 * time.Hour), Severity: policy.SeverityInfo, Kind: policy.EventJobStarted, Message: "too old"},
		{Time: now.Add(-2 * time.Hour), Severity: policy.SeverityInfo, Kind: policy.EventJobStarted, Message: "older"},
		{Time: now.Add(-time.Hour), Severity: policy.SeverityError, Kind: policy.EventVMFailed, Message: "newest"},
	} {
		if err := f.db.AddEvent(ctx, e); err != nil {
			t.Fatal(i, err)
		}
	}
	release := make(chan struct{})
	defer close(release)
	info, err := f.tasks.Start("backup", "web01", func(ctx context.Context, rep *task.Reporter) (any, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil, ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	f.do("GET", "/api/v1/dashboard", nil, ro).json(t, &d)
	// web01 failed; old01's points are ad hoc (no job, not in vCenter):
	// counted nowhere; db01 has none.
	if d.VMs != (DashboardVMs{Protected: 0, Failed: 1, Unprotected: 1}) {
		t.Fatalf("vms %+v", d.VMs)
	}
	if len(d.RunningTasks) != 1 || d.RunningTasks[0].ID != info.ID {
		t.Fatalf("running tasks %+v", d.RunningTasks)
	}
	// validJob's window opens Monday 22:00; the fake clock is Sunday 29 Nov 2026 12:00 UTC.
	if d.NextWindow == nil || d.NextWindow.Job != "nightly" || !d.NextWindow.Start.Equal(time.Date(2026, 11, 30, 22, 0, 0, 0, time.UTC)) || d.NextWindow.Open {
		t.Fatalf("next window %+v", d.NextWindow)
	}
	if len(d.RecentEvents) != 2 || d.RecentEvents[0].Message != "newest" || d.RecentEvents[1].Message != "older" {
		t.Fatalf("recent events %+v", d.RecentEvents)
	}
}

// Statistics (a walk of every point) are computed once for many readers
// and again as soon as the points change.
func TestRepoStatsCached(t *testing.T) {
	f := newFixture(t, nil)
	rs := f.srv.cfg.Repositories.(*repos.Set)
	ro := bearer(f.tokens[auth.RoleRestoreOnly])
	runs := rs.StatsLoads
	for _, p := range []string{"/api/v1/repositories/main", "/api/v1/dashboard", "/api/v1/repositories/main"} {
		if r := f.do("GET", p, nil, ro); r.status != 200 {
			t.Fatalf("%s: %d", p, r.status)
		}
	}
	if n := runs(); n != 1 {
		t.Fatalf("statistics computed %d times for unchanged points", n)
	}
	commitPoint(t, f.repo, testVM, "nightly", time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC))
	var det RepositoryDetail
	f.do("GET", "/api/v1/repositories/main", nil, ro).json(t, &det)
	if n := runs(); n != 2 || det.Stats.Points != len(f.points)+1 {
		t.Fatalf("after a new point: %d computations, %d points", n, det.Stats.Points)
	}
	f.clk.Advance(repos.DefaultStatsTTL)
	f.do("GET", "/api/v1/repositories/main", nil, ro)
	if n := runs(); n != 3 {
		t.Fatalf("after the TTL: %d computations", n)
	}
}
