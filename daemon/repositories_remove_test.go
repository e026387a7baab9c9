package daemon

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/drconfig"
	"github.com/vmvault/vmvault/web/api"
)

// loginAs logs a user in with a cookie session and returns the client and
// its CSRF header.
func loginAs(t *testing.T, addr, user, password string) (*apiClient, map[string]string) {
	t.Helper()
	c := &apiClient{t: t, base: "http://" + addr, hc: &http.Client{Jar: newJar(t), Timeout: 60 * time.Second}}
	code, body := c.call("POST", "/api/v1/auth/login", map[string]string{"username": user, "password": password}, nil)
	if code != 200 {
		t.Fatalf("login %s: %d %s", user, code, body)
	}
	var login struct{ CSRFToken string }
	_ = json.Unmarshal(body, &login)
	return c, map[string]string{"X-CSRF-Token": login.CSRFToken}
}

// repoNames lists GET /repositories' names, and the dashboard's.
func repoNames(t *testing.T, c *apiClient) (list, dashboard string) {
	t.Helper()
	_, body := c.call("GET", "/api/v1/repositories", nil, nil)
	var rs []api.RepositoryInfo
	if err := json.Unmarshal(body, &rs); err != nil {
		t.Fatalf("repositories: %s", body)
	}
	var names []string
	for _, r := range rs {
		names = append(names, r.Name)
	}
	_, body = c.call("GET", "/api/v1/dashboard", nil, nil)
	var dash struct{ Repositories []struct{ Name string } }
	if err := json.Unmarshal(body, &dash); err != nil {
		t.Fatalf("dashboard: %s", body)
	}
	var dn []string
	for _, r := range dash.Repositories {
		dn = append(dn, r.Name)
	}
	return strings.Join(names, ","), strings.Join(dn, ",")
}

func weeklyJob(id, repo string) map[string]any {
	return map[string]any{"id": id, "name": id, "enabled": true, "repository": repo, "quiesce": "none",
		"selection": map[string]any{"vms": []string{"no-such-vm"}},
		"window":    map[string]any{"location": "UTC", "days": map[string]any{"sunday": []string{"01:00-02:00"}}},
		"retention": map[string]any{"last": 3}}
}

