package console

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/internal/browsertest"
)

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

// TestModels checks the pages' pure modules, imported as the console
// serves them: the window grid against the API's window JSON (round trips,
// ranges across midnight, words, openings, the next opening in a time zone),
// retention presets, the selection model, the restore timeline and space
// check, and the usage chart.
func TestModels(t *testing.T) {
	b := signedIn(t)
	eval := func(expr string) string {
		t.Helper()
		return browsertest.Eval[string](b, fmt.Sprintf(`(async () => { const W = await import("/assets/pages/jobwizard-window.js");
			const R = await import("/assets/pages/jobwizard-retention.js"); const T = await import("/assets/pages/jobwizard-tree.js");
			const L = await import("/assets/pages/restore-timeline.js"); const C = await import("/assets/pages/repositories-chart.js");
			const v = (%s); return typeof v === "string" ? v : JSON.stringify(v); })()`, expr))
	}
	tests := []struct{ name, expr, want string }{
		{"round trip of the default window",
			`JSON.stringify(W.windowFromGrid(W.gridFromWindow({location: "Europe/Paris", days: {monday: ["00:00-06:00", "18:00-24:00"], saturday: ["00:00-24:00"]}}).grid, "Europe/Paris"))`,
			`{"location":"Europe/Paris","days":{"monday":["00:00-06:00","18:00-24:00"],"saturday":["00:00-24:00"]}}`},
		{"a range across midnight splits at the day",
			`W.windowFromGrid(W.gridFromWindow({days: {sunday: ["22:00-06:00"]}}).grid).days`,
			`{"monday":["00:00-06:00"],"sunday":["22:00-24:00"]}`},
		{"an end of 00:00 is midnight",
			`W.windowFromGrid(W.gridFromWindow({days: {friday: ["20:00-00:00"]}}).grid).days`,
			`{"friday":["20:00-24:00"]}`},
		{"minutes round outwards and say so",
			`W.gridFromWindow({days: {monday: ["22:30-23:15"]}}).approximate + " " + W.describeWindow({days: {monday: ["22:30-23:15"]}})`,
			`true Monday: 22:00–24:00 (rounded to whole hours)`},
		{"days with the same hours are grouped",
			`W.describeWindow({days: {monday: ["01:00-02:00"], tuesday: ["01:00-02:00"], wednesday: ["01:00-02:00"], saturday: ["00:00-24:00"]}})`,
			`Monday–Wednesday: 01:00–02:00; Saturday: all day`},
		{"openings join across midnight and the weekend",
			`W.describeOpenings(W.gridFromWindow({days: {friday: ["18:00-24:00"], saturday: ["00:00-24:00"], sunday: ["00:00-24:00"], monday: ["00:00-06:00"]}}).grid)`,
			`["Friday 18:00 until Monday 06:00 (60 h)"]`},
		{"a weekend opening starts a run each day, as the scheduler cuts it",
			`W.runStarts(W.gridFromWindow({days: {friday: ["18:00-24:00"], saturday: ["00:00-24:00"], sunday: ["00:00-24:00"], monday: ["00:00-06:00"]}}).grid, 0)`,
			`["Friday 18:00, Saturday 18:00, Sunday 18:00"]`},
		{"every 4 hours inside a night",
			`W.runStarts(W.gridFromWindow({days: {monday: ["22:00-24:00"], tuesday: ["00:00-06:00"]}}).grid, 4)`,
			`["Monday 22:00, Tuesday 02:00"]`},
		{"daily at 22:00 leaves 21:00-22:00 closed",
			`W.windowFromGrid(W.dailyAt(22)).days.monday`,
			`["00:00-21:00","22:00-24:00"]`},
		{"never and always",
			`W.describeGrid(W.emptyGrid()).concat(W.describeGrid(W.emptyGrid().map(r => r.map(() => true))))`,
			`["Never open: paint at least one hour.","Always open, around the clock."]`},
		{"next opening in the window's zone",
			`W.nextOpening({location: "America/New_York", days: {monday: ["22:00-06:00"]}}, new Date("2026-11-29T19:00:00Z")).next.toISOString()`,
			`2026-12-01T03:00:00.000Z`},
		{"open now, and when it closes",
			`(() => { const n = W.nextOpening({location: "UTC", days: {sunday: ["00:00-24:00"], monday: ["00:00-06:00"]}}, new Date("2026-11-29T19:00:00Z")); return n.openNow + " " + n.closes.toISOString(); })()`,
			`true 2026-11-30T06:00:00.000Z`},
		{"retention presets and words",
			`R.describeRetention(R.retentionFor("daily-weekly-monthly")) + " | " + R.retentionFor("few").preset + " | " + R.presetOf({last: 7, weekly: 4, monthly: 3})`,
			`7 daily, 4 weekly, 12 monthly | few | few`},
		{"retention that keeps nothing is refused",
			`R.validateRetention({preset: "", last: 0})`,
			`{"retention":"keeps nothing: set at least one count"}`},
		{"selection: a folder with a name exclusion",
			`(() => { const tr = T.buildTree([{id: "f", type: "folder", name: "vm", parent: ""}, {id: "v1", type: "vm", name: "web-01", parent: "f", instanceUuid: "u1"}, {id: "v2", type: "vm", name: "db-TEST", parent: "f", instanceUuid: "u2"}]);
				const s = T.emptySelection(); T.toggleInclude(s, tr.byId.get("f"), true); s.exclude.names.push("*-test");
				return T.matchedVMs(s, tr).map(n => n.name).join(",") + " " + JSON.stringify(T.compactSelection(s)); })()`,
			`web-01 {"containers":[{"kind":"folder","id":"f","name":"vm"}],"exclude":{"names":["*-test"]}}`},
		{"restore points group by local day, newest first",
			`L.groupByDay([{id: "a", time: new Date(2026, 10, 28, 9).toISOString()}, {id: "b", time: new Date(2026, 10, 29, 8).toISOString()}, {id: "c", time: new Date(2026, 10, 29, 20).toISOString()}], new Date(2026, 10, 29, 21)).map(g => g.label + ":" + g.points.map(p => p.id).join("")).join(" ")`,
			`Today:cb Yesterday:a`},
		{"days are the appliance's time zone's days",
			`L.groupByDay([{id: "a", time: "2026-11-29T23:10:00Z"}, {id: "b", time: "2026-11-29T10:00:00Z"}, {id: "c", time: "2026-11-27T10:00:00Z"}], new Date("2026-11-29T23:30:00Z"), "Europe/Paris").map(g => g.label + ":" + g.points.map(p => p.id).join("")).join(" | ")`,
			`Today:a | Yesterday:b | Friday, 27 November 2026:c`},
		{"consistency words",
			`[{consistency: "application"}, {consistency: "filesystem"}, {consistency: ""}, {partial: true}].map(p => L.consistency(p).label).join(", ")`,
			`application-consistent, file-system-consistent, crash-consistent, partial`},
		{"VMs deleted from vCenter are restore choices",
			`L.vmChoices([{instanceUuid: "u1", name: "web", inInventory: true}], [{vm: {instanceUuid: "u1", name: "web"}}, {vm: {instanceUuid: "u9", name: "gone"}}]).map(c => c.name + "/" + c.inInventory + "/" + c.points).join(" ")`,
			`gone/false/1 web/true/1`},
		{"datastore space: short blocks thick disks, warns for thin",
			`[L.datastoreFit({free: 10}, 64, false), L.datastoreFit({free: 10}, 64, true), L.datastoreFit({free: 100}, 64, false)].map(f => f.short + "/" + f.blocking).join(" ")`,
			`true/true true/false false/false`},
		{"chart axis rounds to binary units",
			`[C.niceMax(402653184) / 1048576, C.niceMax(3 * 1073741824) / 1073741824].join(" ")`,
			`400 4`},
		{"usage chart is an accessible SVG with both series",
			`(() => { const s = C.usageChart([{time: "2026-11-01T00:00:00Z", logicalBytes: 100, storedBytes: 40}, {time: "2026-11-02T00:00:00Z", logicalBytes: 200, storedBytes: 60}], {fmtBytes: String, fmtDate: String});
				return [s.getAttribute("role"), s.querySelector("title").textContent, s.querySelectorAll("polyline").length, s.querySelectorAll("circle").length].join(" "); })()`,
			`img Repository usage over time 2 4`},
	}
	for _, tc := range tests {
		if got := eval(tc.expr); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}

// TestPagesAccessibility runs the harness's accessibility audit (named
// controls, unique ids, one h1 and main) on every step of the job and
// restore wizards and on the pages the navigation does not list.
func TestPagesAccessibility(t *testing.T) {
	b := signedIn(t)
	audit := func(where string) {
		t.Helper()
		if p := b.A11yProblems(); len(p) > 0 {
			t.Errorf("%s:\n  %s", where, strings.Join(p, "\n  "))
		}
	}
	job, repo := p2DemoJobAndRepo(t, b)
	b.Go("#/jobs/" + job)
	b.WaitVisible(".p2-run, .p2-history .empty")
	audit("job page")
	b.Go("#/repositories/" + repo)
	b.WaitVisible(".usage-chart")
	audit("repository page")

	b.Go("#/job-wizard")
	b.WaitVisible("#job-name")
	b.Fill("#job-name", "a11y")
	for _, step := range []string{"basics", "vms", "repository", "schedule", "retention", "preview", "summary"} {
		b.WaitVisible(fmt.Sprintf(`.p2-step-panel[data-step=%s]:not([hidden])`, step))
		if step == "preview" {
			b.WaitText("#preview-summary", "Would keep")
		}
		audit("job wizard step " + step)
		if step == "vms" {
			b.Click(`.p2-tree li[data-name="web-01"] > .p2-tree-line > input[data-node]`)
		}
		if step != "summary" {
			b.Click("#wizard-next")
		}
	}

	b.Go("#/restore")
	b.WaitVisible(`input[name=vm][data-name="web-01"]`)
	audit("restore: VM")
	b.Click(`input[name=vm][data-name="web-01"]`)
	b.Click("#restore-vm .p2-next")
	b.WaitVisible(`#restore-point input[name=point]`)
	audit("restore: point")
	b.Click(`#restore-point input[name=point]`)
	b.Click("#restore-point .p2-next")
	b.WaitVisible("#mode-new")
	audit("restore: mode")
	b.Click("#restore-mode .p2-next")
	b.WaitVisible("#restore-ds")
	audit("restore: target")
	b.Click("#restore-target .p2-next")
	b.WaitVisible("#restore-choices")
	audit("restore: summary")
}
