package web

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/internal/task"
	"github.com/vmvault/vmvault/policy"
)

func (f *fixture) jobCount() int {
	f.t.Helper()
	jobs, err := f.db.Jobs(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	return len(jobs)
}

// Bad input on the job endpoints gets 4xx with the error shape naming the
// field, and changes nothing.
func TestJobsBadInput(t *testing.T) {
	f := newFixture(t, nil)
	if r := f.admin("POST", "/api/v1/jobs", validJob("keep")); r.status != 201 {
		t.Fatalf("seed job: %d %s", r.status, r.body)
	}
	noRepo := validJob("a")
	delete(noRepo, "repository")
	unknownRepo := validJob("a")
	unknownRepo["repository"] = "nope"
	badRet := validJob("a")
	badRet["retention"] = map[string]any{"last": 0}
	with := func(kv ...any) map[string]any {
		j := validJob("a")
		for i := 0; i < len(kv); i += 2 {
			j[kv[i].(string)] = kv[i+1]
		}
		return j
	}
	tests := []struct {
		name   string
		body   any
		status int
		field  string
	}{
		{"missing repository", noRepo, 422, "repository"},
		{"unknown repository", unknownRepo, 422, "repository"},
		{"keeps nothing", badRet, 422, "retention"},
		{"unknown VSS type", with("quiesce", "application", "vssType", "incremental"), 422, "vssType"},
		{"VSS full without application", with("quiesce", "filesystem", "vssType", "full"), 422, "vssType"},
		{"VSS full with the default mode", with("vssType", "full"), 422, "vssType"},
		{"VSS type not a string", `{"id":"a","name":"A","repository":"main","quiesce":"application","vssType":5}`, 400, "vssType"},
		{"script without a command", with("scripts", map[string]any{"preVM": map[string]any{"command": []string{}}}), 422, "scripts.preVM.command"},
		{"script with a relative program", with("scripts", map[string]any{"postJob": map[string]any{"command": []string{"./notify"}}}), 422, "scripts.postJob.command"},
		{"script timeout too long", with("scripts", map[string]any{"preJob": map[string]any{"command": []string{"true"}, "timeoutSeconds": 90000}}), 422, "scripts.preJob.timeoutSeconds"},
		{"script policy unknown", with("scripts", map[string]any{"postVM": map[string]any{"command": []string{"true"}, "onFailure": "ignore"}}), 422, "scripts.postVM.onFailure"},
		{"script unknown hook", with("scripts", map[string]any{"during": map[string]any{"command": []string{"true"}}}), 400, "during"},
		{"missing name", map[string]any{"id": "a", "repository": "main", "retention": map[string]any{"last": 1}, "selection": map[string]any{"vms": []string{"x"}}}, 422, "name"},
		{"unknown field", `{"id":"a","name":"A","repository":"main","colour":"red"}`, 400, "colour"},
		{"wrong type", `{"id":"a","name":"A","repository":"main","priority":"high"}`, 400, "priority"},
		{"nested wrong type", `{"id":"a","name":"A","repository":"main","selection":{"vms":"x"}}`, 400, "selection.vms"},
		{"bad window", `{"id":"a","name":"A","repository":"main","window":{"location":"UTC","days":{"funday":["22:00-06:00"]}}}`, 400, "window"},
		{"not json", `id=a`, 400, ""},
		{"trailing", `{"id":"a"} {"id":"b"}`, 400, ""},
		{"empty", ``, 400, ""},
		{"huge", `{"id":"a","name":"` + strings.Repeat("x", MaxBodyBytes) + `"}`, 413, ""},
		{"exists", validJob("keep"), 409, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := f.admin("POST", "/api/v1/jobs", tc.body)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			if tc.field != "" {
				r.fieldNamed(t, tc.field)
			} else {
				r.errBody(t)
			}
			if n := f.jobCount(); n != 1 {
				t.Fatalf("%d jobs after a rejected request", n)
			}
		})
	}
	// PUT: the id in the body must match the path; unknown jobs are 404.
	other := validJob("other")
	if r := f.admin("PUT", "/api/v1/jobs/keep", other); r.status != 422 {
		t.Fatalf("mismatched id: %d", r.status)
	} else {
		r.fieldNamed(t, "id")
	}
	if r := f.admin("PUT", "/api/v1/jobs/missing", validJob("missing")); r.status != 404 {
		t.Fatalf("put unknown: %d", r.status)
	}
	if r := f.admin("GET", "/api/v1/jobs/"+strings.Repeat("x", 200), nil); r.status != 400 {
		t.Fatalf("long id: %d", r.status)
	}
}

