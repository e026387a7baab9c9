package vcsimtests

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vcsim-tests/lab/labtest"
	"github.com/vmvault/vmvault/vsphere"
)

func TestSnapshotQuiesceOutcomes(t *testing.T) {
	l := labtest.Start(t, lab.Options{})
	c := connect(t, l)
	ctx := context.Background()
	vm := findVM(t, c, "DC0_H0_VM0")

	s, err := c.CreateSnapshot(ctx, vm.VMRef, vsphere.SnapshotOptions{Name: "ok", Quiesce: true})
	if err != nil {
		t.Fatalf("quiesced snapshot with Tools running: %v", err)
	}
	if !s.Quiesced || s.Name != "vmvault-ok" || len(s.Disks) != 1 || s.VM.MoRef != vm.MoRef || s.Parent != "" {
		t.Errorf("snapshot = %+v", s)
	}
	if !strings.HasPrefix(s.Description, "vmvault:test-appliance:") {
		t.Errorf("description marker = %q", s.Description)
	}
	if err := c.RemoveSnapshot(ctx, vm.VMRef, s.MoRef); err != nil {
		t.Fatal(err)
	}

	if err := l.FailNextQuiesce(vm.Name, 1); err != nil {
		t.Fatal(err)
	}
	_, err = c.CreateSnapshot(ctx, vm.VMRef, vsphere.SnapshotOptions{Name: "q", Quiesce: true})
	if !errors.Is(err, vsphere.ErrQuiesceFailed) {
		t.Errorf("quiesce fault: %v, want ErrQuiesceFailed", err)
	}

	// Windows guests get the VSS spec; the lab accepts it like a plain one.
	if err := l.SetGuestFamily(vm.Name, "windowsGuest"); err != nil {
		t.Fatal(err)
	}
	s, err = c.CreateSnapshot(ctx, vm.VMRef, vsphere.SnapshotOptions{Name: "vss", Quiesce: true, Writers: true, VSSBackupType: vsphere.VSSFull})
	if err != nil {
		t.Fatalf("windows quiesced snapshot: %v", err)
	}
	reqs, err := l.SnapshotRequests(vm.Name)
	if err != nil || len(reqs) == 0 {
		t.Fatalf("snapshot requests: %v %v", reqs, err)
	}
	if got := specString(reqs[len(reqs)-1].Quiesce); got != specAppFull || s.Quiesce.VSSContext != vsphere.VSSContextBackup || !s.Quiesce.Windows {
		t.Errorf("windows spec sent %s (reported %+v), want %s", got, s.Quiesce, specAppFull)
	}
	if err := c.RemoveSnapshot(ctx, vm.VMRef, s.MoRef); err != nil {
		t.Fatal(err)
	}

	if err := l.SetToolsRunning(vm.Name, false); err != nil {
		t.Fatal(err)
	}
	_, err = c.CreateSnapshot(ctx, vm.VMRef, vsphere.SnapshotOptions{Name: "t", Quiesce: true})
	if !errors.Is(err, vsphere.ErrToolsUnavailable) {
		t.Errorf("tools not running: %v, want ErrToolsUnavailable", err)
	}
	// The caller's fallback: crash-consistent works without Tools.
	s, err = c.CreateSnapshot(ctx, vm.VMRef, vsphere.SnapshotOptions{Name: "crash"})
	if err != nil || s.Quiesced {
		t.Fatalf("crash-consistent snapshot: %v %+v", err, s)
	}
	if err := c.RemoveSnapshot(ctx, vm.VMRef, s.MoRef); err != nil {
		t.Fatal(err)
	}

	if err := l.FailNextSnapshot(vm.Name, &types.FileFault{File: "x"}); err != nil {
		t.Fatal(err)
	}
	_, err = c.CreateSnapshot(ctx, vm.VMRef, vsphere.SnapshotOptions{Name: "f"})
	if !errors.Is(err, vsphere.ErrSnapshotFailed) {
		t.Errorf("snapshot task failure: %v, want ErrSnapshotFailed", err)
	}
	names, _ := l.Snapshots(vm.Name)
	if len(names) != 0 {
		t.Errorf("failed snapshots left %v behind", names)
	}
	if err := c.RemoveSnapshot(ctx, vm.VMRef, "snapshot-404"); !errors.Is(err, vsphere.ErrNotFound) {
		t.Errorf("remove missing snapshot: %v, want ErrNotFound", err)
	}
}

