package console

import (
	"fmt"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/browsertest"
)

type demoPoint struct {
	ID   string    `json:"id"`
	Time time.Time `json:"time"`
	VM   struct {
		Name         string `json:"name"`
		InstanceUUID string `json:"instanceUuid"`
	} `json:"vm"`
	Partial      bool  `json:"partial"`
	LogicalBytes int64 `json:"logicalBytes"`
}

// rowsAll is the expression "the points table shows exactly n rows, all of
// VM key".
func rowsAll(key string, n int) string {
	return fmt.Sprintf(`(() => { const s = [...document.querySelectorAll("#points-body section.p2-vm-group")];
		const rows = document.querySelectorAll("#points-body tr[data-point]");
		return s.length === 1 && s[0].dataset.vm === %q && rows.length === %d; })()`, key, n)
}

// TestPointsFilterByVM filters the restore points page by VM (its list
// held only "All VMs": the options were appended as one array), by a
// point id prefix and by date; each row shows the point's short id and the
// VM's protected size is its newest point's, not the sum of its points.
// Then Inventory's "Restore points" button opens the page filtered to that
// VM (it listed every VM's points).
func TestPointsFilterByVM(t *testing.T) {
	b := signedIn(t)
	var pts []demoPoint
	if st := p2API(t, b, "GET", "/restore-points", nil, &pts); st != 200 || len(pts) < 2 {
		t.Fatalf("demo restore points: status %d, %d points", st, len(pts))
	}
	byVM := map[string][]demoPoint{}
	for _, p := range pts {
		byVM[p.VM.InstanceUUID] = append(byVM[p.VM.InstanceUUID], p)
	}
	var keys []string
	for k := range byVM {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return len(byVM[keys[i]]) > len(byVM[keys[j]]) })
	key := keys[0]
	mine := byVM[key]

	b.Go("#/restore-points")
	b.WaitVisible("#points-body tr[data-point]")
	if n := b.Count("#points-vm option"); n != len(byVM)+1 {
		t.Fatalf("the VM filter has %d options, want All VMs and %d VMs", n, len(byVM))
	}
	b.Select("#points-vm", key)
	b.WaitJS(rowsAll(key, len(mine)), fmt.Sprintf("only the %d points of %s", len(mine), mine[0].VM.Name))

	// Protected: the newest complete point's size.
	var newest demoPoint
	for _, p := range mine {
		if !p.Partial && p.Time.After(newest.Time) {
			newest = p
		}
	}
	hint := b.Text("#points-body section.p2-vm-group p.hint")
	if want := fmt.Sprintf("%d restore point", len(mine)); !strings.Contains(hint, want) || !strings.Contains(hint, "protected by the newest") {
		t.Errorf("group hint %q: want %q and the newest point's size", hint, want)
	}
	if len(mine) > 1 {
		var sum int64
		for _, p := range mine {
			sum += p.LogicalBytes
		}
		if sum != newest.LogicalBytes && strings.Contains(hint, "in total") {
			t.Errorf("group hint %q sums the points' sizes", hint)
		}
	}

	// The short id is on the row; the id prefix search finds the one point.
	target := mine[len(mine)-1]
	row := fmt.Sprintf(`tr[data-point=%q]`, target.ID)
	b.WaitText(row+` code.point-id`, target.ID[:12])
	b.Fill("#points-q", target.ID[:10])
	b.WaitJS(rowsAll(key, 1)+` && !!document.querySelector(`+fmt.Sprintf("%q", row)+`)`, "the point found by its id prefix")
	b.Fill("#points-q", "")
	b.WaitJS(rowsAll(key, len(mine)), "all points of the VM again")

	// A date range past every point empties the list; one around the
	// points shows them again.
	b.SetValue("#points-from", "2999-01-01")
	b.WaitText("#points-body", "No restore point matches the filter.")
	b.SetValue("#points-from", "")
	b.WaitJS(rowsAll(key, len(mine)), "all points of the VM after clearing the date")

	// Inventory's button opens the page filtered to its VM.
	b.Go("#/inventory")
	link := fmt.Sprintf(`a.button[href="#/restore-points?vm=%s"]`, url.QueryEscape(key))
	b.WaitVisible(link)
	b.Click(link)
	b.WaitJS(rowsAll(key, len(mine)), "the inventory's restore points of "+mine[0].VM.Name)
	if v := p2Value(b, "#points-vm"); v != key {
		t.Errorf("VM filter after the inventory button: %q, want %q", v, key)
	}
	b.CheckConsole()
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
