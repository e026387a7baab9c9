package console

// Issue 8 follow-up: the Tasks page's "Scheduled backups" section shows the
// backups the scheduler runs (they are not registry tasks): the running
// ones live from the shell's stream, and the jobs' runs of the last 24
// hours with their per-VM outcomes, linking to the job page.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/browsertest"
)

const h11DemoJob = "demo-vms" // demo.JobID

type h11Run struct {
	ID    string `json:"id"`
	Job   string `json:"job"`
	State string `json:"state"`
	VMs   []struct {
		State string `json:"state"`
	} `json:"vms"`
}

// h11RunNow starts the demo job and returns its run id. The demo job's
// window is open around the clock, so the scheduler may be running it
// already (409): wait for that run to end and try again.
func h11RunNow(t *testing.T, b *browsertest.Browser) string {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var res struct {
			Run string `json:"run"`
		}
		st := p2API(t, b, "POST", "/jobs/"+h11DemoJob+"/run", nil, &res)
		if st == 202 && res.Run != "" {
			return res.Run
		}
		if st != 409 {
			t.Fatalf("POST /jobs/%s/run: %d, run %q", h11DemoJob, st, res.Run)
		}
		if time.Now().After(deadline) {
			t.Fatalf("POST /jobs/%s/run: still 409 (a run is going) after 3 minutes", h11DemoJob)
		}
		time.Sleep(time.Second)
	}
}

// TestScheduledRunOnTasksPage runs the demo job now while the Tasks page
// is open: its run appears in the "Scheduled backups" section without a
// reload, reaches the final state the API reports, counts its VMs'
// outcomes as the API does, and links to the job page.
func TestScheduledRunOnTasksPage(t *testing.T) {
	b := signedIn(t)
	b.Go("#/tasks")
	pageTitle(t, b, "Tasks")
	b.WaitVisible("#tasks-list table, #tasks-list .empty")
	b.WaitVisible("#tasks-scheduled h2")
	b.WaitVisible("#tasks-sched-runs table, #tasks-sched-runs .empty")
	b.WaitVisible("#tasks-sched-running table, #tasks-sched-running .empty")
	if got := b.Text("#tasks-sched-runs"); strings.Contains(got, "Could not load") {
		t.Fatalf("the runs section failed: %s", got)
	}

	run := h11RunNow(t, b)
	row := fmt.Sprintf(`#tasks-sched-runs tr[data-run=%q]`, run)
	p2WaitJS(b, 30*time.Second, fmt.Sprintf(`!!document.querySelector(%q)`, row), "the run's row on the Tasks page")
	p2WaitJS(b, 3*time.Minute, fmt.Sprintf(`(() => { const r = document.querySelector(%q);
		return !!r && ["succeeded", "partial", "failed", "cancelled", "interrupted"].includes(r.dataset.state); })()`, row),
		"the run's row in a final state")

	var runs []h11Run
	if st := p2API(t, b, "GET", "/jobs/"+h11DemoJob+"/runs?limit=5", nil, &runs); st != 200 {
		t.Fatalf("GET /jobs/%s/runs: %d", h11DemoJob, st)
	}
	var api *h11Run
	for i := range runs {
		if runs[i].ID == run {
			api = &runs[i]
		}
	}
	if api == nil {
		t.Fatalf("GET /jobs/%s/runs has no run %s: %+v", h11DemoJob, run, runs)
	}
	// The demo's window is open around the clock: a window run of the same
	// job may share the VMs, so "partial" is an honest outcome too.
	if api.State != "succeeded" && api.State != "partial" {
		t.Errorf("the demo job's run ended %s, want succeeded: %+v", api.State, api)
	}
	if got := p2Attr(b, row, "data-state"); got != api.State {
		t.Errorf("the row says %q, the API %q", got, api.State)
	}
	b.WaitText(row+" .badge", api.State)
	counts := map[string]int{}
	for _, v := range api.VMs {
		counts[v.State]++
	}
	outcome := b.Text(row + " .tasks-sched-outcomes")
	for s, n := range counts {
		if !strings.Contains(outcome, fmt.Sprintf("%d %s", n, s)) {
			t.Errorf("outcomes %q do not say %d %s", outcome, n, s)
		}
	}
	if counts["succeeded"] == 0 {
		t.Errorf("no VM of the demo job's run succeeded: %+v", api)
	}
	b.WaitText(row, "run now")
	b.WaitText(row+" a", "Demo VMs")
	if href := p2Attr(b, row+" a", "href"); href != "#/jobs/"+h11DemoJob {
		t.Errorf("the run links to %q, want #/jobs/%s", href, h11DemoJob)
	}
	if cap := b.Text("#tasks-sched-runs caption"); cap != "Job runs in the last 24 hours" {
		t.Errorf("runs table caption %q", cap)
	}
	if probs := b.A11yProblems(); len(probs) > 0 {
		t.Errorf("accessibility of the Tasks page with a job run: %v", probs)
	}
	p2NoJunk(t, b, "tasks page")
	b.CheckConsole()

	b.Click(row + " a")
	pageTitle(t, b, "Demo VMs")
	b.CheckConsole()
}

