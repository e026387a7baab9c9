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
	// Every timer the advance fires is armed again once its loop has made
	// its pass: the approvals runner's after RunDue, so a runner that ran
	// early would have deleted by then.
	armed := clk.Pending()
	clk.Advance(23*time.Hour + 59*time.Minute)
	if !clk.BlockUntil(armed, timeout(t, 20*time.Second)) {
		t.Fatalf("the daemon's timers were not armed again after the advance (%d of %d)", clk.Pending(), armed)
	}
	if code, body := api.call("GET", "/api/v1/restore-points/"+p.ID, nil, nil); code != 200 {
		t.Fatalf("the point before the delay ended: %d %s", code, body)
	}
	clk.Advance(2 * time.Minute)
	// The runner deletes in its own goroutine and the API is read over
	// HTTP: poll it, within a deadline.
	waitFor(t, 20*time.Second, "the point deleted after the delay", func() (bool, string) {
		code, body := api.call("GET", "/api/v1/restore-points/"+p.ID, nil, nil)
		return code == 404, fmt.Sprintf("%d %s\n%s", code, body, td.stderr.String())
	})
	// The status and the execute event are recorded just after the
	// delete: wait for them.
	waitFor(t, 20*time.Second, "the approval executed", func() (bool, string) {
		code, body := api.call("GET", "/api/v1/approvals", nil, nil)
		return code == 200 && strings.Contains(string(body), `"status":"executed"`), fmt.Sprintf("%d %s", code, body)
	})
	waitFor(t, 20*time.Second, "the audit events", func() (bool, string) {
		code, body := api.call("GET", "/api/v1/events?kind=approval", nil, nil)
		return code == 200 && strings.Contains(string(body), `"approval.execute"`) && strings.Contains(string(body), `"approval.request"`), fmt.Sprintf("%d %s", code, body)
	})
}

// timeout returns a channel closed after d (or at the end of the test).
func timeout(t *testing.T, d time.Duration) <-chan struct{} {
	done := make(chan struct{})
	tm := time.AfterFunc(d, func() { close(done) })
	t.Cleanup(func() { tm.Stop() })
	return done
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