// With approvals.delay configured, removing a repository added from the
// console waits: 202 with a pending remove-repository action, the
// repository still listed; the requester cannot approve it (403); a
// second administrator's approval removes it at once (gone from the list,
// the dashboard and its points); its data stays and POST /repositories
// (mode open) brings it back with its point. A second request executes by
// itself when the delay has passed. A job or a copy job using it, and a
// repository of the configuration file, are refused (409) naming why, and
// nothing is held.
func TestRemoveRepositoryWithApproval(t *testing.T) {
	dir := t.TempDir()
	repoDir := filepath.Join(dir, "repo")
	repository.TestRepositoryWithPoint(t, repoDir, "repo-pass")
	offsite := filepath.Join(dir, "offsite")
	p := repository.TestRepositoryWithPoint(t, offsite, "offsite-pass")
	td, clk := startWithApprovals(t, dir, repoDir)
	admin, csrf := cookieLogin(t, td.addr, "admin-secret-9")
	if code, body := admin.call("POST", "/api/v1/users", map[string]any{"username": "bob", "password": "bob-password-12", "role": "administrator"}, csrf); code != 201 {
		t.Fatalf("user bob: %d %s", code, body)
	}
	bob, bobCSRF := loginAs(t, td.addr, "bob", "bob-password-12")
	open := map[string]any{"mode": "open", "name": "offsite", "path": offsite, "passphrase": "offsite-pass"}
	if code, body := admin.call("POST", "/api/v1/repositories", open, csrf); code != 201 {
		t.Fatalf("open offsite: %d %s", code, body)
	}

	pending := func() int {
		t.Helper()
		_, body := admin.call("GET", "/api/v1/approvals?status=pending", nil, nil)
		var as []api.Approval
		_ = json.Unmarshal(body, &as)
		return len(as)
	}
	// Refusals, each at the request: nothing waits.
	if code, body := admin.call("DELETE", "/api/v1/repositories/main", nil, csrf); code != 409 || !strings.Contains(string(body), "configuration file") {
		t.Fatalf("remove the file's repository: %d %s, want 409 naming the configuration file", code, body)
	}
	if code, body := admin.call("POST", "/api/v1/jobs", weeklyJob("nightly", "offsite"), csrf); code != 201 {
		t.Fatalf("job: %d %s", code, body)
	}
	copyJob := map[string]any{"id": "tape", "name": "Tape", "source": "main", "target": "offsite",
		"window": map[string]any{"location": "UTC", "days": map[string]any{"sunday": []string{"01:00-02:00"}}}, "retention": map[string]any{"last": 3}}
	if code, body := admin.call("POST", "/api/v1/copy-jobs", copyJob, csrf); code != 201 {
		t.Fatalf("copy job: %d %s", code, body)
	}
	code, body := admin.call("DELETE", "/api/v1/repositories/offsite", nil, csrf)
	if code != 409 || !strings.Contains(string(body), "backup jobs nightly") || !strings.Contains(string(body), "copy jobs tape") {
		t.Fatalf("remove a repository jobs use: %d %s, want 409 naming job nightly and copy job tape", code, body)
	}
	if n := pending(); n != 0 {
		t.Fatalf("%d actions pending after refusals", n)
	}
	if code, body := admin.call("DELETE", "/api/v1/repositories/nothere", nil, csrf); code != 404 {
		t.Fatalf("remove a repository that does not exist: %d %s", code, body)
	}
	for _, del := range []string{"/api/v1/jobs/nightly", "/api/v1/copy-jobs/tape"} {
		if code, body := admin.call("DELETE", del, nil, csrf); code != 204 && code != 200 {
			t.Fatalf("DELETE %s: %d %s", del, code, body)
		}
	}

	// The removal waits for a second administrator.
	code, body = admin.call("DELETE", "/api/v1/repositories/offsite", nil, csrf)
	var a api.Approval
	_ = json.Unmarshal(body, &a)
	if code != 202 || a.Kind != api.ApprovalRemoveRepository || a.Subject != "offsite" || a.Status != api.ApprovalPending ||
		!strings.Contains(a.Summary, "data is kept") || !a.EffectiveAt.Equal(clk.Now().Add(24*time.Hour)) {
		t.Fatalf("remove with a delay: %d %s", code, body)
	}
	if code, body := admin.call("DELETE", "/api/v1/repositories/offsite", nil, csrf); code != 409 {
		t.Fatalf("a second request while one waits: %d %s, want 409", code, body)
	}
	if list, dash := repoNames(t, admin); list != "main,offsite" || dash != "main,offsite" {
		t.Fatalf("while the removal waits: repositories %q, dashboard %q", list, dash)
	}
	if code, body := admin.call("POST", "/api/v1/approvals/"+a.ID+"/approve", nil, csrf); code != 403 {
		t.Fatalf("the requester approves: %d %s, want 403", code, body)
	}
	if list, _ := repoNames(t, admin); list != "main,offsite" {
		t.Fatalf("after the requester's refused approval: %q", list)
	}
	code, body = bob.call("POST", "/api/v1/approvals/"+a.ID+"/approve", nil, bobCSRF)
	_ = json.Unmarshal(body, &a)
	if code != 200 || a.Status != api.ApprovalExecuted || a.ApprovedBy != "bob" {
		t.Fatalf("bob approves: %d %s", code, body)
	}
	if list, dash := repoNames(t, admin); list != "main" || dash != "main" {
		t.Fatalf("after the removal: repositories %q, dashboard %q", list, dash)
	}
	if code, _ := admin.call("GET", "/api/v1/repositories/offsite", nil, nil); code != 404 {
		t.Fatalf("GET the removed repository: %d", code)
	}
	if code, _ := admin.call("GET", "/api/v1/restore-points/"+p.ID, nil, nil); code != 404 {
		t.Fatalf("a point of the removed repository: %d", code)
	}
	_, body = admin.call("GET", "/api/v1/events?kind=approval&limit=100", nil, nil)
	var evs []struct{ Kind, Subject, Outcome, User string }
	_ = json.Unmarshal(body, &evs)
	seen := map[string]bool{}
	for _, e := range evs {
		if e.Outcome == "ok" {
			seen[e.Kind+" "+e.Subject] = true
		}
	}
	if !seen["approval.request "+a.ID] || !seen["approval.execute offsite"] {
		t.Fatalf("audit events: %s", body)
	}

	// The data stayed, the lock is released: it opens, with its point.
	if fi, err := os.Stat(filepath.Join(offsite, "config")); err != nil || !fi.Mode().IsRegular() {
		t.Fatal("the removed repository's files are gone")
	}
	r, err := repository.Open(context.Background(), offsite, []byte("offsite-pass"), repository.OpenOptions{})
	if err != nil {
		t.Fatalf("open the removed repository: %v (its lock still held?)", err)
	}
	pts, err := r.List(context.Background())
	r.Close()
	if err != nil || len(pts) != 1 || pts[0].ID != p.ID {
		t.Fatalf("points of the removed repository: %v %v", pts, err)
	}
	if code, body := admin.call("POST", "/api/v1/repositories", open, csrf); code != 201 {
		t.Fatalf("open it again: %d %s", code, body)
	}
	if code, body := admin.call("GET", "/api/v1/restore-points/"+p.ID, nil, nil); code != 200 || !strings.Contains(string(body), `"offsite"`) {
		t.Fatalf("its point after opening it again: %d %s", code, body)
	}

	// Without a second administrator it executes once the delay passed.
	if code, body := admin.call("DELETE", "/api/v1/repositories/offsite", nil, csrf); code != 202 {
		t.Fatalf("remove again: %d %s", code, body)
	}
	clk.Advance(24*time.Hour + time.Minute)
	waitFor(t, 20*time.Second, "the delayed removal", func() (bool, string) {
		list, _ := repoNames(t, admin)
		return list == "main", list
	})
}