// TestScheduledRunningLive replays the server's "scheduler" events on the
// shell's stream (a lab backup ends within the server's one-second activity
// poll, too fast to watch): the Tasks page shows one labelled row per VM
// with its job (a link), phase, progress, rate and ETA, updated in place,
// gone when the scheduler is idle; at 400 px nothing scrolls sideways.
func TestScheduledRunningLive(t *testing.T) {
	b := signedIn(t)
	liveWatchEventSources(t, b)
	b.Reload()
	pageTitle(t, b, "Dashboard")
	b.Go("#/tasks")
	pageTitle(t, b, "Tasks")
	b.WaitJS(`window.h8es.length === 1 && window.h8es[0].readyState === 1`, "the shell's one stream open")
	b.WaitVisible("#tasks-sched-running table, #tasks-sched-running .empty")
	// Let the stream's or the dashboard's first scheduler status land.
	b.WaitJS(`new Promise(res => setTimeout(() => res(true), 300))`, "settle")

	backup := func(vm string, done, total, rate int64) string {
		return fmt.Sprintf(`{"job":%q,"run":"demo-vms/h11","vm":%q,"instanceUuid":"u-%s","started":"2026-11-29T20:00:00Z","phase":"disk 1/1","done":%d,"total":%d,"rate":%d}`,
			h11DemoJob, vm, vm, done, total, rate)
	}
	const mib = 1 << 20
	for _, size := range []struct{ w, h int64 }{{1280, 800}, {400, 800}} {
		t.Run(fmt.Sprintf("%dpx", size.w), func(t *testing.T) {
			b.Viewport(size.w, size.h)
			liveScheduler(t, b, "["+backup("files-01", 25*mib, 100*mib, 5*mib)+"]")
			row := `#tasks-sched-running tr[data-sched-vm="files-01"]`
			b.WaitVisible(row)
			b.WaitText(row, "disk 1/1")
			b.WaitText(row, "25%")
			b.WaitText(row, "5.00 MiB/s")
			b.WaitText(row, "ETA 15s") // 75 MiB left at 5 MiB/s
			b.WaitText(row+" a", "Demo VMs")
			if href := p2Attr(b, row+" a", "href"); href != "#/jobs/"+h11DemoJob {
				t.Errorf("the running backup links to %q", href)
			}
			if v := browsertest.Eval[float64](b, fmt.Sprintf(`document.querySelector(%q).value`, row+" progress")); v != 25 {
				t.Errorf("bar at %v, want 25", v)
			}
			if cap := b.Text("#tasks-sched-running caption"); cap != "Scheduled backups running" {
				t.Errorf("running table caption %q", cap)
			}
			browsertest.Eval[bool](b, fmt.Sprintf(`(document.querySelector(%q).h11mark = true)`, row))
			liveScheduler(t, b, "["+backup("files-01", 75*mib, 100*mib, 5*mib)+","+backup("db-01", 0, 0, 0)+"]")
			b.WaitText(row, "75%")
			b.WaitText(row, "ETA 5s")
			b.WaitVisible(`#tasks-sched-running tr[data-sched-vm="db-01"]`)
			if !browsertest.Eval[bool](b, fmt.Sprintf(`document.querySelector(%q).h11mark === true`, row)) {
				t.Error("the row was replaced, not updated in place")
			}
			if over := browsertest.Eval[int](b, `document.documentElement.scrollWidth - window.innerWidth`); over > 1 {
				t.Errorf("at %dpx the page scrolls sideways by %d px", size.w, over)
			}
			if probs := b.A11yProblems(); len(probs) > 0 {
				t.Errorf("accessibility with scheduled backups running: %v", probs)
			}
			p2NoJunk(t, b, "tasks page, backups running")
			liveScheduler(t, b, "[]")
			b.WaitGone(`#tasks-sched-running tr`)
			b.WaitText("#tasks-sched-running", "No scheduled backup is running.")
			b.CheckConsole()
		})
	}
}
