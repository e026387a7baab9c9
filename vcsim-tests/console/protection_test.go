package console

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/browsertest"
)

// TestProtectedMeansAJobCoversIt backs up, with the inventory's "Back up
// now", a VM that no job selects. The button asks which repository and
// says that an ad-hoc point does not protect the VM; the progress shows
// above the tree. Afterwards the VM reads "ad hoc only", not "protected",
// as on its own page, GET /vms says adHoc, and the dashboard's protected
// count is what it was.
func TestProtectedMeansAJobCoversIt(t *testing.T) {
	b := signedIn(t)
	var vms []struct {
		InstanceUUID string   `json:"instanceUuid"`
		Name         string   `json:"name"`
		InInventory  bool     `json:"inInventory"`
		Jobs         []string `json:"jobs"`
		Protected    bool     `json:"protected"`
		AdHoc        bool     `json:"adHoc"`
	}
	if st := p2API(t, b, "GET", "/vms", nil, &vms); st != 200 {
		t.Fatalf("GET /vms: %d", st)
	}
	name, uuid := "", ""
	for _, v := range vms {
		if v.InInventory && len(v.Jobs) == 0 && !strings.HasSuffix(v.Name, "-restored") {
			name, uuid = v.Name, v.InstanceUUID
			break
		}
	}
	if name == "" {
		t.Fatalf("no inventory VM outside every job: %+v", vms)
	}
	type dash struct {
		VMs struct {
			Protected, Unprotected int
		} `json:"vms"`
	}
	var before dash
	if st := p2API(t, b, "GET", "/dashboard", nil, &before); st != 200 {
		t.Fatalf("GET /dashboard: %d", st)
	}

	b.Viewport(1440, 900)
	b.Go("#/inventory")
	row := fmt.Sprintf(`li[data-vm=%q]`, name)
	b.WaitVisible(row + " .backup-now")
	b.Click(row + " .backup-now")
	b.WaitVisible("#backup-now[open] #backup-repo")
	b.WaitText("#backup-why", "No enabled job selects it")
	shot(t, b, "1440-back-up-now")
	// Cancel starts nothing.
	b.Click("#backup-cancel")
	b.WaitGone("#backup-now")
	if n := b.Count("#inventory-runs li"); n != 0 {
		t.Fatalf("Cancel started %d backups", n)
	}
	b.Click(row + " .backup-now")
	b.WaitVisible("#backup-now[open] #backup-repo")
	b.Click("#backup-ok")
	b.WaitGone("#backup-now")
	bar := fmt.Sprintf(`#inventory-runs li[data-vm=%q] .progress`, name)
	b.WaitVisible(bar)
	if n := b.Count("#inventory-tree .progress"); n != 0 {
		t.Errorf("%d progress bars drawn inside the tree", n)
	}
	p2WaitJS(b, 2*time.Minute, p2Progress(bar), name+"'s backup at 100%, succeeded")
	b.WaitVisible(row + ` [data-protection="ad-hoc"]`)
	shot(t, b, "1440-inventory-ad-hoc")
	if got := b.Text(row + " .inventory-node"); !strings.Contains(got, "ad hoc only") || strings.Contains(strings.ReplaceAll(got, "unprotected", ""), "protected") {
		t.Errorf("%s after its ad-hoc backup reads %q", name, got)
	}

	if st := p2API(t, b, "GET", "/vms", nil, &vms); st != 200 {
		t.Fatalf("GET /vms: %d", st)
	}
	for _, v := range vms {
		if v.InstanceUUID == uuid && (v.Protected || !v.AdHoc) {
			t.Errorf("GET /vms after the ad-hoc backup: %+v", v)
		}
	}
	var after dash
	if st := p2API(t, b, "GET", "/dashboard", nil, &after); st != 200 {
		t.Fatalf("GET /dashboard: %d", st)
	}
	if after.VMs.Protected != before.VMs.Protected {
		t.Errorf("dashboard: %d protected VMs after an ad-hoc backup, %d before", after.VMs.Protected, before.VMs.Protected)
	}
	b.Go("#/vms/" + uuid)
	b.WaitText("#vm-protection", "ad hoc only")
	b.Go("#/dashboard")
	b.WaitVisible(`[data-card="Protected VMs"] .value`)
	if got := browsertest.Eval[string](b, `document.querySelector('[data-card="Protected VMs"] .value').textContent`); got != fmt.Sprint(after.VMs.Protected) {
		t.Errorf("the dashboard card says %s protected VMs, the API %d", got, after.VMs.Protected)
	}
	b.CheckConsole()
}
