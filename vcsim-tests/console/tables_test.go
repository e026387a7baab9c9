package console

// Issue 18, items 4-7 (the console's tables and figures): the Tasks and
// Events tables fit the page at 1440 px and at 400 px, rates, sizes and
// counts read as people write them, and a full check does not look like
// a quick one.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/browsertest"
)

// tablesOverflowJS lists what overflows on the page: the page scrolling
// sideways, a table's box scrolling sideways, a cell whose content is wider
// than the cell or sticks out of it.
const tablesOverflowJS = `(() => {
	const out = [];
	const se = document.scrollingElement;
	if (se.scrollWidth > se.clientWidth + 1) out.push("page scrolls sideways: " + se.scrollWidth + " > " + se.clientWidth);
	for (const w of document.querySelectorAll("main .table-wrap")) {
		if (w.scrollWidth > w.clientWidth + 1) out.push("table box scrolls sideways: " + w.scrollWidth + " > " + w.clientWidth + " (" + (w.closest("[id]") || {}).id + ")");
	}
	for (const td of document.querySelectorAll("main td")) {
		const r = td.getBoundingClientRect();
		if (r.width === 0) continue;
		let bad = td.scrollWidth > td.clientWidth + 1;
		for (const c of td.querySelectorAll("*")) {
			const cr = c.getBoundingClientRect();
			if (cr.width > 0 && (cr.right > r.right + 1 || cr.left < r.left - 1)) bad = true;
		}
		if (bad) out.push("cell " + (td.dataset.label || "?") + " overflows: " + JSON.stringify(td.innerText.slice(0, 80)));
		if (out.length > 12) break;
	}
	return out;
})()`

