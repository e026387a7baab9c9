package daemon

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/notify"
	"github.com/vmvault/vmvault/service/settings"
	"github.com/vmvault/vmvault/web/api"
)

func settingsView(t *testing.T, c *apiClient) api.SettingsView {
	t.Helper()
	code, body := c.call("GET", "/api/v1/settings", nil, nil)
	if code != 200 {
		t.Fatalf("GET /settings: %d %s", code, body)
	}
	var v api.SettingsView
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// fieldOf returns the fields a 422 names.
func fieldsOf(t *testing.T, body []byte) []string {
	t.Helper()
	var e struct {
		Error struct {
			Details []struct{ Field string }
		}
	}
	_ = json.Unmarshal(body, &e)
	var out []string
	for _, d := range e.Error.Details {
		out = append(out, d.Field)
	}
	return out
}

func testRepoInit() Options {
	return Options{AlertDebounce: 200 * time.Millisecond, RepoInit: repository.InitOptions{Chunker: repository.TestChunker, KDF: repository.TestKDF}}
}

// The console's mail settings and maintenance window apply to the running
// daemon: a test mail through unsaved values, then the configured mail
// after saving (the notifier was replaced live), and maintenance that did
// not run without a window runs as soon as one is saved. Both are still
// the console's after a restart, and GET /settings says so.
func TestConsoleSettingsApplyLive(t *testing.T) {
	l := startTestLab(t)
	dir := t.TempDir()
	sd, _ := startLabDaemon(t, l, dir, "admin-secret-5", "", testRepoInit())
	c, csrf := cookieLogin(t, sd.addr, "admin-secret-5")

	v := settingsView(t, c)
	if v.SMTP.Source != api.SourceNone || v.Maintenance.Source != api.SourceNone || v.VCenter.Source != api.SourceYAML || v.VCenter.URL != l.URL().String() || !v.VCenter.PasswordSet || v.VCenter.RestartNeeded {
		t.Fatalf("settings before any change: %+v", v)
	}
	// No mail yet: the configured test answers that it is not configured.
	if code, body := c.call("POST", "/api/v1/settings/smtp/test", map[string]any{"to": "ops@example.com"}, csrf); code != 409 {
		t.Fatalf("test mail without SMTP: %d %s", code, body)
	}

	mb := startMailbox(t, dir, "", "")
	smtpBody := map[string]any{"enabled": true, "host": "127.0.0.1", "port": mb.port, "tls": "none", "from": "vmvault <vmvault@example.com>",
		"to": []string{"ops@example.com"}, "dailyReportAt": "off", "alerts": true}
	// The Test button: unsaved values.
	if code, body := c.call("POST", "/api/v1/settings/smtp/test", map[string]any{"to": "first@example.com", "smtp": smtpBody}, csrf); code != 200 {
		t.Fatalf("test mail through unsaved values: %d %s", code, body)
	}
	mb.wait(t, "[vmvault] test mail from ", 30*time.Second)
	// tls none to a host that is not loopback is the YAML's rule too.
	if code, body := c.call("PUT", "/api/v1/settings/smtp", with(smtpBody, "host", "mail.example.com"), csrf); code != 422 || !strings.Contains(strings.Join(fieldsOf(t, body), ","), "tls") {
		t.Fatalf("tls none to a remote host: %d %s", code, body)
	}
	code, body := c.call("PUT", "/api/v1/settings/smtp", smtpBody, csrf)
	var saved api.SectionSaved
	_ = json.Unmarshal(body, &saved)
	if code != 200 || saved.Applies != api.AppliesNow {
		t.Fatalf("save SMTP: %d %s", code, body)
	}
	mb.mu.Lock()
	before := len(mb.mails)
	mb.mu.Unlock()
	if code, body := c.call("POST", "/api/v1/settings/smtp/test", map[string]any{"to": "second@example.com"}, csrf); code != 200 {
		t.Fatalf("test mail through the saved settings: %d %s", code, body)
	}
	mb.wait(t, "[vmvault] test mail from ", 30*time.Second)
	mb.mu.Lock()
	after := len(mb.mails)
	mb.mu.Unlock()
	if after != before+1 {
		t.Fatalf("the saved mail settings sent %d mails, want 1", after-before)
	}

	// Maintenance runs on the repositories jobs use; a job whose window is
	// not now, then a maintenance window open now.
	now := time.Now().UTC()
	later := now.Add(12 * time.Hour)
	job := map[string]any{"id": "nightly", "name": "Nightly", "enabled": true, "repository": "main", "quiesce": "none",
		"selection": map[string]any{"vms": []string{"no-such-vm"}},
		"window":    map[string]any{"location": "UTC", "days": map[string]any{strings.ToLower(later.Weekday().String()): []string{fmt.Sprintf("%02d:00-%02d:30", later.Hour(), later.Hour())}}},
		"retention": map[string]any{"last": 3}}
	if code, body := c.call("POST", "/api/v1/jobs", job, csrf); code != 201 {
		t.Fatalf("job: %d %s", code, body)
	}
	reclaims := func() int {
		_, body := c.call("GET", "/api/v1/events?kind=reclaim&limit=100", nil, nil)
		var evs []struct{ Kind string }
		_ = json.Unmarshal(body, &evs)
		n := 0
		for _, e := range evs {
			if e.Kind == "reclaim.done" {
				n++
			}
		}
		return n
	}
	// No window, so nothing can start a reclaim: none is recorded.
	if n := reclaims(); n != 0 {
		t.Fatalf("%d reclaims without a maintenance window", n)
	}
	start := now.Add(-time.Minute)
	if start.Day() != now.Day() {
		start = now.Truncate(24 * time.Hour)
	}
	end := start.Add(2 * time.Hour)
	rng := fmt.Sprintf("%02d:%02d-%02d:%02d", start.Hour(), start.Minute(), end.Hour(), end.Minute())
	maint := map[string]any{"window": map[string]any{"location": "UTC", "days": map[string]any{strings.ToLower(start.Weekday().String()): []string{rng}}}, "fullCheckDays": 3}
	code, body = c.call("PUT", "/api/v1/settings/maintenance", maint, csrf)
	_ = json.Unmarshal(body, &saved)
	if code != 200 || saved.Applies != api.AppliesNow {
		t.Fatalf("save maintenance: %d %s", code, body)
	}
	// The scheduler runs maintenance on the wall clock, read over HTTP:
	// poll, within a deadline.
	waitFor(t, 30*time.Second, "a reclaim in the maintenance window saved from the console", func() (bool, string) {
		n := reclaims()
		return n > 0, fmt.Sprintf("%d reclaims", n)
	})
	// The changes are audit events.
	_, body = c.call("GET", "/api/v1/events?kind=settings&limit=100", nil, nil)
	for _, k := range []string{"settings.smtp", "settings.maintenance"} {
		if !strings.Contains(string(body), `"`+k+`"`) {
			t.Errorf("no %s audit event: %s", k, body)
		}
	}

	// Restart: the console's values win over the YAML's (which has neither).
	sd.stop(t, ShutdownGrace+notify.FlushTimeout+10*time.Second)
	yml, err := os.ReadFile(filepath.Join(dir, "vmvault.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sd = startDaemon(t, dir, string(yml), map[string]string{"MAIN_PASS": "repo-pass", "VC_PASS": l.Password(), "VMVAULT_ADMIN_PASSWORD": "admin-secret-5"}, testRepoInit())
	c, csrf = cookieLogin(t, sd.addr, "admin-secret-5")
	v = settingsView(t, c)
	if v.SMTP.Source != api.SourceConsole || v.SMTP.Port != mb.port || v.Maintenance.Source != api.SourceConsole || v.Maintenance.FullCheckDays != 3 || v.Maintenance.Window == nil {
		t.Fatalf("settings after restart: %+v", v)
	}
	if code, body := c.call("POST", "/api/v1/settings/smtp/test", map[string]any{"to": "third@example.com"}, csrf); code != 200 {
		t.Fatalf("test mail after restart: %d %s", code, body)
	}
	// Reset: the YAML's (no mail) applies again, live.
	if code, body := c.call("DELETE", "/api/v1/settings/smtp", nil, csrf); code != 200 {
		t.Fatalf("reset smtp: %d %s", code, body)
	}
	if code, body := c.call("POST", "/api/v1/settings/smtp/test", map[string]any{"to": "ops@example.com"}, csrf); code != 409 {
		t.Fatalf("test mail after reset: %d %s", code, body)
	}
	if v := settingsView(t, c); v.SMTP.Source != api.SourceNone {
		t.Fatalf("smtp source after reset %q", v.SMTP.Source)
	}
}

func with(base map[string]any, kv ...any) map[string]any {
	out := map[string]any{}
	for k, v := range base {
		out[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}

// A vCenter connection saved from the console: the answer says it applies
// at the next start, the password is sealed (never in clear in state.db),
// and the next start uses it — here a wrong password, so the daemon starts
// without vCenter rather than not at all, and says so.
func TestConsoleVCenterAtRestart(t *testing.T) {
	l := startTestLab(t)
	dir := t.TempDir()
	sd, _ := startLabDaemon(t, l, dir, "admin-secret-6", "", testRepoInit())
	c, csrf := cookieLogin(t, sd.addr, "admin-secret-6")
	const secret = "Console-Secret-991"
	code, body := c.call("PUT", "/api/v1/settings/vcenter", map[string]any{"url": l.URL().String(), "username": l.Username(), "password": secret, "thumbprint": l.Thumbprint()}, csrf)
	var saved api.SectionSaved
	_ = json.Unmarshal(body, &saved)
	if code != 200 || saved.Applies != api.AppliesRestart || !strings.Contains(saved.Message, "restart") {
		t.Fatalf("save vCenter: %d %s", code, body)
	}
	v := settingsView(t, c)
	if v.VCenter.Source != api.SourceConsole || !v.VCenter.RestartNeeded || v.VCenter.Active != l.URL().String() {
		t.Fatalf("vCenter after saving: %+v", v.VCenter)
	}
	// Saving it again without a password keeps the stored one.
	if code, body := c.call("PUT", "/api/v1/settings/vcenter", map[string]any{"url": l.URL().String(), "username": l.Username(), "thumbprint": l.Thumbprint()}, csrf); code != 200 {
		t.Fatalf("save without password: %d %s", code, body)
	}
	sd.stop(t, ShutdownGrace+10*time.Second)
	raw, err := os.ReadFile(filepath.Join(dir, "state", "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), secret) {
		t.Fatal("the vCenter password is in clear in state.db")
	}
	if !strings.Contains(string(raw), "passwordSealed") {
		t.Fatal("no sealed password in state.db")
	}
	if fi, err := os.Stat(filepath.Join(dir, "state", settings.KeyFileName)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("settings key: %v %v", fi, err)
	}
	yml, _ := os.ReadFile(filepath.Join(dir, "vmvault.yaml"))
	sd = startDaemon(t, dir, string(yml), map[string]string{"MAIN_PASS": "repo-pass", "VC_PASS": l.Password(), "VMVAULT_ADMIN_PASSWORD": "admin-secret-6"}, testRepoInit())
	c, _ = cookieLogin(t, sd.addr, "admin-secret-6")
	v = settingsView(t, c)
	if v.VCenter.Source != api.SourceConsole || !v.VCenter.PasswordSet {
		t.Fatalf("vCenter after restart: %+v", v.VCenter)
	}
	logs := sd.stderr.String()
	switch {
	case strings.Contains(logs, "vCenter connected"):
		// The lab took the password: then it is the running connection.
		if v.VCenter.RestartNeeded {
			t.Fatalf("connected with the saved values, yet restartNeeded: %+v", v.VCenter)
		}
	case !strings.Contains(logs, "running without vCenter"):
		t.Fatalf("neither connected nor said why not:\n%s", logs)
	}
	if strings.Contains(logs, secret) {
		t.Fatal("the vCenter password reached the log")
	}
}

// Repositories from the console: a new one is created and opened at once
// (backups and points can use it), an existing one is opened with its
// passphrase, each refusal names its field and changes nothing, and both
// are open again after a restart with their passphrases in 0600 files.
func TestConsoleRepositories(t *testing.T) {
	dir := t.TempDir()
	cfg := lifecycleConfig(t, dir, "")
	yml, _ := os.ReadFile(filepath.Join(dir, "vmvault.yaml"))
	vars := map[string]string{"MAIN_PASS": "repo-pass", "VMVAULT_ADMIN_PASSWORD": "admin-secret-7"}
	// The production defaults (chunker, KDF) for repositories created here.
	sd := startDaemon(t, dir, string(yml), vars, Options{})
	c, csrf := cookieLogin(t, sd.addr, "admin-secret-7")

	existing := filepath.Join(dir, "existing")
	p := repository.TestRepositoryWithPoint(t, existing, "existing-pass")
	junk := filepath.Join(dir, "junk")
	if err := os.MkdirAll(junk, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(junk, "notes.txt"), []byte("not a repository"), 0o644); err != nil {
		t.Fatal(err)
	}
	mainDir := cfg.Repositories[0].Path
	for _, tc := range []struct {
		name  string
		body  map[string]any
		field string
	}{
		{"name in use", map[string]any{"mode": "create", "name": "main", "path": filepath.Join(dir, "new"), "passphrase": "new-pass-1"}, "name"},
		{"inside a repository", map[string]any{"mode": "create", "name": "nested", "path": filepath.Join(mainDir, "sub"), "passphrase": "new-pass-1"}, "path"},
		{"contains a repository", map[string]any{"mode": "create", "name": "parent", "path": dir, "passphrase": "new-pass-1"}, "path"},
		{"non-empty, not a repository", map[string]any{"mode": "create", "name": "junk", "path": junk, "passphrase": "new-pass-1"}, "path"},
		{"create over a repository", map[string]any{"mode": "create", "name": "again", "path": existing, "passphrase": "new-pass-1"}, "path"},
		{"open a directory without one", map[string]any{"mode": "open", "name": "junk", "path": junk}, "path"},
		{"open a missing directory", map[string]any{"mode": "open", "name": "gone", "path": filepath.Join(dir, "gone")}, "path"},
		{"open with a wrong passphrase", map[string]any{"mode": "open", "name": "existing", "path": existing, "passphrase": "not-the-pass"}, "passphrase"},
		{"a file in the way", map[string]any{"mode": "create", "name": "blocked", "path": filepath.Join(junk, "notes.txt", "repo"), "passphrase": "new-pass-1"}, "path"},
		{"open the repository already open", map[string]any{"mode": "open", "name": "main2", "path": mainDir, "passphrase": "repo-pass"}, "path"},
	} {
		code, body := c.call("POST", "/api/v1/repositories", tc.body, csrf)
		if code != 422 || !strings.Contains(","+strings.Join(fieldsOf(t, body), ",")+",", ","+tc.field+",") {
			t.Errorf("%s: %d %s, want 422 on %s", tc.name, code, body, tc.field)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "new")); err == nil {
		t.Error("a refused create made its directory")
	}
	newDir := filepath.Join(dir, "created")
	// Check only (the console's Test): nothing is created or kept.
	if code, body := c.call("POST", "/api/v1/repositories", map[string]any{"mode": "create", "name": "created", "path": newDir, "passphrase": "created-pass", "check": true}, csrf); code != 200 {
		t.Fatalf("check create: %d %s", code, body)
	}
	if _, err := os.Stat(newDir); err == nil {
		t.Fatal("a checked create made its directory")
	}
	code, body := c.call("POST", "/api/v1/repositories", map[string]any{"mode": "open", "name": "existing", "path": existing, "passphrase": "existing-pass", "check": true}, csrf)
	var checked api.RepositoryInfo
	_ = json.Unmarshal(body, &checked)
	if code != 200 || checked.Points != 1 || !checked.Encrypted {
		t.Fatalf("check open: %d %s", code, body)
	}
	if code, body := c.call("POST", "/api/v1/repositories", map[string]any{"mode": "open", "name": "existing", "path": existing, "passphrase": "wrong-pass", "check": true}, csrf); code != 422 || strings.Join(fieldsOf(t, body), ",") != "passphrase" {
		t.Fatalf("check open with a wrong passphrase: %d %s", code, body)
	}
	_, body = c.call("GET", "/api/v1/repositories", nil, nil)
	if strings.Contains(string(body), `"existing"`) {
		t.Fatalf("a checked open was kept: %s", body)
	}
	code, body = c.call("POST", "/api/v1/repositories", map[string]any{"mode": "create", "name": "created", "path": newDir, "passphrase": "created-pass"}, csrf)
	if code != 201 || strings.Contains(string(body), "created-pass") {
		t.Fatalf("create: %d %s", code, body)
	}
	if code, body := c.call("POST", "/api/v1/repositories", map[string]any{"mode": "open", "name": "existing", "path": existing, "passphrase": "existing-pass"}, csrf); code != 201 {
		t.Fatalf("open: %d %s", code, body)
	}
	check := func() {
		t.Helper()
		_, body := c.call("GET", "/api/v1/repositories", nil, nil)
		var list []api.RepositoryInfo
		_ = json.Unmarshal(body, &list)
		names := []string{}
		for _, r := range list {
			names = append(names, r.Name)
		}
		if strings.Join(names, ",") != "created,existing,main" {
			t.Fatalf("repositories %v", names)
		}
		if code, body := c.call("GET", "/api/v1/restore-points/"+p.ID, nil, nil); code != 200 || !strings.Contains(string(body), `"existing"`) {
			t.Fatalf("the opened repository's point: %d %s", code, body)
		}
		// A job may use the new repository.
		if code, body := c.call("GET", "/api/v1/repositories/created", nil, nil); code != 200 {
			t.Fatalf("created repository: %d %s", code, body)
		}
	}
	check()
	_, body = c.call("GET", "/api/v1/events?kind=repository&limit=100", nil, nil)
	// A Test (check) is its own kind, not an add.
	if n, m := strings.Count(string(body), `"repository.add"`), strings.Count(string(body), `"repository.test"`); n != 12 || m != 3 {
		t.Errorf("%d repository.add and %d repository.test audit events, want 12 (10 refused, 2 added) and 3 (1 refused, 2 checked)", n, m)
	}

	sd.stop(t, ShutdownGrace+10*time.Second)
	for _, n := range []string{"created", "existing"} {
		fi, err := os.Stat(filepath.Join(cfg.StateDir, "repositories", n+".passphrase"))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("passphrase file of %s: %v %v", n, fi, err)
		}
	}
	raw, _ := os.ReadFile(filepath.Join(cfg.StateDir, "state.db"))
	if strings.Contains(string(raw), "created-pass") || strings.Contains(string(raw), "existing-pass") {
		t.Fatal("a repository passphrase is in state.db")
	}
	sd = startDaemon(t, dir, string(yml), vars, Options{})
	c, _ = cookieLogin(t, sd.addr, "admin-secret-7")
	check()
	if logs := sd.stderr.String(); strings.Contains(logs, "created-pass") || strings.Contains(logs, "existing-pass") {
		t.Fatal("a repository passphrase reached the log")
	}
}

// Without vCenter in the file: a vCenter saved without a password is
// refused on the password (there is none to keep); mail with a user but no
// password is refused on the password; a maintenance window is saved but
// says it applies once a vCenter (and so the scheduler) is there.
func TestConsoleSettingsWithoutVCenter(t *testing.T) {
	dir := t.TempDir()
	lifecycleConfig(t, dir, "")
	yml, _ := os.ReadFile(filepath.Join(dir, "vmvault.yaml"))
	sd := startDaemon(t, dir, string(yml), map[string]string{"MAIN_PASS": "repo-pass", "VMVAULT_ADMIN_PASSWORD": "admin-secret-8"}, Options{})
	c, csrf := cookieLogin(t, sd.addr, "admin-secret-8")
	if v := settingsView(t, c); v.VCenter.Source != api.SourceNone || v.SMTP.Source != api.SourceNone || v.Maintenance.Source != api.SourceNone {
		t.Fatalf("sources without vCenter, smtp and maintenance: %+v", v)
	}
	code, body := c.call("PUT", "/api/v1/settings/vcenter", map[string]any{"url": "https://vc.example.com/sdk", "username": "u"}, csrf)
	if code != 422 || strings.Join(fieldsOf(t, body), ",") != "password" {
		t.Fatalf("vCenter without any password: %d %s", code, body)
	}
	code, body = c.call("PUT", "/api/v1/settings/smtp", map[string]any{"enabled": true, "host": "127.0.0.1", "tls": "none", "username": "mailer",
		"from": "a@example.com", "to": []string{"b@example.com"}, "dailyReportAt": "off", "alerts": true}, csrf)
	if code != 422 || strings.Join(fieldsOf(t, body), ",") != "password" {
		t.Fatalf("mail user without a password: %d %s", code, body)
	}
	code, body = c.call("PUT", "/api/v1/settings/maintenance", map[string]any{"window": map[string]any{"location": "UTC", "days": map[string]any{"sunday": []string{"01:00-02:00"}}}}, csrf)
	var saved api.SectionSaved
	_ = json.Unmarshal(body, &saved)
	if code != 200 || saved.Applies != api.AppliesRestart || !strings.Contains(saved.Message, "vCenter") {
		t.Fatalf("maintenance without a scheduler: %d %s", code, body)
	}
	v := settingsView(t, c)
	if v.VCenter.Source != api.SourceNone || v.SMTP.Source != api.SourceNone || v.Maintenance.Source != api.SourceConsole {
		t.Fatalf("a refused section was saved: %+v", v)
	}
}
