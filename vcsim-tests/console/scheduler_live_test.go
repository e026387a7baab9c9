package console

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/vmvault/vmvault/internal/browsertest"
)

// liveWatchEventSources makes every page load of b record the EventSources
// it opens (window.h8es), before the console's own scripts run.
func liveWatchEventSources(t *testing.T, b *browsertest.Browser) {
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

// liveScheduler dispatches a "scheduler" event with backups on the shell's
// stream, as the server sends it.
func liveScheduler(t *testing.T, b *browsertest.Browser, backups string) {
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
	liveWatchEventSources(t, b)
	b.Reload()
	pageTitle(t, b, "Dashboard")
	b.WaitJS(`window.h8es.length === 1 && window.h8es[0].readyState === 1`, "the shell's one stream open")
	b.WaitText("#dashboard-scheduled", "No scheduled backup is running.")

	run := func(vm, uuid string, done, total int64) string {
		return fmt.Sprintf(`{"job":"nightly","run":"nightly/1","vm":%q,"instanceUuid":%q,"started":"2026-11-29T20:00:00Z","phase":"reading","done":%d,"total":%d,"rate":1048576}`, vm, uuid, done, total)
	}
	liveScheduler(t, b, "["+run("files-01", "u-files", 25, 100)+"]")
	rowSel := `#dashboard-scheduled .dashboard-sched[data-sched-vm="files-01"]`
	b.WaitVisible(rowSel)
	b.WaitText(rowSel, "files-01 · job nightly (reading)")
	b.WaitText(rowSel, "25%")
	if v := browsertest.Eval[float64](b, fmt.Sprintf(`document.querySelector(%q + " progress").value`, rowSel)); v != 25 {
		t.Errorf("bar at %v, want 25", v)
	}
	browsertest.Eval[bool](b, fmt.Sprintf(`(document.querySelector(%q).h8mark = true)`, rowSel))
	liveScheduler(t, b, "["+run("files-01", "u-files", 75, 100)+","+run("db-01", "u-db", 0, 0)+"]")
	b.WaitText(rowSel, "75%")
	b.WaitVisible(`#dashboard-scheduled .dashboard-sched[data-sched-vm="db-01"]`)
	if !browsertest.Eval[bool](b, fmt.Sprintf(`document.querySelector(%q).h8mark === true`, rowSel)) {
		t.Error("the bar was replaced, not updated in place")
	}
	if probs := b.A11yProblems(); len(probs) > 0 {
		t.Errorf("accessibility with scheduled backups shown: %v", probs)
	}
	liveScheduler(t, b, "[]")
	b.WaitGone(`#dashboard-scheduled .dashboard-sched`)
	b.WaitText("#dashboard-scheduled", "No scheduled backup is running.")

	// A real run from the job page, followed through the shell's stream.
	vms := liveVMs(t, b)
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
		"selection": map[string]any{"vms": sel}, "window": liveWindow(), "retention": map[string]any{"last": 30}}
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
