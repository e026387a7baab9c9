package web

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/internal/state"
	"github.com/vmvault/vmvault/internal/task"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/records"
	"github.com/vmvault/vmvault/service/repos"
	"github.com/vmvault/vmvault/service/settings"
)

const testAdminPassword = "secret-password"

type fixture struct {
	t      testing.TB
	srv    *Server
	http   *httptest.Server
	db     *state.DB
	clk    *clock.Fake
	repo   *repository.Repository
	points []repository.Point
	inv    *policy.MemInventory
	tokens map[auth.Role]string
	tasks  *task.Registry
	// verifier is the Verifier the fixture wires (Config.Verifier).
	verifier *memVerifier
}

var testVM = policy.VM{InstanceUUID: "4210a1b2-0000-0000-0000-000000000001", Name: "web01", MoRef: "vm-42",
	Containers: []policy.ContainerRef{{Kind: policy.KindFolder, ID: "group-v1"}}}

// commitPoint stores a small restore point of vm (job tag set) in r.
func commitPoint(t testing.TB, r *repository.Repository, vm policy.VM, job string, at time.Time) repository.Point {
	t.Helper()
	return commitPointWith(t, r, vm, job, at, "crash", nil)
}

// commitPointWith is commitPoint with a consistency and more tags.
func commitPointWith(t testing.TB, r *repository.Repository, vm policy.VM, job string, at time.Time, consistency string, tags map[string]string) repository.Point {
	t.Helper()
	all := map[string]string{repos.JobTag: job}
	for k, v := range tags {
		all[k] = v
	}
	ctx := context.Background()
	s, err := r.NewSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Abort()
	data := bytes.Repeat([]byte(vm.Name+at.String()), 4096)
	id, _, _, err := s.PutChunk(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	root, err := s.PutDisk(ctx, int64(len(data)), []repository.Extent{{Offset: 0, Length: int64(len(data)), ID: id}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Commit(ctx, repository.NewPoint{
		VM:   repository.VMIdentity{Name: vm.Name, MoRef: vm.MoRef, InstanceUUID: vm.InstanceUUID},
		Time: at, Consistency: consistency, Tags: all,
		Disks: []repository.NewDisk{{Key: 2000, Label: "Hard disk 1", Capacity: int64(len(data)), Map: root,
			Stats: repository.DiskStats{BytesRead: int64(len(data)), NewBytes: int64(len(data)), StoredBytes: int64(len(data)) / 4}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func newFixture(t testing.TB, mod func(*Config)) *fixture {
	t.Helper()
	dir := t.TempDir()
	db, err := state.Open(filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	wdb, err := bolt.Open(filepath.Join(dir, "web.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wdb.Close() })
	ast, err := auth.NewBoltStore(wdb)
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	am, err := auth.NewManager(auth.Config{Clock: clk, Store: ast, Hash: auth.HashParams{Time: 1, MemoryKiB: 64, Threads: 1}, IPBurst: 1000, UserBurst: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := am.EnsureAdmin(context.Background(), testAdminPassword); err != nil {
		t.Fatal(err)
	}
	tst, err := task.NewBoltStore(wdb)
	if err != nil {
		t.Fatal(err)
	}
	reg := task.New(task.Config{Store: tst})
	settings, err := settings.NewBolt(db)
	if err != nil {
		t.Fatal(err)
	}
	repo := repository.TestRepository(t)
	// Cleanups run last-registered first: tasks (a check still running when
	// a test ends) must finish before the repository closes, as in the daemon.
	t.Cleanup(func() { reg.Close(context.Background()) })
	f := &fixture{t: t, db: db, clk: clk, repo: repo, inv: policy.NewMemInventory(testVM), tokens: map[auth.Role]string{}, tasks: reg}
	f.points = append(f.points,
		commitPoint(t, repo, testVM, "nightly", time.Date(2026, 11, 27, 23, 0, 0, 0, time.UTC)),
		commitPoint(t, repo, testVM, "nightly", time.Date(2026, 11, 28, 23, 0, 0, 0, time.UTC)),
		commitPoint(t, repo, policy.VM{InstanceUUID: "gone-vm", Name: "old01"}, "", time.Date(2026, 10, 1, 1, 0, 0, 0, time.UTC)),
	)
	rs := repos.New(map[string]*repository.Repository{"main": repo}, repos.WithClock(clk))
	rs.Maintenance = db.Maintenance
	mv := newMemVerifier(clk)
	rs.SetVerification(mv.latest)
	f.verifier = mv
	rec := records.New(db)
	cfg := Config{Clock: clk, Auth: am, Tasks: reg, Jobs: rec, Inventory: f.inv, Points: rs, Repositories: rs,
		Events: rec, VMStates: rec, Settings: settings, CopyJobs: newMemCopyJobs(), Instant: newMemInstant(f.points[2]), Prober: fakeProber{},
		Verifier: mv, VerificationJobs: newTestVerificationJobs(t, rs, passingVerifier{})}
	if mod != nil {
		mod(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.srv = srv
	f.http = httptest.NewServer(srv.Handler())
	t.Cleanup(f.http.Close)
	// Streams end first, or closing the test server waits for them forever.
	t.Cleanup(srv.Close)
	for _, role := range []auth.Role{auth.RoleAdministrator, auth.RoleOperator, auth.RoleRestoreOnly} {
		secret, _, err := am.CreateToken(context.Background(), auth.Principal{User: "admin", Role: auth.RoleAdministrator}, "t-"+string(role), role, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.tokens[role] = secret
	}
	return f
}

type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// errBody decodes the one error shape and fails if the body is not it.
func (r resp) errBody(t testing.TB) ErrorDetail {
	t.Helper()
	var eb ErrorBody
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&eb); err != nil || eb.Error.Code == "" || eb.Error.Message == "" {
		t.Fatalf("status %d: not the error shape: %s (%v)", r.status, r.body, err)
	}
	return eb.Error
}

func (r resp) fieldNamed(t *testing.T, field string) {
	t.Helper()
	det := r.errBody(t)
	b, _ := json.Marshal(det.Details)
	var fes []FieldError
	_ = json.Unmarshal(b, &fes)
	for _, fe := range fes {
		if fe.Field == field {
			return
		}
	}
	t.Fatalf("status %d: error does not name field %q: %s", r.status, field, r.body)
}

type reqOpt func(*http.Request)

func bearer(tok string) reqOpt {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }
}

func (f *fixture) do(method, path string, body any, opts ...reqOpt) resp {
	f.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, f.http.URL+path, rd)
	if err != nil {
		f.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, o := range opts {
		o(req)
	}
	res, err := f.http.Client().Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	r := resp{status: res.StatusCode, header: res.Header, body: b}
	validateResponse(f.t, method, path, r)
	return r
}

func (f *fixture) admin(method, path string, body any) resp {
	f.t.Helper()
	return f.do(method, path, body, bearer(f.tokens[auth.RoleAdministrator]))
}

func validJob(id string) map[string]any {
	return map[string]any{
		"id": id, "name": "Nightly " + id, "enabled": true, "repository": "main",
		"selection": map[string]any{"vms": []string{testVM.InstanceUUID}},
		"window":    map[string]any{"location": "UTC", "days": map[string]any{"monday": []string{"22:00-06:00"}}},
		"retention": map[string]any{"last": 1},
	}
}

func mustAuthStore(t *testing.T, f *fixture) auth.Store {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "auth.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	st, err := auth.NewBoltStore(db)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := auth.HashPassword(testAdminPassword, auth.HashParams{Time: 1, MemoryKiB: 64, Threads: 1})
	if err := st.SetAdminHash(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	return st
}

// recordingMailer is web's side of the Mailer contract: it records the
// addresses and fails with err when set (notify's real SMTP client is
// tested in notify against a real SMTP server).
type recordingMailer struct {
	mu  sync.Mutex
	to  []string
	err error
}

func (m *recordingMailer) SendTest(ctx context.Context, to string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return m.err
	}
	m.to = append(m.to, to)
	return nil
}

// staticVCenter answers connection tests without a vCenter (the vsphere
// implementation is tested against the lab in cmd/appliance).
type staticVCenter struct{}

func (staticVCenter) TestVCenter(ctx context.Context, req VCenterTest) (VCenterTestResult, error) {
	if req.Password == "wrong" {
		return VCenterTestResult{OK: false, Message: "login refused"}, nil
	}
	return VCenterTestResult{OK: true, Version: "VMware vCenter Server 8.0.0 build-1", Message: "connected"}, nil
}
