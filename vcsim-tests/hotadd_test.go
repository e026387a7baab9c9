package vcsimtests

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vcsim-tests/lab/labtest"
	"github.com/vmvault/vmvault/vsphere"
)

// TestHotAddReadsFrozenDisk: the snapshot's frozen disk is attached to the
// appliance VM, read through the device the lab hands out (the snapshot-
// time content, not the guest's later writes) and detached on Close.
func TestHotAddReadsFrozenDisk(t *testing.T) {
	l := labtest.Start(t, lab.Options{})
	c := connect(t, l)
	ctx := context.Background()
	app, err := l.AddAppliance(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Found by BIOS UUID, as on a real appliance VM.
	uuidFile, err := l.BIOSUUIDFile(app, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	loc := l.HotAddLocator(app)
	h, err := c.HotAdder(ctx, vsphere.HotAddOptions{BIOSUUIDFile: uuidFile, Locator: loc})
	if err != nil {
		t.Fatal(err)
	}
	if h.Appliance().MoRef != app {
		t.Fatalf("appliance = %s, want %s", h.Appliance().MoRef, app)
	}
	vm := findVM(t, c, "DC0_C0_RP0_VM1")
	size := l.Options().DiskCapacity
	before := pattern(int(size), 3)
	if err := l.WriteDiskFrom(vm.Name, 0, bytes.NewReader(before)); err != nil {
		t.Fatal(err)
	}
	s, err := c.CreateSnapshot(ctx, vm.VMRef, vsphere.SnapshotOptions{Name: "h"})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.WriteDisk(vm.Name, 0, 8192, []byte("after the snapshot")); err != nil {
		t.Fatal(err)
	}
	src, err := h.Open(ctx, s, vm.Disks[0].Key)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := l.HotAdded(app); len(got) != 1 || got[0] != vm.Disks[0].FileName {
		t.Fatalf("attached to the appliance: %v, want [%s]", got, vm.Disks[0].FileName)
	}
	got := make([]byte, size)
	if n, err := src.ReadAt(got, 0); int64(n) != size || (err != nil && !errors.Is(err, io.EOF)) {
		t.Fatalf("ReadAt = %d, %v", n, err)
	}
	if !bytes.Equal(got, before) {
		t.Fatal("hot-added read differs from the snapshot-time content")
	}
	if loc.BytesRead() != size {
		t.Fatalf("lab counted %d bytes read, want %d", loc.BytesRead(), size)
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	if got, _ := l.HotAdded(app); len(got) != 0 {
		t.Fatalf("still attached after Close: %v", got)
	}
	if loc.OpenDevices() != 0 {
		t.Fatalf("%d devices left open", loc.OpenDevices())
	}
	// The frozen file survives the detach.
	if b, err := l.ReadBase(vm.Name, 0, 0, 16); err != nil || !bytes.Equal(b, before[:16]) {
		t.Fatalf("base after detach: %v %x", err, b)
	}
}

// TestHotAddSweepDetachesLeftovers: a disk left attached by a crashed run
// (its source never closed) is detached by the next HotAdder's sweep; the
// appliance's own disk stays.
func TestHotAddSweepDetachesLeftovers(t *testing.T) {
	l := labtest.Start(t, lab.Options{})
	c := connect(t, l)
	ctx := context.Background()
	app, err := l.AddAppliance(ctx)
	if err != nil {
		t.Fatal(err)
	}
	loc := l.HotAddLocator(app)
	h, err := c.HotAdder(ctx, vsphere.HotAddOptions{ApplianceVM: app, Locator: loc})
	if err != nil {
		t.Fatal(err)
	}
	vm := findVM(t, c, "DC0_C0_RP0_VM0")
	s, err := c.CreateSnapshot(ctx, vm.VMRef, vsphere.SnapshotOptions{Name: "crash"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Open(ctx, s, vm.Disks[0].Key); err != nil { // "crash": never closed
		t.Fatal(err)
	}
	own := findVM(t, c, app).Disks
	h2, err := c.HotAdder(ctx, vsphere.HotAddOptions{ApplianceVM: app, Locator: loc})
	if err != nil {
		t.Fatal(err)
	}
	swept, err := h2.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(swept) != 1 || swept[0].File != vm.Disks[0].FileName || swept[0].VM != vm.MoRef {
		t.Fatalf("swept %+v", swept)
	}
	if got, _ := l.HotAdded(app); len(got) != 0 {
		t.Fatalf("still attached after the sweep: %v", got)
	}
	if now := findVM(t, c, app).Disks; len(now) != len(own)-1 {
		t.Fatalf("appliance disks %d after the sweep, want %d (its own)", len(now), len(own)-1)
	}
	again, err := h2.Sweep(ctx)
	if err != nil || len(again) != 0 {
		t.Fatalf("second sweep: %v %v", again, err)
	}
}

// TestHotAddAttachFailureLeavesNothing: a reconfigure that fails leaves no
// disk attached and says so.
func TestHotAddAttachFailureLeavesNothing(t *testing.T) {
	l := labtest.Start(t, lab.Options{})
	c := connect(t, l)
	ctx := context.Background()
	app, err := l.AddAppliance(ctx)
	if err != nil {
		t.Fatal(err)
	}
	loc := l.HotAddLocator(app)
	h, err := c.HotAdder(ctx, vsphere.HotAddOptions{ApplianceVM: app, Locator: loc})
	if err != nil {
		t.Fatal(err)
	}
	vm := findVM(t, c, "DC0_C0_RP0_VM0")
	s, err := c.CreateSnapshot(ctx, vm.VMRef, vsphere.SnapshotOptions{Name: "f"})
	if err != nil {
		t.Fatal(err)
	}
	l.FailMethod("ReconfigVM_Task", &types.InvalidState{}, 1)
	if _, err := h.Open(ctx, s, vm.Disks[0].Key); err == nil {
		t.Fatal("Open succeeded with a failing reconfigure")
	}
	l.ClearMethodFaults()
	// The device never shows up: attached, then detached again.
	loc.Hidden.Store(true)
	h2, err := c.HotAdder(ctx, vsphere.HotAddOptions{ApplianceVM: app, Locator: loc, DeviceTimeout: 50e6, PollEvery: 5e6})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h2.Open(ctx, s, vm.Disks[0].Key); !errors.Is(err, vsphere.ErrDeviceNotFound) {
		t.Fatalf("Open with no device = %v, want ErrDeviceNotFound", err)
	}
	if got, _ := l.HotAdded(app); len(got) != 0 {
		t.Fatalf("left attached: %v", got)
	}
}

// TestHotAddSweepRecognisesUnmarkedAndSparesOthers: a leftover whose marker
// was lost is still recognised (an independent-nonpersistent disk outside
// the appliance's folder that is the frozen disk of a VM under this
// appliance's snapshot); a disk another appliance attached is not touched.
func TestHotAddSweepRecognisesUnmarkedAndSparesOthers(t *testing.T) {
	l := labtest.Start(t, lab.Options{})
	ctx := context.Background()
	app, err := l.AddAppliance(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ours := connect(t, l)
	other := connect(t, l, func(c *vsphere.Config) { c.ApplianceID = "other-appliance" })
	loc := l.HotAddLocator(app)
	attach := func(c *vsphere.Client, vmName string) string {
		t.Helper()
		h, err := c.HotAdder(ctx, vsphere.HotAddOptions{ApplianceVM: app, Locator: loc})
		if err != nil {
			t.Fatal(err)
		}
		vm := findVM(t, c, vmName)
		s, err := c.CreateSnapshot(ctx, vm.VMRef, vsphere.SnapshotOptions{Name: "left"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.Open(ctx, s, vm.Disks[0].Key); err != nil {
			t.Fatal(err)
		}
		return vm.Disks[0].FileName
	}
	mine := attach(ours, "DC0_C0_RP0_VM0")
	theirs := attach(other, "DC0_C0_RP0_VM1")
	// Lose our marker (an administrator cleaned the advanced settings).
	avm := object.NewVirtualMachine(l.Admin().Client, types.ManagedObjectReference{Type: "VirtualMachine", Value: app})
	var mvm mo.VirtualMachine
	if err := avm.Properties(ctx, avm.Reference(), []string{"config.extraConfig"}, &mvm); err != nil {
		t.Fatal(err)
	}
	var drop []types.BaseOptionValue
	for _, o := range mvm.Config.ExtraConfig {
		ov := o.GetOptionValue()
		if s, _ := ov.Value.(string); strings.HasPrefix(ov.Key, "vmvault.hotadd.") && strings.HasSuffix(s, mine) {
			drop = append(drop, &types.OptionValue{Key: ov.Key, Value: ""})
		}
	}
	if len(drop) != 1 {
		t.Fatalf("markers for %s: %d", mine, len(drop))
	}
	task, err := avm.Reconfigure(ctx, types.VirtualMachineConfigSpec{ExtraConfig: drop})
	if err == nil {
		err = task.Wait(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	h, err := ours.HotAdder(ctx, vsphere.HotAddOptions{ApplianceVM: app, Locator: loc})
	if err != nil {
		t.Fatal(err)
	}
	swept, err := h.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(swept) != 1 || swept[0].File != mine || !strings.Contains(swept[0].Why, "snapshot") {
		t.Fatalf("swept %+v, want only %s", swept, mine)
	}
	if got, _ := l.HotAdded(app); len(got) != 1 || got[0] != theirs {
		t.Fatalf("attached after our sweep: %v, want the other appliance's %s", got, theirs)
	}
}

// TestHotAddDetachFailureIsReportedAndSwept: a detach that fails is
// Close's error (the backup's warning), and the next sweep detaches.
func TestHotAddDetachFailureIsReportedAndSwept(t *testing.T) {
	l := labtest.Start(t, lab.Options{})
	c := connect(t, l)
	ctx := context.Background()
	app, err := l.AddAppliance(ctx)
	if err != nil {
		t.Fatal(err)
	}
	loc := l.HotAddLocator(app)
	h, err := c.HotAdder(ctx, vsphere.HotAddOptions{ApplianceVM: app, Locator: loc})
	if err != nil {
		t.Fatal(err)
	}
	vm := findVM(t, c, "DC0_C0_RP0_VM0")
	s, err := c.CreateSnapshot(ctx, vm.VMRef, vsphere.SnapshotOptions{Name: "d"})
	if err != nil {
		t.Fatal(err)
	}
	src, err := h.Open(ctx, s, vm.Disks[0].Key)
	if err != nil {
		t.Fatal(err)
	}
	l.FailMethod("ReconfigVM_Task", &types.InvalidState{}, 1)
	if err := src.Close(); err == nil || !strings.Contains(err.Error(), "sweep") {
		t.Fatalf("Close with a failing detach = %v, want an error naming the sweep", err)
	}
	l.ClearMethodFaults()
	if got, _ := l.HotAdded(app); len(got) != 1 {
		t.Fatalf("attached after the failed detach: %v", got)
	}
	if loc.OpenDevices() != 0 {
		t.Fatal("the device stayed open")
	}
	swept, err := h.Sweep(ctx)
	if err != nil || len(swept) != 1 {
		t.Fatalf("sweep: %v %v", swept, err)
	}
	if got, _ := l.HotAdded(app); len(got) != 0 {
		t.Fatalf("attached after the sweep: %v", got)
	}
}
