package console

// Issue 18's "Done when": one test populates the demo as an administrator
// would have it after a week (a restore to a new VM with a long name, a
// failed overwrite, a quick and a full check, a job with a very long name
// whose run has backed up every VM while its window stays open), then
// visits every page — the details of tasks, jobs, repositories and VMs, the
// wizards' steps and the files page included — at 1440x900 and at 400x800.
// It fails when a page scrolls sideways, a table cell's text is cut off or
// sticks out of its cell, the page shows a leaked JavaScript value, or the
// browser logs an error.
//
// VMVAULT_AUDIT_SHOTS=dir saves a screenshot of the viewport of every page
// at both sizes in dir, even when the test passes (to look at the pages).

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/vmvault/vmvault/internal/browsertest"
)

// auditOverflowJS lists what is wrong with the page's layout: the page
// scrolling sideways (naming the widest unclipped element), a table cell
// whose content is wider than the cell or sticks out of it, a table box
// scrolling sideways.
const auditOverflowJS = `(() => {
	const out = [];
	const se = document.scrollingElement;
	if (se.scrollWidth > se.clientWidth + 1) {
		const cw = se.clientWidth;
		const clipped = (e) => { for (let a = e.parentElement; a; a = a.parentElement) { if (getComputedStyle(a).overflowX !== "visible") return true; } return false; };
		const past = [...document.querySelectorAll("body *")].filter(e => e.getBoundingClientRect().right > cw + 1 && !clipped(e))
			.slice(0, 3).map(e => "<" + e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") + (e.className && typeof e.className === "string" ? "." + e.className.split(" ").join(".") : "") + "> " + JSON.stringify((e.innerText || "").slice(0, 60)));
		out.push("the page scrolls sideways by " + (se.scrollWidth - cw) + " px: " + past.join(", "));
	}
	for (const w of document.querySelectorAll("main .table-wrap")) {
		if (w.scrollWidth > w.clientWidth + 1) out.push("a table box scrolls sideways by " + (w.scrollWidth - w.clientWidth) + " px (" + ((w.querySelector("caption") || {}).textContent || (w.closest("[id]") || {}).id) + ")");
	}
	for (const td of document.querySelectorAll("main td, main th")) {
		const r = td.getBoundingClientRect();
		if (r.width === 0 || td.closest("[hidden]")) continue;
		let bad = td.scrollWidth > td.clientWidth + 1;
		for (const c of td.querySelectorAll("*")) {
			const cr = c.getBoundingClientRect();
			if (cr.width > 0 && getComputedStyle(c).position !== "absolute" && (cr.right > r.right + 1 || cr.left < r.left - 1)) bad = true;
		}
		if (bad) out.push("cell " + JSON.stringify(td.dataset.label || td.innerText.slice(0, 20)) + " cuts off " + JSON.stringify(td.innerText.slice(0, 80)));
		if (out.length > 10) break;
	}
	return out;
})()`

// auditLongJob is a job name as long as administrators write them.
const auditLongJob = "Nightly backup of the production web and database servers in the Frankfurt datacenter (tier 1, keep for the auditors)"

// auditLongVM is the name of the VM the restore makes.
const auditLongVM = "restored-web-01-for-the-quarterly-audit-of-the-finance-department-2026"

type auditTask struct {
	ID    string `json:"id"`
	State string `json:"state"`
	Error string `json:"error"`
}

// auditWaitTask waits until the task ends and returns it.
func auditWaitTask(t *testing.T, b *browsertest.Browser, id string) auditTask {
	t.Helper()
	var tk auditTask
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		if st := p2API(t, b, "GET", "/tasks/"+id, nil, &tk); st != 200 {
			t.Fatalf("GET /tasks/%s: %d", id, st)
		}
		if tk.State == "succeeded" || tk.State == "failed" || tk.State == "cancelled" {
			return tk
		}
	}
	t.Fatalf("task %s still %s after two minutes", id, tk.State)
	return tk
}

