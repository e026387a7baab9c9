package console

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp/kb"

	"github.com/vmvault/vmvault/internal/browsertest"
)

type vmStatus struct {
	InstanceUUID string `json:"instanceUuid"`
	Name         string `json:"name"`
	Protected    bool   `json:"protected"`
}

// vmByName finds a demo VM through the API, from the page's session.
func vmByName(t *testing.T, b *browsertest.Browser, name string) vmStatus {
	t.Helper()
	a := browsertest.Eval[apiAnswer[[]vmStatus]](b, apiJS("GET", "/vms", ""))
	for _, v := range a.Body {
		if v.Name == name {
			return v
		}
	}
	t.Fatalf("no VM %s in GET /vms (status %d, %d VMs)", name, a.Status, len(a.Body))
	return vmStatus{}
}

// TestDashboard: the numbers are populated from the demo, and a task started
// elsewhere appears with a progress bar that reaches 100% live.
func TestDashboard(t *testing.T) {
	b := signedIn(t)
	pageTitle(t, b, "Dashboard")
	b.WaitJS(`Number((document.querySelector('[data-card="Protected VMs"] .value') || {}).textContent) > 0`, "a protected VM count above 0")
	b.WaitText("#dashboard-repos td", "demo")
	b.WaitText("#dashboard-repos td", "×") // the ratios
	b.WaitText("#dashboard-window", "Demo VMs")
	b.WaitText("#dashboard-events td", "backed up")

	vm := vmByName(t, b, "db-01")
	type task struct {
		ID    string `json:"id"`
		State string `json:"state"`
	}
	a := browsertest.Eval[apiAnswer[task]](b, apiJS("POST", "/backups", fmt.Sprintf(`JSON.stringify({vms: [%q]})`, vm.InstanceUUID)))
	if a.Status != 202 || a.Body.ID == "" {
		t.Fatalf("POST /backups: status %d, task %+v", a.Status, a.Body)
	}
	// The page learns of the task only through the live stream.
	row := fmt.Sprintf(`[data-task-row=%q]`, a.Body.ID)
	b.WaitVisible(row + " progress")
	b.WaitJS(fmt.Sprintf(`(() => { const p = document.querySelector(%q); return p && p.dataset.state === "succeeded" && p.dataset.percent === "100"; })()`, row+" .progress"),
		"the task's progress bar at 100%, succeeded")
	if v := browsertest.Eval[int](b, fmt.Sprintf(`document.querySelector(%q).value`, row+" progress")); v != 100 {
		t.Errorf("progress value %d, want 100", v)
	}
	b.WaitText(row, "Details")
	// Live means the SSE stream: the polling fallback (which runs only while
	// the stream cannot open) never ran. The open stream itself is not in
	// the resource timings until it ends.
	for _, u := range browsertest.Eval[[]string](b, `performance.getEntriesByType("resource").map(e => e.name)`) {
		if strings.Contains(u, "/api/v1/tasks?limit=50") {
			t.Errorf("the console polled tasks (%s): the live stream did not open", u)
			break
		}
	}
}

