package web

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/internal/task"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/service/filerestore/catalog"
)

// scopeKeywords mark routes that touch restore points, VMs, repositories
// or what names them: such a route must honour scopes (a class other than
// not-applicable) unless only administrators, who are never scoped, may call it.
var scopeKeywords = []string{"restore-points", "files", "restores", "vms", "repositories", "dashboard", "events", "stream", "tasks", "approvals", "backups", "retention-preview"}

// Every route says how it honours a scope, and the ones that name a
// point, repository or task in their path are checked by the adapter. A
// new route without a class, or one touching points classified
// not-applicable, fails here.
func TestScopeRouteTable(t *testing.T) {
	f := newFixture(t, nil)
	for _, rt := range f.srv.routes {
		k := rt.method + " " + rt.path
		if rt.scope == scopeUnset {
			t.Errorf("%s: no scope class in the route table (scope.go: scopeNA, scopePointID, ...)", k)
			continue
		}
		want := scopeUnset
		switch {
		case strings.HasPrefix(rt.path, "/api/v1/restore-points/:id"):
			want = scopePointID
		case strings.HasPrefix(rt.path, "/api/v1/repositories/:id"):
			want = scopeRepoID
		case strings.HasPrefix(rt.path, "/api/v1/tasks/:id"):
			want = scopeTaskID
		case strings.HasPrefix(rt.path, "/api/v1/instant-recoveries/:id"):
			want = scopeInstantID
		}
		if want != scopeUnset && rt.scope != want {
			t.Errorf("%s: scope class %s, want %s", k, rt.scope, want)
		}
		if rt.scope == scopeNA && rt.role != auth.RoleAdministrator {
			for _, kw := range scopeKeywords {
				if strings.Contains(rt.path, kw) {
					t.Errorf("%s touches %s but is classified not-applicable", k, kw)
				}
			}
		}
	}
}

// scopedToken makes an operator token limited to sc.
func scopedToken(t *testing.T, f *fixture, name string, sc auth.Scope) reqOpt {
	t.Helper()
	sec, _, err := f.srv.cfg.Auth.CreateScopedToken(context.Background(), auth.Principal{User: "admin", Role: auth.RoleAdministrator}, name, auth.RoleOperator, 0, sc)
	if err != nil {
		t.Fatal(err)
	}
	return bearer(sec)
}

