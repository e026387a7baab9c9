package web

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/policy"
)

// TestInstantRoles: restore-only starts isolated sessions only; migrate
// and stop need an operator; a session's state decides what may follow.
func TestInstantRoles(t *testing.T) {
	f := newFixture(t, nil)
	pt := f.points[0].ID
	tests := []struct {
		name   string
		role   auth.Role
		method string
		path   string
		body   string
		want   int
	}{
		{"restore-only on the network", auth.RoleRestoreOnly, "POST", "/api/v1/instant-recoveries", fmt.Sprintf(`{"point":%q}`, pt), http.StatusForbidden},
		{"restore-only isolated", auth.RoleRestoreOnly, "POST", "/api/v1/instant-recoveries", fmt.Sprintf(`{"point":%q,"isolated":true}`, pt), http.StatusAccepted},
		{"operator on the network", auth.RoleOperator, "POST", "/api/v1/instant-recoveries", fmt.Sprintf(`{"point":%q}`, pt), http.StatusAccepted},
		{"unknown point", auth.RoleOperator, "POST", "/api/v1/instant-recoveries", `{"point":"0123456789abcdef"}`, http.StatusUnprocessableEntity},
		{"unknown field", auth.RoleOperator, "POST", "/api/v1/instant-recoveries", fmt.Sprintf(`{"point":%q,"nics":1}`, pt), http.StatusBadRequest},
		{"restore-only stop", auth.RoleRestoreOnly, "POST", "/api/v1/instant-recoveries/" + memInstantID + "/stop", ``, http.StatusForbidden},
		{"migrate without datastore", auth.RoleOperator, "POST", "/api/v1/instant-recoveries/" + memInstantID + "/migrate", `{"datastore":""}`, http.StatusUnprocessableEntity},
		{"unknown session", auth.RoleOperator, "POST", "/api/v1/instant-recoveries/ffffffffffff/stop", ``, http.StatusNotFound},
		{"operator stop", auth.RoleOperator, "POST", "/api/v1/instant-recoveries/" + memInstantID + "/stop", ``, http.StatusAccepted},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var body any
			if tc.body != "" {
				body = tc.body
			}
			r := f.as(tc.role, tc.method, tc.path, body)
			if r.status != tc.want {
				t.Fatalf("%d %s, want %d", r.status, r.body, tc.want)
			}
			if r.status == http.StatusAccepted {
				var info struct{ ID string }
				r.json(t, &info)
				waitTask(t, f, info.ID)
			}
		})
	}
	// The list shows every session with its state.
	var list []struct{ ID, State string }
	f.admin("GET", "/api/v1/instant-recoveries", nil).json(t, &list)
	found := false
	for _, s := range list {
		if s.ID == memInstantID {
			found = s.State == "stopped"
		}
	}
	if !found || len(list) != 3 {
		t.Fatalf("sessions %+v", list)
	}
	// A second stop fails in its task: the event says so when the task ends.
	r := f.as(auth.RoleOperator, "POST", "/api/v1/instant-recoveries/"+memInstantID+"/stop", nil)
	var info struct{ ID string }
	r.json(t, &info)
	waitTask(t, f, info.ID)

	// Each start, migrate and stop is an audit event with its outcome,
	// naming the point or the session it acted on.
	var evs []policy.Event
	f.admin("GET", "/api/v1/events?kind=instant", nil).json(t, &evs)
	count := map[string]int{}
	for _, e := range evs {
		count[e.Kind+" "+e.Outcome]++
		if e.Kind == "instant.stop" && (e.ObjectKind != "instant" || (e.Outcome == OutcomeOK && e.ObjectID != memInstantID)) {
			t.Errorf("stop event names %q %q, want the session %s", e.ObjectKind, e.ObjectID, memInstantID)
		}
		if e.Kind == "instant.start" && e.Outcome == OutcomeOK && (e.ObjectKind != "point" || e.ObjectID != pt || !strings.Contains(e.Message, "VM ")) {
			t.Errorf("start event %+v does not name the point and its VM", e)
		}
	}
	for k, n := range map[string]int{"instant.start ok": 2, "instant.start failed": 3, "instant.stop ok": 1, "instant.stop failed": 3, "instant.migrate failed": 1} {
		if count[k] != n {
			t.Errorf("%d %s events, want %d (all: %v)", count[k], k, n, count)
		}
	}
}
