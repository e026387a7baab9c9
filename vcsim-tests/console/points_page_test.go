package console

import (
	"fmt"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"
)

// TestLockedPointRefusesDelete locks a restore point on the restore
// points page, sees its Delete refused with the reason, checks that the
// server refuses the deletion too and that the point is still there, then
// unlocks it.
func TestLockedPointRefusesDelete(t *testing.T) {
	b := signedIn(t)
	b.Go("#/restore-points")
	b.WaitVisible(`button[data-action=lock]`)
	id := p2Attr(b, `button[data-action=lock]`, "data-point")
	if id == "" {
		t.Fatal("no lockable restore point")
	}
	row := fmt.Sprintf(`tr[data-point=%q]`, id)
	b.Click(row + ` button[data-action=lock]`)
	b.WaitVisible(row + `[data-locked="true"]`)
	b.WaitText(row, "locked")
	b.WaitText("#points-status", "locked")

	// Delete on a locked point explains instead of asking.
	b.Click(row + ` button[data-action=delete]`)
	b.WaitText(fmt.Sprintf("#msg-%s", id), "cannot be deleted")
	if n := b.Count("#confirm[open]"); n != 0 {
		t.Fatal("the confirmation dialog opened for a locked point")
	}
	if got := p2Attr(b, row+` button[data-action=delete]`, "aria-disabled"); got != "true" {
		t.Errorf("Delete of a locked point: aria-disabled = %q, want true", got)
	}
	// The server refuses it as well, and the point stays.
	if st := p2API(t, b, "DELETE", "/restore-points/"+id, nil, nil); st != 409 {
		t.Errorf("DELETE a locked point: status %d, want 409", st)
	}
	var p struct {
		Locked bool `json:"locked"`
	}
	if st := p2API(t, b, "GET", "/restore-points/"+id, nil, &p); st != 200 || !p.Locked {
		t.Fatalf("the locked point after a refused delete: status %d, locked %v", st, p.Locked)
	}

	b.Click(row + ` button[data-action=unlock]`)
	b.WaitVisible(row + `[data-locked="false"]`)
	if st := p2API(t, b, "GET", "/restore-points/"+id, nil, &p); st != 200 || p.Locked {
		t.Fatalf("after unlock: status %d, locked %v", st, p.Locked)
	}
	b.CheckConsole()
}

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
