package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/state"
	"github.com/vmvault/vmvault/repository"
)

// serveRun is one `appliance serve` run in process with extra flags.
type serveRun struct {
	addr           string
	stdout, stderr *bytes.Buffer
	done           chan int
	cancel         context.CancelFunc
}

// startServe runs `appliance serve --config cfgPath extra...`. If the daemon
// exits before listening, it returns the run with addr empty and the exit
// code in done.
func startServe(t *testing.T, cfgPath string, vars map[string]string, extra ...string) *serveRun {
	t.Helper()
	r := &serveRun{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, done: make(chan int, 1)}
	ready := make(chan string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	t.Cleanup(cancel)
	env := &cliEnv{stdout: r.stdout, stderr: r.stderr, getenv: func(k string) string { return vars[k] }, serveReady: func(addr string) { ready <- addr }}
	go func() { r.done <- run(ctx, env, append([]string{"serve", "--config", cfgPath}, extra...)) }()
	select {
	case r.addr = <-ready:
	case code := <-r.done:
		r.done <- code
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not start")
	}
	return r
}

func (r *serveRun) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case code := <-r.done:
		if code != 0 {
			t.Fatalf("serve exited %d: %s", code, r.stderr)
		}
	case <-time.After(shutdownGrace + 15*time.Second):
		t.Fatal("serve did not stop")
	}
}

