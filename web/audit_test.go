package web

import (
	"context"
	"encoding/csv"
	"errors"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/internal/task"
	"github.com/vmvault/vmvault/policy"
)

// overwriteFails is fakeEngine whose restores over the original VM fail as
// a powered-on VM makes them fail.
type overwriteFails struct{ fakeEngine }

func (overwriteFails) Restore(ctx context.Context, req RestoreRequest, rep Reporter) (*RestoreResult, error) {
	if req.Mode == "original" {
		return nil, errors.New("VM web01 is powered on: power it off first")
	}
	return fakeEngine{}.Restore(ctx, req, rep)
}

// TestAuditTrail does what an administrator did in issue 18 — a failed
// and a good login, two restores, a failed overwrite, two ad-hoc backups,
// two checks and a lock — and finds each as an event saying who, from
// where and how it ended; then filters the trail and exports it. Before
// the audit trail, only job and download events were recorded.
func TestAuditTrail(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Backups = overwriteFails{}; c.Restores = overwriteFails{} })
	op := bearer(f.tokens[auth.RoleOperator])
	var me struct {
		User string `json:"user"`
	}
	f.do("GET", "/api/v1/auth/me", nil, op).json(t, &me)
	if me.User == "" {
		t.Fatal("the operator token has no user")
	}

	if r := f.do("POST", "/api/v1/auth/login", map[string]string{"username": "admin", "password": "wrong"}); r.status != 401 {
		t.Fatalf("wrong password: %d", r.status)
	}
	if r := f.do("POST", "/api/v1/auth/login", map[string]string{"username": "admin", "password": testAdminPassword}); r.status != 200 {
		t.Fatalf("login: %d %s", r.status, r.body)
	}
	start := func(path string, body any) {
		t.Helper()
		r := f.do("POST", path, body, op)
		if r.status != 202 {
			t.Fatalf("POST %s: %d %s", path, r.status, r.body)
		}
		var info task.Info
		r.json(t, &info)
		waitTask(t, f, info.ID)
	}
	pt := f.points[1].ID
	start("/api/v1/restores", map[string]any{"point": pt, "mode": "new", "name": "web01-a"})
	start("/api/v1/restores", map[string]any{"point": pt, "mode": "rehearsal", "name": "web01-b"})
	start("/api/v1/restores", map[string]any{"point": pt, "mode": "original"})
	start("/api/v1/backups", map[string]any{"vms": []string{testVM.InstanceUUID}})
	start("/api/v1/backups", map[string]any{"vms": []string{testVM.InstanceUUID}})
	start("/api/v1/repositories/main/check", nil)
	start("/api/v1/repositories/main/check", map[string]any{"readData": true})
	if r := f.do("POST", "/api/v1/restore-points/"+pt+"/lock", nil, op); r.status != 200 {
		t.Fatalf("lock: %d %s", r.status, r.body)
	}
	// A refused request is a failed action too (an operator may not delete).
	if r := f.do("DELETE", "/api/v1/restore-points/"+pt, nil, op); r.status != 403 {
		t.Fatalf("operator delete: %d", r.status)
	}
	// Reads are not actions.
	f.do("GET", "/api/v1/restore-points", nil, op)

	var all []policy.Event
	f.admin("GET", "/api/v1/events", nil).json(t, &all)
	type want struct {
		kind, user, outcome, errPart string
		n                            int
	}
	for _, w := range []want{
		{"auth.login", "admin", OutcomeFailed, "", 1},
		{"auth.login", "admin", OutcomeOK, "", 1},
		{"restore.vm", me.User, OutcomeOK, "", 2},
		{"restore.vm", me.User, OutcomeFailed, "powered on", 1},
		{"backup.adhoc", me.User, OutcomeOK, "", 2},
		{"repository.check", me.User, OutcomeOK, "", 2},
		{"point.lock", me.User, OutcomeOK, "", 1},
		{"point.delete", me.User, OutcomeFailed, "administrator", 1},
	} {
		n := 0
		for _, e := range all {
			if e.Kind != w.kind || e.Outcome != w.outcome {
				continue
			}
			n++
			if e.User != w.user || e.Address != "127.0.0.1" || !strings.Contains(e.Error, w.errPart) || (w.outcome == OutcomeOK) != (e.Error == "") {
				t.Errorf("%s %s event: user %q address %q error %q; want user %q, address 127.0.0.1, error with %q", w.kind, w.outcome, e.User, e.Address, e.Error, w.user, w.errPart)
			}
			if !strings.Contains(e.Message, e.User) || !strings.Contains(e.Message, "127.0.0.1") {
				t.Errorf("%s message %q names neither the user nor the address", w.kind, e.Message)
			}
		}
		if n != w.n {
			t.Errorf("%d %s events with outcome %s, want %d", n, w.kind, w.outcome, w.n)
		}
	}
	for _, e := range all {
		if e.Kind == "restore.vm" && (e.VM != testVM.InstanceUUID || e.Repository != "main" || !strings.Contains(e.Subject, pt)) {
			t.Errorf("restore event does not name the point, VM and repository: %+v", e)
		}
	}

	count := func(query string) int {
		t.Helper()
		var evs []policy.Event
		r := f.admin("GET", "/api/v1/events?"+query, nil)
		if r.status != 200 {
			t.Fatalf("events?%s: %d %s", query, r.status, r.body)
		}
		r.json(t, &evs)
		return len(evs)
	}
	for q, n := range map[string]int{
		"kind=restore":                     3,
		"kind=restore.vm&outcome=failed":   1,
		"outcome=failed":                   3,
		"user=admin&kind=auth":             2,
		"user=" + me.User + "&kind=backup": 2,
		"kind=repository.check":            2,
		"user=nobody":                      0,
	} {
		if got := count(q); got != n {
			t.Errorf("events?%s: %d events, want %d", q, got, n)
		}
	}
	for _, q := range []string{"outcome=maybe", "from=2026-11-29T12:00:00Z&to=2026-11-29T11:00:00Z", "kind=" + strings.Repeat("k", 300)} {
		if r := f.admin("GET", "/api/v1/events?"+q, nil); r.status != 400 {
			t.Errorf("events?%s: %d, want 400", q, r.status)
		}
	}

	r := f.admin("GET", "/api/v1/events/export?format=csv&outcome=failed", nil)
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/csv") || !strings.Contains(r.header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("CSV export: %d %v", r.status, r.header)
	}
	rows, err := csv.NewReader(strings.NewReader(string(r.body))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4 || strings.Join(rows[0][:7], ",") != "time,severity,kind,user,address,outcome,error" {
		t.Fatalf("CSV export of the 3 failures: %q", rows)
	}
	for _, row := range rows[1:] {
		if row[5] != OutcomeFailed || row[4] != "127.0.0.1" || row[3] == "" {
			t.Errorf("CSV row %q", row)
		}
	}
	var js []policy.Event
	r = f.admin("GET", "/api/v1/events/export?format=json&kind=restore", nil)
	r.json(t, &js)
	if len(js) != 3 || !strings.Contains(r.header.Get("Content-Disposition"), ".json") {
		t.Fatalf("JSON export: %d events, %v", len(js), r.header)
	}
	if r := f.admin("GET", "/api/v1/events/export?format=xml", nil); r.status != 400 {
		t.Errorf("export format xml: %d", r.status)
	}
}