// TestScopeOverRoutes walks the route table: for every route a scope
// applies to, a principal outside the scope gets 404 (path ids), an
// answer without what it may not see (lists) or the answer of an unknown
// point or VM (bodies); one inside gets the unscoped answer. A route of a
// class this test has no case for fails it.
func TestScopeOverRoutes(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Restores = fakeEngine{}; c.Backups = fakeEngine{} })
	ctx := context.Background()
	web, old := f.points[0], f.points[2] // web01 (in the inventory), old01 (gone from it)
	if web.VM.Name != "web01" || old.VM.Name != "old01" {
		t.Fatal("fixture points changed")
	}
	// An event about the VM gone from vCenter, shown on the dashboard and the events page.
	if err := f.db.AddEvent(ctx, policy.Event{Time: f.clk.Now().Add(-time.Hour), Severity: policy.SeverityError, Kind: "backup.failed", Subject: "old01", VM: "gone-vm", Message: "backup of old01 failed"}); err != nil {
		t.Fatal(err)
	}
	if err := f.srv.cfg.Jobs.PutJob(ctx, policy.NewJob("nightly", "Nightly", "main", time.UTC)); err != nil {
		t.Fatal(err)
	}
	unscoped := bearer(f.tokens[auth.RoleOperator])
	webOnly := scopedToken(t, f, "web-only", auth.Scope{VMs: []string{"web*"}})
	oldOnly := scopedToken(t, f, "old-only", auth.Scope{VMs: []string{"old*"}})
	otherRepo := scopedToken(t, f, "other-repo", auth.Scope{Repositories: []string{"other"}})
	mainRepo := scopedToken(t, f, "main-repo", auth.Scope{Repositories: []string{"main"}})

	// A task of each point (restores run at once with the fake engine).
	startRestore := func(id string) string {
		b, _ := json.Marshal(map[string]any{"point": id, "mode": "new", "name": "r"})
		st, body := f.statusOf(t, "POST", "/api/v1/restores", b, unscoped)
		if st != http.StatusAccepted {
			t.Fatalf("restore %s: %d %s", id, st, body)
		}
		var info struct{ ID string }
		_ = json.Unmarshal(body, &info)
		return info.ID
	}
	webTask, oldTask := startRestore(web.ID), startRestore(old.ID)

	get := func(method, path string, body []byte, opt reqOpt) (int, string) {
		t.Helper()
		st, b := f.statusOf(t, method, path, body, opt)
		return st, string(b)
	}
	fill := func(p string, pid, tid string) string {
		r := strings.NewReplacer(":id", "ID", ":vol", "1")
		p = r.Replace(p)
		switch {
		case strings.HasPrefix(p, "/api/v1/restore-points/"):
			return strings.Replace(p, "ID", pid, 1)
		case strings.HasPrefix(p, "/api/v1/repositories/"):
			return strings.Replace(p, "ID", "main", 1)
		case strings.HasPrefix(p, "/api/v1/tasks/"):
			return strings.Replace(p, "ID", tid, 1)
		}
		return p
	}
	// Lists whose unscoped answer cannot show the marker in this fixture
	// (no file service, a stream that never ends, no approvals configured,
	// no job runs): TestScopeFiltersSearch and TestScopeFiltersApprovals
	// test the first and third filters on their own.
	vacuous := map[string]bool{"GET /api/v1/files/search": true, "GET /api/v1/stream": true, "GET /api/v1/approvals": true, "GET /api/v1/jobs/:id/runs": true}
	// Bodies: the request naming what is outside (for webOnly) and inside.
	bodies := map[string][2]map[string]any{
		"POST /api/v1/restores":           {{"point": old.ID, "mode": "new", "name": "x"}, {"point": web.ID, "mode": "new", "name": "x"}},
		"POST /api/v1/restores/disk":      {{"point": old.ID, "disk": 2000, "targetVm": testVM.InstanceUUID}, {"point": web.ID, "disk": 2000, "targetVm": testVM.InstanceUUID}},
		"POST /api/v1/backups":            {{"vms": []string{"gone-vm"}}, {"vms": []string{testVM.InstanceUUID}}},
		"POST /api/v1/instant-recoveries": {{"point": old.ID, "isolated": true}, {"point": web.ID, "isolated": true}},
		"POST /api/v1/transport-probes":   {{"vm": "gone-vm"}, {"vm": testVM.InstanceUUID}},
	}
	checked := 0
	for _, rt := range f.srv.routes {
		k := rt.method + " " + rt.path
		if rt.role == "" || rt.role == auth.RoleAdministrator {
			continue // public, or administrators only: never scoped
		}
		switch rt.scope {
		case scopeNA:
			continue
		case scopePointID, scopeTaskID:
			// old01's point and task are outside webOnly, web01's inside.
			for _, c := range []struct {
				pid, tid string
				in, out  reqOpt
			}{{old.ID, oldTask, oldOnly, webOnly}, {web.ID, webTask, webOnly, oldOnly}} {
				path := fill(rt.path, c.pid, c.tid)
				out := c.out
				wantSt, wantBody := get(rt.method, path, []byte(`{}`), unscoped)
				if st, b := get(rt.method, path, []byte(`{}`), out); st != http.StatusNotFound {
					t.Errorf("%s outside the scope: %d %s, want 404", path, st, b)
				}
				if st, b := get(rt.method, path, []byte(`{}`), c.in); st != wantSt && !(rt.method == "POST" && st < 500) {
					t.Errorf("%s inside the scope: %d %s, unscoped %d %s", path, st, b, wantSt, wantBody)
				}
			}
		case scopeRepoID:
			path := fill(rt.path, "", "")
			wantSt, _ := get(rt.method, path, []byte(`{}`), unscoped)
			if st, b := get(rt.method, path, []byte(`{}`), otherRepo); st != http.StatusNotFound {
				t.Errorf("%s outside the scope: %d %s, want 404", path, st, b)
			}
			if st, b := get(rt.method, path, []byte(`{}`), mainRepo); st != wantSt {
				t.Errorf("%s inside the scope: %d %s, unscoped %d", path, st, b, wantSt)
			}
		case scopeInstantID:
			// The fixture's session runs old01's point.
			path := strings.Replace(rt.path, ":id", memInstantID, 1)
			wantSt, _ := get(rt.method, path, []byte(`{"datastore":"ds"}`), unscoped)
			if st, b := get(rt.method, path, []byte(`{"datastore":"ds"}`), webOnly); st != http.StatusNotFound {
				t.Errorf("%s outside the scope: %d %s, want 404", path, st, b)
			}
			if st, b := get(rt.method, path, []byte(`{"datastore":"ds"}`), oldOnly); st != wantSt {
				t.Errorf("%s inside the scope: %d %s, unscoped %d", path, st, b, wantSt)
			}
		case scopeFiltered:
			if vacuous[k] {
				if st, b := get(rt.method, rt.path, nil, webOnly); st >= 500 && st != http.StatusNotImplemented || st == 403 || st == 401 {
					t.Errorf("%s scoped: %d %s", k, st, b)
				}
				break
			}
			path := rt.path
			var body []byte
			marker, in, out := old.ID, oldOnly, webOnly
			switch {
			case strings.HasPrefix(path, "/api/v1/repositories"):
				marker, in, out = `"main"`, mainRepo, otherRepo
			case path == "/api/v1/vms" || path == "/api/v1/dashboard" || strings.HasPrefix(path, "/api/v1/events"):
				marker = "old01"
			case path == "/api/v1/jobs/:id/retention-preview":
				// The job's points are web01's.
				path, marker, in, out = "/api/v1/jobs/nightly/retention-preview", web.ID, webOnly, oldOnly
			case path == "/api/v1/retention-preview":
				body = []byte(`{"repository":"main","retention":{"last":3}}`)
			}
			_, all := get(rt.method, path, body, unscoped)
			if !strings.Contains(all, marker) {
				t.Errorf("%s: the unscoped answer lacks %s, the test proves nothing: %.300s", k, marker, all)
			}
			if _, b := get(rt.method, path, body, out); strings.Contains(b, marker) {
				t.Errorf("%s outside the scope shows %s: %.300s", k, marker, b)
			}
			if _, b := get(rt.method, path, body, in); !strings.Contains(b, marker) {
				t.Errorf("%s inside the scope lacks %s: %.300s", k, marker, b)
			}
		case scopeBody:
			bs, ok := bodies[k]
			if !ok {
				t.Errorf("%s: a body route without a case in TestScopeOverRoutes", k)
				continue
			}
			outB, _ := json.Marshal(bs[0])
			inB, _ := json.Marshal(bs[1])
			if st, b := get(rt.method, rt.path, outB, webOnly); st != http.StatusUnprocessableEntity {
				t.Errorf("%s outside the scope: %d %s, want 422 as for an unknown point or VM", k, st, b)
			}
			wantSt, _ := get(rt.method, rt.path, inB, unscoped)
			if st, b := get(rt.method, rt.path, inB, webOnly); st != wantSt {
				t.Errorf("%s inside the scope: %d %s, unscoped %d", k, st, b, wantSt)
			}
		default:
			t.Errorf("%s: scope class %s has no case in TestScopeOverRoutes", k, rt.scope)
			continue
		}
		checked++
	}
	if checked < 20 {
		t.Fatalf("only %d scoped routes checked", checked)
	}

	// An out-of-scope point answers exactly as an unknown one.
	_, unknown := get("POST", "/api/v1/restores", []byte(`{"point":"0123456789abcdef","mode":"new","name":"x"}`), webOnly)
	_, outside := get("POST", "/api/v1/restores", []byte(`{"point":"`+old.ID+`","mode":"new","name":"x"}`), webOnly)
	if strings.ReplaceAll(outside, old.ID, "0123456789abcdef") != unknown {
		t.Errorf("an out-of-scope point answers %s, an unknown one %s", outside, unknown)
	}
	_, unknownGet := get("GET", "/api/v1/restore-points/"+strings.Repeat("0", len(old.ID)), nil, webOnly)
	_, outsideGet := get("GET", "/api/v1/restore-points/"+old.ID, nil, webOnly)
	if strings.ReplaceAll(outsideGet, old.ID, strings.Repeat("0", len(old.ID))) != unknownGet {
		t.Errorf("GET of an out-of-scope point answers %s, of an unknown one %s", outsideGet, unknownGet)
	}
	// Pages count only the points in scope.
	_, page := get("GET", "/api/v1/restore-points?limit=1", nil, webOnly)
	var pg PointsPage
	if err := json.Unmarshal([]byte(page), &pg); err != nil || pg.Total != 2 || len(pg.Items) != 1 || pg.Next == "" {
		t.Errorf("scoped page %s %v", page, err)
	}
	// GET /auth/me shows the caller's scope.
	if _, me := get("GET", "/api/v1/auth/me", nil, webOnly); !strings.Contains(me, `"scopes":[{"vms":["web*"]}]`) {
		t.Errorf("me: %s", me)
	}
}

