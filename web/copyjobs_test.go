package web

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/internal/state"
	"github.com/vmvault/vmvault/service/copyjob"
)

// memCopyJobs is CopyJobs in memory for the API's tests; it validates
// with copyjob's rules (the daemon's adapter does the same).
type memCopyJobs struct {
	mu      sync.Mutex
	jobs    map[string]CopyJob
	runs    map[string][]CopyRun
	offsite map[string]time.Time
	busy    bool
}

func newMemCopyJobs() *memCopyJobs {
	return &memCopyJobs{jobs: map[string]CopyJob{}, runs: map[string][]CopyRun{}, offsite: map[string]time.Time{}}
}

func (m *memCopyJobs) CopyJobs(ctx context.Context) ([]CopyJobView, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := []CopyJobView{}
	for _, j := range m.jobs {
		out = append(out, m.view(j))
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out, nil
}

func (m *memCopyJobs) view(j CopyJob) CopyJobView {
	v := CopyJobView{CopyJob: j}
	if rs := m.runs[j.ID]; len(rs) > 0 {
		r := rs[0]
		v.LastRun = &r
	}
	return v
}

func (m *memCopyJobs) CopyJob(ctx context.Context, id string) (CopyJobView, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	j, ok := m.jobs[id]
	if !ok {
		return CopyJobView{}, fmt.Errorf("copy job %q: %w", id, ErrNotFound)
	}
	return m.view(j), nil
}

func (m *memCopyJobs) PutCopyJob(ctx context.Context, j CopyJob) error {
	if err := copyjob.Job(j).Validate(func(n string) bool { return n == "main" || n == "offsite" }); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.jobs[j.ID] = j
	return nil
}

func (m *memCopyJobs) DeleteCopyJob(ctx context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.jobs[id]; !ok {
		return fmt.Errorf("copy job %q: %w", id, ErrNotFound)
	}
	delete(m.jobs, id)
	return nil
}

func (m *memCopyJobs) RunCopyJob(ctx context.Context, id string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.jobs[id]; !ok {
		return "", fmt.Errorf("copy job %q: %w", id, ErrNotFound)
	}
	if m.busy {
		return "", fmt.Errorf("copy job %s is already copying: %w", id, ErrBusy)
	}
	r := CopyRun{ID: fmt.Sprintf("%s/%d", id, len(m.runs[id])+1), Job: id, Trigger: "manual", Start: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC), State: "succeeded", PointsCopied: 2, BytesSent: 4096}
	r.End = r.Start.Add(time.Minute)
	m.runs[id] = append([]CopyRun{r}, m.runs[id]...)
	return r.ID, nil
}

func (m *memCopyJobs) CopyRuns(ctx context.Context, id string, limit int) ([]CopyRun, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.jobs[id]; !ok {
		return nil, fmt.Errorf("copy job %q: %w", id, ErrNotFound)
	}
	rs := m.runs[id]
	return rs[:min(limit, len(rs))], nil
}

func (m *memCopyJobs) OffsiteCopies(ctx context.Context) (map[string]time.Time, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]time.Time{}
	for k, v := range m.offsite {
		out[k] = v
	}
	return out, nil
}

const validCopyJob = `{"id":"offsite","name":"Offsite","source":"main","target":"offsite","jobs":["nightly"],
 "window":{"location":"UTC","days":{"monday":["01:00-05:00"]}},"retention":{"last":7},"enabled":true}`

func TestCopyJobsAPI(t *testing.T) {
	cj := newMemCopyJobs()
	f := newFixture(t, func(c *Config) { c.CopyJobs = cj })
	if r := f.admin("POST", "/api/v1/copy-jobs", validCopyJob); r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	if r := f.admin("POST", "/api/v1/copy-jobs", validCopyJob); r.status != http.StatusConflict {
		t.Fatalf("create twice: %d", r.status)
	}
	for name, body := range map[string]string{
		"same repos":   `{"id":"x","source":"main","target":"main","window":{"location":"UTC","days":{"monday":["01:00-05:00"]}},"retention":{"last":7}}`,
		"unknown repo": `{"id":"x","source":"main","target":"nowhere","window":{"location":"UTC","days":{"monday":["01:00-05:00"]}},"retention":{"last":7}}`,
		"keeps none":   `{"id":"x","source":"main","target":"offsite","window":{"location":"UTC","days":{"monday":["01:00-05:00"]}},"retention":{}}`,
		"bad window":   `{"id":"x","source":"main","target":"offsite","window":{"location":"UTC","days":{"funday":["01:00-05:00"]}},"retention":{"last":1}}`,
		"unknown":      `{"id":"x","source":"main","target":"offsite","speed":1}`,
	} {
		r := f.admin("POST", "/api/v1/copy-jobs", body)
		if r.status != 400 && r.status != 422 {
			t.Errorf("%s: %d %s", name, r.status, r.body)
		} else {
			r.errBody(t)
		}
	}
	if len(cj.jobs) != 1 {
		t.Fatalf("a refused body was saved: %d jobs", len(cj.jobs))
	}
	// Operators run, only administrators change.
	if r := f.do("POST", "/api/v1/copy-jobs/offsite/run", nil, bearer(f.tokens[auth.RoleOperator])); r.status != http.StatusAccepted {
		t.Fatalf("run as operator: %d %s", r.status, r.body)
	}
	if r := f.do("PUT", "/api/v1/copy-jobs/offsite", validCopyJob, bearer(f.tokens[auth.RoleOperator])); r.status != http.StatusForbidden {
		t.Fatalf("put as operator: %d", r.status)
	}
	var runs []CopyRun
	r := f.do("GET", "/api/v1/copy-jobs/offsite/runs", nil, bearer(f.tokens[auth.RoleRestoreOnly]))
	r.json(t, &runs)
	if len(runs) != 1 || runs[0].PointsCopied != 2 {
		t.Fatalf("runs %s", r.body)
	}
	var v CopyJobView
	f.admin("GET", "/api/v1/copy-jobs/offsite", nil).json(t, &v)
	if v.LastRun == nil || v.Target != "offsite" || v.Jobs[0] != "nightly" {
		t.Fatalf("view %+v", v)
	}
	if r := f.admin("PUT", "/api/v1/copy-jobs/other", validCopyJob); r.status != 422 {
		t.Fatalf("put with another id: %d", r.status)
	}
	if r := f.admin("DELETE", "/api/v1/copy-jobs/offsite", nil); r.status != http.StatusNoContent {
		t.Fatalf("delete: %d", r.status)
	}
	if r := f.admin("GET", "/api/v1/copy-jobs/offsite", nil); r.status != 404 {
		t.Fatalf("get deleted: %d", r.status)
	}
	// Every change is in the audit trail.
	evs, err := f.db.Events(context.Background(), state.EventQuery{})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, e := range evs {
		kinds[e.Kind]++
	}
	if kinds["copyjob.create"] < 1 || kinds["copyjob.run"] != 1 || kinds["copyjob.delete"] != 1 {
		t.Fatalf("audit kinds %v", kinds)
	}
}