func TestJobsLifecycle(t *testing.T) {
	sched := &fakeScheduler{}
	f := newFixture(t, func(c *Config) { c.Scheduler = sched })
	r := f.admin("POST", "/api/v1/jobs", validJob("nightly"))
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	var jr jobResponse
	r.json(t, &jr)
	if jr.Job.ID != "nightly" || len(jr.Warnings) != 0 || sched.reloads != 1 {
		t.Fatalf("created %+v, reloads %d", jr, sched.reloads)
	}
	// A selection the inventory does not know warns but saves.
	j := validJob("nightly")
	j["selection"] = map[string]any{"vms": []string{"unknown-uuid"}}
	r = f.admin("PUT", "/api/v1/jobs/nightly", j)
	r.json(t, &jr)
	if r.status != 200 || len(jr.Warnings) == 0 {
		t.Fatalf("put: %d %s", r.status, r.body)
	}
	var jobs []policy.Job
	f.admin("GET", "/api/v1/jobs", nil).json(t, &jobs)
	if len(jobs) != 1 || jobs[0].Selection.VMs[0] != "unknown-uuid" {
		t.Fatalf("list %+v", jobs)
	}
	// Retention preview: "last 1" keeps the newer of the two nightly points.
	var pv RetentionPreview
	r = f.admin("GET", "/api/v1/jobs/nightly/retention-preview", nil)
	r.json(t, &pv)
	if r.status != 200 || pv.Keep != 1 || pv.Remove != 1 || pv.Decisions[1].Point != f.points[0].ID || pv.BytesFreed <= 0 {
		t.Fatalf("preview %d %+v", r.status, pv)
	}
	// Run now goes through the scheduler.
	r = f.do("POST", "/api/v1/jobs/nightly/run", nil, bearer(f.tokens[auth.RoleOperator]))
	if r.status != 202 || sched.ran != "nightly" {
		t.Fatalf("run: %d %s", r.status, r.body)
	}
	sched.err = policy.ErrJobDisabled
	if r := f.admin("POST", "/api/v1/jobs/nightly/run", nil); r.status != 409 {
		t.Fatalf("disabled: %d", r.status)
	}
	if r := f.admin("DELETE", "/api/v1/jobs/nightly", nil); r.status != 204 {
		t.Fatalf("delete: %d", r.status)
	}
	if r := f.admin("GET", "/api/v1/jobs/nightly", nil); r.status != 404 || r.errBody(t).Code != "not_found" {
		t.Fatalf("after delete: %d", r.status)
	}
	if r := f.admin("POST", "/api/v1/jobs/nightly/run", nil); r.status != 404 {
		t.Fatalf("run deleted: %d", r.status)
	}
}

type fakeScheduler struct {
	reloads int
	ran     string
	err     error
}

func (s *fakeScheduler) RunNow(ctx context.Context, job string) (string, error) {
	if s.err != nil {
		return "", s.err
	}
	s.ran = job
	return "run-1", nil
}
func (s *fakeScheduler) Reload(ctx context.Context) error { s.reloads++; return nil }