// auditPopulate makes the demo look lived in and returns the ids the pages
// need.
type auditIDs struct {
	job, restoreTask, failedTask, checkTask, fullCheckTask, backupTask, web01, restoredVM, point string
}

func auditPopulate(t *testing.T, b *browsertest.Browser) auditIDs {
	t.Helper()
	var ids auditIDs
	ids.web01, ids.point = tablesWeb01(t, b)

	// A job with a very long name over web-01, its window open around the
	// clock: the scheduler starts its run when it is saved (no "run now":
	// that makes a manual run, which ends with its last VM), backs web-01
	// up and keeps the run open until the day's slot closes.
	ids.job = p2Unique("audit-long-name-job-for-the-frankfurt-production-servers")
	days := map[string][]string{}
	for _, d := range []string{"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"} {
		days[d] = []string{"00:00-24:00"}
	}
	job := map[string]any{
		"id": ids.job, "name": auditLongJob, "enabled": true, "repository": "demo",
		"description": "A job whose name and id are as long as real ones get.",
		"selection":   map[string]any{"vms": []string{ids.web01}},
		"window":      map[string]any{"location": "UTC", "days": days},
		"retention":   map[string]any{"last": 3},
	}
	if st := p2API(t, b, "POST", "/jobs", job, nil); st != 201 && st != 200 {
		t.Fatalf("POST /jobs: %d", st)
	}
	t.Cleanup(func() { p2API(t, b, "DELETE", "/jobs/"+ids.job, nil, nil) })

	// A restore to a new VM with a long name, and a failed overwrite of the
	// running web-01 (not powered off first).
	var tk auditTask
	if st := p2API(t, b, "POST", "/restores", map[string]any{"point": ids.point, "mode": "new", "name": p2Unique(auditLongVM)}, &tk); st != 202 {
		t.Fatalf("POST /restores (new): %d", st)
	}
	ids.restoreTask = tk.ID
	if st := p2API(t, b, "POST", "/restores", map[string]any{"point": ids.point, "mode": "original"}, &tk); st != 202 {
		t.Fatalf("POST /restores (original): %d", st)
	}
	ids.failedTask = tk.ID
	ids.checkTask = tablesStartCheck(t, b, false)
	ids.fullCheckTask = tablesStartCheck(t, b, true)
	if got := auditWaitTask(t, b, ids.restoreTask); got.State != "succeeded" {
		t.Fatalf("the restore to a new VM ended %s: %s", got.State, got.Error)
	}
	if got := auditWaitTask(t, b, ids.failedTask); got.State != "failed" {
		t.Fatalf("the overwrite of the running web-01 ended %s, want failed", got.State)
	}
	var vms []struct {
		InstanceUUID string `json:"instanceUuid"`
		Name         string `json:"name"`
	}
	p2API(t, b, "GET", "/vms", nil, &vms)
	for _, v := range vms {
		if strings.HasPrefix(v.Name, auditLongVM) {
			ids.restoredVM = v.InstanceUUID
		}
	}
	if ids.restoredVM == "" {
		t.Fatalf("the restored VM %s… is not in GET /vms", auditLongVM)
	}
	// Its first backup: changed block tracking is off on the new VM, so
	// the backup warns (and the long-named VM has a point of its own).
	if st := p2API(t, b, "POST", "/backups", map[string]any{"vms": []string{ids.restoredVM}}, &tk); st != 202 {
		t.Fatalf("POST /backups: %d", st)
	}
	if got := auditWaitTask(t, b, tk.ID); got.State != "succeeded" {
		t.Fatalf("the backup of the restored VM ended %s: %s", got.State, got.Error)
	}
	ids.backupTask = tk.ID
	return ids
}