func TestCopyJobsNotWired(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.CopyJobs = nil })
	if r := f.admin("GET", "/api/v1/copy-jobs", nil); r.status != http.StatusNotImplemented {
		t.Fatalf("%d", r.status)
	}
	var d Dashboard
	f.admin("GET", "/api/v1/dashboard", nil).json(t, &d)
	if d.Offsite != nil {
		t.Fatal("offsite section without copy jobs")
	}
}

// The dashboard counts protected VMs with a copy less than 24 h old.
func TestDashboardOffsite(t *testing.T) {
	cj := newMemCopyJobs()
	f := newFixture(t, func(c *Config) { c.CopyJobs = cj })
	// A job covers web01: its points protect it.
	if r := f.admin("POST", "/api/v1/jobs", validJob("nightly")); r.status != 201 {
		t.Fatal(r.status)
	}
	var d Dashboard
	f.admin("GET", "/api/v1/dashboard", nil).json(t, &d)
	if d.Offsite != nil {
		t.Fatal("offsite section without a copy job")
	}
	if r := f.admin("POST", "/api/v1/copy-jobs", validCopyJob); r.status != 201 {
		t.Fatal(r.status)
	}
	f.admin("GET", "/api/v1/dashboard", nil).json(t, &d)
	if d.Offsite == nil || d.Offsite.Protected != d.VMs.Protected || d.Offsite.Protected == 0 || d.Offsite.Copied != 0 || len(d.Offsite.Missing) != d.Offsite.Protected {
		t.Fatalf("no copies: %+v (vms %+v)", d.Offsite, d.VMs)
	}
	now := f.clk.Now()
	cj.mu.Lock()
	cj.offsite[testVM.InstanceUUID] = now.Add(-25 * time.Hour)
	cj.mu.Unlock()
	f.admin("GET", "/api/v1/dashboard", nil).json(t, &d)
	if d.Offsite.Copied != 0 {
		t.Fatalf("a 25 h old copy counted: %+v", d.Offsite)
	}
	cj.mu.Lock()
	cj.offsite[testVM.InstanceUUID] = now.Add(-time.Hour)
	cj.mu.Unlock()
	f.admin("GET", "/api/v1/dashboard", nil).json(t, &d)
	if d.Offsite.Copied != 1 {
		t.Fatalf("a recent copy not counted: %+v", d.Offsite)
	}
}

// Whatever the body, POST and PUT /copy-jobs answer below 500 with the one
// error shape, and a refused body changes nothing.
func FuzzCopyJobBodies(f *testing.F) {
	f.Add(false, []byte(validCopyJob))
	f.Add(true, []byte(validCopyJob))
	f.Add(false, []byte(`{"id":"x","source":"main","target":"main","window":{"location":"UTC","days":{"monday":["01:00-05:00"]}},"retention":{"last":7}}`))
	f.Add(false, []byte(`{"id":"x","source":"main","target":"offsite","window":{"location":"Nowhere/X","days":{"xday":["25:00-99:00"]}},"retention":{"last":-1}}`))
	f.Add(true, []byte(`{"id":"offsite","vms":[""],"jobs":null,"window":null,"retention":{"preset":"zzz"}}`))
	cj := newMemCopyJobs()
	fx := newFixture(f, func(c *Config) { c.CopyJobs = cj })
	if r := fx.admin("POST", "/api/v1/copy-jobs", validCopyJob); r.status != 201 {
		f.Fatal(r.status)
	}
	f.Fuzz(func(t *testing.T, put bool, body []byte) {
		method, path := "POST", "/api/v1/copy-jobs"
		if put {
			method, path = "PUT", "/api/v1/copy-jobs/offsite"
		}
		before, _ := cj.CopyJobs(context.Background())
		req := httptest.NewRequest(method, path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+fx.tokens[auth.RoleAdministrator])
		rec := httptest.NewRecorder()
		fx.srv.Handler().ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %q: %d %s", method, body, rec.Code, rec.Body.Bytes())
		}
		if rec.Code >= 400 {
			resp{status: rec.Code, body: rec.Body.Bytes()}.errBody(t)
			after, _ := cj.CopyJobs(context.Background())
			if fmt.Sprint(before) != fmt.Sprint(after) {
				t.Fatalf("a refused body (%d) changed the jobs: %q", rec.Code, body)
			}
		}
	})
}
