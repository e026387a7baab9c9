package vcsimtests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vcsim-tests/lab/labtest"
	"github.com/vmvault/vmvault/vsphere"
)

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i%251)
	}
	return b
}

func extents(es []vsphere.Extent) string {
	var b bytes.Buffer
	for _, e := range es {
		fmt.Fprintf(&b, "[%d+%d]", e.Offset>>10, e.Length>>10)
	}
	return b.String() // KiB, readable in failures
}

// TestChangedAreasAcrossSnapshots: "*" gives the allocated areas, a change
// id gives exactly the blocks written since, paging over 1 MiB pages of an
// 8 MiB disk is invisible to the caller.
func TestChangedAreasAcrossSnapshots(t *testing.T) {
	l := labtest.Start(t, lab.Options{})
	c := connect(t, l)
	ctx := context.Background()
	vm := findVM(t, c, "DC0_C0_RP0_VM0")
	key := vm.Disks[0].Key

	// Without CBT there is no change id.
	s0, err := c.CreateSnapshot(ctx, vm.VMRef, vsphere.SnapshotOptions{Name: "nocbt"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ChangedAreas(ctx, s0, key, vsphere.AllocatedAreas); !errors.Is(err, vsphere.ErrCBTDisabled) {
		t.Errorf("no CBT: %v, want ErrCBTDisabled", err)
	}
	if err := c.RemoveSnapshot(ctx, vm.VMRef, s0.MoRef); err != nil {
		t.Fatal(err)
	}
	if err := c.EnableCBT(ctx, vm.VMRef); err != nil {
		t.Fatal(err)
	}
	if v := findVM(t, c, vm.MoRef); !v.CBTEnabled {
		t.Fatal("CBT not enabled")
	}
	if names, _ := l.Snapshots(vm.Name); len(names) != 0 {
		t.Errorf("stun snapshot left behind: %v", names)
	}
	// Data in three places, one straddling the 1 MiB page boundary.
	writes := []struct {
		off int64
		n   int
	}{{0, 4096}, {1<<20 - 1000, 3000}, {5 << 20, 200 << 10}}
	for i, w := range writes {
		if err := l.WriteDisk(vm.Name, 0, w.off, pattern(w.n, byte(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	s1, err := c.CreateSnapshot(ctx, vm.VMRef, vsphere.SnapshotOptions{Name: "full"})
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := s1.Disk(key)
	if d1.ChangeID == "" {
		t.Fatal("snapshot disk has no change id")
	}
	calls := c.Stats().SOAPCalls
	all, err := c.ChangedAreas(ctx, s1, key, vsphere.AllocatedAreas)
	if err != nil {
		t.Fatal(err)
	}
	if pages := c.Stats().SOAPCalls - calls; pages != 8 {
		t.Errorf("QueryChangedDiskAreas calls = %d, want 8 pages of 1 MiB", pages)
	}
	// 64 KiB blocks: [0,64K) [960K,1088K) [5120K,5376K)
	if got, want := extents(all), "[0+64][960+128][5120+256]"; got != want {
		t.Errorf("allocated = %s, want %s", got, want)
	}
	if err := c.RemoveSnapshot(ctx, vm.VMRef, s1.MoRef); err != nil {
		t.Fatal(err)
	}

	// Incremental: one new write after the first backup.
	if err := l.WriteDisk(vm.Name, 0, 3<<20+10, []byte("changed")); err != nil {
		t.Fatal(err)
	}
	s2, err := c.CreateSnapshot(ctx, vm.VMRef, vsphere.SnapshotOptions{Name: "incr"})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := c.ChangedAreas(ctx, s2, key, d1.ChangeID)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := extents(ch), "[3072+64]"; got != want {
		t.Errorf("changed since full = %s, want %s", got, want)
	}
	// Writes during the snapshot are not part of it.
	if err := l.WriteDisk(vm.Name, 0, 7<<20, []byte("later")); err != nil {
		t.Fatal(err)
	}
	ch, err = c.ChangedAreas(ctx, s2, key, d1.ChangeID)
	if err != nil || extents(ch) != "[3072+64]" {
		t.Errorf("after a write during the snapshot: %s, %v", extents(ch), err)
	}
	d2, _ := s2.Disk(key)
	if err := c.RemoveSnapshot(ctx, vm.VMRef, s2.MoRef); err != nil {
		t.Fatal(err)
	}
	s3, err := c.CreateSnapshot(ctx, vm.VMRef, vsphere.SnapshotOptions{Name: "incr2"})
	if err != nil {
		t.Fatal(err)
	}
	ch, err = c.ChangedAreas(ctx, s3, key, d2.ChangeID)
	if err != nil || extents(ch) != "[7168+64]" {
		t.Errorf("second incremental: %s, %v", extents(ch), err)
	}
	// Nothing changed between the same ids.
	d3, _ := s3.Disk(key)
	ch, err = c.ChangedAreas(ctx, s3, key, d3.ChangeID)
	if err != nil || len(ch) != 0 {
		t.Errorf("no change: %s, %v", extents(ch), err)
	}
	// Older ids still work while the epoch holds.
	ch, err = c.ChangedAreas(ctx, s3, key, d1.ChangeID)
	if err != nil || extents(ch) != "[3072+64][7168+64]" {
		t.Errorf("since full: %s, %v", extents(ch), err)
	}
}

func TestChangedAreasResets(t *testing.T) {
	l := labtest.Start(t, lab.Options{})
	c := connect(t, l)
	ctx := context.Background()
	vm := findVM(t, c, "DC0_H0_VM0")
	key := vm.Disks[0].Key
	if err := c.EnableCBT(ctx, vm.VMRef); err != nil {
		t.Fatal(err)
	}
	snapID := func(name string) (*vsphere.Snapshot, string) {
		t.Helper()
		s, err := c.CreateSnapshot(ctx, vm.VMRef, vsphere.SnapshotOptions{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		d, _ := s.Disk(key)
		return s, d.ChangeID
	}
	s1, id1 := snapID("a")
	// Revert: the next snapshot has a new epoch; the old id is refused
	// before any call (epoch mismatch).
	ovm := l.Admin()
	task, err := methods.RevertToCurrentSnapshot_Task(ctx, ovm.Client, &types.RevertToCurrentSnapshot_Task{This: types.ManagedObjectReference{Type: "VirtualMachine", Value: vm.MoRef}})
	if err != nil {
		t.Fatal(err)
	}
	if err := object.NewTask(ovm.Client, task.Returnval).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveSnapshot(ctx, vm.VMRef, s1.MoRef); err != nil {
		t.Fatal(err)
	}
	s2, id2 := snapID("b")
	if _, err := c.ChangedAreas(ctx, s2, key, id1); !errors.Is(err, vsphere.ErrCBTReset) {
		t.Errorf("after revert: %v, want ErrCBTReset", err)
	}
	// The server refuses a stale id too: resize while s2 exists, then ask
	// s2 (same epoch as id2 on the client side) — the lab's ctk says no.
	if err := l.ResizeDisk(vm.Name, 0, 16<<20); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ChangedAreas(ctx, s2, key, id2); !errors.Is(err, vsphere.ErrCBTReset) {
		t.Errorf("after resize: %v, want ErrCBTReset", err)
	}
	if err := c.RemoveSnapshot(ctx, vm.VMRef, s2.MoRef); err != nil {
		t.Fatal(err)
	}
	s3, _ := snapID("c")
	if d, _ := s3.Disk(key); d.CapacityBytes != 16<<20 {
		t.Errorf("capacity after resize = %d", d.CapacityBytes)
	}
	if _, err := c.ChangedAreas(ctx, s3, key, id2); !errors.Is(err, vsphere.ErrCBTReset) {
		t.Errorf("old id after resize: %v, want ErrCBTReset", err)
	}
	// A full read ("*") always works after a reset.
	if _, err := c.ChangedAreas(ctx, s3, key, vsphere.AllocatedAreas); err != nil {
		t.Errorf("full after reset: %v", err)
	}
	// A change id from the future is refused.
	d3, _ := s3.Disk(key)
	if _, err := c.ChangedAreas(ctx, s3, key, d3.ChangeID[:len(d3.ChangeID)-1]+"99"); !errors.Is(err, vsphere.ErrCBTReset) {
		t.Errorf("future id: %v, want ErrCBTReset", err)
	}
}
