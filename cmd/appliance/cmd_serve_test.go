package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/web/webtest"
)

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

// The daemon end to end without vCenter: TLS with a generated certificate,
// login, a token, jobs validated against the configured repositories,
// restore points of a real repository, locking, CSRF for cookie sessions,
// graceful shutdown that leaves the repository reopenable.
func TestServeEndToEnd(t *testing.T) {
	dir := t.TempDir()
	repoDir := filepath.Join(dir, "repo")
	point := repository.TestRepositoryWithPoint(t, repoDir, "repo-pass")
	adminPw := filepath.Join(dir, "admin-password")
	if err := os.WriteFile(adminPw, []byte("admin-secret-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgYAML := fmt.Sprintf(`
listen: 127.0.0.1:0
state_dir: state
time_zone: Europe/Paris
log_level: debug
admin: {password_file: %s}
repositories:
  - {name: main, path: %s, passphrase_env: MAIN_PASS}
`, adminPw, repoDir)
	sd := startDaemon(t, dir, cfgYAML, map[string]string{"MAIN_PASS": "repo-pass"})
	addr, stdout, stderr, done, cancel, cfgPath := sd.addr, sd.stdout, sd.stderr, sd.done, sd.cancel, sd.cfgPath
	if _, err := os.Stat(filepath.Join(dir, "state", "tls", "cert.pem")); err != nil {
		t.Fatalf("no generated certificate: %v", err)
	}
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	api := &apiClient{t: t, base: "https://" + addr, hc: hc}
	anon := &apiClient{t: t, base: api.base, hc: &http.Client{Timeout: 20 * time.Second, Transport: hc.Transport}}

	if code, _ := anon.call("GET", "/healthz", nil, nil); code != 200 {
		t.Fatalf("healthz %d", code)
	}
	if code, _ := anon.call("GET", "/api/v1/jobs", nil, nil); code != 401 {
		t.Fatalf("jobs without auth %d", code)
	}
	code, body := api.call("POST", "/api/v1/auth/login", map[string]string{"username": "admin", "password": "admin-secret-1"}, nil)
	if code != 200 {
		t.Fatalf("login %d %s", code, body)
	}
	var login struct{ CSRFToken string }
	_ = json.Unmarshal(body, &login)
	csrf := map[string]string{"X-CSRF-Token": login.CSRFToken}

	// A token, created over the cookie session (CSRF required).
	if code, _ := api.call("POST", "/api/v1/auth/tokens", map[string]string{"name": "ci", "role": "operator"}, nil); code != 403 {
		t.Fatalf("token without CSRF %d", code)
	}
	code, body = api.call("POST", "/api/v1/auth/tokens", map[string]string{"name": "admin-ci", "role": "administrator"}, csrf)
	if code != 201 {
		t.Fatalf("token %d %s", code, body)
	}
	var tok struct{ Token string }
	_ = json.Unmarshal(body, &tok)
	bearer := map[string]string{"Authorization": "Bearer " + tok.Token}

	job := map[string]any{"id": "nightly", "name": "Nightly", "enabled": true, "repository": "nope",
		"selection": map[string]any{"vms": []string{"4210a1b2-0000-0000-0000-000000000001"}},
		"window":    map[string]any{"location": "Europe/Paris", "days": map[string]any{"monday": []string{"22:00-06:00"}}},
		"retention": map[string]any{"preset": "few", "last": 7, "weekly": 4}}
	code, body = anon.call("POST", "/api/v1/jobs", job, bearer)
	if code != 422 || !strings.Contains(string(body), `"field":"repository"`) {
		t.Fatalf("job with unknown repository: %d %s", code, body)
	}
	job["repository"] = "main"
	if code, body := anon.call("POST", "/api/v1/jobs", job, bearer); code != 201 {
		t.Fatalf("job: %d %s", code, body)
	}

	code, body = anon.call("GET", "/api/v1/restore-points?repository=main", nil, bearer)
	var pts []struct {
		ID     string
		Locked bool
	}
	if err := json.Unmarshal(body, &pts); code != 200 || err != nil || len(pts) != 1 || pts[0].ID != point.ID {
		t.Fatalf("points %d %s", code, body)
	}
	if code, body := anon.call("POST", "/api/v1/restore-points/"+point.ID+"/lock", nil, bearer); code != 200 || !strings.Contains(string(body), `"locked":true`) {
		t.Fatalf("lock %d %s", code, body)
	}
	// CSRF on the cookie session: refused without the header, accepted with it.
	if code, _ := api.call("POST", "/api/v1/restore-points/"+point.ID+"/unlock", nil, nil); code != 403 {
		t.Fatalf("unlock without CSRF %d", code)
	}
	if code, _ := api.call("GET", "/api/v1/restore-points/"+point.ID, nil, nil); code != 200 {
		t.Fatalf("read with cookie %d", code)
	}
	if code, body := api.call("GET", "/api/v1/jobs/nightly/retention-preview", nil, nil); code != 200 {
		t.Fatalf("preview %d %s", code, body)
	}
	if code, body := anon.call("GET", "/metrics", nil, bearer); code != 200 || !strings.Contains(string(body), `vmvault_repository_points{repository="main"} 1`) {
		t.Fatalf("metrics %d %s", code, body)
	}

	// A second daemon on the same state directory is refused, clearly.
	second := runCLIEnv(t, map[string]string{"MAIN_PASS": "repo-pass"}, "serve", "--config", cfgPath)
	if second.code != 1 || !strings.Contains(second.stderr, "another daemon is running") {
		t.Fatalf("second daemon: exit %d: %s", second.code, second.stderr)
	}
	// A second daemon with its own state directory cannot take the repository.
	other := filepath.Join(dir, "other.yaml")
	if err := os.WriteFile(other, []byte(strings.Replace(cfgYAML, "state_dir: state", "state_dir: state2", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	second = runCLIEnv(t, map[string]string{"MAIN_PASS": "repo-pass"}, "serve", "--config", other)
	if second.code != 1 || !strings.Contains(second.stderr, "in use by another daemon or command") {
		t.Fatalf("second daemon on the repository: exit %d: %s", second.code, second.stderr)
	}

	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("serve exit %d: %s", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
	for _, secret := range []string{"admin-secret-1", "repo-pass", tok.Token} {
		if strings.Contains(stderr.String(), secret) || strings.Contains(stdout.String(), secret) {
			t.Fatalf("a secret reached the output")
		}
	}
	// The repository was closed cleanly and the lock persisted.
	r, err := repository.Open(context.Background(), repoDir, []byte("repo-pass"), repository.OpenOptions{})
	if err != nil {
		t.Fatalf("reopen repository: %v", err)
	}
	defer r.Close()
	p, err := r.Point(context.Background(), point.ID)
	if err != nil || !p.Locked {
		t.Fatalf("after restart: %+v %v", p, err)
	}
}

// A bad configuration stops the daemon before it starts, naming the field.
func TestServeBadConfig(t *testing.T) {
	p := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(p, []byte("state_dir: /tmp/x\nrepositories: [{name: a, path: /a}]\nlisten: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runCLIEnv(t, nil, "serve", "--config", p)
	if r.code == 0 || !strings.Contains(r.stderr, "listen") {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if r := runCLIEnv(t, nil, "serve"); r.code != 2 {
		t.Fatalf("no --config: exit %d", r.code)
	}
}

// Without a password file or $VMVAULT_ADMIN_PASSWORD the first start
// generates the administrator's password and prints it once, on stdout;
// it works, and the next start prints nothing.
func TestServeGeneratesAdminPassword(t *testing.T) {
	dir := t.TempDir()
	repoDir := filepath.Join(dir, "repo")
	repository.TestRepositoryWithPoint(t, repoDir, "repo-pass")
	cfgPath := filepath.Join(dir, "vmvault.yaml")
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf("listen: 127.0.0.1:0\ntls: {disable: true}\nstate_dir: state\nrepositories: [{name: main, path: %s, passphrase_env: P}]\n", repoDir)), 0o600); err != nil {
		t.Fatal(err)
	}
	start := func() (stdout string, addr string, stop func()) {
		t.Helper()
		ready := make(chan string, 1)
		ctx, cancel := context.WithCancel(context.Background())
		var out, errb bytes.Buffer
		env := &cliEnv{stdout: &out, stderr: &errb, getenv: func(k string) string { return map[string]string{"P": "repo-pass"}[k] },
			serveReady: func(a string) { ready <- a }}
		done := make(chan int, 1)
		go func() { done <- run(ctx, env, []string{"serve", "--config", cfgPath}) }()
		select {
		case addr = <-ready:
		case code := <-done:
			t.Fatalf("serve exited %d: %s", code, errb.String())
		case <-time.After(20 * time.Second):
			t.Fatal("serve did not start")
		}
		return out.String(), addr, func() {
			cancel()
			if code := <-done; code != 0 {
				t.Fatalf("serve exit %d: %s", code, errb.String())
			}
		}
	}
	out, addr, stop := start()
	_, pw, ok := strings.Cut(strings.TrimSpace(out), "): ")
	if !ok || len(pw) < 16 {
		stop()
		t.Fatalf("no generated password on stdout: %q", out)
	}
	api := &apiClient{t: t, base: "http://" + addr, hc: &http.Client{Timeout: 20 * time.Second}}
	if code, body := api.call("POST", "/api/v1/auth/login", map[string]string{"username": "admin", "password": pw}, nil); code != 200 {
		stop()
		t.Fatalf("login with the generated password: %d %s", code, body)
	}
	stop()
	out, _, stop = start()
	stop()
	if out != "" {
		t.Fatalf("second start printed %q", out)
	}
}

// testDaemon is an `appliance serve` run in process by a test.
type testDaemon struct {
	addr           string
	cfgPath        string
	stdout, stderr *bytes.Buffer
	done           chan int
	cancel         context.CancelFunc
}

// startDaemon writes cfgYAML to dir/vmvault.yaml, runs `appliance serve` on
// it with the given environment, and waits until it listens. The daemon is
// stopped at the end of the test if the test did not stop it.
func startDaemon(t *testing.T, dir, cfgYAML string, vars map[string]string) *testDaemon {
	t.Helper()
	d := &testDaemon{cfgPath: filepath.Join(dir, "vmvault.yaml"), stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, done: make(chan int, 1)}
	if err := os.WriteFile(d.cfgPath, []byte(cfgYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	t.Cleanup(cancel)
	env := &cliEnv{stdout: d.stdout, stderr: d.stderr, getenv: func(k string) string { return vars[k] }, serveReady: func(addr string) { ready <- addr }}
	go func() { d.done <- run(ctx, env, []string{"serve", "--config", d.cfgPath}) }()
	select {
	case d.addr = <-ready:
	case code := <-d.done:
		t.Fatalf("serve exited %d: %s", code, d.stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not start")
	}
	return d
}

// startLabDaemon starts the daemon in process against lab l, on plain HTTP,
// with one repository "main" holding a committed point (passphrase
// "repo-pass") in dir/repo and its state in dir/state; extraYAML is appended
// to the configuration (its relative paths are relative to dir). It returns
// the daemon and the repository's directory.
func startLabDaemon(t *testing.T, l *lab.Lab, dir, adminPassword, extraYAML string) (*testDaemon, string) {
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
	sd := startDaemon(t, dir, cfgYAML, map[string]string{"MAIN_PASS": "repo-pass", "VC_PASS": l.Password(), "VMVAULT_ADMIN_PASSWORD": adminPassword})
	return sd, repoDir
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
