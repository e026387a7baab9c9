package console

import (
	"strconv"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/internal/browsertest"
)

// TestDashboardWeek checks the seven-day overview: the counting module on
// runs and tasks made up here (retried VMs, missed windows, another week),
// then the dashboard after a real backup, whose day counts it.
func TestDashboardWeek(t *testing.T) {
	b := signedIn(t)
	got := browsertest.Eval[string](b, `(async () => { const W = await import("/assets/pages/dashboard-week.js");
		const now = new Date(2026, 11, 1, 15, 0);
		const at = (d, h) => (d > 1 ? new Date(2026, 10, d, h, 0) : new Date(2026, 11, d, h, 0)).toISOString(); // d > 1: November
		const runs = [
			{trigger: "window", started: at(1, 1), vms: [{state: "succeeded", finished: at(1, 2)}, {state: "failed", finished: at(1, 3)}, {state: "not-run"}]},
			{trigger: "missed", started: at(30, 1), vms: []},
			{trigger: "window", started: at(20, 1), vms: [{state: "succeeded", finished: at(20, 2)}]}, // 11 days ago: outside
			{trigger: "manual", started: at(25, 23), vms: [{state: "succeeded", finished: at(26, 0)}]},
		];
		const tasks = [
			{kind: "backup", state: "succeeded", ended: at(1, 9), result: [{vm: "a"}, {vm: "b", error: "snapshot failed"}]},
			{kind: "backup", state: "failed", ended: at(30, 9)},
			{kind: "check", state: "succeeded", ended: at(1, 9)},
		];
		return W.weekSummary(runs, tasks, now).map(d => d.day + ":" + d.succeeded + "/" + d.failed + "/" + d.notRun).join(" "); })()`)
	want := "2026-11-25:0/0/0 2026-11-26:1/0/0 2026-11-27:0/0/0 2026-11-28:0/0/0 2026-11-29:0/0/0 2026-11-30:0/1/0 2026-12-01:2/2/1"
	if got != want {
		t.Fatalf("weekSummary:\n got %s\nwant %s", got, want)
	}

	var task struct {
		ID string `json:"id"`
	}
	if st := p2API(t, b, "POST", "/backups", map[string]any{"vms": []string{p2VMUUID(t, b, "web-01")}}, &task); st != 202 {
		t.Fatalf("POST /backups: %d", st)
	}
	p2WaitTask(t, b, task.ID)
	b.Go("#/dashboard")
	today := browsertest.Eval[string](b, `(() => { const d = new Date(); return d.getFullYear() + "-" + String(d.getMonth() + 1).padStart(2, "0") + "-" + String(d.getDate()).padStart(2, "0"); })()`)
	row := `#dashboard-week tr[data-day="` + today + `"]`
	b.WaitVisible(row)
	if n := b.Count("#dashboard-week tbody tr"); n != 7 {
		t.Errorf("%d days in the overview, want 7", n)
	}
	cell := strings.TrimSpace(b.Text(row + ` td[data-label="Succeeded"]`))
	if n, err := strconv.Atoi(cell); err != nil || n < 1 {
		t.Errorf("today's succeeded backups = %q, want at least the one just made", cell)
	}
	b.CheckConsole()
}
