package console

// Follow-ups of the console: the job wizard's tag picker and quiesce
// requirement, the restore wizard's per-NIC network mapping, and the
// scheduler's running backups on the dashboard and the jobs page through
// the shell's one stream.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/vmvault/vmvault/internal/browsertest"
)

type h8VM struct {
	InstanceUUID string   `json:"instanceUuid"`
	Name         string   `json:"name"`
	InInventory  bool     `json:"inInventory"`
	Tags         []string `json:"tags"`
}

func h8VMs(t *testing.T, b *browsertest.Browser) map[string]h8VM {
	t.Helper()
	var vms []h8VM
	if st := p2API(t, b, "GET", "/vms", nil, &vms); st != 200 {
		t.Fatalf("GET /vms: %d", st)
	}
	out := map[string]h8VM{}
	for _, v := range vms {
		if v.InInventory {
			out[v.Name] = v
		}
	}
	return out
}

// h8WaitTask waits for an API task to succeed and returns its result.
func h8WaitTask(t *testing.T, b *browsertest.Browser, id, what string) any {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var tk struct {
			State  string `json:"state"`
			Error  string `json:"error"`
			Result any    `json:"result"`
		}
		if st := p2API(t, b, "GET", "/tasks/"+id, nil, &tk); st != 200 {
			t.Fatalf("GET /tasks/%s: %d", id, st)
		}
		switch tk.State {
		case "succeeded":
			return tk.Result
		case "failed", "cancelled":
			t.Fatalf("%s: task %s %s: %s", what, id, tk.State, tk.Error)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: task %s still %s", what, id, tk.State)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// h8Backup backs a VM up through POST /backups and returns its newest point.
func h8Backup(t *testing.T, b *browsertest.Browser, uuid string) string {
	t.Helper()
	var tk struct {
		ID string `json:"id"`
	}
	if st := p2API(t, b, "POST", "/backups", map[string]any{"vms": []string{uuid}}, &tk); st != 202 {
		t.Fatalf("POST /backups %s: %d", uuid, st)
	}
	h8WaitTask(t, b, tk.ID, "backup of "+uuid)
	var pts []struct {
		ID string `json:"id"`
	}
	if st := p2API(t, b, "GET", "/restore-points?vm="+uuid, nil, &pts); st != 200 || len(pts) == 0 {
		t.Fatalf("restore points of %s after its backup: %d, %d points", uuid, st, len(pts))
	}
	return pts[0].ID // newest first
}

// h8Window is a window three days ahead: no scheduled window opens while
// the suite runs, whatever the day.
func h8Window() map[string]any {
	day := strings.ToLower(time.Now().UTC().Add(72 * time.Hour).Weekday().String())
	return map[string]any{"location": "UTC", "days": map[string]any{day: []string{"10:00-11:00"}}}
}

// TestTagPickerAndQuiesceRequired selects VMs by the demo's tag in the job
// wizard: the picker names it "Environment / production", the wizard's
// "Selected now" shows exactly the two tagged VMs, the saved job stores the
// tag's id, and the jobs list names the tag. The quiesce step's
// requirement is off with quiescing off, and saved when ticked.
func TestTagPickerAndQuiesceRequired(t *testing.T) {
	b := signedIn(t)
	var tags []struct{ ID, Name, Category string }
	if st := p2API(t, b, "GET", "/tags", nil, &tags); st != 200 {
		t.Fatalf("GET /tags: %d", st)
	}
	prod := ""
	for _, tg := range tags {
		if tg.Category == "Environment" && tg.Name == "production" {
			prod = tg.ID
		}
	}
	if prod == "" {
		t.Fatalf("GET /tags has no Environment/production: %+v", tags)
	}
	var tagged []string
	for name, v := range h8VMs(t, b) {
		if slices.Contains(v.Tags, prod) {
			tagged = append(tagged, name)
		}
	}
	slices.Sort(tagged)
	if !slices.Equal(tagged, []string{"db-01", "web-01"}) {
		t.Fatalf("VMs carrying Environment/production: %v, want db-01 and web-01", tagged)
	}

	b.Go("#/job-wizard")
	b.WaitVisible("#job-name")
	name := p2Unique("By tag")
	b.Fill("#job-name", name)
	id := p2Value(b, "#job-id")
	b.Click("#job-enabled") // disabled: its default window must not open during the suite
	b.Click("#wizard-next")

	row := `#tag-picker li[data-tag-label="Environment / production"]`
	b.WaitVisible(row)
	b.WaitText(row, "2 VMs now")
	b.Click(row + ` input[data-tag-include]`)
	b.WaitText("#selection-match", "Selected now: 2 VMs (db-01, web-01).")
	// Excluding the tag instead unticks the inclusion and selects nothing.
	b.Click(row + ` input[data-tag-exclude]`)
	b.WaitText("#selection-match", "Selected now: 0 VMs.")
	if browsertest.Eval[bool](b, fmt.Sprintf(`document.querySelector(%q).checked`, row+` input[data-tag-include]`)) {
		t.Error("excluding a tag left it included")
	}
	b.Click(row + ` input[data-tag-include]`)
	b.WaitText("#selection-match", "Selected now: 2 VMs (db-01, web-01).")
	b.Click("#wizard-next")

	b.WaitVisible(`input[name=repository]:checked`)
	b.Click("#wizard-next")
	b.WaitVisible("#window-grid")
	b.Click("#wizard-next")

	// Quiescing: "require" is meaningless with quiescing off.
	b.WaitVisible("#q-required")
	b.Click(`label[for="q-none"]`)
	b.WaitJS(`document.getElementById("q-required").disabled && !document.getElementById("q-required").checked`, "require disabled with quiescing off")
	b.Click(`label[for="q-filesystem"]`)
	b.WaitJS(`!document.getElementById("q-required").disabled`, "require enabled with file-system quiescing")
	b.WaitText("#q-required-hint", "its snapshot is removed")
	b.Click(`label[for="q-required"]`)
	b.Click("#wizard-next")

	b.WaitText("#preview-summary", "Would keep")
	b.Click("#wizard-next")
	b.WaitText("#job-summary", "tag Environment / production")
	b.WaitText("#job-summary", "required: a VM that cannot be quiesced fails")
	p2NoJunk(t, b, "wizard summary")
	b.Click("#wizard-save")
	b.WaitJS(fmt.Sprintf(`location.hash === %q`, "#/jobs/"+id), "the new job's page")
	b.WaitText(".p2-dl", "tag Environment / production")
	b.WaitText(".p2-dl", "required")

	var job struct {
		Enabled   bool `json:"enabled"`
		Selection struct {
			VMs     []string `json:"vms"`
			Tags    []string `json:"tags"`
			Exclude struct {
				Tags []string `json:"tags"`
			} `json:"exclude"`
		} `json:"selection"`
		Quiesce         string `json:"quiesce"`
		QuiesceRequired bool   `json:"quiesceRequired"`
	}
	if st := p2API(t, b, "GET", "/jobs/"+id, nil, &job); st != 200 {
		t.Fatalf("GET /jobs/%s: %d", id, st)
	}
	if !slices.Equal(job.Selection.Tags, []string{prod}) || len(job.Selection.VMs) != 0 || len(job.Selection.Exclude.Tags) != 0 {
		t.Errorf("selection = %+v, want the tag id %s only", job.Selection, prod)
	}
	if job.Quiesce != "filesystem" || !job.QuiesceRequired || job.Enabled {
		t.Errorf("quiesce %q required %v enabled %v, want filesystem, required, disabled", job.Quiesce, job.QuiesceRequired, job.Enabled)
	}
	b.Go("#/jobs")
	jrow := fmt.Sprintf(`#jobs-table tr[data-job=%q]`, id)
	b.WaitText(jrow, "tag Environment / production")
	b.WaitText(jrow, "2 now")

	// Reopened, the wizard shows the saved choices.
	b.Go("#/job-wizard/" + id)
	b.WaitVisible("#job-name")
	b.Click("#wizard-next")
	b.WaitVisible(row)
	if !browsertest.Eval[bool](b, fmt.Sprintf(`document.querySelector(%q).checked`, row+` input[data-tag-include]`)) {
		t.Error("the reopened wizard does not show the tag included")
	}
	b.CheckConsole()
	if st := p2API(t, b, "DELETE", "/jobs/"+id, nil, nil); st != 204 && st != 200 {
		t.Errorf("DELETE /jobs/%s: %d", id, st)
	}
}

// TestRestoreNetworkMapping restores a VM with a NIC through the wizard,
// mapping its network to another one: the target step lists the point's
// saved NICs and disks, defaults the NIC to its own network, the summary
// names the mapping, and the new VM's NIC is on the chosen network (read
// back through the API: the new VM is backed up and its point's saved
// configuration names the network).
func TestRestoreNetworkMapping(t *testing.T) {
	b := signedIn(t)
	// The demo's sample VMs have no NIC; the lab's model VMs have one.
	src, ok := h8VMs(t, b)["DC0_H0_VM1"]
	if !ok {
		t.Fatal("the demo has no VM DC0_H0_VM1")
	}
	point := h8Backup(t, b, src.InstanceUUID)
	var rp struct {
		Config *struct {
			NICs []struct {
				Label   string `json:"label"`
				Network string `json:"network"`
			} `json:"nics"`
			Disks []struct {
				Label string `json:"label"`
			} `json:"disks"`
		} `json:"config"`
	}
	if st := p2API(t, b, "GET", "/restore-points/"+point, nil, &rp); st != 200 || rp.Config == nil || len(rp.Config.NICs) != 1 || len(rp.Config.Disks) == 0 {
		t.Fatalf("GET /restore-points/%s: %d, config %+v; want one NIC and its disks", point, st, rp.Config)
	}

	// Opened on the point, the wizard starts at the kind of restore.
	b.Go("#/restore?point=" + point)
	b.WaitVisible("#mode-new")
	b.Click(`label[for="mode-new"]`)
	b.Click("#restore-mode .p2-next")

	name := p2Unique("h8-netmap")
	b.WaitVisible("#restore-name")
	b.Fill("#restore-name", name)
	b.WaitVisible("#restore-networks")
	b.WaitText("#restore-saved-disks", rp.Config.Disks[0].Label)
	sel := `#restore-networks select[data-source]`
	b.WaitText("#restore-networks", rp.Config.NICs[0].Label)
	if got := p2Attr(b, sel, "data-source"); got != rp.Config.NICs[0].Network {
		t.Fatalf("the mapping row is for %q, want the NIC's network %q", got, rp.Config.NICs[0].Network)
	}
	// The NIC's own network is chosen by default; map it to another one.
	same := p2Attr(b, sel, "data-same")
	if same == "" || p2Value(b, sel) != same {
		t.Fatalf("default target %q, want the NIC's own network %q", p2Value(b, sel), same)
	}
	options := browsertest.Eval[[]string](b, fmt.Sprintf(`[...document.querySelector(%q).options].map(o => o.value)`, sel))
	target := ""
	for _, o := range options {
		if o != "" && o != same && !strings.Contains(o, "Uplinks") {
			target = o
			break
		}
	}
	if target == "" {
		t.Fatalf("no other network to map %s to: %v", same, options)
	}
	b.Select(sel, target)
	b.Click("#restore-target .p2-next")
	b.WaitText("#restore-choices", fmt.Sprintf("%s → %s", same, target))
	p2NoJunk(t, b, "restore summary")
	b.Click("#restore-start")
	b.WaitVisible("#restore-progress")
	p2WaitJS(b, 3*time.Minute, p2Progress("#restore-progress"), "the restore's progress at 100%, succeeded")
	b.WaitText("#restored-vm-name", name)
	b.CheckConsole()

	var restored h8VM
	deadline := time.Now().Add(30 * time.Second)
	for {
		if v, ok := h8VMs(t, b)[name]; ok {
			restored = v
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the restored VM %q is not in the inventory", name)
		}
		time.Sleep(time.Second) // the inventory is cached for a few seconds
	}
	back := h8Backup(t, b, restored.InstanceUUID)
	if st := p2API(t, b, "GET", "/restore-points/"+back, nil, &rp); st != 200 || rp.Config == nil || len(rp.Config.NICs) != 1 {
		t.Fatalf("the restored VM's point: %d %+v", st, rp.Config)
	}
	if got := rp.Config.NICs[0].Network; got != target && !strings.HasPrefix(got, "dvportgroup-") {
		t.Fatalf("the restored VM's NIC is on %q, want %q", got, target)
	}
	// A distributed port group is recorded by its id: name it through the targets.
	if got := rp.Config.NICs[0].Network; got != target {
		var tg struct {
			Datacenters []struct {
				Networks []struct{ ID, Name string } `json:"networks"`
			} `json:"datacenters"`
		}
		p2API(t, b, "GET", "/restore-targets", nil, &tg)
		named := ""
		for _, d := range tg.Datacenters {
			for _, n := range d.Networks {
				if n.ID == got {
					named = n.Name
				}
			}
		}
		if named != target {
			t.Fatalf("the restored VM's NIC is on %s (%q), want %q", got, named, target)
		}
	}
}

// h8WatchEventSources makes every page load of b record the EventSources
// it opens (window.h8es), before the console's own scripts run.
func h8WatchEventSources(t *testing.T, b *browsertest.Browser) {
	t.Helper()
	const src = `(() => {
		const Orig = window.EventSource;
		window.h8es = [];
		window.EventSource = function (...a) { const es = new Orig(...a); window.h8es.push(es); return es; };
		window.EventSource.prototype = Orig.prototype;
	})();`
	err := chromedp.Do(b.Ctx(), func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: src})
		return chromedp.Void{}, err
	})
	if err != nil {
		t.Fatalf("install the EventSource watcher: %v", err)
	}
}