// A CSV export cannot smuggle a formula into a spreadsheet through a user
// name or message.
func TestExportCSVNoFormula(t *testing.T) {
	f := newFixture(t, nil)
	if err := f.db.AddEvent(context.Background(), policy.Event{Time: f.clk.Now(), Severity: policy.SeverityInfo, Kind: "auth.login",
		User: "=HYPERLINK(\"x\")", Outcome: OutcomeFailed, Message: "@SUM(A1)"}); err != nil {
		t.Fatal(err)
	}
	r := f.admin("GET", "/api/v1/events/export?format=csv&kind=auth.login", nil)
	rows, err := csv.NewReader(strings.NewReader(string(r.body))).ReadAll()
	if err != nil || len(rows) != 2 {
		t.Fatalf("%v %q", err, rows)
	}
	for _, cell := range rows[1] {
		if cell != "" && strings.ContainsRune("=+-@", rune(cell[0])) {
			t.Errorf("cell %q starts a formula", cell)
		}
	}
}

// Every route that changes something is audited: a route added without an
// audit kind fails here (reads and the unsaved retention preview are not
// actions).
func TestEveryChangeIsAudited(t *testing.T) {
	f := newFixture(t, nil)
	for _, r := range f.srv.Routes() {
		_, audited := auditKinds[r.Method+" "+r.Path]
		change := r.Method != "GET" && r.Path != "/api/v1/retention-preview"
		if change && !audited {
			t.Errorf("%s %s changes something but has no audit kind", r.Method, r.Path)
		}
		if k := auditKinds[r.Method+" "+r.Path]; k != "" && auditVerbs[k] == "" {
			t.Errorf("audit kind %s has no verb", k)
		}
	}
	for k := range auditKinds {
		m, p, _ := strings.Cut(k, " ")
		found := false
		for _, r := range f.srv.Routes() {
			found = found || (r.Method == m && r.Path == p)
		}
		if !found {
			t.Errorf("audit kind for %s, which is no route", k)
		}
	}
}