func TestRestorePoints(t *testing.T) {
	f := newFixture(t, nil)
	op := bearer(f.tokens[auth.RoleOperator])
	list := func(q string) []RestorePoint {
		t.Helper()
		var pts []RestorePoint
		r := f.admin("GET", "/api/v1/restore-points"+q, nil)
		if r.status != 200 {
			t.Fatalf("list %s: %d %s", q, r.status, r.body)
		}
		r.json(t, &pts)
		return pts
	}
	if pts := list(""); len(pts) != 3 || pts[0].ID != f.points[1].ID {
		t.Fatalf("all: %+v", pts)
	}
	if pts := list("?vm=" + testVM.InstanceUUID); len(pts) != 2 {
		t.Fatalf("by vm: %d", len(pts))
	}
	if pts := list("?vm=old01&repository=main"); len(pts) != 1 {
		t.Fatalf("by vm name: %d", len(pts))
	}
	if pts := list("?job=nightly&from=2026-11-28T00:00:00Z&to=2026-11-29T00:00:00Z"); len(pts) != 1 || pts[0].ID != f.points[1].ID {
		t.Fatalf("by time: %+v", pts)
	}
	if r := f.admin("GET", "/api/v1/restore-points?from=yesterday", nil); r.status != 400 {
		t.Fatalf("bad time: %d", r.status)
	} else {
		r.fieldNamed(t, "from")
	}
	if r := f.admin("GET", "/api/v1/restore-points?repository=nope", nil); r.status != 404 {
		t.Fatalf("unknown repository: %d", r.status)
	}
	id := f.points[0].ID
	var p RestorePoint
	f.admin("GET", "/api/v1/restore-points/"+id[:12], nil).json(t, &p)
	if p.ID != id || p.Repository != "main" || p.Job != "nightly" || p.VM.Name != "web01" || len(p.Disks) != 1 {
		t.Fatalf("get by prefix: %+v", p)
	}
	for _, bad := range []string{"xyz", "zzzzzzzzzz", strings.Repeat("a", 65)} {
		if r := f.admin("GET", "/api/v1/restore-points/"+bad, nil); r.status != 400 {
			t.Fatalf("bad id %q: %d", bad, r.status)
		}
	}
	if r := f.admin("GET", "/api/v1/restore-points/"+strings.Repeat("0", 64), nil); r.status != 404 {
		t.Fatalf("unknown: %d", r.status)
	}
	// Lock (operator), delete refused while locked (admin), unlock, delete.
	r := f.do("POST", "/api/v1/restore-points/"+id+"/lock", nil, op)
	r.json(t, &p)
	if r.status != 200 || !p.Locked {
		t.Fatalf("lock: %d %s", r.status, r.body)
	}
	if r := f.do("DELETE", "/api/v1/restore-points/"+id, nil, op); r.status != 403 {
		t.Fatalf("operator delete: %d", r.status)
	}
	if r := f.admin("DELETE", "/api/v1/restore-points/"+id, nil); r.status != 409 || r.errBody(t).Code != "point_locked" {
		t.Fatalf("delete locked: %d %s", r.status, r.body)
	}
	f.do("POST", "/api/v1/restore-points/"+id+"/unlock", nil, op).json(t, &p)
	if p.Locked {
		t.Fatal("still locked")
	}
	if r := f.admin("DELETE", "/api/v1/restore-points/"+id, nil); r.status != 204 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	if pts := list(""); len(pts) != 2 {
		t.Fatalf("after delete: %d", len(pts))
	}
}