// h8Scheduler dispatches a "scheduler" event with backups on the shell's
// stream, as the server sends it.
func h8Scheduler(t *testing.T, b *browsertest.Browser, backups string) {
	t.Helper()
	ok := browsertest.Eval[bool](b, fmt.Sprintf(`(() => {
		const es = window.h8es.filter(e => e.url.endsWith("/api/v1/stream") && e.readyState !== 2).pop();
		if (!es) return false;
		es.dispatchEvent(new MessageEvent("scheduler", {data: JSON.stringify({backups: %s, maintenance: []})}));
		return true;
	})()`, backups))
	if !ok {
		t.Fatal("the shell's stream is not open")
	}
}

// TestScheduledBackupsLive: the dashboard shows the scheduler's running
// backups from the shell's stream ("scheduler" events), one labelled bar
// per VM updated in place, gone when the scheduler is idle; and the job
// page follows a real run to 100% through the shell's stream without
// opening an EventSource of its own. (A lab backup of the demo's VMs
// finishes within the server's one-second activity poll, so the dashboard
// part replays the server's events on the shell's own stream.)
func TestScheduledBackupsLive(t *testing.T) {
	b := signedIn(t)
	h8WatchEventSources(t, b)
	b.Reload()
	pageTitle(t, b, "Dashboard")
	b.WaitJS(`window.h8es.length === 1 && window.h8es[0].readyState === 1`, "the shell's one stream open")
	b.WaitText("#dashboard-scheduled", "No scheduled backup is running.")

	run := func(vm, uuid string, done, total int64) string {
		return fmt.Sprintf(`{"job":"nightly","run":"nightly/1","vm":%q,"instanceUuid":%q,"started":"2026-11-29T20:00:00Z","phase":"reading","done":%d,"total":%d,"rate":1048576}`, vm, uuid, done, total)
	}
	h8Scheduler(t, b, "["+run("files-01", "u-files", 25, 100)+"]")
	rowSel := `#dashboard-scheduled .dashboard-sched[data-sched-vm="files-01"]`
	b.WaitVisible(rowSel)
	b.WaitText(rowSel, "files-01 · job nightly (reading)")
	b.WaitText(rowSel, "25%")
	if v := browsertest.Eval[float64](b, fmt.Sprintf(`document.querySelector(%q + " progress").value`, rowSel)); v != 25 {
		t.Errorf("bar at %v, want 25", v)
	}
	browsertest.Eval[bool](b, fmt.Sprintf(`(document.querySelector(%q).h8mark = true)`, rowSel))
	h8Scheduler(t, b, "["+run("files-01", "u-files", 75, 100)+","+run("db-01", "u-db", 0, 0)+"]")
	b.WaitText(rowSel, "75%")
	b.WaitVisible(`#dashboard-scheduled .dashboard-sched[data-sched-vm="db-01"]`)
	if !browsertest.Eval[bool](b, fmt.Sprintf(`document.querySelector(%q).h8mark === true`, rowSel)) {
		t.Error("the bar was replaced, not updated in place")
	}
	if probs := b.A11yProblems(); len(probs) > 0 {
		t.Errorf("accessibility with scheduled backups shown: %v", probs)
	}
	h8Scheduler(t, b, "[]")
	b.WaitGone(`#dashboard-scheduled .dashboard-sched`)
	b.WaitText("#dashboard-scheduled", "No scheduled backup is running.")

	// A real run from the job page, followed through the shell's stream.
	vms := h8VMs(t, b)
	var sel []string
	for _, n := range []string{"files-01", "db-01"} {
		v, ok := vms[n]
		if !ok {
			t.Fatalf("the demo has no VM %s", n)
		}
		sel = append(sel, v.InstanceUUID)
	}
	_, repo := p2DemoJobAndRepo(t, b)
	id := fmt.Sprintf("h8-live-%d", time.Now().UnixNano()%1_000_000)
	job := map[string]any{"id": id, "name": id, "enabled": true, "repository": repo, "quiesce": "none",
		"selection": map[string]any{"vms": sel}, "window": h8Window(), "retention": map[string]any{"last": 30}}
	if st := p2API(t, b, "POST", "/jobs", job, nil); st != 201 {
		t.Fatalf("POST /jobs: %d", st)
	}
	defer p2API(t, b, "DELETE", "/jobs/"+id, nil, nil)
	b.Go("#/jobs/" + id)
	b.WaitVisible(`.page-actions button[data-action=run]`)
	before := browsertest.Eval[int](b, `window.h8es.length`)
	b.Click(`.page-actions button[data-action=run]`)
	b.WaitVisible(".p2-run-progress")
	p2WaitJS(b, 3*time.Minute, p2Progress(".p2-run-progress"), "the run's progress at 100%, succeeded")
	if n := browsertest.Eval[int](b, `window.h8es.length`); n != before {
		t.Errorf("the job page opened %d EventSource(s) of its own; it must use the shell's stream", n-before)
	}
	b.CheckConsole()
}
