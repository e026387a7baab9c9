package console

import (
	"fmt"
	"strings"
	"testing"
)

// TestVMPage opens a VM from the inventory: its page shows where it lives,
// its power state, its jobs, every restore point the API lists for it and
// the runs that included it; an unknown VM says so instead of an empty page.
func TestVMPage(t *testing.T) {
	b := signedIn(t)
	var vms []struct {
		InstanceUUID string   `json:"instanceUuid"`
		Name         string   `json:"name"`
		InInventory  bool     `json:"inInventory"`
		Jobs         []string `json:"jobs"`
	}
	if st := p2API(t, b, "GET", "/vms", nil, &vms); st != 200 {
		t.Fatalf("GET /vms: %d", st)
	}
	uuid := ""
	for _, v := range vms {
		if v.Name == "web-01" && v.InInventory {
			uuid = v.InstanceUUID
		}
	}
	if uuid == "" {
		t.Fatalf("the demo has no VM web-01: %+v", vms)
	}
	// A backup now, so the VM has a point and its page something to list.
	var task struct {
		ID string `json:"id"`
	}
	if st := p2API(t, b, "POST", "/backups", map[string]any{"vms": []string{uuid}}, &task); st != 202 && st != 200 {
		t.Fatalf("POST /backups: %d", st)
	}
	p2WaitTask(t, b, task.ID)
	var points []struct {
		ID string `json:"id"`
	}
	if st := p2API(t, b, "GET", "/restore-points?vm="+uuid, nil, &points); st != 200 || len(points) == 0 {
		t.Fatalf("GET /restore-points?vm=: %d, %d points", st, len(points))
	}

	b.Go("#/inventory")
	row := `#inventory-tree li[data-vm="web-01"]`
	b.WaitVisible(row + " .power")
	if got := b.Text(row + " .power"); got != "on" && got != "off" && got != "suspended" {
		t.Errorf("inventory power state = %q", got)
	}
	b.Click(fmt.Sprintf(`%s a[href="#/vms/%s"]`, row, uuid))
	b.WaitText("#page-title", "VM: web-01")
	b.WaitText("#vm-summary", uuid)
	b.WaitText("#vm-summary", "In vCenter")
	want := min(len(points), 100)
	b.WaitJS(fmt.Sprintf(`document.querySelectorAll("#vm-points tbody tr").length === %d`, want), fmt.Sprintf("%d restore point rows", want))
	if first := b.Text("#vm-points tbody tr:first-child"); !strings.Contains(first, points[0].ID[:12]) {
		t.Errorf("first point row %q, want the newest point %s", first, points[0].ID[:12])
	}
	b.WaitVisible("#vm-runs")
	p2NoJunk(t, b, "VM page")
	b.CheckConsole()

	b.Go("#/vms/no-such-vm")
	b.WaitText("#vm-missing", "no-such-vm")
}