// auditShot saves the viewport as dir/name.png.
func auditShot(t *testing.T, b *browsertest.Browser, dir, name string) {
	t.Helper()
	png, err := chromedp.Run(b.Ctx(), chromedp.CaptureScreenshot())
	if err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return
	}
	name = strings.Trim(regexp.MustCompile(`[^A-Za-z0-9.-]+`).ReplaceAllString(name, "_"), "_")
	if err := os.MkdirAll(dir, 0o755); err == nil {
		_ = os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644)
	}
}

func TestAuditEveryPage(t *testing.T) {
	b := signedIn(t)
	ids := auditPopulate(t, b)
	// Two restores of web-01 are told apart: the one to a new VM names it.
	b.Go("#/tasks")
	b.WaitText(fmt.Sprintf(`#tasks-list a[href="#/tasks/%s"]`, ids.restoreTask), "restore web-01 as "+auditLongVM)
	if got := b.Text(fmt.Sprintf(`#tasks-list a[href="#/tasks/%s"]`, ids.failedTask)); got != "restore web-01" {
		t.Errorf("the failed overwrite is listed as %q", got)
	}
	// The restore's page names the VM it made, links to it, and gives its
	// figures in units (not "Seconds 0.457976262", a 64-digit point id).
	b.Go("#/tasks/" + ids.restoreTask)
	b.WaitText("#task-result-vm", auditLongVM)
	if href := p2Attr(b, "#task-result-vm", "href"); href != "#/vms/"+ids.restoredVM {
		t.Errorf("the restored VM links to %q, want #/vms/%s", href, ids.restoredVM)
	}
	if res := b.Text("#task-result"); regexp.MustCompile(`[0-9a-f]{64}|\d\.\d{4,}|Bytes Per Second`).MatchString(res) || !strings.Contains(res, "/s") {
		t.Errorf("the restore's result reads %q", res)
	}
	// Find files… from web-01's page chooses web-01's newest point, not
	// the VM backed up last (the restored one).
	b.Go("#/files?vm=web-01")
	b.WaitVisible("#files-point")
	if got := browsertest.Eval[string](b, `(() => { const s = document.getElementById("files-point"); return s.options[s.selectedIndex].dataset.vm || ""; })()`); got != "web-01" {
		t.Errorf("the files page for web-01 chose a point of %q", got)
	}
	// The backup's result: the point by its first digits, linked; the read
	// mode in words (not "allocate|d").
	b.Go("#/tasks/" + ids.backupTask)
	b.WaitVisible(`#task-warnings`)
	b.WaitVisible(`td[data-label="Restore point"] a[href^="#/restore-points?q="]`)
	if res := b.Text(`main .table-wrap`); regexp.MustCompile(`[0-9a-f]{64}`).MatchString(res) || b.Text(`main .table-wrap td[data-label="Mode"]`) != "allocated areas" {
		t.Errorf("the backup's result reads %q", res)
	}
	auditWindowRun(t, b, ids)
	auditVMWarnings(t, b, ids)
	auditRepositoryFigures(t, b)
	auditEventsReadable(t, b, ids)
	shots := os.Getenv("VMVAULT_AUDIT_SHOTS")
	pages := []struct{ route, ready string }{
		{"#/dashboard", "#dashboard-repos table"},
		{"#/inventory", "#inventory-tree li"},
		{"#/jobs", "#jobs-table"},
		{"#/jobs/" + ids.job, ".p2-history .p2-run, .p2-history .empty"},
		{"#/restore-points", ".p2-vm-group"},
		{"#/instant-recoveries", "#instant-list table, #instant-list .empty"},
		{"#/repositories", "#repositories-table"},
		{"#/repositories/demo", ".usage-chart"},
		{"#/files", "#files-search"},
		{"#/files?vm=web-01", "#files-search"},
		{"#/vms/" + ids.web01, "#vm-summary"},
		{"#/vms/" + ids.restoredVM, "#vm-summary"},
		{"#/tasks", "#tasks-list table"},
		{"#/tasks/" + ids.restoreTask, "#task-summary"},
		{"#/tasks/" + ids.failedTask, "#task-summary"},
		{"#/tasks/" + ids.fullCheckTask, "#task-check-mode"},
		{"#/tasks/" + ids.checkTask, "#task-check-mode"},
		{"#/tasks/" + ids.backupTask, "#task-warnings"},
		{"#/events", "#events-list table"},
		{"#/settings", "#tokens-list table, #tokens-list .empty"},
	}
	for _, size := range []struct{ w, h int64 }{{1440, 900}, {400, 800}} {
		b.Viewport(size.w, size.h)
		check := func(where string) {
			t.Helper()
			// Live parts (the stream, the week, scheduled runs) land first.
			b.WaitJS(`new Promise(res => setTimeout(() => res(true), 600))`, "settle")
			for _, p := range browsertest.Eval[[]string](b, auditOverflowJS) {
				t.Errorf("%s at %d px: %s", where, size.w, p)
			}
			p2NoJunk(t, b, fmt.Sprintf("%s at %d px", where, size.w))
			if shots != "" {
				auditShot(t, b, shots, fmt.Sprintf("%d-%s", size.w, where))
			}
			b.CheckConsole()
		}
		for _, p := range pages {
			b.Go(p.route)
			b.WaitVisible(p.ready)
			check(p.route)
		}

		// The job wizard, step by step (editing the long-named job).
		b.Go("#/job-wizard/" + ids.job)
		for _, step := range []string{"basics", "vms", "repository", "schedule", "retention", "preview", "summary"} {
			b.WaitVisible(fmt.Sprintf(`.p2-step-panel[data-step=%s]:not([hidden])`, step))
			if step == "preview" {
				b.WaitText("#preview-summary", "Would keep")
			}
			check("job wizard: " + step)
			if step != "summary" {
				b.Click("#wizard-next")
			}
		}

		// The restore wizard, step by step, up to its summary.
		b.Go("#/restore")
		b.WaitVisible(`input[name=vm][data-name="web-01"]`)
		check("restore: VM")
		b.Click(`input[name=vm][data-name="web-01"]`)
		b.Click("#restore-vm .p2-next")
		b.WaitVisible(`#restore-point input[name=point]`)
		check("restore: point")
		b.Click(`#restore-point input[name=point]`)
		b.Click("#restore-point .p2-next")
		b.WaitVisible("#mode-new")
		check("restore: mode")
		b.Click("#restore-mode .p2-next")
		b.WaitVisible("#restore-ds")
		check("restore: target")
		b.Click("#restore-target .p2-next")
		b.WaitVisible("#restore-choices")
		check("restore: summary")
	}
}