// Cookie sessions: the CSRF header is required on every change, not on reads;
// logout ends the session.
func TestSessionCSRF(t *testing.T) {
	f := newFixture(t, nil)
	r := f.do("POST", "/api/v1/auth/login", map[string]string{"username": "admin", "password": testAdminPassword})
	if r.status != 200 {
		t.Fatalf("login: %d %s", r.status, r.body)
	}
	var lr loginResponse
	r.json(t, &lr)
	var session *http.Cookie
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if c.Name == sessionCookie {
			session = c
			if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
				t.Fatalf("session cookie flags: %+v", c)
			}
		}
	}
	if session == nil || lr.CSRFToken == "" || lr.Role != auth.RoleAdministrator {
		t.Fatalf("login response %+v", lr)
	}
	cookie := func(r *http.Request) { r.AddCookie(&http.Cookie{Name: sessionCookie, Value: session.Value}) }
	csrf := func(v string) reqOpt { return func(r *http.Request) { r.Header.Set(csrfHeader, v) } }
	if r := f.do("GET", "/api/v1/jobs", nil, cookie); r.status != 200 {
		t.Fatalf("read with cookie: %d", r.status)
	}
	for name, opts := range map[string][]reqOpt{"no header": {cookie}, "wrong header": {cookie, csrf("nope")}} {
		r := f.do("POST", "/api/v1/jobs", validJob("x"), opts...)
		if r.status != 403 || r.errBody(t).Code != "csrf" {
			t.Fatalf("%s: %d %s", name, r.status, r.body)
		}
	}
	if f.jobCount() != 0 {
		t.Fatal("a request without CSRF changed something")
	}
	if r := f.do("POST", "/api/v1/jobs", validJob("x"), cookie, csrf(lr.CSRFToken)); r.status != 201 {
		t.Fatalf("with CSRF: %d %s", r.status, r.body)
	}
	if r := f.do("POST", "/api/v1/auth/logout", nil, cookie, csrf(lr.CSRFToken)); r.status != 204 {
		t.Fatalf("logout: %d", r.status)
	}
	if r := f.do("GET", "/api/v1/jobs", nil, cookie); r.status != 401 {
		t.Fatalf("after logout: %d", r.status)
	}
	// Wrong password and wrong types.
	if r := f.do("POST", "/api/v1/auth/login", map[string]string{"username": "admin", "password": "wrong"}); r.status != 401 {
		t.Fatalf("wrong password: %d", r.status)
	}
	if r := f.do("POST", "/api/v1/auth/login", `{"username":"admin","password":1}`); r.status != 400 {
		t.Fatalf("wrong type: %d", r.status)
	} else {
		r.fieldNamed(t, "password")
	}
}

func TestLoginRateLimited(t *testing.T) {
	f := newFixture(t, func(c *Config) {})
	am, _ := auth.NewManager(auth.Config{Clock: f.clk, Store: mustAuthStore(t, f), UserBurst: 2, IPBurst: 100, Hash: auth.HashParams{Time: 1, MemoryKiB: 64, Threads: 1}})
	f.srv.cfg.Auth = am
	for range 2 {
		f.do("POST", "/api/v1/auth/login", map[string]string{"username": "admin", "password": "wrong"})
	}
	r := f.do("POST", "/api/v1/auth/login", map[string]string{"username": "admin", "password": testAdminPassword})
	if r.status != 429 || r.header.Get("Retry-After") == "" || r.errBody(t).Code != "rate_limited" {
		t.Fatalf("third attempt: %d %v %s", r.status, r.header, r.body)
	}
	f.clk.Advance(time.Minute)
	if r := f.do("POST", "/api/v1/auth/login", map[string]string{"username": "admin", "password": testAdminPassword}); r.status != 200 {
		t.Fatalf("after a minute: %d %s", r.status, r.body)
	}
}

func TestTokens(t *testing.T) {
	f := newFixture(t, nil)
	r := f.admin("POST", "/api/v1/auth/tokens", map[string]any{"name": "ci", "role": "restore-only"})
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	var tr tokenResponse
	r.json(t, &tr)
	if !strings.HasPrefix(tr.Token, "vmv_") || r.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("token %q", tr.Token)
	}
	var me auth.Principal
	f.do("GET", "/api/v1/auth/me", nil, bearer(tr.Token)).json(t, &me)
	if me.Role != auth.RoleRestoreOnly {
		t.Fatalf("me %+v", me)
	}
	// The secret is never listed.
	lr := f.admin("GET", "/api/v1/auth/tokens", nil)
	if strings.Contains(string(lr.body), tr.Token) || strings.Contains(string(lr.body), "hash") {
		t.Fatalf("token list leaks: %s", lr.body)
	}
	if r := f.admin("POST", "/api/v1/auth/tokens", map[string]any{"name": "x", "role": "root"}); r.status != 422 {
		t.Fatalf("bad role: %d", r.status)
	} else {
		r.fieldNamed(t, "role")
	}
	if r := f.admin("DELETE", "/api/v1/auth/tokens/"+tr.Detail.ID, nil); r.status != 204 {
		t.Fatalf("revoke: %d", r.status)
	}
	if r := f.do("GET", "/api/v1/auth/me", nil, bearer(tr.Token)); r.status != 401 {
		t.Fatalf("revoked token: %d", r.status)
	}
}

