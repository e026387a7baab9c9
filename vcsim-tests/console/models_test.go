package console

import (
	"fmt"
	"testing"

	"github.com/vmvault/vmvault/internal/browsertest"
)

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