// auditWindowRun (issue 18, item 2): a scheduled run whose VMs are all
// backed up stays open until its window slot closes; the dashboard, the
// Tasks page and the job page say it is done and when the window closes,
// not "running", and the job page's "Next run" is when the next run starts
// (the next day's slot of a window open around the clock), not "window
// open now".
func auditWindowRun(t *testing.T, b *browsertest.Browser, ids auditIDs) {
	t.Helper()
	var run struct {
		ID         string `json:"id"`
		State      string `json:"state"`
		SlotCloses string `json:"slotCloses"`
		VMs        []struct {
			State string `json:"state"`
		} `json:"vms"`
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(300 * time.Millisecond) {
		var runs []json.RawMessage
		p2API(t, b, "GET", "/jobs/"+ids.job+"/runs?limit=1", nil, &runs)
		if len(runs) == 1 {
			_ = json.Unmarshal(runs[0], &run)
			if len(run.VMs) == 1 && run.VMs[0].State == "succeeded" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job's run did not back web-01 up in two minutes: %+v", run)
		}
	}
	// The run has backed up its VM: it is over, though its window stays
	// open (the scheduler ends a run whose VMs are all done; it used to
	// read "running" until the window closed).
	for deadline := time.Now().Add(time.Minute); run.State == "running"; time.Sleep(300 * time.Millisecond) {
		var runs []json.RawMessage
		p2API(t, b, "GET", "/jobs/"+ids.job+"/runs?limit=1", nil, &runs)
		if len(runs) == 1 {
			_ = json.Unmarshal(runs[0], &run)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the window run with every VM done is still %q", run.State)
		}
	}
	if run.State != "succeeded" || run.SlotCloses != "" {
		t.Fatalf("the window run with every VM done: state %q, slotCloses %q (want succeeded and no open slot)", run.State, run.SlotCloses)
	}
	fmtTime := func(v time.Time) string {
		return browsertest.Eval[string](b, fmt.Sprintf(`(async () => (await import("/assets/lib/fmt.js")).time(%q))()`, v.Format(time.RFC3339)))
	}
	// The window is open all day, every day: the next run starts at the
	// next midnight UTC.
	until := fmtTime(time.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour))

	b.Viewport(1440, 900)
	b.Go("#/dashboard")
	b.WaitText("#dashboard-scheduled", "No scheduled backup is running.")
	b.WaitText("#dashboard-next-run", until)

	b.Go("#/tasks")
	row := fmt.Sprintf(`#tasks-sched-runs tr[data-run=%q]`, run.ID)
	b.WaitVisible(row)
	if st := b.Text(row + ` td[data-label="State"]`); strings.Contains(st, "running") {
		t.Errorf("Tasks: the finished run's state reads %q", st)
	}

	b.Go("#/jobs/" + ids.job)
	sum := fmt.Sprintf(`.p2-history .p2-run[data-run=%q] summary`, run.ID)
	b.WaitVisible(sum)
	if got := b.Text(sum); strings.Contains(got, "running") {
		t.Errorf("job page: the finished run reads %q", got)
	}
	b.WaitVisible("#job-next-run")
	if got := b.Text("#job-next-run"); strings.Contains(got, "window open now") || !strings.HasPrefix(got, until) {
		t.Errorf("job page: Next run reads %q, want it to start with the next run's start %s", got, until)
	}
	b.Go("#/jobs")
	b.WaitVisible(fmt.Sprintf(`#jobs-table tr[data-job=%q]`, ids.job))
	if got := b.Text(fmt.Sprintf(`#jobs-table tr[data-job=%q] td[data-label="Next run"]`, ids.job)); !strings.HasPrefix(got, until) {
		t.Errorf("jobs list: Next run reads %q, want %s first", got, until)
	}
	b.CheckConsole()
}

