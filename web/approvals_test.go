package web

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/internal/state"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/service/approval"
	"github.com/vmvault/vmvault/web/api"
)

// approvalFixture is the API with a 24 h delay on destructive actions and a
// second administrator, bob.
type approvalFixture struct {
	*fixture
	bob string // bob's administrator token
}

func newApprovalFixture(t *testing.T, delay time.Duration) *approvalFixture {
	t.Helper()
	var am *auth.Manager
	f := newFixture(t, func(c *Config) {
		am = c.Auth
		adb, err := state.Open(filepath.Join(t.TempDir(), "approvals.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { adb.Close() })
		rec := c.Events.(EventRecorder)
		m, err := approval.New(approval.Config{DB: adb, Delay: delay, Clock: c.Clock,
			Executors: map[string]approval.Executor{
				api.ApprovalDeletePoint:      approval.DeletePoint(c.Points),
				api.ApprovalShortenRetention: approval.ShortenRetention(c.Jobs, nil),
			},
			OnEvent: func(e policy.Event) { _ = rec.AddEvent(context.Background(), e) }})
		if err != nil {
			t.Fatal(err)
		}
		c.Approvals = m
	})
	bob := secondAdmin(t, am)
	return &approvalFixture{fixture: f, bob: bob}
}

func (f *fixture) as(role auth.Role, method, path string, body any) resp {
	f.t.Helper()
	return f.do(method, path, body, bearer(f.tokens[role]))
}

func (f *fixture) eventKinds(t *testing.T, prefix string) []policy.Event {
	t.Helper()
	evs, err := f.db.Events(context.Background(), state.EventQuery{Kind: prefix})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// A time lock through the API: administrators set it, GET shows it, and
// no role (administrator included) can unlock or delete the point before
// the date; the refusal names the date.
func TestTimeLockAPI(t *testing.T) {
	f := newFixture(t, nil)
	id := f.points[1].ID
	// The repository keeps the wall clock; the API's fake clock is days behind it.
	until := time.Now().Add(72 * time.Hour).UTC().Truncate(time.Second)
	date := until.Format(time.RFC3339)
	lock := "/api/v1/restore-points/" + id + "/lock"

	for _, tc := range []struct {
		name   string
		role   auth.Role
		body   any
		status int
		field  string
	}{
		{"not a date", auth.RoleAdministrator, map[string]any{"until": "tomorrow"}, 400, "until"},
		{"in the past", auth.RoleAdministrator, map[string]any{"until": "2020-01-01T00:00:00Z"}, 422, "until"},
		{"a century", auth.RoleAdministrator, map[string]any{"until": "2126-01-01T00:00:00Z"}, 422, "until"},
		{"unknown field", auth.RoleAdministrator, map[string]any{"untill": date}, 400, "untill"},
		{"operator", auth.RoleOperator, map[string]any{"until": date}, 403, ""},
		{"restore-only", auth.RoleRestoreOnly, map[string]any{"until": date}, 403, ""},
	} {
		r := f.as(tc.role, "POST", lock, tc.body)
		if r.status != tc.status {
			t.Fatalf("%s: %d %s, want %d", tc.name, r.status, r.body, tc.status)
		}
		if tc.field != "" {
			r.fieldNamed(t, tc.field)
		}
	}
	var p RestorePoint
	if r := f.admin("GET", "/api/v1/restore-points/"+id, nil); r.status != 200 {
		t.Fatal(r.status)
	} else if r.json(t, &p); p.Locked || !p.LockedUntil.IsZero() {
		t.Fatalf("a refused time lock changed the point: %+v", p)
	}

	r := f.admin("POST", lock, map[string]any{"until": date})
	if r.status != 200 {
		t.Fatalf("time lock: %d %s", r.status, r.body)
	}
	r.json(t, &p)
	if !p.Locked || !p.LockedUntil.Equal(until) {
		t.Fatalf("time-locked point: locked %v until %v, want %v", p.Locked, p.LockedUntil, until)
	}
	if r := f.admin("GET", "/api/v1/restore-points", nil); !strings.Contains(string(r.body), `"lockedUntil":"`+date+`"`) {
		t.Fatalf("the list does not show lockedUntil %s: %s", date, r.body)
	}
	for _, role := range []auth.Role{auth.RoleAdministrator, auth.RoleOperator} {
		r := f.as(role, "POST", "/api/v1/restore-points/"+id+"/unlock", nil)
		if r.status != 409 || r.errBody(t).Code != "point_locked" || !strings.Contains(r.errBody(t).Message, date) {
			t.Errorf("unlock as %s before the date: %d %s, want 409 point_locked naming %s", role, r.status, r.body, date)
		}
	}
	if r := f.admin("DELETE", "/api/v1/restore-points/"+id, nil); r.status != 409 || !strings.Contains(r.errBody(t).Message, date) {
		t.Errorf("delete as administrator before the date: %d %s", r.status, r.body)
	}
	if r := f.admin("POST", lock, map[string]any{"until": until.Add(-time.Hour).Format(time.RFC3339)}); r.status != 409 {
		t.Errorf("shorten the time lock: %d %s", r.status, r.body)
	}
	if r := f.admin("GET", "/api/v1/restore-points/"+id, nil); r.status != 200 {
		t.Fatalf("the point after the refusals: %d", r.status)
	} else if r.json(t, &p); !p.Locked || !p.LockedUntil.Equal(until) {
		t.Fatalf("after the refusals: %+v", p)
	}
	// A plain lock still works for an operator, with or without a body.
	other := "/api/v1/restore-points/" + f.points[0].ID
	for _, body := range []any{nil, map[string]any{}} {
		if r := f.as(auth.RoleOperator, "POST", other+"/lock", body); r.status != 200 {
			t.Fatalf("plain lock (body %v): %d %s", body, r.status, r.body)
		}
		if r := f.as(auth.RoleOperator, "POST", other+"/unlock", nil); r.status != 200 {
			t.Fatalf("plain unlock: %d %s", r.status, r.body)
		}
	}
	evs := f.eventKinds(t, "point.lock")
	if !anyMessage(evs, "until "+date) {
		t.Errorf("no audit event names the time lock: %+v", evs)
	}
}

// With a delay, DELETE waits (202); restore-only and operators cannot
// approve or cancel, the requester cannot approve, a second administrator
// executes it at once; every step is in the audit log.
func TestApprovalDeletePoint(t *testing.T) {
	f := newApprovalFixture(t, 24*time.Hour)
	id := f.points[0].ID
	r := f.admin("DELETE", "/api/v1/restore-points/"+id, nil)
	if r.status != 202 {
		t.Fatalf("delete with a delay: %d %s", r.status, r.body)
	}
	var a Approval
	r.json(t, &a)
	if a.Kind != api.ApprovalDeletePoint || a.Subject != id || a.Status != api.ApprovalPending || a.RequestedBy != "admin" ||
		!a.EffectiveAt.Equal(f.clk.Now().Add(24*time.Hour)) || a.Repository != "main" {
		t.Fatalf("pending action %+v", a)
	}
	if r := f.admin("GET", "/api/v1/restore-points/"+id, nil); r.status != 200 {
		t.Fatalf("the point went before approval: %d", r.status)
	}
	if r := f.admin("DELETE", "/api/v1/restore-points/"+id, nil); r.status != 409 {
		t.Errorf("a second deletion request: %d %s", r.status, r.body)
	}
	var list []Approval
	f.as(auth.RoleRestoreOnly, "GET", "/api/v1/approvals?status=pending", nil).json(t, &list)
	if len(list) != 1 || list[0].ID != a.ID {
		t.Fatalf("pending approvals %+v", list)
	}
	if r := f.admin("GET", "/api/v1/approvals?status=nonsense", nil); r.status != 400 {
		t.Errorf("bad status filter: %d", r.status)
	}
	for _, role := range []auth.Role{auth.RoleRestoreOnly, auth.RoleOperator} {
		for _, verb := range []string{"approve", "cancel"} {
			if r := f.as(role, "POST", "/api/v1/approvals/"+a.ID+"/"+verb, nil); r.status != 403 {
				t.Errorf("%s as %s: %d, want 403", verb, role, r.status)
			}
		}
	}
	r = f.admin("POST", "/api/v1/approvals/"+a.ID+"/approve", nil)
	if r.status != 403 || !strings.Contains(r.errBody(t).Message, "another administrator") {
		t.Fatalf("approve by the requester: %d %s", r.status, r.body)
	}
	if r := f.admin("GET", "/api/v1/restore-points/"+id, nil); r.status != 200 {
		t.Fatalf("refused approvals deleted the point: %d", r.status)
	}
	r = f.do("POST", "/api/v1/approvals/"+a.ID+"/approve", nil, bearer(f.bob))
	if r.status != 200 {
		t.Fatalf("approve by bob: %d %s", r.status, r.body)
	}
	r.json(t, &a)
	if a.Status != api.ApprovalExecuted || a.ApprovedBy != "bob" {
		t.Fatalf("approved: %+v", a)
	}
	if r := f.admin("GET", "/api/v1/restore-points/"+id, nil); r.status != 404 {
		t.Fatalf("the approved deletion left the point: %d", r.status)
	}
	if r := f.do("POST", "/api/v1/approvals/"+a.ID+"/cancel", nil, bearer(f.bob)); r.status != 409 {
		t.Errorf("cancel an executed action: %d", r.status)
	}
	if r := f.admin("POST", "/api/v1/approvals/0123456789abcdef/approve", nil); r.status != 404 {
		t.Errorf("approve an unknown id: %d", r.status)
	}

	// Cancel: any administrator, the requester included; the point stays.
	other := f.points[1].ID
	f.admin("DELETE", "/api/v1/restore-points/"+other, nil).json(t, &a)
	r = f.admin("POST", "/api/v1/approvals/"+a.ID+"/cancel", nil)
	if r.status != 200 {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	r.json(t, &a)
	if a.Status != api.ApprovalCancelled || a.CancelledBy != "admin" {
		t.Fatalf("cancelled: %+v", a)
	}
	if r := f.admin("GET", "/api/v1/restore-points/"+other, nil); r.status != 200 {
		t.Fatalf("a cancelled deletion removed the point: %d", r.status)
	}

	want := map[string]int{"approval.request": 2, "approval.approve": 2, "approval.cancel": 1, "approval.execute": 1}
	got := map[string]int{}
	for _, e := range f.eventKinds(t, "approval") {
		got[e.Kind]++
		if e.Kind == "approval.execute" && (e.User != "bob" || e.Outcome != "ok" || e.Subject != id) {
			t.Errorf("execute event %+v", e)
		}
		if e.Kind == "approval.approve" && e.User == "admin" && e.Outcome != "failed" {
			t.Errorf("the requester's refused approval is recorded as %s", e.Outcome)
		}
	}
	for k, n := range want {
		if got[k] < n {
			t.Errorf("audit events %s: %d, want at least %d (all: %v)", k, got[k], n, got)
		}
	}
}

// With a delay, a time-locked point's deletion is refused at once (409
// naming the date), not held to fail later.
func TestApprovalRefusesLockedPoint(t *testing.T) {
	f := newApprovalFixture(t, time.Hour)
	id := f.points[1].ID
	until := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	if r := f.admin("POST", "/api/v1/restore-points/"+id+"/lock", map[string]any{"until": until.Format(time.RFC3339)}); r.status != 200 {
		t.Fatalf("time lock: %d %s", r.status, r.body)
	}
	r := f.admin("DELETE", "/api/v1/restore-points/"+id, nil)
	if r.status != 409 || r.errBody(t).Code != "point_locked" || !strings.Contains(r.errBody(t).Message, until.Format(time.RFC3339)) {
		t.Fatalf("delete a time-locked point with a delay: %d %s", r.status, r.body)
	}
	var list []Approval
	f.admin("GET", "/api/v1/approvals", nil).json(t, &list)
	if len(list) != 0 {
		t.Fatalf("a refused deletion left an action: %+v", list)
	}
}

// With a delay, a PUT that keeps fewer points saves everything but the
// retention now and holds the retention (202); one that keeps as many or
// more saves at once; the approval by a second administrator applies it.
func TestApprovalShortenRetention(t *testing.T) {
	f := newApprovalFixture(t, 24*time.Hour)
	job := validJob("nightly")
	job["retention"] = map[string]any{"last": 5, "monthly": 2}
	if r := f.admin("POST", "/api/v1/jobs", job); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	job["retention"] = map[string]any{"last": 9, "monthly": 2}
	if r := f.admin("PUT", "/api/v1/jobs/nightly", job); r.status != 200 {
		t.Fatalf("a longer retention: %d %s", r.status, r.body)
	}
	job["retention"] = map[string]any{"last": 2, "daily": 7, "monthly": 2}
	job["name"] = "Renamed"
	r := f.admin("PUT", "/api/v1/jobs/nightly", job)
	if r.status != 202 {
		t.Fatalf("a shorter retention: %d %s", r.status, r.body)
	}
	var pending struct {
		Job      policy.Job `json:"job"`
		Approval Approval   `json:"approval"`
	}
	r.json(t, &pending)
	a := pending.Approval
	if a.Kind != api.ApprovalShortenRetention || a.Subject != "nightly" || a.Retention == nil || a.Retention.Last != 2 || a.Retention.Daily != 7 ||
		!strings.Contains(a.Summary, "last 9 -> 2") {
		t.Fatalf("pending action %+v", a)
	}
	var saved policy.Job
	f.admin("GET", "/api/v1/jobs/nightly", nil).json(t, &saved)
	if saved.Name != "Renamed" || saved.Retention.Last != 9 {
		t.Fatalf("saved now: name %q retention %+v; want the rename and the old retention", saved.Name, saved.Retention)
	}
	// A bad job is refused before anything waits.
	job["selection"] = map[string]any{}
	job["retention"] = map[string]any{"last": 1}
	if r := f.admin("PUT", "/api/v1/jobs/nightly", job); r.status != 422 {
		t.Errorf("an invalid job with a shorter retention: %d %s", r.status, r.body)
	}
	if r := f.as(auth.RoleOperator, "POST", "/api/v1/approvals/"+a.ID+"/approve", nil); r.status != 403 {
		t.Errorf("approve as operator: %d", r.status)
	}
	if r := f.do("POST", "/api/v1/approvals/"+a.ID+"/approve", nil, bearer(f.bob)); r.status != 200 {
		t.Fatalf("approve by bob: %d %s", r.status, r.body)
	}
	f.admin("GET", "/api/v1/jobs/nightly", nil).json(t, &saved)
	if saved.Retention.Last != 2 || saved.Retention.Daily != 7 || saved.Name != "Renamed" {
		t.Fatalf("after approval: %+v", saved)
	}
}

// Without a delay (the default) nothing waits: DELETE answers 204.
func TestApprovalNoDelayActsAtOnce(t *testing.T) {
	f := newApprovalFixture(t, 0)
	if r := f.admin("DELETE", "/api/v1/restore-points/"+f.points[0].ID, nil); r.status != 204 {
		t.Fatalf("delete without a delay: %d %s", r.status, r.body)
	}
	var list []Approval
	f.admin("GET", "/api/v1/approvals", nil).json(t, &list)
	if len(list) != 0 {
		t.Fatalf("approvals without a delay: %+v", list)
	}
}

func anyMessage(evs []policy.Event, s string) bool {
	for _, e := range evs {
		if strings.Contains(e.Message, s) {
			return true
		}
	}
	return false
}

// secondAdmin creates administrator bob, the second administrator an
// approval needs, and returns his API token.
func secondAdmin(t *testing.T, am *auth.Manager) string {
	t.Helper()
	ctx := context.Background()
	if _, err := am.CreateUser(ctx, "bob", "another-secret-password", auth.RoleAdministrator); err != nil {
		t.Fatal(err)
	}
	bob, _, err := am.CreateToken(ctx, auth.Principal{User: "bob", Role: auth.RoleAdministrator}, "bob", auth.RoleAdministrator, 0)
	if err != nil {
		t.Fatal(err)
	}
	return bob
}
