package daemon

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/repository"
)

// With approvals.delay configured, an administrator's deletion of a
// restore point waits: the point is still there just before the delay
// ends, and the daemon's runner deletes it once the clock passes it,
// recording the execution in the event log.
func TestServeDelayedDeleteExecutes(t *testing.T) {
	dir := t.TempDir()
	repoDir := filepath.Join(dir, "repo")
	p := repository.TestRepositoryWithPoint(t, repoDir, "repo-pass")
	td, clk := startWithApprovals(t, dir, repoDir)
	api, csrf := cookieLogin(t, td.addr, "admin-secret-9")

	code, body := api.call("DELETE", "/api/v1/restore-points/"+p.ID, nil, csrf)
	if code != 202 {
		t.Fatalf("delete with a delay: %d %s", code, body)
	}
	var a struct {
		ID, Status  string
		EffectiveAt time.Time
	}
	_ = json.Unmarshal(body, &a)
	if a.Status != "pending" || !a.EffectiveAt.Equal(clk.Now().Add(24*time.Hour)) {
		t.Fatalf("pending action %s", body)
	}
	clk.Advance(23*time.Hour + 59*time.Minute)
	time.Sleep(100 * time.Millisecond) // a runner that ran early would have deleted by now
	if code, body := api.call("GET", "/api/v1/restore-points/"+p.ID, nil, nil); code != 200 {
		t.Fatalf("the point before the delay ended: %d %s", code, body)
	}
	clk.Advance(2 * time.Minute)
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, _ := api.call("GET", "/api/v1/restore-points/"+p.ID, nil, nil)
		if code == 404 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the point is still there after the delay: %d\n%s", code, td.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The status and the execute event are recorded just after the
	// delete: wait for them.
	for {
		code, body = api.call("GET", "/api/v1/approvals", nil, nil)
		if code == 200 && strings.Contains(string(body), `"status":"executed"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("approvals after the delay: %d %s", code, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for {
		code, body = api.call("GET", "/api/v1/events?kind=approval", nil, nil)
		if code == 200 && strings.Contains(string(body), `"approval.execute"`) && strings.Contains(string(body), `"approval.request"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("audit events: %d %s", code, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startWithApprovals starts a daemon with one repository, main at repoDir
// (passphrase "repo-pass"), approvals.delay 24h, a fake clock and the
// administrator password "admin-secret-9".
func startWithApprovals(t *testing.T, dir, repoDir string) (*testDaemon, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(time.Now().UTC().Truncate(time.Second))
	cfg := fmt.Sprintf(`
listen: 127.0.0.1:0
tls: {disable: true}
state_dir: state
sessions: {ttl: 720h}
approvals: {delay: 24h}
repositories:
  - {name: main, path: %s, passphrase_env: MAIN_PASS}
`, repoDir)
	td := startDaemon(t, dir, cfg, map[string]string{"MAIN_PASS": "repo-pass", "VMVAULT_ADMIN_PASSWORD": "admin-secret-9"}, Options{Clock: clk})
	return td, clk
}