// Without a delay the removal acts at once (200, dataKept), is an audit
// event (repository.remove), forgets the repository in the state (not
// opened at the next start, passphrase file gone) and in the
// configuration saved into the remaining repositories.
func TestRemoveRepositoryNow(t *testing.T) {
	dir := t.TempDir()
	cfg := lifecycleConfig(t, dir, "")
	yml, _ := os.ReadFile(filepath.Join(dir, "vmvault.yaml"))
	vars := map[string]string{"MAIN_PASS": "repo-pass", "VMVAULT_ADMIN_PASSWORD": "admin-secret-7"}
	sd := startDaemon(t, dir, string(yml), vars, Options{ConfigSaveDebounce: 20 * time.Millisecond})
	c, csrf := cookieLogin(t, sd.addr, "admin-secret-7")
	offsite := filepath.Join(dir, "offsite")
	p := repository.TestRepositoryWithPoint(t, offsite, "offsite-pass")
	if code, body := c.call("POST", "/api/v1/repositories", map[string]any{"mode": "open", "name": "offsite", "path": offsite, "passphrase": "offsite-pass"}, csrf); code != 201 {
		t.Fatalf("open offsite: %d %s", code, body)
	}
	pfile := filepath.Join(cfg.StateDir, "repositories", "offsite.passphrase")
	if _, err := os.Stat(pfile); err != nil {
		t.Fatal(err)
	}
	// A change makes the saver write the configuration, which names offsite.
	if code, body := c.call("PUT", "/api/v1/settings", map[string]any{"timeZone": "UTC", "eventRetentionDays": 30}, csrf); code != 200 {
		t.Fatalf("settings: %d %s", code, body)
	}
	waitFor(t, 20*time.Second, "configuration saved", func() (bool, string) {
		log := sd.stderr.String()
		return strings.Count(log, "appliance configuration saved") >= 1, log
	})
	if names := savedRepos(t, cfg.Repositories[0].Path, true); names != "main,offsite" {
		t.Fatalf("the saved configuration names %q, want main,offsite", names)
	}

	code, body := c.call("DELETE", "/api/v1/repositories/offsite", nil, csrf)
	var res api.RemovedRepository
	_ = json.Unmarshal(body, &res)
	if code != 200 || !res.DataKept || res.Name != "offsite" || !strings.Contains(res.Message, "kept") || !strings.Contains(res.Message, offsite) {
		t.Fatalf("remove: %d %s", code, body)
	}
	if list, dash := repoNames(t, c); list != "main" || dash != "main" {
		t.Fatalf("after the removal: repositories %q, dashboard %q", list, dash)
	}
	if _, err := os.Stat(pfile); !os.IsNotExist(err) {
		t.Fatalf("the passphrase file of the removed repository: %v", err)
	}
	_, body = c.call("GET", "/api/v1/events?kind=repository&limit=100", nil, nil)
	if !strings.Contains(string(body), `"repository.remove"`) {
		t.Fatalf("no repository.remove audit event: %s", body)
	}
	saved := strings.Count(sd.stderr.String(), "appliance configuration saved")
	waitFor(t, 20*time.Second, "configuration saved after the removal", func() (bool, string) {
		log := sd.stderr.String()
		return strings.Count(log, "appliance configuration saved") > saved, log
	})
	sd.stop(t, ShutdownGrace+10*time.Second)

	if names := savedRepos(t, cfg.Repositories[0].Path, false); names != "main" {
		t.Fatalf("the saved configuration names %q after the removal, want main", names)
	}

	// Not opened at the next start; its data opens as before.
	sd = startDaemon(t, dir, string(yml), vars, Options{})
	c, csrf = cookieLogin(t, sd.addr, "admin-secret-7")
	if list, _ := repoNames(t, c); list != "main" {
		t.Fatalf("after a restart: %q", list)
	}
	if code, body := c.call("POST", "/api/v1/repositories", map[string]any{"mode": "open", "name": "offsite", "path": offsite, "passphrase": "offsite-pass"}, csrf); code != 201 {
		t.Fatalf("open it again: %d %s", code, body)
	}
	if code, body := c.call("GET", "/api/v1/restore-points/"+p.ID, nil, nil); code != 200 {
		t.Fatalf("its point: %d %s", code, body)
	}
}

// savedRepos reads the configuration saved into the repository at dir
// (read-only while the daemon holds it) and returns the names it lists.
func savedRepos(t *testing.T, dir string, readOnly bool) string {
	t.Helper()
	ctx := context.Background()
	r, err := repository.Open(ctx, dir, []byte("repo-pass"), repository.OpenOptions{ReadOnly: readOnly, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	raw, _, err := r.LoadApplianceConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var sc drconfig.SavedConfig
	if err := json.Unmarshal(raw, &sc); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, sr := range sc.Repositories {
		names = append(names, sr.Name)
	}
	return strings.Join(names, ",")
}