// A VM folder scope is judged on the inventory's folder path.
func TestScopeFolderPath(t *testing.T) {
	vm := &policy.VM{Containers: []policy.ContainerRef{
		{Kind: policy.KindFolder, ID: "group-v9", Name: "finance"},
		{Kind: policy.KindFolder, ID: "group-v3", Name: "vm"},
		{Kind: policy.KindDatacenter, ID: "datacenter-2", Name: "DC0"},
		{Kind: policy.KindFolder, ID: "group-d1", Name: "Datacenters"},
		{Kind: policy.KindResourcePool, ID: "resgroup-1", Name: "Resources"},
		{Kind: policy.KindCluster, ID: "domain-c1", Name: "C0"},
	}}
	if got := folderPath(vm); got != "/DC0/vm/finance" {
		t.Fatalf("folder path %q", got)
	}
	if got := folderPath(&policy.VM{Containers: []policy.ContainerRef{{Kind: policy.KindFolder, ID: "group-v1"}}}); got != "" {
		t.Fatalf("folder path without a datacenter %q", got)
	}
}

// The users and tokens endpoints take, show and change scopes.
func TestScopesOverTheAPI(t *testing.T) {
	f := newFixture(t, nil)
	res := f.admin("POST", "/api/v1/users", map[string]any{"username": "fin", "password": "fin-password", "role": "restore-only", "scope": map[string]any{"folders": []string{"/DC0/vm/finance/"}, "vms": []string{"fin-*"}}})
	if res.status != http.StatusCreated || !strings.Contains(string(res.body), `"scope":{"folders":["/DC0/vm/finance"],"vms":["fin-*"]}`) {
		t.Fatalf("create scoped user: %d %s", res.status, res.body)
	}
	if res := f.admin("POST", "/api/v1/users", map[string]any{"username": "boss", "password": "boss-password", "role": "administrator", "scope": map[string]any{"vms": []string{"x"}}}); res.status != http.StatusUnprocessableEntity {
		t.Fatalf("scoped administrator: %d %s", res.status, res.body)
	}
	if res := f.admin("PUT", "/api/v1/users/fin", map[string]any{"scope": map[string]any{"folders": []string{"relative"}}}); res.status != http.StatusUnprocessableEntity {
		t.Fatalf("bad scope: %d %s", res.status, res.body)
	}
	if res := f.admin("GET", "/api/v1/users", nil); !strings.Contains(string(res.body), `"fin-*"`) {
		t.Fatalf("list users: %s", res.body)
	}
	if res := f.admin("PUT", "/api/v1/users/fin", map[string]any{"scope": map[string]any{}}); res.status != 200 || strings.Contains(string(res.body), "scope") {
		t.Fatalf("clear scope: %d %s", res.status, res.body)
	}
	res = f.admin("POST", "/api/v1/auth/tokens", map[string]any{"name": "ci", "role": "restore-only", "scope": map[string]any{"repositories": []string{"main"}}})
	var tc tokenResponse
	res.json(t, &tc)
	if res.status != http.StatusCreated || len(tc.Detail.Scope.Repositories) != 1 {
		t.Fatalf("create scoped token: %d %s", res.status, res.body)
	}
	if res := f.admin("PUT", "/api/v1/auth/tokens/"+tc.Detail.ID, map[string]any{"scope": map[string]any{"tags": []string{"env:prod"}}}); res.status != 200 || !strings.Contains(string(res.body), `"tags":["env:prod"]`) {
		t.Fatalf("set token scope: %d %s", res.status, res.body)
	}
	if res := f.admin("PUT", "/api/v1/auth/tokens/nope", map[string]any{"scope": map[string]any{}}); res.status != http.StatusNotFound {
		t.Fatalf("unknown token: %d %s", res.status, res.body)
	}
	// The token's tag scope: web01 has no tag, so it sees no point.
	if res := f.do("GET", "/api/v1/restore-points", nil, bearer(tc.Token)); res.status != 200 || string(res.body) != "[]" {
		t.Fatalf("points of a tag-scoped token: %d %s", res.status, res.body)
	}
}