// TestInventory: search narrows the tree to one VM, "Back up now" runs a
// task whose progress reaches 100%, the task page shows it with its log,
// and the protection filter works.
func TestInventory(t *testing.T) {
	b := signedIn(t)
	b.Go("#/inventory")
	pageTitle(t, b, "Inventory")
	b.WaitVisible(`li[data-vm="web-01"]`)
	total := b.Count("li[data-vm]")
	if total < 3 {
		t.Fatalf("inventory lists %d VMs, want the demo's (3 or more)", total)
	}
	b.Fill("#inventory-search", "files")
	b.WaitJS(`document.querySelectorAll("li[data-vm]").length === 1 && !!document.querySelector('li[data-vm="files-01"]')`, "only files-01 listed")
	b.WaitText("#inventory-count", fmt.Sprintf("1 of %d VMs", total))
	b.WaitText(`li[data-vm="files-01"]`, "protected")
	b.WaitText(`li[data-vm="files-01"]`, "last good")

	// Back up now asks which repository (its job's) and confirms; the
	// progress shows above the tree, not inside it.
	b.Click(`li[data-vm="files-01"] .backup-now`)
	b.WaitVisible("#backup-now[open] #backup-repo")
	if got := p2Value(b, "#backup-repo"); got != "demo" {
		t.Errorf("Back up now offers repository %q first, want its job's (demo)", got)
	}
	b.Click("#backup-ok")
	b.WaitGone("#backup-now")
	sel := `#inventory-runs li[data-vm="files-01"] .progress`
	b.WaitVisible(sel)
	b.WaitJS(fmt.Sprintf(`(() => { const p = document.querySelector(%q); return p && p.dataset.state === "succeeded" && p.dataset.percent === "100"; })()`, sel),
		"files-01's backup at 100%, succeeded")
	b.WaitText(".toast", "Backup of files-01 finished.")
	if n := b.Count("#inventory-tree .progress"); n != 0 {
		t.Errorf("%d progress bars inside the tree", n)
	}

	// The task page lists it; its detail page shows the final state and log.
	b.Click(`#inventory-runs li[data-vm="files-01"] a`)
	pageTitle(t, b, "Tasks")
	b.WaitText("#task-summary", "files-01")
	b.WaitText(".facts", "succeeded")
	b.WaitJS(`document.getElementById("task-log").textContent.trim().length > 0`, "log lines")
	b.Click(`.page-actions a`)
	b.WaitText("#tasks-list td", "files-01")

	b.Go("#/inventory")
	b.WaitVisible(`li[data-vm="web-01"]`)
	b.Select("#inventory-status", "unprotected")
	b.WaitJS(`!document.querySelector('li[data-vm="web-01"]') && document.querySelectorAll("li[data-vm]").length > 0`, "only unprotected VMs")
	for _, name := range browsertest.Eval[[]string](b, `[...document.querySelectorAll("li[data-vm]")].map(e => e.dataset.vm)`) {
		if name == "web-01" || name == "db-01" || name == "files-01" {
			t.Errorf("protected VM %s listed as not protected", name)
		}
	}
}

// TestTasksCancel: cancelling asks first (Escape keeps the task), then
// cancels; the list shows the state live.
func TestTasksCancel(t *testing.T) {
	b := signedIn(t)
	b.Go("#/tasks")
	pageTitle(t, b, "Tasks")
	vm := vmByName(t, b, "web-01")
	type task struct {
		ID string `json:"id"`
	}
	// Three VMs queue behind each other often enough to catch one running;
	// when all finish first, the cancel button is simply gone (checked below).
	a := browsertest.Eval[apiAnswer[task]](b, apiJS("POST", "/backups", fmt.Sprintf(`JSON.stringify({vms: [%q]})`, vm.InstanceUUID)))
	if a.Status != 202 {
		t.Fatalf("POST /backups: status %d", a.Status)
	}
	b.Go("#/tasks/" + a.Body.ID)
	b.WaitText("#task-summary", "web-01")
	// Checked and focused in one step: the backup may end, and the button
	// go, between two round trips to the browser.
	if browsertest.Eval[bool](b, `(c => c ? (c.focus(), true) : false)(document.getElementById("task-cancel"))`) {
		b.Keys(kb.Enter)
		// The backup may finish between the check above and the key press:
		// then the button is gone before it is pressed and no dialog opens.
		b.WaitJS(`document.getElementById("confirm").open || ["succeeded", "cancelled", "failed"].some(s => document.querySelector(".facts").textContent.includes(s))`, "the confirmation dialog or a final state")
		if browsertest.Eval[bool](b, `document.getElementById("confirm").open`) {
			if f := b.Focused(); f != "#confirm-cancel" {
				t.Errorf("dangerous confirmation: focus on %s, want the Cancel button", f)
			}
			b.Keys(kb.Escape)
			b.WaitJS(`!document.getElementById("confirm").open`, "the dialog closed")
		}
	}
	b.WaitJS(`["succeeded", "cancelled", "failed"].some(s => document.querySelector(".facts").textContent.includes(s))`, "a final state")
	if strings.Contains(b.Text(".facts"), "cancelled") {
		t.Errorf("Escape in the confirmation cancelled the task")
	}
	b.WaitText(".progress-info", "succeeded")
}