// A damaged state.db stops the daemon with an error that names the file and
// the newest good copy; `state backups` lists the copies the daemon took at
// its starts; `serve --restore-state newest` installs the newest, keeps the
// damaged file, says so in the log, and the daemon has its users and jobs.
func TestServeStartsFromStateCopy(t *testing.T) {
	dir := t.TempDir()
	repoDir := filepath.Join(dir, "repo")
	repository.TestRepositoryWithPoint(t, repoDir, "repo-pass")
	adminPw := filepath.Join(dir, "admin-password")
	if err := os.WriteFile(adminPw, []byte("admin-secret-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stateDir := filepath.Join(dir, "state")
	cfgPath := filepath.Join(dir, "vmvault.yaml")
	cfgYAML := fmt.Sprintf(`
listen: 127.0.0.1:0
tls: {disable: true}
state_dir: %s
admin: {password_file: %s}
repositories:
  - {name: main, path: %s, passphrase_env: MAIN_PASS}
`, stateDir, adminPw, repoDir)
	if err := os.WriteFile(cfgPath, []byte(cfgYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"MAIN_PASS": "repo-pass"}
	dbPath := filepath.Join(stateDir, "state.db")

	// First start: a user and a job.
	r := startServe(t, cfgPath, vars)
	if r.addr == "" {
		t.Fatalf("serve exited: %s", r.stderr)
	}
	api, csrf := cookieLogin(t, r.addr, "admin-secret-1")
	if code, body := api.call("POST", "/api/v1/users", map[string]any{"username": "alice", "password": "alice-password-1", "role": "operator"}, csrf); code != 201 {
		t.Fatalf("create user: %d %s", code, body)
	}
	job := map[string]any{"id": "nightly", "name": "Nightly", "enabled": true, "repository": "main",
		"selection": map[string]any{"vms": []string{"4210a1b2-0000-0000-0000-000000000001"}},
		"window":    map[string]any{"location": "UTC", "days": map[string]any{"monday": []string{"22:00-06:00"}}},
		"retention": map[string]any{"preset": "few", "last": 7}}
	if code, body := api.call("POST", "/api/v1/jobs", job, csrf); code != 201 {
		t.Fatalf("create job: %d %s", code, body)
	}
	r.stop(t)
	if !strings.Contains(r.stderr.String(), "state database copied") {
		t.Fatalf("no copy at start in the log: %s", r.stderr)
	}
	// Second start takes a copy holding alice and the job.
	r = startServe(t, cfgPath, vars)
	if r.addr == "" {
		t.Fatalf("serve exited: %s", r.stderr)
	}
	r.stop(t)
	copies, err := state.ListCopies(state.CopiesDir(dbPath), true)
	if err != nil || len(copies) == 0 {
		t.Fatalf("copies %v %v", copies, err)
	}
	newest := copies[0]

	// Damage state.db: everything after the two meta pages is garbage.
	raw, err := os.ReadFile(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	damaged := bytes.Clone(raw)
	for i := 8192; i < len(damaged); i++ {
		damaged[i] = byte(i*7 + 3)
	}
	if err := os.WriteFile(dbPath, damaged, 0o600); err != nil {
		t.Fatal(err)
	}
	r = startServe(t, cfgPath, vars)
	if r.addr != "" {
		r.stop(t)
		t.Fatal("the daemon started on a damaged state.db")
	}
	if code := <-r.done; code != 1 {
		t.Fatalf("exit %d: %s", code, r.stderr)
	}
	msg := r.stderr.String()
	t.Logf("start on a damaged state.db:\n%s", msg)
	for _, want := range []string{dbPath, newest.Path, newest.Time.Format(time.RFC3339), "--restore-state newest"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("start-up error does not name %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "panic") || strings.Contains(msg, "goroutine") {
		t.Fatalf("panic: %s", msg)
	}

	// The listing shows the copies and that they verify.
	out := mustCLI(t, "state", "backups", "--state-dir", stateDir)
	t.Logf("state backups:\n%s", out)
	if !strings.Contains(out, newest.Path) || !strings.Contains(out, " ok ") {
		t.Fatalf("state backups:\n%s", out)
	}
	var listed []struct {
		Path     string
		Verified bool
	}
	if err := json.Unmarshal([]byte(mustCLI(t, "state", "backups", "--config", cfgPath, "--json")), &listed); err != nil || len(listed) != len(copies) || listed[0].Path != newest.Path || !listed[0].Verified {
		t.Fatalf("state backups --json: %+v %v", listed, err)
	}

	// Start from the newest copy.
	r = startServe(t, cfgPath, vars, "--restore-state", "newest")
	if r.addr == "" {
		t.Fatalf("serve --restore-state newest exited: %s", r.stderr)
	}
	alice := &apiClient{t: t, base: "http://" + r.addr, hc: &http.Client{Jar: newJar(t), Timeout: 20 * time.Second}}
	if code, body := alice.call("POST", "/api/v1/auth/login", map[string]string{"username": "alice", "password": "alice-password-1"}, nil); code != 200 {
		t.Fatalf("alice after the restore: %d %s", code, body)
	}
	code, body := alice.call("GET", "/api/v1/jobs", nil, nil)
	if code != 200 || !strings.Contains(string(body), `"id":"nightly"`) {
		t.Fatalf("jobs after the restore: %d %s", code, body)
	}
	r.stop(t)
	log := r.stderr.String()
	kept, _ := filepath.Glob(dbPath + ".replaced-*")
	if len(kept) != 1 {
		t.Fatalf("replaced file kept as %v", kept)
	}
	if b, _ := os.ReadFile(kept[0]); !bytes.Equal(b, damaged) {
		t.Fatal("the damaged file was not kept intact")
	}
	for _, want := range []string{"state database restored from a copy", newest.Path, kept[0]} {
		if !strings.Contains(log, want) {
			t.Fatalf("log does not say %q:\n%s", want, log)
		}
	}

	// A copy that does not verify is refused, and nothing is replaced.
	bad := filepath.Join(dir, "bad.db")
	if err := os.WriteFile(bad, damaged, 0o600); err != nil {
		t.Fatal(err)
	}
	r = startServe(t, cfgPath, vars, "--restore-state", bad)
	if r.addr != "" {
		r.stop(t)
		t.Fatal("started from a damaged copy")
	}
	if code := <-r.done; code != 1 || !strings.Contains(r.stderr.String(), bad) {
		t.Fatalf("exit %d: %s", code, r.stderr)
	}
	if err := state.Verify(dbPath); err != nil {
		t.Fatalf("state.db after a refused restore: %v", err)
	}
}