// TestStaleSnapshotSweep: only this appliance's snapshots (prefix AND
// marker) older than the cut-off are removed; user snapshots survive.
func TestStaleSnapshotSweep(t *testing.T) {
	l := labtest.Start(t, lab.Options{})
	c := connect(t, l)
	ctx := context.Background()
	vm := findVM(t, c, "DC0_C0_RP0_VM1")
	ovm := object.NewVirtualMachine(l.Admin().Client, types.ManagedObjectReference{Type: "VirtualMachine", Value: vm.MoRef})
	user := func(name, desc string) {
		t.Helper()
		task, err := ovm.CreateSnapshot(ctx, name, desc, false, false)
		if err != nil {
			t.Fatal(err)
		}
		if err := task.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	user("before-upgrade", "user snapshot")
	if _, err := c.CreateSnapshot(ctx, vm.VMRef, vsphere.SnapshotOptions{Name: "job1-run1"}); err != nil {
		t.Fatal(err)
	}
	user("vmvault-lookalike", "made by a person")
	user("vmvault-other", "vmvault:another-appliance:1700000000")
	if _, err := c.CreateSnapshot(ctx, vm.VMRef, vsphere.SnapshotOptions{Name: "job1-run2"}); err != nil {
		t.Fatal(err)
	}
	user("vmvault-bad-marker", "vmvault:test-appliance:notanumber")

	list, err := c.Snapshots(ctx, vm.VMRef)
	if err != nil {
		t.Fatal(err)
	}
	ours := 0
	for _, s := range list {
		if s.Ours {
			ours++
		}
	}
	if len(list) != 6 || ours != 2 {
		t.Fatalf("snapshots = %d (ours %d), want 6 (2)", len(list), ours)
	}
	// Nothing is older than a cut-off in the past.
	removed, err := c.RemoveStaleSnapshots(ctx, vm.VMRef, time.Now().Add(-time.Hour))
	if err != nil || len(removed) != 0 {
		t.Fatalf("sweep with old cut-off removed %v (%v)", removed, err)
	}
	removed, err = c.RemoveStaleSnapshots(ctx, vm.VMRef, time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 2 {
		t.Errorf("removed %d snapshots, want 2: %+v", len(removed), removed)
	}
	left, _ := l.Snapshots(vm.Name)
	sort.Strings(left)
	want := []string{"before-upgrade", "vmvault-bad-marker", "vmvault-lookalike", "vmvault-other"}
	if strings.Join(left, ",") != strings.Join(want, ",") {
		t.Errorf("left %v, want %v", left, want)
	}
}

func TestRemoveSnapshotConsolidates(t *testing.T) {
	l := labtest.Start(t, lab.Options{})
	c := connect(t, l)
	ctx := context.Background()
	vm := findVM(t, c, "DC0_H0_VM1")
	needed := func() bool {
		t.Helper()
		var v mo.VirtualMachine
		if err := l.Admin().RetrieveOne(ctx, types.ManagedObjectReference{Type: "VirtualMachine", Value: vm.MoRef}, []string{"runtime.consolidationNeeded"}, &v); err != nil {
			t.Fatal(err)
		}
		return v.Runtime.ConsolidationNeeded
	}
	s, err := c.CreateSnapshot(ctx, vm.VMRef, vsphere.SnapshotOptions{Name: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.SetConsolidationNeeded(vm.Name, true); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveSnapshot(ctx, vm.VMRef, s.MoRef); err != nil {
		t.Fatal(err)
	}
	if needed() {
		t.Error("consolidation still needed after RemoveSnapshot")
	}
	s, err = c.CreateSnapshot(ctx, vm.VMRef, vsphere.SnapshotOptions{Name: "c2"})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.SetConsolidationNeeded(vm.Name, true); err != nil {
		t.Fatal(err)
	}
	l.FailMethod("ConsolidateVMDisks_Task", &types.FileLocked{}, 1)
	if err := c.RemoveSnapshot(ctx, vm.VMRef, s.MoRef); !errors.Is(err, vsphere.ErrConsolidation) {
		t.Errorf("failed consolidation: %v, want ErrConsolidation", err)
	}
	if names, _ := l.Snapshots(vm.Name); len(names) != 0 {
		t.Errorf("snapshot not removed: %v", names)
	}
}