// A repository check runs as a task; its SSE stream carries the snapshot and
// ends with the final state; the task is then listed and cannot be cancelled.
func TestCheckTaskSSE(t *testing.T) {
	f := newFixture(t, nil)
	op := bearer(f.tokens[auth.RoleOperator])
	r := f.do("POST", "/api/v1/repositories/main/check", `{"readData":true}`, op)
	if r.status != 202 {
		t.Fatalf("check: %d %s", r.status, r.body)
	}
	var info task.Info
	r.json(t, &info)
	req, _ := http.NewRequest("GET", f.http.URL+"/api/v1/tasks/"+info.ID+"/events", nil)
	op(req)
	res, err := f.http.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); res.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("events: %d %s", res.StatusCode, ct)
	}
	sc := bufio.NewScanner(res.Body)
	var events []string
	var last task.Info
	event := ""
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			event = v
			events = append(events, v)
		}
		if v, ok := strings.CutPrefix(line, "data: "); ok && event == "state" {
			if err := json.Unmarshal([]byte(v), &last); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(events) == 0 || events[0] != "state" || last.State != task.Succeeded {
		t.Fatalf("events %v, last %+v", events, last)
	}
	var detail TaskDetail
	f.admin("GET", "/api/v1/tasks/"+info.ID, nil).json(t, &detail)
	if detail.State != task.Succeeded || len(detail.Log) == 0 || detail.Result == nil {
		t.Fatalf("detail %+v", detail)
	}
	var list []task.Info
	f.admin("GET", "/api/v1/tasks?state=succeeded", nil).json(t, &list)
	if len(list) != 1 || list[0].ID != info.ID {
		t.Fatalf("list %+v", list)
	}
	if r := f.do("POST", "/api/v1/tasks/"+info.ID+"/cancel", nil, op); r.status != 409 {
		t.Fatalf("cancel finished: %d", r.status)
	}
	if r := f.do("POST", "/api/v1/tasks/nope/cancel", nil, op); r.status != 404 {
		t.Fatalf("cancel unknown: %d", r.status)
	}
	if r := f.do("POST", "/api/v1/repositories/nope/reclaim", nil, op); r.status != 404 {
		t.Fatalf("reclaim unknown: %d", r.status)
	}
	if r := f.do("POST", "/api/v1/repositories/main/check", `{"full":true}`, op); r.status != 400 {
		t.Fatalf("check unknown field: %d", r.status)
	}
}

