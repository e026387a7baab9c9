package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/drconfig"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
)

// waitFor polls cond every 100 ms until it holds or within passes.
func waitFor(t *testing.T, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: timed out; last: %s", what, state)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The appliance is gone: daemon A backs up a VM and copies it offsite with
// a copy job, its configuration is saved into its repositories; a fresh
// daemon B, given only the repositories (paths and passphrase) and
// --import-config, gets the jobs, the copy job and the settings back,
// lists the points (the catalog rebuilt: index.db was lost with A) and
// restores one. A second import over B's state is refused without Force.
func TestServeDisasterRecovery(t *testing.T) {
	ctx := context.Background()
	l, err := lab.Start(ctx, lab.Options{DiskCapacity: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	const vm = "DC0_H0_VM0"
	disk := randBytes(21, 1<<20)
	if err := l.WriteDisk(vm, 0, 0, disk); err != nil {
		t.Fatal(err)
	}
	dirA := t.TempDir()
	offsiteDir := filepath.Join(dirA, "offsite")
	if err := repository.Init(ctx, offsiteDir, []byte("repo-pass"), repository.InitOptions{Chunker: repository.TestChunker, KDF: repository.TestKDF}); err != nil {
		t.Fatal(err)
	}
	extra := fmt.Sprintf("  - {name: offsite, path: %s, passphrase_env: MAIN_PASS}\n", offsiteDir)
	a, repoDir := startLabDaemon(t, l, dirA, "admin-secret-a", extra, Options{ConfigSaveDebounce: 50 * time.Millisecond})
	api, csrf := cookieLogin(t, a.addr, "admin-secret-a")
	uuid := api.vmUUID(vm)
	if code, body := api.call("POST", "/api/v1/jobs", quiesceJob("nightly", uuid, "none", false), csrf); code != 201 {
		t.Fatalf("job: %d %s", code, body)
	}
	if code, body := api.call("PUT", "/api/v1/settings", map[string]any{"timeZone": "Europe/Paris", "eventRetentionDays": 30}, csrf); code != 200 {
		t.Fatalf("settings: %d %s", code, body)
	}
	if code, body := api.call("POST", "/api/v1/users", map[string]any{"username": "alice", "password": "alice-password-1", "role": "operator"}, csrf); code != 201 {
		t.Fatalf("user: %d %s", code, body)
	}
	if code, body := api.call("POST", "/api/v1/jobs/nightly/run", nil, csrf); code != 202 {
		t.Fatalf("run: %d %s", code, body)
	}
	point := ""
	waitFor(t, 90*time.Second, "backup", func() (bool, string) {
		_, body := api.call("GET", "/api/v1/jobs/nightly/runs", nil, nil)
		var runs []struct {
			State string
			VMs   []struct {
				Point string `json:"restorePoint"`
			}
		}
		_ = json.Unmarshal(body, &runs)
		if len(runs) == 1 && runs[0].State == "succeeded" && len(runs[0].VMs) == 1 {
			point = runs[0].VMs[0].Point
			return true, ""
		}
		if len(runs) == 1 && runs[0].State != "running" {
			t.Fatalf("backup run: %s", body)
		}
		return false, string(body)
	})
	copyJob := map[string]any{"id": "offsite", "name": "Offsite", "source": "main", "target": "offsite", "jobs": []string{"nightly"},
		"window": map[string]any{"location": "UTC", "days": map[string]any{"sunday": []string{"01:00-02:00"}}}, "retention": map[string]any{"last": 3}}
	if code, body := api.call("POST", "/api/v1/copy-jobs", copyJob, csrf); code != 201 {
		t.Fatalf("copy job: %d %s", code, body)
	}
	if code, body := api.call("POST", "/api/v1/copy-jobs/offsite/run", nil, csrf); code != 202 {
		t.Fatalf("copy run: %d %s", code, body)
	}
	waitFor(t, 60*time.Second, "copy run", func() (bool, string) {
		_, body := api.call("GET", "/api/v1/copy-jobs/offsite/runs", nil, nil)
		var runs []struct {
			State        string
			PointsCopied int
			BytesSent    int64
		}
		_ = json.Unmarshal(body, &runs)
		if len(runs) == 1 && runs[0].State != "running" {
			if runs[0].State != "succeeded" || runs[0].PointsCopied != 1 || runs[0].BytesSent == 0 {
				t.Fatalf("copy run: %s", body)
			}
			return true, ""
		}
		return false, string(body)
	})
	_, body := api.call("GET", "/api/v1/dashboard", nil, nil)
	var dash struct {
		Offsite *struct{ Protected, Copied int }
	}
	_ = json.Unmarshal(body, &dash)
	if dash.Offsite == nil || dash.Offsite.Copied != 1 || dash.Offsite.Protected < 1 {
		t.Fatalf("dashboard offsite: %s", body)
	}
	_, body = api.call("GET", "/api/v1/events?kind=copy", nil, nil)
	if !strings.Contains(string(body), `"copy.finished"`) {
		t.Fatalf("no copy.finished event: %s", body)
	}
	// The last change (the copy job) is saved within the debounce.
	waitFor(t, 20*time.Second, "configuration saved", func() (bool, string) {
		log := a.stderr.String()
		return strings.Contains(log, "appliance configuration saved") && strings.Contains(log, "copy_jobs=1"), log
	})
	a.stop(t, ShutdownGrace+10*time.Second)

	// What was saved: the configuration, no secret.
	r, err := repository.Open(ctx, repoDir, []byte("repo-pass"), repository.OpenOptions{NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	raw, _, err := r.LoadApplianceConfig(ctx)
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	var saved drconfig.SavedConfig
	if err := json.Unmarshal(raw, &saved); err != nil {
		t.Fatal(err)
	}
	if len(saved.Jobs) != 1 || len(saved.CopyJobs) != 1 || saved.Settings == nil || len(saved.Users) != 2 || len(saved.Repositories) != 2 {
		t.Fatalf("saved configuration: %s", raw)
	}
	for _, secret := range []string{"admin-secret-a", "alice-password-1", "repo-pass", "argon2", l.Password(), "vmv_"} {
		if strings.Contains(string(raw), secret) {
			t.Fatalf("the saved configuration holds a secret (%q): %s", secret, raw)
		}
	}

	// Appliance A is gone: its state directory and the local catalog with it.
	if err := os.RemoveAll(filepath.Join(dirA, "state")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(repoDir, "index.db")); err != nil {
		t.Fatal(err)
	}
	dirB := t.TempDir()
	cfgB := fmt.Sprintf(`
listen: 127.0.0.1:0
tls: {disable: true}
state_dir: %s
vcenter: {url: %q, username: %s, password_env: VC_PASS, thumbprint: %q}
repositories:
  - {name: main, path: %s, passphrase_env: MAIN_PASS}
  - {name: offsite, path: %s, passphrase_env: MAIN_PASS}
`, filepath.Join(dirB, "state"), l.URL().String(), l.Username(), l.Thumbprint(), repoDir, offsiteDir)
	vars := map[string]string{"MAIN_PASS": "repo-pass", "VC_PASS": l.Password(), "VMVAULT_ADMIN_PASSWORD": "admin-secret-b"}
	b := startDaemon(t, dirB, cfgB, vars, Options{Import: &ImportConfig{Repository: "main"}})
	if out := b.stdout.String(); !strings.Contains(out, "1 jobs, 1 copy jobs, settings: true") ||
		!strings.Contains(out, "user alice (operator, local) recreated without a password") ||
		!strings.Contains(out, "user admin (administrator, local) exists on this appliance: left as it is") ||
		!strings.Contains(out, "users without a password: 1 ") {
		t.Fatalf("import output: %s", out)
	}
	for _, secret := range []string{"admin-secret-a", "alice-password-1", "repo-pass", "argon2"} {
		if strings.Contains(b.stdout.String()+b.stderr.String(), secret) {
			t.Fatalf("B's import printed a secret (%q)", secret)
		}
	}
	apiB, csrfB := cookieLogin(t, b.addr, "admin-secret-b")
	checkImportedUsers(t, b.addr, apiB, csrfB)
	_, body = apiB.call("GET", "/api/v1/jobs/nightly", nil, nil)
	var job struct {
		Repository string
		Selection  struct{ VMs []string }
	}
	if err := json.Unmarshal(body, &job); err != nil || job.Repository != "main" || len(job.Selection.VMs) != 1 || job.Selection.VMs[0] != uuid {
		t.Fatalf("imported job: %s", body)
	}
	_, body = apiB.call("GET", "/api/v1/copy-jobs/offsite", nil, nil)
	if !strings.Contains(string(body), `"target":"offsite"`) || !strings.Contains(string(body), `"nightly"`) {
		t.Fatalf("imported copy job: %s", body)
	}
	_, body = apiB.call("GET", "/api/v1/settings", nil, nil)
	if !strings.Contains(string(body), `"timeZone":"Europe/Paris"`) || !strings.Contains(string(body), `"eventRetentionDays":30`) {
		t.Fatalf("imported settings: %s", body)
	}
	_, body = apiB.call("GET", "/api/v1/restore-points", nil, nil)
	if !strings.Contains(string(body), point) {
		t.Fatalf("B does not list A's point %s: %s", point, body)
	}
	// A second copy sends nothing: the target already has it.
	if code, body := apiB.call("POST", "/api/v1/copy-jobs/offsite/run", nil, csrfB); code != 202 {
		t.Fatalf("copy run on B: %d %s", code, body)
	}
	waitFor(t, 60*time.Second, "copy run on B", func() (bool, string) {
		_, body := apiB.call("GET", "/api/v1/copy-jobs/offsite/runs", nil, nil)
		var runs []struct {
			State                       string
			PointsCopied, PointsSkipped int
		}
		_ = json.Unmarshal(body, &runs)
		if len(runs) == 1 && runs[0].State != "running" {
			if runs[0].State != "succeeded" || runs[0].PointsCopied != 0 || runs[0].PointsSkipped != 1 {
				t.Fatalf("copy run on B: %s", body)
			}
			return true, ""
		}
		return false, string(body)
	})
	code, body := apiB.call("POST", "/api/v1/restores", map[string]any{"point": point, "mode": "new", "name": "dr-restored"}, csrfB)
	if code != 202 {
		t.Fatalf("restore: %d %s", code, body)
	}
	var tk struct{ ID string }
	_ = json.Unmarshal(body, &tk)
	waitFor(t, 90*time.Second, "restore", func() (bool, string) {
		_, b := apiB.call("GET", "/api/v1/tasks/"+tk.ID, nil, nil)
		var info struct{ State string }
		_ = json.Unmarshal(b, &info)
		if info.State == "failed" || info.State == "cancelled" {
			t.Fatalf("restore task: %s", b)
		}
		return info.State == "succeeded", string(b)
	})
	got, err := l.ReadDisk("dr-restored", 0, 0, 1<<20)
	if err != nil {
		t.Fatalf("restored VM: %v", err)
	}
	if !bytes.Equal(got, disk) {
		t.Fatal("the VM restored by appliance B differs from what A backed up")
	}
	b.stop(t, ShutdownGrace+10*time.Second)

	// B's state is configured now: a second import is refused.
	cfg, err := LoadConfig(filepath.Join(dirB, "vmvault.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(ctx, cfg, Options{Stdout: &syncBuffer{}, Stderr: &syncBuffer{}, Getenv: func(k string) string { return vars[k] },
		Import: &ImportConfig{Repository: "main"}})
	if !errors.Is(err, drconfig.ErrStateNotEmpty) {
		t.Fatalf("import over a configured state: %v", err)
	}
	// With --force the import runs again and leaves the users it finds
	// alone: alice keeps the password B's administrator set.
	out := &syncBuffer{}
	d, err := New(ctx, cfg, Options{Stdout: out, Stderr: &syncBuffer{}, Getenv: func(k string) string { return vars[k] },
		Import: &ImportConfig{Repository: "main", Force: true}})
	if err != nil {
		t.Fatalf("forced import: %v", err)
	}
	defer d.Close()
	if !strings.Contains(out.String(), "user alice (operator, local) exists on this appliance: left as it is (operator, local)") || strings.Contains(out.String(), "recreated") {
		t.Fatalf("forced import output: %s", out)
	}
	if s, err := d.am.Login(ctx, "192.0.2.9", "alice", "alice-password-b"); err != nil || s.Role != "operator" {
		t.Fatalf("alice after a second import: %+v %v", s, err)
	}
}

// checkImportedUsers: on the appliance B recreated, alice is listed with
// her role and a password to set; she cannot sign in with her old password,
// with none, or with any, and the answer is the one an unknown name gets;
// once B's administrator sets her password she signs in with her role.
func checkImportedUsers(t *testing.T, addr string, admin *apiClient, csrf map[string]string) {
	t.Helper()
	listUsers := func() map[string]map[string]any {
		t.Helper()
		code, body := admin.call("GET", "/api/v1/users", nil, nil)
		var us []map[string]any
		if err := json.Unmarshal(body, &us); code != 200 || err != nil {
			t.Fatalf("GET /users: %d %s", code, body)
		}
		out := map[string]map[string]any{}
		for _, u := range us {
			out[u["username"].(string)] = u
		}
		return out
	}
	us := listUsers()
	if len(us) != 2 || us["alice"]["role"] != "operator" || us["alice"]["source"] != "local" || us["alice"]["passwordNotSet"] != true || us["admin"]["passwordNotSet"] != false {
		t.Fatalf("users on B: %v", us)
	}
	login := func(user, pw string) (int, string) {
		t.Helper()
		c := &apiClient{t: t, base: "http://" + addr, hc: &http.Client{Jar: newJar(t), Timeout: 60 * time.Second}}
		code, body := c.call("POST", "/api/v1/auth/login", map[string]string{"username": user, "password": pw}, nil)
		return code, string(body)
	}
	_, unknown := login("nobody", "alice-password-1")
	for _, pw := range []string{"alice-password-1", "", "anything-at-all"} {
		code, body := login("alice", pw)
		if code != 401 || !strings.Contains(body, `"bad_credentials"`) || !strings.Contains(body, "until an administrator sets their password") {
			t.Fatalf("alice signs in with %q before her password is set: %d %s", pw, code, body)
		}
		if pw != "" && body != unknown {
			t.Fatalf("alice's answer %s differs from an unknown name's %s", body, unknown)
		}
	}
	code, body := admin.call("PUT", "/api/v1/users/alice", map[string]any{"password": "alice-password-b"}, csrf)
	if code != 200 || !strings.Contains(string(body), `"passwordNotSet":false`) || !strings.Contains(string(body), `"role":"operator"`) {
		t.Fatalf("set alice's password: %d %s", code, body)
	}
	if us := listUsers(); us["alice"]["passwordNotSet"] != false {
		t.Fatalf("alice after her password was set: %v", us["alice"])
	}
	code, lb := login("alice", "alice-password-b")
	if code != 200 || !strings.Contains(lb, `"role":"operator"`) {
		t.Fatalf("alice with the password B's administrator set: %d %s", code, lb)
	}
	if code, body := login("nobody", "x"); code != 401 || strings.Contains(body, "sets their password") {
		t.Fatalf("a failed login once no user waits: %d %s", code, body)
	}
}

// An import names what is missing: a repository without a saved
// configuration, or saved jobs using a repository the new configuration lacks.
func TestImportConfigErrors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	repoDir := filepath.Join(dir, "repo")
	repository.TestRepositoryWithPoint(t, repoDir, "pw")
	cfgYAML := fmt.Sprintf("listen: 127.0.0.1:0\ntls: {disable: true}\nstate_dir: %s\nrepositories:\n  - {name: main, path: %s, passphrase_env: P}\n", filepath.Join(dir, "state"), repoDir)
	p := filepath.Join(dir, "vmvault.yaml")
	if err := os.WriteFile(p, []byte(cfgYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	env := func(k string) string {
		return map[string]string{"P": "pw", "VMVAULT_ADMIN_PASSWORD": "admin-pw-123"}[k]
	}
	newD := func(ic *ImportConfig) error {
		d, err := New(ctx, cfg, Options{Stdout: &syncBuffer{}, Stderr: &syncBuffer{}, Getenv: env, Import: ic})
		if err == nil {
			d.Close()
		}
		return err
	}
	if err := newD(&ImportConfig{Repository: "main"}); !errors.Is(err, repository.ErrNotFound) || !strings.Contains(err.Error(), "no saved appliance configuration") {
		t.Fatalf("no saved configuration: %v", err)
	}
	// A configuration whose job uses a repository "gone".
	r, err := repository.Open(ctx, repoDir, []byte("pw"), repository.OpenOptions{NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	saved := `{"format":1,"jobs":[{"id":"j","name":"j","enabled":true,"repository":"gone","selection":{"vms":["x"]},"window":{"location":"UTC","days":{"monday":["01:00-02:00"]}},"retention":{"last":1}}],"copyJobs":[],"users":[],"repositories":[{"name":"gone","path":"s3:https://s3.example/b"}]}`
	if err := r.SaveApplianceConfig(ctx, []byte(saved)); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if err := newD(&ImportConfig{Repository: "main"}); err == nil || !strings.Contains(err.Error(), "gone (it was at s3:https://s3.example/b)") {
		t.Fatalf("missing repository: %v", err)
	}
	// A saved user the import could not recreate refuses the whole import
	// before anything is written: the job of the same save is not there.
	for _, bad := range []struct{ users, want string }{
		{`[{"name":"alice","role":"root","source":"local"}]`, `user 0: "alice": unknown role "root"`},
		{`[{"name":"al/ice","role":"operator","source":"local"}]`, "no control character or slash"},
		{`[{"name":"alice","role":"operator","source":"ldap"}]`, `source "ldap"`},
		{`[{"name":"alice","role":"operator","source":"local"},{"name":"ALICE","role":"operator","source":"local"}]`, `repeated name "ALICE"`},
	} {
		r, _ = repository.Open(ctx, repoDir, []byte("pw"), repository.OpenOptions{NoFsync: true})
		job := `{"id":"j","name":"j","enabled":true,"repository":"main","selection":{"vms":["x"]},"window":{"location":"UTC","days":{"monday":["01:00-02:00"]}},"retention":{"last":1}}`
		_ = r.SaveApplianceConfig(ctx, []byte(`{"format":1,"jobs":[`+job+`],"copyJobs":[],"users":`+bad.users+`,"repositories":[]}`))
		r.Close()
		if err := newD(&ImportConfig{Repository: "main"}); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Fatalf("users %s: %v, want %q", bad.users, err, bad.want)
		}
	}
	d, err := New(ctx, cfg, Options{Stdout: &syncBuffer{}, Stderr: &syncBuffer{}, Getenv: env})
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := d.db.Jobs(ctx)
	us, _ := d.am.Users(ctx)
	d.Close()
	if err != nil || len(jobs) != 0 || len(us) != 1 {
		t.Fatalf("a refused import wrote %d jobs, %d users (%v)", len(jobs), len(us), err)
	}
	// By location with the passphrase, format too new.
	r, _ = repository.Open(ctx, repoDir, []byte("pw"), repository.OpenOptions{NoFsync: true})
	_ = r.SaveApplianceConfig(ctx, []byte(`{"format":99}`))
	r.Close()
	if err := newD(&ImportConfig{Repository: repoDir}); err == nil || !strings.Contains(err.Error(), "format 99") {
		t.Fatalf("newer format: %v", err)
	}
	// The refused attempts left a state the daemon opens.
	if err := newD(nil); err != nil {
		t.Fatal(err)
	}
}