// auditVMWarnings (issue 18, item 7): the warnings a VM's backups recorded
// (changed block tracking was off at the restored VM's first backup)
// show on the VM's page, next to the restore point and in its summary.
func auditVMWarnings(t *testing.T, b *browsertest.Browser, ids auditIDs) {
	t.Helper()
	var pts []struct {
		ID       string   `json:"id"`
		Warnings []string `json:"warnings"`
	}
	p2API(t, b, "GET", "/restore-points?vm="+ids.restoredVM, nil, &pts)
	warned := ""
	want := ""
	for _, p := range pts {
		if len(p.Warnings) > 0 {
			warned, want = p.ID, p.Warnings[0]
			break
		}
	}
	if warned == "" {
		t.Fatalf("no restore point of the restored VM has a warning in the API (its first backup ran with changed block tracking off): %+v", pts)
	}
	b.Go("#/vms/" + ids.restoredVM)
	b.WaitText("#vm-warnings", want)
	cell := fmt.Sprintf(`#vm-points tr[data-point=%q] td[data-label="Notes"]`, warned)
	b.WaitVisible(cell + " .badge-warning")
	if got := b.Text(cell); !strings.Contains(got, want) {
		t.Errorf("VM page: the point's notes read %q, want its warning %q", got, want)
	}
	b.CheckConsole()
}