// TestEvents: the demo's events are listed; the severity filter, the VM
// filter and the range check work.
func TestEvents(t *testing.T) {
	b := signedIn(t)
	b.Go("#/events")
	pageTitle(t, b, "Events")
	b.WaitText("#events-list td", "backed up")

	b.Select("#events-severity", "error")
	b.Click(`#events-filter button[type=submit]`)
	b.WaitJS(`!document.querySelector("#events-list td") || [...document.querySelectorAll('#events-list td[data-label="Severity"]')].every(td => td.textContent === "error")`, "only errors")

	vm := vmByName(t, b, "web-01")
	b.Select("#events-severity", "")
	b.Select("#events-vm", vm.InstanceUUID)
	b.Click(`#events-filter button[type=submit]`)
	b.WaitJS(`document.querySelectorAll('#events-list td[data-label="VM"]').length > 0 && [...document.querySelectorAll('#events-list td[data-label="VM"]')].every(td => td.textContent === "web-01")`, "only web-01's events")

	b.Select("#events-range", "custom")
	b.SetValue("#events-from", "2026-05-02T10:00")
	b.SetValue("#events-to", "2026-05-01T10:00")
	b.Click(`#events-filter button[type=submit]`)
	b.WaitText("#events-filter .field-error", "The end must be after the start.")
}

// TestViewports opens every page of the jobs, restore, restore points,
// files, VM and repositories part at 1440x900 and at 400x800 (TestPagesAtSizes
// covers the shell's pages): each renders its data
// without a console error and without a horizontal scroll bar on the page
// (wide tables scroll inside their own box, the window grid fits).
func TestViewports(t *testing.T) {
	b := signedIn(t)
	job, repo := p2DemoJobAndRepo(t, b)
	pages := []struct{ route, ready string }{
		{"#/jobs", "#jobs-table"},
		{"#/jobs/" + job, ".p2-history .p2-run, .p2-history .empty"},
		{"#/job-wizard", "#job-name"},
		{"#/restore", "input[name=vm]"},
		{"#/instant-recoveries", "#instant-list table, #instant-list .empty"},
		{"#/restore-points", ".p2-vm-group"},
		{"#/repositories", "#repositories-table"},
		{"#/repositories/" + repo, ".usage-chart"},
		{"#/files", "#files-search"},
		{"#/vms/" + p2VMUUID(t, b, "web-01"), "#vm-summary"},
	}
	for _, size := range []struct{ w, h int64 }{{1440, 900}, {400, 800}} {
		b.Viewport(size.w, size.h)
		for _, p := range pages {
			b.Go(p.route)
			b.WaitVisible(p.ready)
			p2NoJunk(t, b, p.route)
			if over := browsertest.Eval[int](b, `document.documentElement.scrollWidth - document.documentElement.clientWidth`); over > 0 {
				widest := browsertest.Eval[string](b, `(() => { const cw = document.documentElement.clientWidth; const clipped = (e) => { for (let a = e.parentElement; a; a = a.parentElement) { const o = getComputedStyle(a).overflowX; if (o !== "visible") return true; } return false; }; const out = []; for (const e of document.querySelectorAll("body *")) { const r = e.getBoundingClientRect().right; if (r > cw + 1 && !clipped(e)) out.push(Math.round(r) + "px <" + e.tagName.toLowerCase() + " class=" + e.className + "> " + (e.outerHTML || "").slice(0, 160)); } return out.slice(0, 4).join(" | "); })()`)
				t.Errorf("%s at %dpx: the page scrolls sideways by %dpx; unclipped elements past the edge: %s", p.route, size.w, over, widest)
			}
			b.CheckConsole()
		}
		// The window grid's 24 hours fit the width.
		b.Go("#/job-wizard")
		b.Fill("#job-name", "viewport")
		b.Click("#wizard-next")
		b.Click(`.p2-tree li[data-name="web-01"] > .p2-tree-line > input[data-node]`)
		for range 2 {
			b.Click("#wizard-next")
		}
		b.WaitVisible("#window-grid")
		if over := browsertest.Eval[int](b, `(() => { const w = document.querySelector(".p2-grid-wrap"); return w.scrollWidth - w.clientWidth; })()`); over > 0 {
			t.Errorf("window grid at %dpx: scrolls sideways by %dpx", size.w, over)
		}
	}
}
