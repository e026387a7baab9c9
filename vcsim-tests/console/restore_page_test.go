package console

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/browsertest"
)

// TestRestoreNewVM restores web-01's newest point as a new VM with a
// new name through the restore wizard, watches the progress reach 100%,
// sees the new VM's name in the result and checks through the API that the
// VM exists in vCenter.
func TestRestoreNewVM(t *testing.T) {
	b := signedIn(t)
	b.Go("#/restore")
	b.WaitVisible(`input[name=vm][data-name="web-01"]`)
	// Next without a VM says what is missing.
	b.Click("#restore-vm .p2-next")
	b.WaitText("#restore-vm .field-error", "Choose a VM")
	b.Click(`input[name=vm][data-name="web-01"]`)
	b.Click("#restore-vm .p2-next")

	// The timeline: points grouped by day, newest first; take the newest.
	b.WaitVisible("#restore-point .p2-day")
	b.WaitText("#restore-point .p2-days", "Today")
	b.Click(`#restore-point input[name=point]`)
	b.Click("#restore-point .p2-next")

	b.WaitVisible("#mode-new")
	b.Click(`label[for="mode-new"]`)
	b.Click("#restore-mode .p2-next")

	// A name no other test searches for (they look for the sample VMs).
	name := p2Unique("p2-restored")
	b.WaitVisible("#restore-name")
	b.Fill("#restore-name", name)
	// The datastore list shows free space; the demo's datastore has plenty.
	b.WaitText("#restore-ds", "free of")
	b.Select("#restore-ds", "LocalDS_0")
	b.WaitText("#ds-space", "has enough free space")
	b.Click("#restore-target .p2-next")

	b.WaitText("#restore-choices", name)
	b.WaitText("#restore-choices", "LocalDS_0")
	p2NoJunk(t, b, "restore summary")
	b.Click("#restore-start")
	b.WaitVisible("#restore-progress")
	p2WaitJS(b, 3*time.Minute, p2Progress("#restore-progress"), "the restore's progress at 100%, succeeded")
	b.WaitText("#restored-vm-name", name)
	b.CheckConsole()

	var vms []struct {
		Name        string `json:"name"`
		InInventory bool   `json:"inInventory"`
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if st := p2API(t, b, "GET", "/vms", nil, &vms); st != 200 {
			t.Fatalf("GET /vms: %d", st)
		}
		found := false
		for _, v := range vms {
			found = found || (v.Name == name && v.InInventory)
		}
		if found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the restored VM %q is not in the inventory: %+v", name, vms)
		}
		time.Sleep(time.Second) // the inventory is cached for a few seconds
	}
}

// TestRestoreOverOriginalAsksTwice checks the strong confirmation of
// a restore over the original VM: the VM's name must be typed, and the
// final confirmation dialog (Cancel focused) starts nothing when cancelled.
func TestRestoreOverOriginalAsksTwice(t *testing.T) {
	b := signedIn(t)
	var vms []struct {
		InstanceUUID string `json:"instanceUuid"`
		Name         string `json:"name"`
	}
	if st := p2API(t, b, "GET", "/vms", nil, &vms); st != 200 {
		t.Fatalf("GET /vms: %d", st)
	}
	uuid := ""
	for _, v := range vms {
		if v.Name == "web-01" {
			uuid = v.InstanceUUID
		}
	}
	type taskInfo struct {
		Kind string `json:"kind"`
	}
	restores := func() int {
		var ts []taskInfo
		if st := p2API(t, b, "GET", "/tasks?limit=1000", nil, &ts); st != 200 {
			t.Fatalf("GET /tasks: %d", st)
		}
		n := 0
		for _, x := range ts {
			if x.Kind == "restore" {
				n++
			}
		}
		return n
	}
	before := restores()

	b.Go("#/restore?vm=" + uuid) // straight to web-01's timeline
	b.WaitVisible(`#restore-point input[name=point]`)
	b.Click(`#restore-point input[name=point]`)
	b.Click("#restore-point .p2-next")
	b.WaitVisible("#mode-original")
	b.Click(`label[for="mode-original"]`)
	b.Click("#restore-mode .p2-next")
	b.WaitVisible("#confirm-name")
	b.WaitText("#restore-target .p2-danger-box", "overwrites the disks")
	b.Click("#restore-target .p2-next")
	b.WaitText("#restore-target .field-error", "Type web-01 exactly")
	b.Fill("#confirm-name", "web-01")
	b.Click("#restore-target .p2-next")
	b.WaitText("#restore-start", "Overwrite the VM")
	p2NoJunk(t, b, "overwrite summary")
	b.Click("#restore-start")
	b.WaitVisible("#confirm[open]")
	if f := b.Focused(); f != "#confirm-cancel" {
		t.Errorf("focus in the overwrite confirmation = %s, want #confirm-cancel", f)
	}
	b.Click("#confirm-cancel")
	b.WaitGone("#confirm[open]")
	b.WaitVisible("#restore-choices")
	if after := restores(); after != before {
		t.Fatalf("restore tasks: %d before, %d after a cancelled overwrite", before, after)
	}
	b.CheckConsole()
}

