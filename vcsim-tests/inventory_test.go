package vcsimtests

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vcsim-tests/lab/labtest"
	"github.com/vmvault/vmvault/vsphere"
)

func TestInventoryDefaultModel(t *testing.T) {
	l := labtest.Start(t, lab.Options{})
	c := connect(t, l)
	inv, err := c.Inventory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Datacenters) != 1 || inv.Datacenters[0].Path != "/DC0" {
		t.Errorf("datacenters = %+v", inv.Datacenters)
	}
	if len(inv.Clusters) != 1 || len(inv.Clusters[0].Hosts) != 3 {
		t.Errorf("clusters = %+v", inv.Clusters)
	}
	if len(inv.Hosts) != 4 || len(inv.Datastores) != 1 || inv.Datastores[0].CapacityBytes == 0 {
		t.Errorf("hosts = %d, datastores = %+v", len(inv.Hosts), inv.Datastores)
	}
	if len(inv.Networks) == 0 {
		t.Error("no networks")
	}
	for _, n := range inv.Networks {
		if n.Name == "" || strings.HasSuffix(n.Path, "/") {
			t.Errorf("network without a name or path: %+v", n)
		}
	}
	if len(inv.VMs) != 4 {
		t.Fatalf("VMs = %d, want 4", len(inv.VMs))
	}
	for _, vm := range inv.VMs {
		if vm.MoRef == "" || vm.InstanceUUID == "" || vm.Datacenter != "DC0" || !strings.HasPrefix(vm.Path, "/DC0/vm/") {
			t.Errorf("VM identity incomplete: %+v", vm.VMRef)
		}
		if vm.PowerState != "poweredOn" || !vm.ToolsRunning || vm.Host == "" || vm.ResourcePool == "" {
			t.Errorf("VM %s runtime: power=%s tools=%v host=%q pool=%q", vm.Name, vm.PowerState, vm.ToolsRunning, vm.Host, vm.ResourcePool)
		}
		if len(vm.Disks) != 1 {
			t.Fatalf("VM %s disks = %+v", vm.Name, vm.Disks)
		}
		d := vm.Disks[0]
		if d.CapacityBytes != l.Options().DiskCapacity || d.ControllerType != "scsi" || d.Datastore != "LocalDS_0" || d.Mode != "persistent" || d.Unsupported != "" {
			t.Errorf("VM %s disk = %+v", vm.Name, d)
		}
		if len(vm.NICs) != 1 || vm.NICs[0].Network == "" || vm.NICs[0].MAC == "" {
			t.Errorf("VM %s NICs = %+v", vm.Name, vm.NICs)
		}
	}
	byName := map[string]vsphere.VM{}
	for _, vm := range inv.VMs {
		byName[vm.Name] = vm
	}
	if vm := byName["DC0_C0_RP0_VM0"]; vm.Cluster != "DC0_C0" || vm.ResourcePool != "/DC0/host/DC0_C0/Resources" {
		t.Errorf("cluster VM placement: cluster=%q pool=%q", vm.Cluster, vm.ResourcePool)
	}
	// FindVM by name, path and id agree with the inventory.
	want := byName["DC0_H0_VM1"]
	for _, id := range []string{"DC0_H0_VM1", want.Path, want.MoRef} {
		got, err := c.FindVM(context.Background(), id)
		if err != nil {
			t.Fatalf("FindVM(%s): %v", id, err)
		}
		if got.MoRef != want.MoRef || got.Path != want.Path || got.Datacenter != "DC0" {
			t.Errorf("FindVM(%s) = %s %s, want %s %s", id, got.MoRef, got.Path, want.MoRef, want.Path)
		}
	}
	if _, err := c.FindVM(context.Background(), "no-such-vm"); !errors.Is(err, vsphere.ErrNotFound) {
		t.Errorf("FindVM(missing) = %v, want ErrNotFound", err)
	}
}

