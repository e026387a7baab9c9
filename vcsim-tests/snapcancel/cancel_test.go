package snapcancel

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/vmware/govmomi/simulator"

	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vcsim-tests/lab/labtest"
	"github.com/vmvault/vmvault/vsphere"
)

// A backup cancelled while vCenter is still creating its snapshot (a long
// quiesce, a busy host) stops waiting at once, but vCenter completes the task
// anyway. The client must wait for it on its own and remove the snapshot, or
// it stays on the VM with nobody left who knows about it.
func TestCancelledSnapshotCreationLeavesNoSnapshot(t *testing.T) {
	// Set before the lab starts, so every simulator goroutine sees it; the
	// package holds no other test.
	simulator.TaskDelay.MethodDelay = map[string]int{"CreateSnapshotEx": 700}
	ctx := context.Background()
	l := labtest.Start(t, lab.Options{DiskCapacity: 1 << 20})
	// The client's default retry policy, as a daemon would have.
	c := labtest.Connect(t, labtest.Config(l, "", func(c *vsphere.Config) { c.Retry = vsphere.RetryPolicy{} }))
	vm, err := c.FindVM(ctx, "DC0_H0_VM0")
	if err != nil {
		t.Fatal(err)
	}

	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err = c.CreateSnapshot(cctx, vm.VMRef, vsphere.SnapshotOptions{Name: "cancelled"})
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled creation: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		snaps, err := l.Snapshots("DC0_H0_VM0")
		if err != nil {
			t.Fatal(err)
		}
		if len(snaps) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("snapshot left after a cancelled creation: %v", snaps)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// And an uncancelled creation still works (the delay is only slow).
	s, err := c.CreateSnapshot(ctx, vm.VMRef, vsphere.SnapshotOptions{Name: "kept"})
	if err != nil {
		t.Fatal(err)
	}
	if snaps, _ := l.Snapshots("DC0_H0_VM0"); len(snaps) != 1 {
		t.Fatalf("snapshots after a normal creation: %v", snaps)
	}
	if err := c.RemoveSnapshot(ctx, vm.VMRef, s.MoRef); err != nil {
		t.Fatal(err)
	}
}