// TestRestoreRehearsalAndDisk runs the two other kinds of restore
// from the wizard: a rehearsal (a disconnected copy under a generated name)
// and a single disk attached to another VM.
func TestRestoreRehearsalAndDisk(t *testing.T) {
	b := signedIn(t)
	for _, mode := range []string{"rehearsal", "disk"} {
		if mode == "disk" {
			b.Click("#restore-again") // the wizard starts over in place
		} else {
			b.Go("#/restore")
		}
		b.WaitVisible(`input[name=vm][data-name="db-01"]`)
		b.Click(`input[name=vm][data-name="db-01"]`)
		b.Click("#restore-vm .p2-next")
		b.WaitVisible(`#restore-point input[name=point]`)
		b.Click(`#restore-point input[name=point]`)
		b.Click("#restore-point .p2-next")
		b.Click(`label[for="mode-` + mode + `"]`)
		b.Click("#restore-mode .p2-next")
		if mode == "disk" {
			b.WaitVisible("#restore-target-vm")
			b.Click("#restore-target .p2-next") // no target VM yet
			b.WaitText("#restore-target .field-error", "Choose the VM")
			// One of vcsim's own VMs, not a sample VM other tests back up.
			target := browsertest.Eval[string](b, `([...document.querySelectorAll("#restore-target-vm option")].find(o => o.textContent.startsWith("DC0_")) || {value: ""}).value`)
			if target == "" {
				t.Fatal("no vcsim VM to attach the disk to")
			}
			b.Select("#restore-target-vm", target)
		} else {
			b.WaitVisible("#restore-name")
			b.Fill("#restore-name", "p2-rehearsal")
		}
		b.Click("#restore-target .p2-next")
		b.WaitVisible("#restore-choices")
		b.Click("#restore-start")
		b.WaitVisible("#restore-progress")
		p2WaitJS(b, 3*time.Minute, p2Progress("#restore-progress"), mode+" restore at 100%, succeeded")
		if mode == "rehearsal" {
			b.WaitText("#restored-vm-name", "p2-rehearsal-rehearsal-")
		} else {
			b.WaitText("#restore-result", "The disk was restored and attached")
		}
	}
	b.CheckConsole()
}

// TestOverwriteRestoreDoesNotPrePowerOff: powering a production VM off is
// the administrator's decision; the overwrite step used to arrive with
// "Power the VM off first" already ticked.
func TestOverwriteRestoreDoesNotPrePowerOff(t *testing.T) {
	b := signedIn(t)
	var vms []struct {
		InstanceUUID string `json:"instanceUuid"`
		Name         string `json:"name"`
	}
	if st := p2API(t, b, "GET", "/vms", nil, &vms); st != 200 {
		t.Fatalf("GET /vms: %d", st)
	}
	uuid := ""
	for _, v := range vms {
		if v.Name == "web-01" {
			uuid = v.InstanceUUID
		}
	}
	if uuid == "" {
		t.Fatalf("no web-01 in %+v", vms)
	}
	b.Go("#/restore?vm=" + uuid)
	b.WaitVisible(`#restore-point input[name=point]`)
	b.Click(`#restore-point input[name=point]`)
	b.Click("#restore-point .p2-next")
	b.WaitVisible("#mode-original")
	b.Click(`label[for="mode-original"]`)
	b.Click("#restore-mode .p2-next")
	b.WaitVisible("#power-off")
	if browsertest.Eval[bool](b, `document.getElementById("power-off").checked`) {
		t.Error(`"Power the VM off first" is ticked before the administrator chose it`)
	}
	summary := func(want string) {
		t.Helper()
		b.WaitJS(`(() => { const s = document.getElementById("restore-start"); return !!s && s.closest("form").innerText.includes(`+"`"+want+"`"+`); })()`,
			"the summary saying "+want)
	}
	b.Fill("#confirm-name", "web-01")
	b.Click("#restore-target .p2-next")
	summary("leave as is")
	// Ticked on purpose (Back from the summary), the summary says so.
	b.Click("#restore-start ~ .p2-back, .p2-wizard-nav:has(#restore-start) .p2-back")
	b.WaitVisible("#power-off")
	if browsertest.Eval[bool](b, `document.getElementById("power-off").checked`) {
		t.Error(`"Power the VM off first" is ticked after Back although it was left unticked`)
	}
	b.Click(`label[for="power-off"]`)
	b.Click("#restore-target .p2-next")
	summary("power off first")
	b.CheckConsole()
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
	src, ok := liveVMs(t, b)["DC0_H0_VM1"]
	if !ok {
		t.Fatal("the demo has no VM DC0_H0_VM1")
	}
	point := liveBackup(t, b, src.InstanceUUID)
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

	var restored liveVM
	deadline := time.Now().Add(30 * time.Second)
	for {
		if v, ok := liveVMs(t, b)[name]; ok {
			restored = v
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the restored VM %q is not in the inventory", name)
		}
		time.Sleep(time.Second) // the inventory is cached for a few seconds
	}
	back := liveBackup(t, b, restored.InstanceUUID)
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