// tablesStartCheck starts a check of the demo repository and waits until
// the task ends; full reads and verifies every blob.
func tablesStartCheck(t *testing.T, b *browsertest.Browser, full bool) string {
	t.Helper()
	var info struct {
		ID string `json:"id"`
	}
	if st := p2API(t, b, "POST", "/repositories/demo/check", map[string]bool{"readData": full}, &info); st != 202 || info.ID == "" {
		t.Fatalf("POST /repositories/demo/check: %d %+v", st, info)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var task struct {
			State string `json:"state"`
		}
		p2API(t, b, "GET", "/tasks/"+info.ID, nil, &task)
		if task.State == "succeeded" || task.State == "failed" {
			return info.ID
		}
		if time.Now().After(deadline) {
			t.Fatalf("check %s still %s after 2 minutes", info.ID, task.State)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestTablesTasksAndEventsFit visits Tasks and Events with checks done and
// a task of a long id at 1440x900 and at 400 px: nothing scrolls sideways
// and no cell's content overflows it.
func TestTablesTasksAndEventsFit(t *testing.T) {
	b := signedIn(t)
	tablesStartCheck(t, b, false)
	tablesStartCheck(t, b, true)
	// A restore's task names its point (64 hex digits) and fails with a
	// long message: overwriting the running web-01 without powering it off.
	_, point := tablesWeb01(t, b)
	if st := p2API(t, b, "POST", "/restores", map[string]string{"point": point, "mode": "original"}, nil); st != 202 {
		t.Fatalf("POST /restores: %d", st)
	}
	for _, size := range []struct{ w, h int64 }{{1440, 900}, {400, 800}} {
		t.Run(fmt.Sprintf("%dpx", size.w), func(t *testing.T) {
			b.Viewport(size.w, size.h)
			for _, page := range []struct{ route, title, list string }{
				{"#/tasks", "Tasks", "#tasks-list table"},
				{"#/events", "Events", "#events-list table"},
			} {
				b.Go(page.route)
				pageTitle(t, b, page.title)
				b.WaitVisible(page.list)
				// Let the live sections (scheduled backups) land.
				b.WaitJS(`new Promise(res => setTimeout(() => res(true), 500))`, "settle")
				if probs := browsertest.Eval[[]string](b, tablesOverflowJS); len(probs) > 0 {
					t.Errorf("%s at %d px: %s", page.title, size.w, strings.Join(probs, "; "))
				}
				if size.w == 1440 && page.route == "#/tasks" {
					// The Actions column is whole: its header inside the table box.
					if clip := browsertest.Eval[bool](b, `(() => { const th = [...document.querySelectorAll("#tasks-list th")].pop();
						const w = th.closest(".table-wrap").getBoundingClientRect(); return th.getBoundingClientRect().right > w.right + 1; })()`); clip {
						t.Errorf("the Tasks table's last column is cut off at 1440 px")
					}
				}
				b.CheckConsole()
			}
		})
	}
}

// TestTablesFormatHelpers runs the console's formatting module in the page.
func TestTablesFormatHelpers(t *testing.T) {
	b := signedIn(t)
	got := browsertest.Eval[map[string]string](b, `(async () => {
		const f = await import("/assets/lib/fmt.js");
		return {
			slow: f.rate(34.93449781659388), mib: f.rate(5 * 1048576), big: f.rate(812.4 * 1048576),
			kib: f.rate(1010), bytes: f.bytes(23265280), odd: f.bytes(34.9344),
			one: f.plural(1, "VM"), two: f.plural(2, "VM"), none: f.plural(0, "restore point"),
			short: f.shortId("a".repeat(64)), name: f.shortId("web-01"),
		};
	})()`)
	want := map[string]string{
		"slow": "34.9 B/s", "mib": "5.00 MiB/s", "big": "812 MiB/s", "kib": "0.99 KiB/s",
		"bytes": "22.2 MiB", "odd": "35 B",
		"one": "1 VM", "two": "2 VMs", "none": "0 restore points",
		"short": "aaaaaaaaaaaa…", "name": "web-01",
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: got %q, want %q", k, got[k], w)
		}
	}
}

// TestTablesFullCheckLooksFull: a read-and-verify check says so in the task
// list and on its page, a quick check says it is quick, and the data it
// read is in human units.
func TestTablesFullCheckLooksFull(t *testing.T) {
	b := signedIn(t)
	quick := tablesStartCheck(t, b, false)
	full := tablesStartCheck(t, b, true)
	b.Viewport(1440, 900)
	b.Go("#/tasks")
	pageTitle(t, b, "Tasks")
	b.WaitVisible("#tasks-list table")
	link := func(id string) string { return fmt.Sprintf(`#tasks-list a[href="#/tasks/%s"]`, id) }
	if got := b.Text(link(full)); got != "full check demo" {
		t.Errorf("the full check is listed as %q, want \"full check demo\"", got)
	}
	if got := b.Text(link(quick)); got != "check demo" {
		t.Errorf("the quick check is listed as %q, want \"check demo\"", got)
	}
	b.Go("#/tasks/" + full)
	b.WaitText("#task-check-mode", "Full: read and verify all data")
	b.WaitVisible("#task-result")
	res := b.Text("#task-result")
	if !strings.Contains(res, "Data read") || !strings.Contains(res, "iB") && !strings.Contains(res, " B") {
		t.Errorf("the full check's result does not give the data read in units: %q", res)
	}
	if strings.Contains(res, "bytesRead") {
		t.Errorf("the result shows a field name: %q", res)
	}
	b.Go("#/tasks/" + quick)
	b.WaitText("#task-check-mode", "Quick")
	b.CheckConsole()
}

// tablesWeb01 returns web-01's instance UUID and its newest restore point.
func tablesWeb01(t *testing.T, b *browsertest.Browser) (uuid, point string) {
	t.Helper()
	uuid = p2VMUUID(t, b, "web-01")
	var pts []struct {
		ID string `json:"id"`
		VM struct {
			InstanceUUID string `json:"instanceUuid"`
		} `json:"vm"`
	}
	if st := p2API(t, b, "GET", "/restore-points?vm="+uuid, nil, &pts); st != 200 {
		t.Fatalf("GET /restore-points: %d", st)
	}
	for _, p := range pts {
		if p.VM.InstanceUUID == uuid {
			point = p.ID
		}
	}
	if point == "" {
		t.Fatalf("web-01 (%s) has no restore point: %+v", uuid, pts)
	}
	return uuid, point
}

// TestTablesFailedRestoreSaysWhatToDo overwrites the running web-01 without
// "Power the VM off first": the failure says in plain words what to do,
// offers Back and Retry, and the task list names the VM, not the point's
// 64-digit id.
func TestTablesFailedRestoreSaysWhatToDo(t *testing.T) {
	b := signedIn(t)
	uuid, point := tablesWeb01(t, b)
	b.Go("#/restore?vm=" + uuid)
	b.WaitVisible(`#restore-point input[name=point]`)
	b.Click(`#restore-point input[name=point]`)
	b.Click("#restore-point .p2-next")
	b.WaitVisible("#mode-original")
	b.Click(`label[for="mode-original"]`)
	b.Click("#restore-mode .p2-next")
	b.WaitVisible("#power-off")
	b.Fill("#confirm-name", "web-01")
	b.Click("#restore-target .p2-next")
	b.WaitVisible("#restore-start")
	b.Click("#restore-start")
	b.WaitVisible("#confirm-ok")
	b.Click("#confirm-ok")
	failed := func() string {
		t.Helper()
		p2WaitJS(b, time.Minute, `!!document.querySelector("#restore-result .p2-result.failed")`, "the failed restore's message")
		return b.Text("#restore-result .p2-result")
	}
	msg := failed()
	for _, bad := range []string{"allow the restore to", "poweredOn", "the VM is powered on:"} {
		if strings.Contains(msg, bad) {
			t.Errorf("the failure says %q: %s", bad, msg)
		}
	}
	if !strings.Contains(msg, "web-01 is powered on") || !strings.Contains(msg, "start the restore again") {
		t.Errorf("the failure does not say what is wrong and what to do: %s", msg)
	}
	b.WaitVisible("#restore-retry")
	b.WaitVisible("#restore-back")
	// Retry runs the same restore again (and fails the same way).
	b.Click("#restore-retry")
	b.WaitVisible("#confirm-ok")
	b.Click("#confirm-ok")
	p2WaitJS(b, time.Minute, `!!document.querySelector("#restore-result .p2-result.failed") && !!document.querySelector("#restore-back")`, "the retried restore's failure")
	// Back returns to the choices, where the power-off box is.
	b.Click("#restore-back")
	b.WaitVisible("#power-off")

	var tasks []struct {
		ID, Kind, Subject, State string
	}
	if st := p2API(t, b, "GET", "/tasks?limit=100", nil, &tasks); st != 200 {
		t.Fatalf("GET /tasks: %d", st)
	}
	id := ""
	for _, tk := range tasks {
		if tk.Kind == "restore" && tk.Subject == point && tk.State == "failed" {
			id = tk.ID
			break
		}
	}
	if id == "" {
		t.Fatalf("no failed restore task of point %s in %+v", point, tasks)
	}
	b.Go("#/tasks")
	b.WaitVisible("#tasks-list table")
	link := fmt.Sprintf(`#tasks-list a[href="#/tasks/%s"]`, id)
	b.WaitVisible(link)
	if got := b.Text(link); got != "restore web-01" {
		t.Errorf("the failed restore is listed as %q, want \"restore web-01\"", got)
	}
	b.CheckConsole()
}

// TestTablesPreviewCountsTheRepositorysPoints edits a saved job that has
// made no point yet: its retention preview says how many points the
// repository holds (the demo's backups), not "holds no restore points yet".
func TestTablesPreviewCountsTheRepositorysPoints(t *testing.T) {
	b := signedIn(t)
	uuid, _ := tablesWeb01(t, b)
	var pts []struct {
		ID string `json:"id"`
	}
	if st := p2API(t, b, "GET", "/restore-points?repository=demo", nil, &pts); st != 200 || len(pts) == 0 {
		t.Fatalf("GET /restore-points: %d, %d points (the demo backs its VMs up at start)", st, len(pts))
	}
	id := p2Unique("preview-none")
	job := map[string]any{
		"id": id, "name": "Preview " + id, "enabled": false, "repository": "demo",
		"selection": map[string]any{"vms": []string{uuid}},
		"window":    map[string]any{"location": "UTC", "days": map[string][]string{"monday": {"22:00-23:00"}}},
		"retention": map[string]any{"last": 3},
	}
	if st := p2API(t, b, "POST", "/jobs", job, nil); st != 201 && st != 200 {
		t.Fatalf("POST /jobs: %d", st)
	}
	b.Go("#/jobs/" + id + "/edit")
	for i := 0; i < 8 && !browsertest.Eval[bool](b, `!!document.querySelector("#preview-summary")`); i++ {
		b.WaitVisible("#wizard-next")
		b.Click("#wizard-next")
		b.WaitJS(`new Promise(res => setTimeout(() => res(true), 300))`, "the next step")
	}
	b.WaitText("#preview-summary", "Would keep 0 and remove 0")
	b.WaitVisible("#retention-preview .empty")
	got := b.Text("#retention-preview .empty")
	if strings.Contains(got, "holds no restore points") {
		t.Errorf("the preview says %q while the repository holds %d points", got, len(pts))
	}
	// Other tests back up meanwhile: the count is at least what we saw.
	if !strings.Contains(got, "restore points, none of them made by this job") {
		t.Errorf("the preview does not count the repository's points: %q", got)
	}
	b.CheckConsole()
}

// TestTablesBackupRefreshesInventoryAndShowsWarnings backs up a VM that
// has no restore point yet (changed block tracking off, as vcsim makes
// its VMs) while the Inventory is open: the VM's row refreshes from the
// stream with its point and its backup's warning; the task list and the
// task page show the warning; the job page shows its points' warnings.
func TestTablesBackupRefreshesInventoryAndShowsWarnings(t *testing.T) {
	b := signedIn(t)
	var vms []struct {
		InstanceUUID string `json:"instanceUuid"`
		Name         string `json:"name"`
		InInventory  bool   `json:"inInventory"`
		Points       int    `json:"points"`
	}
	if st := p2API(t, b, "GET", "/vms", nil, &vms); st != 200 {
		t.Fatalf("GET /vms: %d", st)
	}
	uuid, name := "", ""
	for _, v := range vms {
		if v.InInventory && v.Points == 0 && v.InstanceUUID != "" {
			uuid, name = v.InstanceUUID, v.Name
			break
		}
	}
	if uuid == "" {
		t.Fatalf("every VM of the demo has a restore point already: no first backup to watch (%+v)", vms)
	}
	b.Viewport(1440, 900)
	b.Go("#/inventory?q=" + name)
	row := fmt.Sprintf(`li[data-vm=%q]`, name)
	b.WaitVisible(row)
	b.WaitText(row, "no restore point")
	var task struct {
		ID string `json:"id"`
	}
	if st := p2API(t, b, "POST", "/backups", map[string]any{"vms": []string{uuid}}, &task); st != 202 || task.ID == "" {
		t.Fatalf("POST /backups: %d %+v", st, task)
	}
	p2WaitJS(b, 2*time.Minute, fmt.Sprintf(`(() => { const r = document.querySelector(%q); return !!r && r.innerText.includes("1 point"); })()`, row),
		"the inventory row refreshed after the backup (without a reload)")
	var done struct {
		State  string `json:"state"`
		Result []struct {
			Warnings []string `json:"warnings"`
		} `json:"result"`
	}
	p2API(t, b, "GET", "/tasks/"+task.ID, nil, &done)
	if done.State != "succeeded" || len(done.Result) != 1 {
		t.Fatalf("the backup ended %s: %+v", done.State, done)
	}
	if len(done.Result[0].Warnings) == 0 {
		t.Fatalf("the first backup of %s has no warning in the API (changed block tracking was on?)", name)
	}
	first := done.Result[0].Warnings[0]
	b.WaitText(row+" .inventory-warnings", first)

	b.Go("#/tasks")
	b.WaitVisible("#tasks-list table")
	trow := fmt.Sprintf(`(() => { const a = document.querySelector('#tasks-list a[href="#/tasks/%s"]'); return a ? a.closest("tr").innerText : ""; })()`, task.ID)
	if got := browsertest.Eval[string](b, trow); !strings.Contains(got, "warning") {
		t.Errorf("the task list does not show the backup's warning: %q", got)
	}
	b.Go("#/tasks/" + task.ID)
	b.WaitText("#task-warnings", first)
	b.WaitText("#task-warnings", name+": ")
	res := b.Text("main")
	if strings.Contains(res, "Bytes read\n0 B\n") || strings.Contains(res, "\t0 B\t") {
		t.Errorf("a backup that read nothing shows a bare 0 B: %q", res)
	}

	// A job run's history: its points' warnings next to the VM outcome. A
	// job of its own over a second VM never backed up.
	second := ""
	for _, v := range vms {
		if v.InInventory && v.Points == 0 && v.InstanceUUID != "" && v.InstanceUUID != uuid {
			second = v.InstanceUUID
			break
		}
	}
	if second == "" {
		t.Fatalf("no second VM without a restore point for the job run (%+v)", vms)
	}
	id := p2Unique("warned")
	days := map[string][]string{}
	for _, d := range []string{"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"} {
		days[d] = []string{"00:00-24:00"}
	}
	job := map[string]any{
		"id": id, "name": "Warned " + id, "enabled": true, "repository": "demo",
		"selection": map[string]any{"vms": []string{second}},
		"window":    map[string]any{"location": "UTC", "days": days},
		"retention": map[string]any{"last": 3},
	}
	if st := p2API(t, b, "POST", "/jobs", job, nil); st != 201 && st != 200 {
		t.Fatalf("POST /jobs: %d", st)
	}
	// Its window is open: the scheduler may start it first (409 here).
	if st := p2API(t, b, "POST", "/jobs/"+id+"/run", nil, nil); st != 202 && st != 409 {
		t.Fatalf("POST /jobs/%s/run: %d", id, st)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var runs []h11Run
		p2API(t, b, "GET", "/jobs/"+id+"/runs?limit=1", nil, &runs)
		// The scheduler may have started a window run first: it stays
		// open (state running) after its VM is done, until its slot closes.
		if len(runs) == 1 && len(runs[0].VMs) == 1 && runs[0].VMs[0].State != "running" && runs[0].VMs[0].State != "pending" {
			if runs[0].VMs[0].State != "succeeded" || runs[0].State != "succeeded" && runs[0].State != "running" {
				t.Fatalf("the job run ended %s (its VM %s)", runs[0].State, runs[0].VMs[0].State)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job run did not end in 2 minutes: %+v", runs)
		}
		time.Sleep(300 * time.Millisecond)
	}
	b.Go("#/jobs/" + id)
	b.WaitVisible(".p2-history .p2-run")
	b.WaitText(".p2-history .p2-run-warnings", "changed block tracking")
	b.CheckConsole()
}
