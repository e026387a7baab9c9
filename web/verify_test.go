package web

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/web/api"
)

// memVerifier is an in-memory Verifier: a walk passes, a boot fails with
// a fixed reason (service/verification and vcsim-tests/verifye2e test
// the real one).
type memVerifier struct {
	clk     *clock.Fake
	noBoot  bool
	mu      sync.Mutex
	results map[string]api.Verification
	reqs    []api.VerifyRequest
}

func newMemVerifier(clk *clock.Fake) *memVerifier {
	return &memVerifier{clk: clk, results: map[string]api.Verification{}}
}

func (m *memVerifier) CanBoot() bool { return !m.noBoot }

func (m *memVerifier) Verify(_ context.Context, point string, req api.VerifyRequest, by string, rep Reporter) (*api.Verification, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reqs = append(m.reqs, req)
	now := m.clk.Now()
	v := api.Verification{ID: fmt.Sprintf("v%d", len(m.reqs)), Point: point, Repository: "main", VM: "web01", Mode: req.Mode,
		Result: "passed", Reason: "1 volume walked", Started: now, Finished: now, Seconds: 1.5, By: by}
	if v.Mode == "" {
		v.Mode = "walk"
	}
	if v.Mode != "walk" {
		v.Result, v.Reason = "failed", "no heartbeat within 10m0s (power poweredOn, Tools guestToolsNotRunning, heartbeat gray)"
		v.Boot = &api.BootVerification{Session: "s1", VMName: "web01-verify-abc", Reason: v.Reason, PoweredOnSeconds: 12, Probes: []api.VerificationProbe{}}
	}
	rep.Progress(v.Mode, 1, 1)
	m.results[point] = v
	return &v, nil
}

func (m *memVerifier) latest(point string) *api.PointVerification {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.results[point]
	if !ok {
		return nil
	}
	return &api.PointVerification{Result: v.Result, Time: v.Finished, Mode: v.Mode, Reason: v.Reason, Seconds: v.Seconds}
}

// TestVerifyRoutes: restore-only may walk, a boot needs an operator; bad
// requests are refused before a task starts; the result is the task's
// and shows on the point, in its detail and in lists.
func TestVerifyRoutes(t *testing.T) {
	f := newFixture(t, nil)
	pt := f.points[0].ID
	path := "/api/v1/restore-points/" + pt + "/verify"
	for _, tc := range []struct {
		name string
		role auth.Role
		path string
		body string
		want int
	}{
		{"restore-only walk", auth.RoleRestoreOnly, path, `{}`, http.StatusAccepted},
		{"restore-only boot", auth.RoleRestoreOnly, path, `{"mode":"boot"}`, http.StatusForbidden},
		{"restore-only both", auth.RoleRestoreOnly, path, `{"mode":"both"}`, http.StatusForbidden},
		{"bad mode", auth.RoleOperator, path, `{"mode":"reboot"}`, http.StatusUnprocessableEntity},
		{"probes without boot", auth.RoleOperator, path, `{"ports":[22]}`, http.StatusUnprocessableEntity},
		{"bad port", auth.RoleOperator, path, `{"mode":"boot","ports":[0]}`, http.StatusUnprocessableEntity},
		{"bad url", auth.RoleOperator, path, `{"mode":"boot","url":"ftp://x/"}`, http.StatusUnprocessableEntity},
		{"negative timeout", auth.RoleOperator, path, `{"mode":"boot","timeoutSeconds":-1}`, http.StatusUnprocessableEntity},
		{"unknown field", auth.RoleOperator, path, `{"mode":"boot","nics":1}`, http.StatusBadRequest},
		{"unknown point", auth.RoleOperator, "/api/v1/restore-points/0123456789abcdef/verify", `{}`, http.StatusNotFound},
		{"operator boot", auth.RoleOperator, path, `{"mode":"boot","ports":[22],"url":"http://guest:8080/health","network":"isolated"}`, http.StatusAccepted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.as(tc.role, "POST", tc.path, tc.body)
			if r.status != tc.want {
				t.Fatalf("%d %s, want %d", r.status, r.body, tc.want)
			}
			if r.status == http.StatusAccepted {
				var info struct{ ID string }
				r.json(t, &info)
				if got := waitTask(t, f, info.ID); got.Error != "" {
					t.Fatalf("task %+v", got)
				}
			}
		})
	}
	if n := len(f.verifier.reqs); n != 2 {
		t.Fatalf("%d verifications ran, want 2 (the refused ones must not)", n)
	}
	if r := f.verifier.reqs[1]; r.Network != "isolated" || len(r.Ports) != 1 || r.URL == "" {
		t.Errorf("request passed on as %+v", r)
	}
	var rp RestorePoint
	f.admin("GET", "/api/v1/restore-points/"+pt, nil).json(t, &rp)
	if v := rp.Verification; v == nil || v.Result != "failed" || v.Mode != "boot" || v.Reason == "" || v.Seconds != 1.5 {
		t.Fatalf("point verification %+v", rp.Verification)
	}
	var list []RestorePoint
	f.admin("GET", "/api/v1/restore-points", nil).json(t, &list)
	seen := 0
	for _, p := range list {
		switch {
		case p.ID == pt && p.Verification != nil && p.Verification.Result == "failed":
			seen++
		case p.ID != pt && p.Verification != nil:
			t.Errorf("point %s was never verified: %+v", p.ID, p.Verification)
		}
	}
	var page struct{ Items []RestorePoint }
	f.admin("GET", "/api/v1/restore-points?limit=10", nil).json(t, &page)
	for _, p := range page.Items {
		if p.ID == pt && p.Verification != nil {
			seen++
		}
	}
	if seen != 2 {
		t.Errorf("the verification shows in %d of the list and the page, want both", seen)
	}
}

// TestVerifyWithoutBoot: without instant recovery a boot answers 501
// and a walk still runs; without a Verifier everything answers 501.
func TestVerifyWithoutBoot(t *testing.T) {
	f := newFixture(t, nil)
	f.verifier.noBoot = true
	path := "/api/v1/restore-points/" + f.points[0].ID + "/verify"
	if r := f.as(auth.RoleOperator, "POST", path, `{"mode":"both"}`); r.status != http.StatusNotImplemented {
		t.Fatalf("boot without instant recovery: %d %s", r.status, r.body)
	}
	if r := f.as(auth.RoleOperator, "POST", path, `{"mode":"walk"}`); r.status != http.StatusAccepted {
		t.Fatalf("walk: %d %s", r.status, r.body)
	}
	g := newFixture(t, func(c *Config) { c.Verifier = nil })
	if r := g.as(auth.RoleOperator, "POST", "/api/v1/restore-points/"+g.points[0].ID+"/verify", `{}`); r.status != http.StatusNotImplemented {
		t.Fatalf("no verifier: %d %s", r.status, r.body)
	}
}