// auditRepositoryFigures (issue 18, items 6 and 9): the repository page
// says whether its last check was a full read-and-verify one (the last
// check auditPopulate ran), its reclaim estimate is the API's figure in
// words ("nothing would be freed" for 0, not "about 0 B"), and a first
// day of backups draws lines (per restore point), not one dot per series.
func auditRepositoryFigures(t *testing.T, b *browsertest.Browser) {
	t.Helper()
	var det struct {
		ReclaimableBytes *int64 `json:"reclaimableBytes"`
	}
	if st := p2API(t, b, "GET", "/repositories/demo", nil, &det); st != 200 || det.ReclaimableBytes == nil {
		t.Fatalf("GET /repositories/demo: %d, reclaimableBytes %v", st, det.ReclaimableBytes)
	}
	b.Go("#/repositories/demo")
	b.WaitText("#last-check", "full check: all data read and verified")
	want := "nothing would be freed now"
	if *det.ReclaimableBytes > 0 {
		want = browsertest.Eval[string](b, fmt.Sprintf(`(async () => (await import("/assets/lib/fmt.js")).bytes(%d))()`, *det.ReclaimableBytes)) + " would be freed now"
	}
	b.WaitText("#reclaim-info", want)
	b.WaitVisible(".usage-chart")
	if n := browsertest.Eval[int](b, `Math.min(...[...document.querySelectorAll("#usage-chart polyline")].map(p => (p.getAttribute("points") || "").trim().split(/\s+/).filter(Boolean).length))`); n < 2 {
		t.Errorf("the usage chart draws %d point(s) per series: a dot, not a line", n)
	}
	b.CheckConsole()
}

// auditEventsReadable (issue 18, item 5): the event log names VMs, not
// their instance UUIDs, and shows a restore point's id by its first digits,
// not 64 of them (the audit events of the backups and restores above carry
// both in their subject and message).
func auditEventsReadable(t *testing.T, b *browsertest.Browser, ids auditIDs) {
	t.Helper()
	b.Viewport(1440, 900)
	b.Go("#/events?range=24h")
	b.WaitVisible(`#events-list td[data-label="Kind"]`)
	b.WaitText(`#events-list td[data-label="Kind"]`, "restore.vm")
	raw := func(where, sel string) {
		t.Helper()
		cells := browsertest.Eval[[]string](b, fmt.Sprintf(`[...document.querySelectorAll(%q)].map(td => td.innerText)`, sel))
		if len(cells) == 0 {
			t.Errorf("%s: no event cells (%s)", where, sel)
		}
		for _, c := range cells {
			if regexp.MustCompile(`[0-9a-f]{64}`).MatchString(c) || strings.Contains(c, ids.web01) || strings.Contains(c, ids.restoredVM) {
				t.Errorf("%s: an event cell shows a raw id: %q", where, c)
			}
		}
	}
	raw("Events", `#events-list td[data-label="Subject"], #events-list td[data-label="Message"]`)
	// The dashboard's recent events too (restore.vm is among the newest).
	b.Go("#/dashboard")
	b.WaitText("#dashboard-events", "restored a VM")
	raw("Dashboard", `#dashboard-events td[data-label="Subject"], #dashboard-events td[data-label="Message"]`)
	b.CheckConsole()
}