func TestVMsEventsSettingsMetrics(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	if r := f.admin("POST", "/api/v1/jobs", validJob("nightly")); r.status != 201 {
		t.Fatal(r.status)
	}
	var vms []VMStatus
	f.admin("GET", "/api/v1/vms", nil).json(t, &vms)
	if len(vms) != 2 {
		t.Fatalf("vms %+v", vms)
	}
	web := vms[0]
	if !web.InInventory || !web.Protected || web.Points != 2 || web.LastPoint.ID != f.points[1].ID || len(web.Jobs) != 1 {
		t.Fatalf("web01 %+v", web)
	}
	// old01's points are all it has: vCenter lost it, no job selects it.
	if vms[1].InInventory || vms[1].Name != "old01" || vms[1].Protected || !vms[1].AdHoc {
		t.Fatalf("old01 %+v", vms[1])
	}
	f.inv.SetError(errors.New("vcenter down"))
	if r := f.admin("GET", "/api/v1/vms", nil); r.status != 503 {
		t.Fatalf("inventory down: %d", r.status)
	}

	base := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	for i, sev := range []policy.Severity{policy.SeverityInfo, policy.SeverityError, policy.SeverityWarning} {
		if err := f.db.AddEvent(ctx, policy.Event{Time: base.Add(time.Duration(i) * time.Hour), Severity: sev, Kind: "k", Job: "nightly", Message: "m"}); err != nil {
			t.Fatal(err)
		}
	}
	var evs []policy.Event
	f.admin("GET", "/api/v1/events?severity=warning&job=nightly", nil).json(t, &evs)
	if len(evs) != 2 {
		t.Fatalf("events %+v", evs)
	}
	f.admin("GET", "/api/v1/events?from=2026-11-29T01:30:00Z&kind=k", nil).json(t, &evs)
	if len(evs) != 1 {
		t.Fatalf("events from %+v", evs)
	}
	if r := f.admin("GET", "/api/v1/events?severity=fatal", nil); r.status != 400 {
		t.Fatalf("bad severity %d", r.status)
	}

	var st Settings
	f.admin("GET", "/api/v1/settings", nil).json(t, &st)
	if st.TimeZone != "UTC" || st.EventRetentionDays != 90 {
		t.Fatalf("defaults %+v", st)
	}
	if r := f.admin("PUT", "/api/v1/settings", Settings{TimeZone: "Mars/Olympus", EventRetentionDays: 9}); r.status != 422 {
		t.Fatalf("bad zone %d", r.status)
	} else {
		r.fieldNamed(t, "timeZone")
	}
	if r := f.admin("PUT", "/api/v1/settings", Settings{TimeZone: "Europe/Paris", EventRetentionDays: 30}); r.status != 200 {
		t.Fatalf("put settings %d %s", r.status, r.body)
	}
	f.do("GET", "/api/v1/settings", nil, bearer(f.tokens[auth.RoleRestoreOnly])).json(t, &st)
	if st.TimeZone != "Europe/Paris" || st.EventRetentionDays != 30 {
		t.Fatalf("saved %+v", st)
	}

	f.srv.ObserveEvent(policy.Event{Kind: policy.EventVMBackedUp, Severity: policy.SeverityInfo})
	f.srv.ObserveBackup(100, 40, 20, 3*time.Second)
	if err := f.db.PutVMState(ctx, policy.VMState{Job: "nightly", VM: testVM.InstanceUUID, LastSuccess: base}); err != nil {
		t.Fatal(err)
	}
	r := f.do("GET", "/metrics", nil, bearer(f.tokens[auth.RoleRestoreOnly]))
	for _, want := range []string{`vmvault_vm_backups_total{result="success"} 1`, `vmvault_tasks{state="running"} 0`, `vmvault_backup_bytes_total{kind="stored"} 20`, "vmvault_vm_backup_duration_seconds_count 1", `vmvault_repository_points{repository="main"} 3`, `vmvault_job_last_success_timestamp_seconds{job="nightly"}`, "vmvault_repository_disk_bytes"} {
		if !strings.Contains(string(r.body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if r := f.do("GET", "/healthz", nil); r.status != 200 {
		t.Fatalf("healthz %d", r.status)
	}
}

// POST /backups and /restores validate, then answer 501 while no engine is
// wired and 202 with a task once one is.
func TestBackupsRestoresWiring(t *testing.T) {
	f := newFixture(t, nil)
	op := bearer(f.tokens[auth.RoleOperator])
	ro := bearer(f.tokens[auth.RoleRestoreOnly])
	if r := f.do("POST", "/api/v1/backups", map[string]any{"vms": []string{testVM.InstanceUUID}}, op); r.status != 501 || r.errBody(t).Code != "not_implemented" {
		t.Fatalf("backup unwired: %d %s", r.status, r.body)
	}
	if r := f.do("POST", "/api/v1/backups", map[string]any{"vms": []string{}}, op); r.status != 422 {
		t.Fatalf("no vms: %d", r.status)
	}
	if r := f.do("POST", "/api/v1/backups", map[string]any{"vms": []string{"x"}, "repository": "nope"}, op); r.status != 422 {
		t.Fatalf("unknown repository: %d", r.status)
	}
	restore := map[string]any{"point": f.points[0].ID, "mode": "new", "name": "web01-restored"}
	if r := f.do("POST", "/api/v1/restores", restore, ro); r.status != 501 {
		t.Fatalf("restore unwired: %d", r.status)
	}
	if r := f.do("POST", "/api/v1/restores", map[string]any{"point": strings.Repeat("0", 64), "mode": "original"}, op); r.status != 422 {
		t.Fatalf("unknown point: %d", r.status)
	} else {
		r.fieldNamed(t, "point")
	}
	if r := f.do("POST", "/api/v1/restores/disk", map[string]any{"point": f.points[0].ID, "disk": 2000}, ro); r.status != 422 {
		t.Fatalf("no target: %d", r.status)
	}

	eng := &fakeEngine{}
	f.srv.cfg.Backups = eng
	f.srv.cfg.Restores = eng
	for _, c := range []struct {
		path string
		body any
	}{
		{"/api/v1/backups", map[string]any{"vms": []string{testVM.InstanceUUID}}},
		{"/api/v1/restores", restore},
		{"/api/v1/restores/disk", map[string]any{"point": f.points[0].ID, "disk": 2000, "targetVm": testVM.InstanceUUID}},
	} {
		r := f.do("POST", c.path, c.body, op)
		if r.status != 202 {
			t.Fatalf("%s wired: %d %s", c.path, r.status, r.body)
		}
		var info task.Info
		r.json(t, &info)
		deadline := time.Now().Add(5 * time.Second)
		for info.State != task.Succeeded {
			if time.Now().After(deadline) {
				t.Fatalf("%s task: %+v", c.path, info)
			}
			time.Sleep(5 * time.Millisecond)
			f.admin("GET", "/api/v1/tasks/"+info.ID, nil).json(t, &info)
		}
	}
}

type fakeEngine struct{}

func (fakeEngine) Backup(ctx context.Context, req BackupRequest, rep Reporter) ([]BackupOutcome, error) {
	rep.Progress("copy", 1, 1)
	var outs []BackupOutcome
	for _, vm := range req.VMs {
		outs = append(outs, BackupOutcome{VM: vm, RestorePoint: "p-" + vm, Mode: "full", BytesRead: 10, NewBytes: 5})
	}
	return outs, nil
}
func (fakeEngine) Restore(ctx context.Context, req RestoreRequest, rep Reporter) (*RestoreResult, error) {
	return &RestoreResult{Mode: req.Mode, RestorePoint: req.Point, VM: VMRef{Name: req.Name, MoRef: "vm-99"}, Disks: []RestoredDisk{}}, nil
}
func (fakeEngine) RestoreDisk(ctx context.Context, req DiskRestoreRequest, rep Reporter) (*RestoreResult, error) {
	return &RestoreResult{Mode: "attach", RestorePoint: req.Point, VM: VMRef{Name: "web01", MoRef: "vm-42"},
		Disks: []RestoredDisk{{SourceKey: req.Disk, TargetKey: 2001, Capacity: 1, BytesWritten: 1}}}, nil
}

type blockingEngine struct{ started chan struct{} }

func (b blockingEngine) Backup(ctx context.Context, req BackupRequest, rep Reporter) ([]BackupOutcome, error) {
	rep.Logf("backing up %s", req.VMs[0])
	rep.Progress("disks", 10, 100)
	close(b.started)
	<-ctx.Done()
	return nil, ctx.Err()
}

// A running task streams its log and progress over SSE, is cancelled
// through the API and ends as cancelled on the stream; an expired session
// is refused.
func TestTaskCancelOverSSE(t *testing.T) {
	eng := blockingEngine{started: make(chan struct{})}
	f := newFixture(t, func(c *Config) { c.Backups = eng })
	op := bearer(f.tokens[auth.RoleOperator])
	r := f.do("POST", "/api/v1/backups", map[string]any{"vms": []string{testVM.InstanceUUID}}, op)
	if r.status != 202 {
		t.Fatalf("backup: %d %s", r.status, r.body)
	}
	var info task.Info
	r.json(t, &info)
	<-eng.started
	req, _ := http.NewRequest("GET", f.http.URL+"/api/v1/tasks/"+info.ID+"/events", nil)
	op(req)
	res, err := f.http.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	var events []string
	var last task.Info
	event := ""
	cancelled := false
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			event = v
			events = append(events, v)
		}
		v, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		if event == "state" {
			_ = json.Unmarshal([]byte(v), &last)
		}
		if event == "log" && !cancelled {
			// The snapshot and the log so far have arrived: cancel.
			if r := f.do("POST", "/api/v1/tasks/"+info.ID+"/cancel", nil, op); r.status != 202 {
				t.Fatalf("cancel: %d %s", r.status, r.body)
			}
			cancelled = true
		}
	}
	if !cancelled || last.State != task.Cancelled || last.Progress.Done != 10 || events[0] != "state" {
		t.Fatalf("events %v, last %+v", events, last)
	}
	var detail TaskDetail
	f.admin("GET", "/api/v1/tasks/"+info.ID, nil).json(t, &detail)
	if len(detail.Log) != 1 || detail.State != task.Cancelled {
		t.Fatalf("detail %+v", detail)
	}

	// Sessions expire.
	lr := f.do("POST", "/api/v1/auth/login", map[string]string{"username": "admin", "password": testAdminPassword})
	var sess *http.Cookie
	for _, c := range (&http.Response{Header: lr.header}).Cookies() {
		if c.Name == sessionCookie {
			sess = c
		}
	}
	cookie := func(r *http.Request) { r.AddCookie(&http.Cookie{Name: sessionCookie, Value: sess.Value}) }
	if r := f.do("GET", "/api/v1/tasks", nil, cookie); r.status != 200 {
		t.Fatalf("fresh session: %d", r.status)
	}
	f.clk.Advance(13 * time.Hour)
	if r := f.do("GET", "/api/v1/tasks", nil, cookie); r.status != 401 {
		t.Fatalf("expired session: %d", r.status)
	}
}

func TestLoginVCenter(t *testing.T) {
	f := newFixture(t, nil)
	am, _ := auth.NewManager(auth.Config{Clock: f.clk, Store: mustAuthStore(t, f), Hash: auth.HashParams{Time: 1, MemoryKiB: 64, Threads: 1},
		VCenterRole: auth.RoleRestoreOnly,
		VerifyVCenter: func(ctx context.Context, user, pw string) error {
			switch {
			case user == "down":
				return errors.New("dial tcp: connection refused")
			case pw == "vc-pass":
				return nil
			}
			return auth.ErrBadCredentials
		}})
	f.srv.cfg.Auth = am
	tests := []struct {
		user, pw string
		status   int
		code     string
	}{
		{"bob@vsphere.local", "vc-pass", 200, ""},
		{"bob@vsphere.local", "nope", 401, "bad_credentials"},
		{"down", "x", 503, "unavailable"},
	}
	for _, tc := range tests {
		r := f.do("POST", "/api/v1/auth/login", map[string]string{"username": tc.user, "password": tc.pw})
		if r.status != tc.status {
			t.Fatalf("%s: %d %s", tc.user, r.status, r.body)
		}
		if tc.code != "" && r.errBody(t).Code != tc.code {
			t.Fatalf("%s: %s", tc.user, r.body)
		}
		if tc.status == 200 && !strings.Contains(string(r.body), `"role":"restore-only"`) {
			t.Fatalf("role: %s", r.body)
		}
	}
}