// File search keeps only the versions, hits and pending points in scope
// (the route's fixture has no file service).
func TestScopeFiltersSearch(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	web, old := f.points[0], f.points[2]
	j := f.srv.newJudge(ctx, auth.Principal{Scopes: []auth.Scope{{VMs: []string{"web*"}}}})
	res, err := f.srv.filterSearch(ctx, j, catalog.Result{
		Hits: []catalog.Hit{
			{VM: "old01", Path: "/etc/a", Versions: []catalog.Version{{RestorePoint: old.ID}}},
			{VM: "web01", Path: "/etc/b", Versions: []catalog.Version{{RestorePoint: web.ID}, {RestorePoint: old.ID}}},
		},
		Pending: []string{old.ID, web.ID},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Hits) != 1 || res.Hits[0].Path != "/etc/b" || len(res.Hits[0].Versions) != 1 || len(res.Pending) != 1 || res.Pending[0] != web.ID {
		t.Fatalf("filtered %+v", res)
	}
}

// The OpenAPI document's x-scope of every operation is the route table's
// scope class.
func TestOpenAPIScopeMatchesRoutes(t *testing.T) {
	f := newFixture(t, nil)
	var doc struct {
		Paths map[string]map[string]struct {
			Scope string `json:"x-scope"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, r := range f.srv.Routes() {
		p := ginParam.ReplaceAllString(r.Path, "{$1}")
		op, ok := doc.Paths[p][strings.ToLower(r.Method)]
		if !ok {
			continue // TestOpenAPIMatchesRoutes names it
		}
		if op.Scope != r.Scope {
			t.Errorf("%s %s: x-scope %q, the route table says %q", r.Method, p, op.Scope, r.Scope)
		}
	}
}

// GET /approvals leaves out a held deletion of a point outside the scope.
func TestScopeFiltersApprovals(t *testing.T) {
	f := newApprovalFixture(t, time.Hour)
	web, old := f.points[0], f.points[2]
	for _, id := range []string{web.ID, old.ID} {
		if r := f.admin("DELETE", "/api/v1/restore-points/"+id, nil); r.status != http.StatusAccepted {
			t.Fatalf("held delete of %s: %d %s", id, r.status, r.body)
		}
	}
	webOnly := scopedToken(t, f.fixture, "web-only", auth.Scope{VMs: []string{"web*"}})
	all := string(f.admin("GET", "/api/v1/approvals", nil).body)
	if !strings.Contains(all, old.ID) || !strings.Contains(all, web.ID) {
		t.Fatalf("unscoped approvals %s", all)
	}
	got := string(f.do("GET", "/api/v1/approvals", nil, webOnly).body)
	if strings.Contains(got, old.ID) || !strings.Contains(got, web.ID) {
		t.Fatalf("scoped approvals %s", got)
	}
}

// What /stream and the dashboard filter with: events, tasks and the
// scheduler's running work.
func TestScopeJudgesEventsTasksActivity(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	old := f.points[2]
	webOnly := f.srv.newJudge(ctx, auth.Principal{Scopes: []auth.Scope{{VMs: []string{"web*"}}}})
	oldOnly := f.srv.newJudge(ctx, auth.Principal{Scopes: []auth.Scope{{VMs: []string{"old*"}}}})
	otherRepo := f.srv.newJudge(ctx, auth.Principal{Scopes: []auth.Scope{{Repositories: []string{"other"}}}})
	gone := policy.Event{VM: "gone-vm", Subject: "old01"}
	web := policy.Event{VM: testVM.InstanceUUID, Subject: "renamed-since"} // judged by the inventory's name
	inMain := policy.Event{Repository: "main"}
	system := policy.Event{Kind: "auth.lockout"}
	for _, c := range []struct {
		j    *scopeJudge
		e    policy.Event
		want bool
	}{
		{webOnly, gone, false}, {oldOnly, gone, true}, {webOnly, web, true}, {oldOnly, web, false},
		{otherRepo, inMain, false}, {webOnly, inMain, true}, {webOnly, system, true}, {nil, gone, true},
	} {
		if got := c.j.allowsEvent(c.e); got != c.want {
			t.Errorf("allowsEvent(%+v) = %v, want %v", c.e, got, c.want)
		}
	}
	restoreOld := task.Info{Kind: "restore", Subject: old.ID}
	checkMain := task.Info{Kind: "check", Subject: "main"}
	backupWeb := task.Info{Kind: "backup", Subject: testVM.InstanceUUID}
	if f.srv.allowsTask(ctx, webOnly, restoreOld) || !f.srv.allowsTask(ctx, oldOnly, restoreOld) ||
		f.srv.allowsTask(ctx, otherRepo, checkMain) || !f.srv.allowsTask(ctx, webOnly, backupWeb) || f.srv.allowsTask(ctx, oldOnly, backupWeb) {
		t.Error("tasks judged wrong")
	}
	a := filterActivity(oldOnly, Activity{Backups: []RunningBackup{{VM: "web01", InstanceUUID: testVM.InstanceUUID}}, Maintenance: []RunningMaintenance{{Repository: "main"}}})
	if len(a.Backups) != 0 || len(a.Maintenance) != 1 {
		t.Errorf("activity for old01's scope: %+v", a)
	}
}

// A caller whose scope lists folders restores new VMs only into them.
func TestScopeRestoreFolder(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Restores = fakeEngine{} })
	// web01's folder has no datacenter above it in the fixture: name patterns let its points in.
	fin := scopedToken(t, f, "fin", auth.Scope{Folders: []string{"/DC0/vm/finance"}, VMs: []string{"web*"}})
	for folder, want := range map[string]int{"": 422, "/DC0/vm/hr": 422, "/DC0/vm/finance/restored": 202} {
		b, _ := json.Marshal(map[string]any{"point": f.points[0].ID, "mode": "new", "name": "x", "folder": folder})
		if st, body := f.statusOf(t, "POST", "/api/v1/restores", b, fin); st != want {
			t.Errorf("restore into %q: %d %s, want %d", folder, st, body, want)
		}
	}
}