// TestRunStatusModel checks run-status.js, imported as the console serves
// it: when a job's next run starts (the window cut into slots as
// policy.Job.Slot cuts it: a day at a time, or every everyHours from the
// opening), and how an open run whose VMs are all done reads.
func TestRunStatusModel(t *testing.T) {
	b := signedIn(t)
	eval := func(expr string) string {
		t.Helper()
		return browsertest.Eval[string](b, fmt.Sprintf(`(async () => { const R = await import("/assets/pages/run-status.js");
			const all = {location: "UTC", days: Object.fromEntries(["monday","tuesday","wednesday","thursday","friday","saturday","sunday"].map(d => [d, ["00:00-24:00"]]))};
			const v = (%s); return typeof v === "string" ? v : JSON.stringify(v); })()`, expr))
	}
	tests := []struct{ name, expr, want string }{
		{"always open: the next day's slot at midnight",
			`R.nextRunStart(all, 0, new Date("2026-12-01T13:20:30Z")).toISOString()`, `2026-12-02T00:00:00.000Z`},
		{"always open, every 4 hours",
			`R.nextRunStart(all, 4, new Date("2026-12-01T13:20:30Z")).toISOString()`, `2026-12-01T16:00:00.000Z`},
		{"a night in Paris every 4 hours: 02:00 after 22:00",
			`R.nextRunStart({location: "Europe/Paris", days: {monday: ["22:00-06:00"]}}, 4, new Date("2026-11-30T21:30:00Z")).toISOString()`, `2026-12-01T01:00:00.000Z`},
		{"a night once: next week's opening",
			`R.nextRunStart({location: "Europe/Paris", days: {monday: ["22:00-06:00"]}}, 0, new Date("2026-11-30T21:30:00Z")).toISOString()`, `2026-12-07T21:00:00.000Z`},
		{"a 60-hour weekend starts a run each day",
			`R.slotStarts({location: "UTC", days: {friday: ["18:00-24:00"], saturday: ["00:00-24:00"], sunday: ["00:00-24:00"], monday: ["00:00-06:00"]}}, 0).map(m => m / 60)`, `[114,138,162]`},
		{"a window that never opens",
			`String(R.nextRunStart({location: "UTC", days: {}}, 0))`, `null`},
		{"an open run with every VM done waits for its window",
			`(() => { const p = R.runPhase({state: "running", slotCloses: "2026-12-02T00:00:00Z", vms: [{state: "succeeded", finished: "2026-12-01T13:05:00Z"}, {state: "succeeded", finished: "2026-12-01T13:06:00Z"}]});
				return [p.phase, R.phaseWord(p), R.windowOpenText(p, d => d.toISOString())].join(" | "); })()`,
			`window-open | backed up | all 2 VMs backed up; the window stays open until 2026-12-02T00:00:00.000Z, failed VMs are retried until then`},
		{"one failed VM is retried",
			`(() => { const p = R.runPhase({state: "running", vms: [{state: "succeeded"}, {state: "failed"}]}); return R.phaseWord(p) + " | " + R.windowOpenText(p, String); })()`,
			`retrying | 1 of 2 VMs backed up, 1 failed; it is retried while the window stays open`},
		{"a VM still running is a run backing up",
			`R.phaseWord(R.runPhase({state: "running", vms: [{state: "succeeded"}, {state: "running"}]}))`, `running`},
		{"a finished run keeps its state",
			`R.phaseWord(R.runPhase({state: "partial", vms: [{state: "succeeded"}, {state: "failed"}]}))`, `partial`},
	}
	for _, tc := range tests {
		if got := eval(tc.expr); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}

// kindsAre is the expression "the events table has rows, all of kinds
// starting with prefix".
func kindsAre(prefix string) string {
	return fmt.Sprintf(`(() => { const k = [...document.querySelectorAll('#events-list tbody td[data-label="Kind"]')].map(c => c.textContent);
		return k.length > 0 && k.every(x => x.startsWith(%q)); })()`, prefix)
}

// TestEventsAuditFilterExport locks and unlocks a point and is refused a
// bad restore through the API, then finds those actions on the Events page
// filtered by kind, user and outcome, with who and from where, and exports
// the filtered trail as CSV and JSON. Before the audit trail these actions
// left no event.
func TestEventsAuditFilterExport(t *testing.T) {
	b := signedIn(t)
	var pts []demoPoint
	if st := p2API(t, b, "GET", "/restore-points", nil, &pts); st != 200 || len(pts) == 0 {
		t.Fatalf("demo restore points: %d", st)
	}
	id := pts[0].ID
	for _, a := range []string{"lock", "unlock"} {
		if st := p2API(t, b, "POST", "/restore-points/"+id+"/"+a, nil, nil); st != 200 {
			t.Fatalf("%s: %d", a, st)
		}
	}
	if st := p2API(t, b, "POST", "/restores", map[string]any{"point": id, "mode": "sideways"}, nil); st != 422 {
		t.Fatalf("a bad restore: %d", st)
	}

	b.Go("#/events")
	b.WaitVisible("#events-kind")
	b.Select("#events-range", "all")
	b.Select("#events-kind", "point")
	b.Fill("#events-user", demo.User)
	b.Click(`#events-filter button[type=submit]`)
	// Every row is then a point event (the first, unfiltered list goes).
	b.WaitJS(kindsAre("point."), "only point events")
	b.WaitText(`#events-list td[data-label="Kind"]`, "point.unlock")
	b.WaitText(`#events-list td[data-label="Kind"]`, "point.lock")
	who := browsertest.Eval[string](b, `[...document.querySelectorAll("#events-list tbody tr")].filter(r => r.querySelector('td[data-label="Kind"]').textContent === "point.lock").map(r => r.querySelector('td[data-label="User"]').textContent)[0] || ""`)
	if !strings.Contains(who, demo.User) || !strings.Contains(who, "from 127.0.0.1") || !strings.HasSuffix(who, "ok") {
		t.Errorf("the User cell %q of the lock does not say who, from where and the outcome", who)
	}

	b.Select("#events-kind", "restore")
	b.Select("#events-outcome", "failed")
	b.Click(`#events-filter button[type=submit]`)
	b.WaitJS(kindsAre("restore.")+` && [...document.querySelectorAll('#events-list td[data-label="User"]')].every(c => c.textContent.endsWith("failed"))`, "only failed restores")

	href := p2Attr(b, "#events-export-csv", "href")
	u, err := url.Parse(href)
	if err != nil || u.Path != "/api/v1/events/export" || u.Query().Get("format") != "csv" || u.Query().Get("kind") != "restore" || u.Query().Get("outcome") != "failed" {
		t.Fatalf("Export CSV link %q does not carry the filter", href)
	}
	type fetched struct {
		Status int    `json:"status"`
		Type   string `json:"type"`
		Disp   string `json:"disp"`
		Text   string `json:"text"`
	}
	get := func(sel string) fetched {
		return browsertest.Eval[fetched](b, fmt.Sprintf(`(async () => { const r = await fetch(document.querySelector(%q).href);
			return {status: r.status, type: r.headers.get("Content-Type") || "", disp: r.headers.get("Content-Disposition") || "", text: await r.text()}; })()`, sel))
	}
	c := get("#events-export-csv")
	lines := strings.Split(strings.TrimSpace(c.Text), "\n")
	if c.Status != 200 || !strings.HasPrefix(c.Type, "text/csv") || !strings.Contains(c.Disp, "attachment") || len(lines) < 2 ||
		!strings.HasPrefix(lines[0], "time,severity,kind,user,address,outcome,error") {
		t.Fatalf("CSV export: %d %q %q\n%s", c.Status, c.Type, c.Disp, c.Text)
	}
	for _, l := range lines[1:] {
		if !strings.Contains(l, ",restore.vm,"+demo.User+",127.0.0.1,failed,") {
			t.Errorf("CSV line %q is not a failed restore by %s from 127.0.0.1", l, demo.User)
		}
	}
	j := get("#events-export-json")
	if j.Status != 200 || !strings.HasPrefix(j.Type, "application/json") || !strings.Contains(j.Text, `"outcome":"failed"`) || strings.Contains(j.Text, `"outcome":"ok"`) {
		t.Fatalf("JSON export: %d %q %s", j.Status, j.Type, j.Text)
	}
	b.CheckConsole()
}