// TestInventoryThousandVMsFewRoundTrips proves the inventory is batched:
// 1,000 VMs cost the same handful of SOAP calls as 4.
//
// vcsim creates VMs slowly (tens of ms each, far slower under -race), so
// the race build uses 250 VMs: the point — the call count does not grow
// with the VM count — holds the same.
func TestInventoryThousandVMsFewRoundTrips(t *testing.T) {
	total := 1000
	if raceEnabled || testing.Short() {
		total = 250
	}
	l := labtest.Start(t, lab.Options{ExtraVMs: total - 4, DiskCapacity: 1 << 20})
	c := connect(t, l)
	before := c.Stats().SOAPCalls
	start := time.Now()
	inv, err := c.Inventory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	calls := c.Stats().SOAPCalls - before
	t.Logf("inventory of %d VMs: %d SOAP round trips, %v", len(inv.VMs), calls, time.Since(start))
	if len(inv.VMs) != total {
		t.Fatalf("VMs = %d, want %d", len(inv.VMs), total)
	}
	if calls > 6 {
		t.Errorf("inventory took %d round trips, want a handful (<= 6)", calls)
	}
	before = c.Stats().SOAPCalls
	refs, err := c.VMsIn(context.Background(), "/DC0")
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != total {
		t.Errorf("VMs in cluster = %d", len(refs))
	}
	if calls := c.Stats().SOAPCalls - before; calls > 6 {
		t.Errorf("container resolution took %d round trips", calls)
	}
}

func TestSelectByContainerAndTag(t *testing.T) {
	l := labtest.Start(t, lab.Options{})
	c := connect(t, l)
	ctx := context.Background()
	names := func(refs []vsphere.VMRef) string {
		var s []string
		for _, r := range refs {
			s = append(s, r.Name)
		}
		return strings.Join(s, ",")
	}
	cases := []struct {
		containers []string
		want       string
	}{
		{[]string{"/DC0"}, "DC0_C0_RP0_VM0,DC0_C0_RP0_VM1,DC0_H0_VM0,DC0_H0_VM1"},
		{[]string{"/DC0/vm"}, "DC0_C0_RP0_VM0,DC0_C0_RP0_VM1,DC0_H0_VM0,DC0_H0_VM1"},
		{[]string{"/DC0/host/DC0_C0"}, "DC0_C0_RP0_VM0,DC0_C0_RP0_VM1"},
		{[]string{"/DC0/host/DC0_C0/Resources"}, "DC0_C0_RP0_VM0,DC0_C0_RP0_VM1"},
		{[]string{"/DC0/host/DC0_H0"}, "DC0_H0_VM0,DC0_H0_VM1"},
		{[]string{"/DC0/host/DC0_H0", "/DC0/host/DC0_C0/Resources"}, "DC0_C0_RP0_VM0,DC0_C0_RP0_VM1,DC0_H0_VM0,DC0_H0_VM1"},
	}
	for _, tc := range cases {
		refs, err := c.VMsIn(ctx, tc.containers...)
		if err != nil {
			t.Fatalf("VMsIn(%v): %v", tc.containers, err)
		}
		if got := names(refs); got != tc.want {
			t.Errorf("VMsIn(%v) = %s, want %s", tc.containers, got, tc.want)
		}
		for _, r := range refs {
			if r.MoRef == "" || r.InstanceUUID == "" {
				t.Errorf("incomplete ref %+v", r)
			}
		}
	}
	if _, err := c.VMsIn(ctx, "/DC0/host/nope"); !errors.Is(err, vsphere.ErrNotFound) {
		t.Errorf("missing container: %v, want ErrNotFound", err)
	}
	if err := l.TagVMs(ctx, "backup", "daily", "DC0_H0_VM1", "DC0_C0_RP0_VM0"); err != nil {
		t.Fatal(err)
	}
	if err := l.TagVMs(ctx, "other", "daily", "DC0_H0_VM0"); err != nil {
		t.Fatal(err)
	}
	refs, err := c.VMsWithTags(ctx, "backup/daily")
	if err != nil {
		t.Fatal(err)
	}
	if got := names(refs); got != "DC0_C0_RP0_VM0,DC0_H0_VM1" {
		t.Errorf("VMsWithTags(backup/daily) = %s", got)
	}
	refs, err = c.VMsWithTags(ctx, "daily")
	if err != nil {
		t.Fatal(err)
	}
	if got := names(refs); got != "DC0_C0_RP0_VM0,DC0_H0_VM0,DC0_H0_VM1" {
		t.Errorf("VMsWithTags(daily) = %s", got)
	}
	if _, err := c.VMsWithTags(ctx, "backup/weekly"); !errors.Is(err, vsphere.ErrNotFound) {
		t.Errorf("unknown tag: %v, want ErrNotFound", err)
	}
}
