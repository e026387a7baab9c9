package daemon

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vsphere"
)

// A snapshot left by a killed run on a VM whose window has closed would stay
// (and grow its delta) until that VM's next backup. The daemon removes it at
// start, records a warning event, and never touches the user's snapshots.
func TestServeSweepsStaleSnapshotsAtStart(t *testing.T) {
	ctx := context.Background()
	l, err := lab.Start(ctx, lab.Options{DiskCapacity: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)

	// "Ours" as an earlier run of this appliance made it: the daemon's
	// client has the default appliance id, and so does this one.
	vc, err := vsphere.Connect(ctx, vsphere.Config{URL: l.URL().String(), Username: l.Username(), Password: l.Password(), Thumbprint: l.Thumbprint()})
	if err != nil {
		t.Fatal(err)
	}
	vm0, err := vc.FindVM(ctx, "DC0_H0_VM0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vc.CreateSnapshot(ctx, vm0.VMRef, vsphere.SnapshotOptions{Name: "killed-run"}); err != nil {
		t.Fatal(err)
	}
	_ = vc.Close(ctx)
	moref, err := l.MoRef("DC0_H0_VM1")
	if err != nil {
		t.Fatal(err)
	}
	uvm := object.NewVirtualMachine(l.Admin().Client, types.ManagedObjectReference{Type: "VirtualMachine", Value: moref})
	task, err := uvm.CreateSnapshot(ctx, "user-before-upgrade", "", false, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := task.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	for vm, want := range map[string]int{"DC0_H0_VM0": 1, "DC0_H0_VM1": 1} {
		if s, _ := l.Snapshots(vm); len(s) != want {
			t.Fatalf("%s before start: %v", vm, s)
		}
	}
	// Snapshot times have one-second resolution in the marker: the daemon's
	// clock starts two seconds on, so its start is after the snapshot's
	// time without the test waiting for the wall clock.
	clk := clock.NewFake(time.Now().Add(2 * time.Second))

	dir := t.TempDir()
	sd, _ := startLabDaemon(t, l, dir, "admin-secret-2", "", Options{Clock: clk})
	deadline := time.Now().Add(20 * time.Second)
	for {
		s, err := l.Snapshots("DC0_H0_VM0")
		if err == nil && len(s) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stale snapshot still there: %v %v\n%s", s, err, sd.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if s, err := l.Snapshots("DC0_H0_VM1"); err != nil || len(s) != 1 {
		t.Fatalf("user snapshot touched: %v %v", s, err)
	}

	api, _ := cookieLogin(t, sd.addr, "admin-secret-2")
	for {
		code, body := api.call("GET", "/api/v1/events", nil, nil)
		if code == 200 && strings.Contains(string(body), "snapshot.stale-removed") && strings.Contains(string(body), "DC0_H0_VM0") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no stale-removed event: %d %s", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	sd.stop(t, ShutdownGrace+10*time.Second)
}
