package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/web/webtest"
)

// randBytes returns n seeded random bytes.
func randBytes(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func startTestLab(t *testing.T) *lab.Lab {
	t.Helper()
	l, err := lab.Start(context.Background(), lab.Options{})
	if err != nil {
		t.Fatalf("start lab: %v", err)
	}
	t.Cleanup(l.Close)
	return l
}

// apiClient is webtest.Client under the names these tests use.
type apiClient struct {
	t    *testing.T
	base string
	hc   *http.Client
}

// call sends one request and checks the answer against the published API
// document (webtest.Client.Call).
func (a *apiClient) call(method, path string, body any, hdr map[string]string) (int, []byte) {
	a.t.Helper()
	return (&webtest.Client{T: a.t, Base: a.base, HC: a.hc}).Call(method, path, body, hdr)
}

// syncBuffer is the daemon's log, read by the test while the daemon writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testDaemon is a daemon run in process by a test, built by New from a
// configuration file and served by Run.
type testDaemon struct {
	addr           string
	stdout, stderr *syncBuffer
	done           chan error // Run's result, after Close
	cancel         context.CancelFunc
}

// startDaemon writes cfgYAML to dir/vmvault.yaml, loads it, builds the
// daemon with the given environment and opts, runs it and waits until it
// listens. The daemon is stopped at the end of the test if the test did
// not stop it.
func startDaemon(t *testing.T, dir, cfgYAML string, vars map[string]string, opts Options) *testDaemon {
	t.Helper()
	p := filepath.Join(dir, "vmvault.yaml")
	if err := os.WriteFile(p, []byte(cfgYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	td := &testDaemon{stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan error, 1)}
	ready := make(chan string, 1)
	opts.Stdout, opts.Stderr = td.stdout, td.stderr
	opts.Getenv = func(k string) string { return vars[k] }
	opts.Ready = func(addr string) { ready <- addr }
	d, err := New(context.Background(), cfg, opts)
	if err != nil {
		t.Fatalf("New: %v\n%s", err, td.stderr.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	td.cancel = cancel
	go func() {
		err := d.Run(ctx)
		td.done <- errors.Join(err, d.Close())
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-td.done:
		case <-time.After(ShutdownGrace + 15*time.Second):
			t.Error("the daemon did not stop")
		}
	})
	select {
	case td.addr = <-ready:
	case err := <-td.done:
		td.done <- err
		t.Fatalf("Run ended: %v\n%s", err, td.stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("the daemon did not start")
	}
	return td
}

// stop cancels the daemon's context and waits for Run and Close.
func (td *testDaemon) stop(t *testing.T, within time.Duration) {
	t.Helper()
	td.cancel()
	select {
	case err := <-td.done:
		td.done <- nil // for the cleanup
		if err != nil {
			t.Fatalf("daemon: %v\n%s", err, td.stderr.String())
		}
	case <-time.After(within):
		t.Fatal("the daemon did not stop")
	}
}

// startLabDaemon starts the daemon in process against lab l, on plain HTTP,
// with one repository "main" holding a committed point (passphrase
// "repo-pass") in dir/repo and its state in dir/state; extraYAML is appended
// to the configuration (its relative paths are relative to dir). It returns
// the daemon and the repository's directory.
func startLabDaemon(t *testing.T, l *lab.Lab, dir, adminPassword, extraYAML string, opts Options) (*testDaemon, string) {
	t.Helper()
	repoDir := filepath.Join(dir, "repo")
	repository.TestRepositoryWithPoint(t, repoDir, "repo-pass")
	cfgYAML := fmt.Sprintf(`
listen: 127.0.0.1:0
tls: {disable: true}
state_dir: %s
vcenter: {url: %q, username: %s, password_env: VC_PASS, thumbprint: %q}
repositories:
  - {name: main, path: %s, passphrase_env: MAIN_PASS}
`, filepath.Join(dir, "state"), l.URL().String(), l.Username(), l.Thumbprint(), repoDir) + extraYAML
	sd := startDaemon(t, dir, cfgYAML, map[string]string{"MAIN_PASS": "repo-pass", "VC_PASS": l.Password(), "VMVAULT_ADMIN_PASSWORD": adminPassword}, opts)
	return sd, repoDir
}

func newJar(t *testing.T) http.CookieJar {
	t.Helper()
	j, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// cookieLogin logs the administrator in with a cookie session, as the
// console does, and returns the client and the CSRF header every change needs.
func cookieLogin(t *testing.T, addr, password string) (*apiClient, map[string]string) {
	t.Helper()
	api := &apiClient{t: t, base: "http://" + addr, hc: &http.Client{Jar: newJar(t), Timeout: 60 * time.Second}}
	code, body := api.call("POST", "/api/v1/auth/login", map[string]string{"username": "admin", "password": password}, nil)
	if code != 200 {
		t.Fatalf("login: %d %s", code, body)
	}
	var login struct{ CSRFToken string }
	_ = json.Unmarshal(body, &login)
	return api, map[string]string{"X-CSRF-Token": login.CSRFToken}
}

// vmUUID returns the instance UUID of the inventory's VM of that name
// (GET /vms); a VM the inventory lacks fails the test.
func (a *apiClient) vmUUID(name string) string {
	a.t.Helper()
	var vms []struct{ InstanceUUID, Name string }
	_, body := a.call("GET", "/api/v1/vms", nil, nil)
	if err := json.Unmarshal(body, &vms); err != nil {
		a.t.Fatal(err)
	}
	for _, v := range vms {
		if v.Name == name {
			return v.InstanceUUID
		}
	}
	a.t.Fatalf("VM %s is not in the inventory: %s", name, body)
	return ""
}
