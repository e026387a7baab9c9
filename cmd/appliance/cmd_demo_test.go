package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vmvault/vmvault/daemon/demo"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
)

// syncBuffer is a bytes.Buffer the demo writes while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// demoLines are the lines `appliance demo` prints once it is ready.
type demoLines struct{ console, user, password, repo, repoPass, state string }

// parseDemoLines returns the printed lines, ok once all three are there.
func parseDemoLines(out string) (demoLines, bool) {
	var d demoLines
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "console: "); ok {
			d.console = v
		}
		if v, ok := strings.CutPrefix(line, "login: "); ok {
			d.user, d.password, _ = strings.Cut(v, " / ")
		}
		if v, ok := strings.CutPrefix(line, "repository: "); ok {
			d.repo = v
		}
		if v, ok := strings.CutPrefix(line, "repository passphrase: "); ok {
			d.repoPass, _, _ = strings.Cut(v, " (")
		}
		if v, ok := strings.CutPrefix(line, "state: "); ok {
			d.state = v
		}
	}
	return d, d.console != "" && d.password != "" && d.state != ""
}

type demoRun struct {
	demoLines
	stdout, stderr *syncBuffer
	done           chan int
	cancel         context.CancelFunc
}

// startDemo runs `appliance demo args...` in process and waits for its
// printed lines. The demo is stopped at the end of the test.
func startDemo(t *testing.T, hooks demoHooks, vars map[string]string, args ...string) *demoRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	d := &demoRun{stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan int, 1), cancel: cancel}
	env := &cliEnv{stdout: d.stdout, stderr: d.stderr, getenv: func(k string) string { return vars[k] }, demo: hooks}
	go func() { d.done <- run(ctx, env, append([]string{"demo"}, args...)) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-d.done:
		case <-time.After(40 * time.Second):
		}
	})
	began := time.Now()
	deadline := time.After(45 * time.Second)
	for {
		if lines, ok := parseDemoLines(d.stdout.String()); ok {
			d.demoLines = lines
			t.Logf("demo ready after %v", time.Since(began).Round(time.Millisecond))
			return d
		}
		select {
		case code := <-d.done:
			d.done <- code
			t.Fatalf("demo exited %d before it was ready:\nstdout: %s\nstderr: %s", code, d.stdout, d.stderr)
		case <-deadline:
			t.Fatalf("demo not ready:\nstdout: %s\nstderr: %s", d.stdout, d.stderr)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stop cancels the demo (as SIGTERM does) and wants exit status 0.
func (d *demoRun) stop(t *testing.T) {
	t.Helper()
	began := time.Now()
	d.cancel()
	select {
	case code := <-d.done:
		d.done <- code
		t.Logf("demo stopped after %v", time.Since(began).Round(time.Millisecond))
		if code != 0 {
			t.Fatalf("demo exit %d: %s", code, d.stderr)
		}
	case <-time.After(40 * time.Second):
		t.Fatal("demo did not stop")
	}
}

// demoLogin logs in to the demo's API with the printed login.
func demoLogin(t *testing.T, d demoLines) (*apiClient, map[string]string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	api := &apiClient{t: t, base: strings.TrimSuffix(d.console, "/"), hc: &http.Client{Jar: jar, Timeout: 30 * time.Second}}
	code, body := api.call("POST", "/api/v1/auth/login", map[string]string{"username": d.user, "password": d.password}, nil)
	if code != 200 {
		t.Fatalf("login with the printed password: %d %s", code, body)
	}
	var login struct{ CSRFToken string }
	_ = json.Unmarshal(body, &login)
	return api, map[string]string{"X-CSRF-Token": login.CSRFToken}
}

type demoPoint struct {
	ID    string
	Time  time.Time
	VM    struct{ Name string }
	Disks []struct {
		Mode      string
		BytesRead int64
	}
}

// waitPoints polls the job's restore points until want(points) holds.
func waitPoints(t *testing.T, api *apiClient, what string, want func([]demoPoint) bool) []demoPoint {
	t.Helper()
	began := time.Now()
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, body := api.call("GET", "/api/v1/restore-points?job="+demo.JobID, nil, nil)
		var pts []demoPoint
		if err := json.Unmarshal(body, &pts); code != 200 || err != nil {
			t.Fatalf("restore points: %d %s", code, body)
		}
		if want(pts) {
			t.Logf("%s after %v", what, time.Since(began).Round(time.Millisecond))
			return pts
		}
		if time.Now().After(deadline) {
			_, ev := api.call("GET", "/api/v1/events", nil, nil)
			t.Fatalf("%s: restore points %s\nevents: %s", what, body, ev)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

var sampleNames = []string{"web-01", "db-01", "files-01"}

func havePointFor(names ...string) func([]demoPoint) bool {
	return func(pts []demoPoint) bool {
		for _, n := range names {
			if !slices.ContainsFunc(pts, func(p demoPoint) bool { return p.VM.Name == n }) {
				return false
			}
		}
		return true
	}
}

// The demo end to end in process: the printed lines, a login with the
// printed password, the job with its open window, a first restore point of
// every sample VM, the sample VMs protected (the simulator's own VMs not),
// a clean stop that leaves no snapshot and a repository that checks clean,
// and a restart on the same --state that finds its job and VMs again.
func TestDemo(t *testing.T) {
	var mu sync.Mutex
	var samples []lab.Sample
	snapshotsLeft := map[string][]string{}
	var hooks demoHooks
	hooks.started = func(l *lab.Lab, s []lab.Sample) { mu.Lock(); samples = s; mu.Unlock() }
	hooks.stopped = func(l *lab.Lab) {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range samples {
			snaps, err := l.Snapshots(s.MoRef)
			if err != nil {
				snaps = append(snaps, "error: "+err.Error())
			}
			if len(snaps) > 0 {
				snapshotsLeft[s.Name] = snaps
			}
		}
	}

	state := filepath.Join(t.TempDir(), "demo")
	vars := map[string]string{"VMVAULT_ADMIN_PASSWORD": "demo-admin-secret"}
	args := []string{"--listen", "127.0.0.1:0", "--state", state, "--disk-mib", "16", "--churn", "0"}
	d := startDemo(t, hooks, vars, args...)
	if !strings.HasPrefix(d.console, "http://127.0.0.1:") || !strings.HasSuffix(d.console, "/") || strings.HasSuffix(d.console, ":0/") {
		t.Errorf("console line %q", d.console)
	}
	if d.user != "admin" || d.password != "demo-admin-secret" || d.state != state {
		t.Errorf("printed login %q / %q, state %q", d.user, d.password, d.state)
	}
	api, csrf := demoLogin(t, d.demoLines)
	if code, _ := api.call("GET", "/", nil, nil); code != 200 {
		t.Errorf("GET / (the console): %d", code)
	}

	code, body := api.call("GET", "/api/v1/jobs/"+demo.JobID, nil, nil)
	var job struct {
		Enabled   bool
		Selection struct{ VMs []string }
		Window    struct{ Days map[string][]string }
		Retention struct{ Daily, Weekly int }
	}
	if err := json.Unmarshal(body, &job); code != 200 || err != nil {
		t.Fatalf("demo job: %d %s", code, body)
	}
	if !job.Enabled || len(job.Selection.VMs) != 3 || len(job.Window.Days) != 7 || job.Retention.Daily != 7 || job.Retention.Weekly != 4 {
		t.Errorf("demo job: %s", body)
	}
	waitPoints(t, api, "a first restore point of every sample VM", havePointFor(sampleNames...))

	var vms []struct {
		Name      string
		Protected bool
		Jobs      []string
	}
	code, body = api.call("GET", "/api/v1/vms", nil, nil)
	if err := json.Unmarshal(body, &vms); code != 200 || err != nil {
		t.Fatalf("vms: %d %s", code, body)
	}
	seen := 0
	for _, v := range vms {
		sample := slices.Contains(sampleNames, v.Name)
		if sample {
			seen++
			if !v.Protected || !slices.Contains(v.Jobs, demo.JobID) {
				t.Errorf("sample VM %s: protected %v, jobs %v", v.Name, v.Protected, v.Jobs)
			}
		} else if v.Protected {
			t.Errorf("%s is protected but no job selects it", v.Name)
		}
	}
	if seen != 3 || len(vms) <= 3 {
		t.Errorf("inventory: %s", body)
	}
	_ = csrf
	d.stop(t)

	mu.Lock()
	if len(samples) != 3 {
		t.Errorf("%d samples", len(samples))
	}
	for vm, snaps := range snapshotsLeft {
		t.Errorf("%s: snapshots left after stop: %v", vm, snaps)
	}
	mu.Unlock()
	fi, err := os.Stat(filepath.Join(state, demo.PassFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("passphrase file: %v %v", fi, err)
	}
	if _, err := os.Stat(filepath.Join(state, demo.AdminPasswordFile)); !os.IsNotExist(err) {
		t.Errorf("the administrator password from the environment was written to disk: %v", err)
	}
	checkDemoRepo(t, state, 3)
	// The printed passphrase opens the printed repository from the CLI.
	if d.repo != filepath.Join(state, "repository") || d.repoPass == "" {
		t.Errorf("printed repository %q, passphrase %q", d.repo, d.repoPass)
	}
	if r := runCLIEnv(t, map[string]string{"VMVAULT_PASSWORD": d.repoPass}, "repo", "list", "--repo", d.repo); r.code != 0 {
		t.Errorf("repo list with the printed passphrase: exit %d: %s", r.code, r.stderr)
	}

	// Restarted on its state directory: the same job, the same VMs, still
	// protected by the points of the first run, and a new run.
	d = startDemo(t, hooks, vars, args...)
	api, _ = demoLogin(t, d.demoLines)
	_, body = api.call("GET", "/api/v1/jobs", nil, nil)
	if n := strings.Count(string(body), `"id":"`+demo.JobID+`"`); n != 1 {
		t.Errorf("after restart, %d demo jobs: %s", n, body)
	}
	_, body = api.call("GET", "/api/v1/vms", nil, nil)
	_ = json.Unmarshal(body, &vms)
	for _, v := range vms {
		if slices.Contains(sampleNames, v.Name) && !v.Protected {
			t.Errorf("after restart %s is not protected: %s", v.Name, body)
		}
	}
	d.stop(t)
	checkDemoRepo(t, state, 4)
}

// dataContent is what the sample's data areas hold now.
func dataContent(t *testing.T, l *lab.Lab, s lab.Sample) []byte {
	t.Helper()
	var out []byte
	for _, a := range s.DataAreas {
		b, err := l.ReadDisk(s.MoRef, 0, a.Off, int(a.Len))
		if err != nil {
			t.Error(err)
		}
		out = append(out, b...)
	}
	return out
}

// checkDemoRepo opens the demo's repository with its stored passphrase and
// wants at least minPoints restore points and a clean full check.
func checkDemoRepo(t *testing.T, state string, minPoints int) {
	t.Helper()
	pass, err := os.ReadFile(filepath.Join(state, demo.PassFile))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r, err := repository.Open(ctx, filepath.Join(state, "repository"), bytes.TrimSpace(pass), repository.OpenOptions{})
	if err != nil {
		t.Fatalf("open the demo repository after stop: %v", err)
	}
	defer r.Close()
	rep, err := r.Check(ctx, repository.CheckOptions{ReadData: true}, nil)
	if err != nil || !rep.Clean() {
		t.Fatalf("check: %+v %v", rep, err)
	}
	if rep.Points < minPoints {
		t.Errorf("%d restore points, want at least %d", rep.Points, minPoints)
	}
}

// A --listen that is not loopback is refused before anything starts: the
// demo serves plain HTTP.
func TestDemoRefusesNonLoopback(t *testing.T) {
	for _, listen := range []string{"0.0.0.0:0", ":8080", "[::]:0", "192.0.2.1:8080", "example.com:80", "nonsense"} {
		t.Run(listen, func(t *testing.T) {
			r := runCLIEnv(t, nil, "demo", "--listen", listen)
			if r.code != 2 || !strings.Contains(r.stderr, "--listen") || r.stdout != "" {
				t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
			}
			if listen != "nonsense" && !strings.Contains(r.stderr, "loopback") {
				t.Fatalf("no reason given: %s", r.stderr)
			}
		})
	}
	for _, args := range [][]string{{"--vms", "0"}, {"--churn", "-1s"}, {"--disk-mib", "1"}, {"extra"}} {
		if r := runCLIEnv(t, nil, append([]string{"demo"}, args...)...); r.code != 2 {
			t.Errorf("demo %v: exit %d %s", args, r.code, r.stderr)
		}
	}
}

// Churn makes the sample VMs write: their file data changes, the change id
// advances, and the next run of the job is an incremental that reads the
// changed blocks. Without --state the temporary state is removed on exit.
func TestDemoChurn(t *testing.T) {
	var mu sync.Mutex
	var theLab *lab.Lab
	var web lab.Sample
	var before []byte
	var changeID string
	var hooks demoHooks
	hooks.started = func(l *lab.Lab, s []lab.Sample) {
		mu.Lock()
		defer mu.Unlock()
		theLab, web = l, s[0]
		before = dataContent(t, l, web)
	}
	d := startDemo(t, hooks, nil, "--listen", "127.0.0.1:0", "--vms", "1", "--disk-mib", "16", "--churn", "100ms")
	if !strings.HasPrefix(d.state, os.TempDir()) {
		t.Errorf("state %s is not temporary", d.state)
	}
	api, csrf := demoLogin(t, d.demoLines)
	waitPoints(t, api, "first point", havePointFor("web-01"))

	mu.Lock()
	l, s, orig := theLab, web, before
	mu.Unlock()
	changeID, _ = l.ChangeID(s.MoRef, 0)
	deadline := time.Now().Add(20 * time.Second)
	for bytes.Equal(dataContent(t, l, s), orig) {
		if time.Now().After(deadline) {
			t.Fatal("churn did not change the sample's file data")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A new run. Run now joins a run of the job that still has VMs to do
	// (the demo's first ones may be): wait until none is running, so this
	// one backs up after the churn.
	for wait := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		_, body := api.call("GET", "/api/v1/jobs/"+demo.JobID+"/runs", nil, nil)
		var runs []struct{ State string }
		_ = json.Unmarshal(body, &runs)
		busy := false
		for _, r := range runs {
			busy = busy || r.State == "running"
		}
		if !busy {
			break
		}
		if time.Now().After(wait) {
			t.Fatalf("the demo's first runs are still running: %s", body)
		}
	}
	// And a churn after their last backup, so this run has blocks to read.
	idle := dataContent(t, l, s)
	for wait := time.Now().Add(20 * time.Second); bytes.Equal(dataContent(t, l, s), idle); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(wait) {
			t.Fatal("churn did not change the sample's file data after the first runs")
		}
	}
	start := time.Now()
	for {
		code, body := api.call("POST", "/api/v1/jobs/"+demo.JobID+"/run", nil, csrf)
		if code == 202 {
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("run now: %d %s", code, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	waitPoints(t, api, "an incremental that read the churned blocks", func(pts []demoPoint) bool {
		for _, p := range pts {
			if p.Time.After(start) && len(p.Disks) == 1 && p.Disks[0].Mode == "incremental" && p.Disks[0].BytesRead > 0 {
				return true
			}
		}
		return false
	})
	if after, _ := l.ChangeID(s.MoRef, 0); after == changeID {
		t.Errorf("change id did not advance: %s", after)
	}
	d.stop(t)
	if _, err := os.Stat(d.state); !os.IsNotExist(err) {
		t.Errorf("temporary state %s left behind: %v", d.state, err)
	}
}

// The built binary, as `make demo` runs it: ready, serving, and exit 0 on
// SIGTERM with its temporary state removed.
func TestDemoBinary(t *testing.T) {
	bin := applianceBinary(t)
	tmp := t.TempDir()
	cmd := exec.Command(bin, "demo", "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "VMVAULT_ADMIN_PASSWORD=")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan demoLines, 1)
	go func() {
		var out strings.Builder
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			if l, ok := parseDemoLines(out.String()); ok {
				lines <- l
			}
		}
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	var d demoLines
	select {
	case d = <-lines:
	case err := <-exited:
		t.Fatalf("demo exited: %v\n%s", err, stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("demo not ready: %s", stderr.String())
	}
	if len(d.password) < 16 || !strings.HasPrefix(d.state, tmp) {
		t.Errorf("generated password %q, state %q", d.password, d.state)
	}
	demoLogin(t, d)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(40 * time.Second):
		t.Fatal("demo did not stop on SIGTERM")
	}
	if _, err := os.Stat(d.state); !os.IsNotExist(err) {
		t.Errorf("temporary state %s left behind: %v", d.state, err)
	}
}
