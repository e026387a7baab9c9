package web

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/internal/state"
	"github.com/vmvault/vmvault/service/verification"
	"github.com/vmvault/vmvault/service/verifyjob"
	"github.com/vmvault/vmvault/web/api"
)

// newTestVerificationJobs is the real store and runner (running until
// the test ends) over points and v; boot mode is allowed.
func newTestVerificationJobs(t testing.TB, points verifyjob.Points, v verifyjob.Verifier) verifyjob.API {
	t.Helper()
	st, err := verifyjob.OpenStore(filepath.Join(t.TempDir(), "verification-jobs"), true)
	if err != nil {
		t.Fatal(err)
	}
	runner := verifyjob.New(verifyjob.Config{Store: st, Points: points, Verifier: v})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runner.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return verifyjob.API{Store: st, Runner: runner, CanBoot: func() bool { return true }}
}

// passingVerifier passes every point at once.
type passingVerifier struct{}

func (passingVerifier) Verify(ctx context.Context, req verification.Request, _ func(string)) (verification.Result, error) {
	return verification.Result{ID: "v-" + req.Point, Point: req.Point, Result: verification.Passed}, nil
}

func (passingVerifier) Latest(string) (verification.Result, bool) {
	return verification.Result{}, false
}

// heldVerifier holds each verification until release is closed.
type heldVerifier struct{ release chan struct{} }

func (h heldVerifier) Verify(ctx context.Context, req verification.Request, _ func(string)) (verification.Result, error) {
	select {
	case <-h.release:
	case <-ctx.Done():
		return verification.Result{}, ctx.Err()
	}
	return verification.Result{ID: "v1", Point: req.Point, Result: verification.Passed}, nil
}

func (heldVerifier) Latest(string) (verification.Result, bool) { return verification.Result{}, false }

type onePoint struct{}

func (onePoint) Points(context.Context, api.PointFilter) ([]api.RestorePoint, error) {
	return []api.RestorePoint{{ID: "0123456789abcdef", VM: api.VMRef{Name: "web-1"}}}, nil
}

const validVerificationJob = `{"id":"weekly","name":"Weekly walk","enabled":true,"vms":["web-*"],"mode":"walk","onlyNew":true,
 "window":{"location":"UTC","days":{"sunday":["08:00-12:00"]}}}`

// The routes over the real store and runner (a held verifier): roles,
// validation with field names, conflict, run now, audit kinds.
func TestVerificationJobsAPI(t *testing.T) {
	hv := heldVerifier{release: make(chan struct{})}
	t.Cleanup(func() { close(hv.release) }) // runs before the runner's stop
	vj := newTestVerificationJobs(t, onePoint{}, hv)
	st := vj.Store
	canBoot := false
	vj.CanBoot = func() bool { return canBoot }
	f := newFixture(t, func(c *Config) { c.VerificationJobs = vj })
	if r := f.admin("POST", "/api/v1/verification-jobs", validVerificationJob); r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	if r := f.admin("POST", "/api/v1/verification-jobs", validVerificationJob); r.status != http.StatusConflict {
		t.Fatalf("create twice: %d", r.status)
	}
	win := `"window":{"location":"UTC","days":{"sunday":["08:00-12:00"]}}`
	for name, tt := range map[string]struct{ body, field string }{
		"probe in walk": {`{"id":"x",` + win + `,"ports":[22]}`, "ports"},
		"bad mode":      {`{"id":"x",` + win + `,"mode":"reboot"}`, "mode"},
		"no boot here":  {`{"id":"x",` + win + `,"mode":"boot"}`, "mode"},
		"empty window":  {`{"id":"x","window":{"location":"UTC","days":{}}}`, "window"},
		"bad parallel":  {`{"id":"x",` + win + `,"maxConcurrent":99}`, "maxConcurrent"},
		"unknown field": {`{"id":"x",` + win + `,"speed":1}`, ""},
	} {
		r := f.admin("POST", "/api/v1/verification-jobs", tt.body)
		if r.status != 400 && r.status != 422 {
			t.Errorf("%s: %d %s", name, r.status, r.body)
			continue
		}
		r.errBody(t)
		if tt.field != "" && !strings.Contains(string(r.body), `"`+tt.field+`"`) {
			t.Errorf("%s: %s does not name field %s", name, r.body, tt.field)
		}
	}
	if jobs, _ := st.Jobs(); len(jobs) != 1 {
		t.Fatalf("a refused body was saved: %d jobs", len(jobs))
	}
	ro, op := bearer(f.tokens[auth.RoleRestoreOnly]), bearer(f.tokens[auth.RoleOperator])
	if r := f.do("PUT", "/api/v1/verification-jobs/weekly", validVerificationJob, op); r.status != http.StatusForbidden {
		t.Fatalf("put as operator: %d", r.status)
	}
	if r := f.do("POST", "/api/v1/verification-jobs/weekly/run", nil, ro); r.status != http.StatusForbidden {
		t.Fatalf("run as restore-only: %d", r.status)
	}
	if r := f.do("POST", "/api/v1/verification-jobs/weekly/run", nil, op); r.status != http.StatusAccepted {
		t.Fatalf("run as operator: %d %s", r.status, r.body)
	}
	if r := f.do("POST", "/api/v1/verification-jobs/weekly/run", nil, op); r.status != http.StatusConflict {
		t.Fatalf("run while running: %d %s", r.status, r.body)
	}
	var v api.VerificationJobView
	f.do("GET", "/api/v1/verification-jobs/weekly", nil, ro).json(t, &v)
	if v.Running == nil || v.Running.State != "running" || v.VMs[0] != "web-*" || !v.OnlyNew {
		t.Fatalf("view %+v", v)
	}
	var list []api.VerificationJobView
	f.do("GET", "/api/v1/verification-jobs", nil, ro).json(t, &list)
	if len(list) != 1 {
		t.Fatalf("list %+v", list)
	}
	canBoot = true
	boot := `{"id":"weekly","name":"Weekly boot","mode":"boot","network":"iso","ports":[22],` + win + `}`
	if r := f.admin("PUT", "/api/v1/verification-jobs/weekly", boot); r.status != http.StatusOK {
		t.Fatalf("put: %d %s", r.status, r.body)
	}
	if r := f.admin("PUT", "/api/v1/verification-jobs/other", boot); r.status != 422 {
		t.Fatalf("put with another id: %d", r.status)
	}
	if r := f.admin("DELETE", "/api/v1/verification-jobs/weekly", nil); r.status != http.StatusNoContent {
		t.Fatalf("delete: %d", r.status)
	}
	if r := f.admin("GET", "/api/v1/verification-jobs/weekly", nil); r.status != 404 {
		t.Fatalf("get deleted: %d", r.status)
	}
	evs, err := f.db.Events(context.Background(), state.EventQuery{})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, e := range evs {
		kinds[e.Kind]++
	}
	if kinds["verificationjob.create"] < 1 || kinds["verificationjob.update"] < 1 || kinds["verificationjob.run"] < 1 || kinds["verificationjob.delete"] != 1 {
		t.Fatalf("audit kinds %v", kinds)
	}
}

func TestVerificationJobsNotWired(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.VerificationJobs = nil })
	if r := f.admin("GET", "/api/v1/verification-jobs", nil); r.status != http.StatusNotImplemented {
		t.Fatalf("%d", r.status)
	}
}
