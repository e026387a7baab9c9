package vcsimtests

import (
	"bytes"
	"context"
	"net/http"
	"testing"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vcsim-tests/lab/labtest"
)

// These tests drive the lab with plain govmomi calls, to pin its semantics
// independently of the vsphere package.

func labVM(t *testing.T, l *lab.Lab, name string) *object.VirtualMachine {
	t.Helper()
	ref, err := l.MoRef(name)
	if err != nil {
		t.Fatal(err)
	}
	return object.NewVirtualMachine(l.Admin().Client, types.ManagedObjectReference{Type: "VirtualMachine", Value: ref})
}

func snapshot(t *testing.T, vm *object.VirtualMachine, name string, quiesce bool) (types.ManagedObjectReference, error) {
	t.Helper()
	task, err := vm.CreateSnapshot(context.Background(), name, "", false, quiesce)
	if err != nil {
		return types.ManagedObjectReference{}, err
	}
	info, err := task.WaitForResult(context.Background())
	if err != nil {
		return types.ManagedObjectReference{}, err
	}
	return info.Result.(types.ManagedObjectReference), nil
}

func TestLabOverlayRevertAndRemoveAll(t *testing.T) {
	l := labtest.Start(t, lab.Options{})
	ctx := context.Background()
	vm := labVM(t, l, "DC0_H0_VM1")
	if err := l.WriteDisk("DC0_H0_VM1", 0, 0, []byte("AAAA")); err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot(t, vm, "s1", false); err != nil {
		t.Fatal(err)
	}
	if err := l.WriteDisk("DC0_H0_VM1", 0, 0, []byte("BB")); err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot(t, vm, "s2", false); err != nil {
		t.Fatal(err)
	}
	if err := l.WriteDisk("DC0_H0_VM1", 0, 1, []byte("C")); err != nil {
		t.Fatal(err)
	}
	check := func(what string, live, base string) {
		t.Helper()
		lv, _ := l.ReadDisk("DC0_H0_VM1", 0, 0, 4)
		bv, _ := l.ReadBase("DC0_H0_VM1", 0, 0, 4)
		if string(lv) != live || string(bv) != base {
			t.Errorf("%s: live %q base %q, want %q %q", what, lv, bv, live, base)
		}
	}
	check("two snapshots", "BCAA", "AAAA")
	// Reverting to the current snapshot (s2) discards only the writes made
	// since it: the disk is as s2 froze it (the lab used to drop the whole
	// chain and go back to s1's state).
	task, err := vm.RevertToCurrentSnapshot(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := task.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	check("after revert", "BBAA", "AAAA")
	if err := l.WriteDisk("DC0_H0_VM1", 0, 3, []byte("D")); err != nil {
		t.Fatal(err)
	}
	task, err = vm.RemoveAllSnapshot(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := task.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	check("after remove all", "BBAD", "BBAD")
	if names, _ := l.Snapshots("DC0_H0_VM1"); len(names) != 0 {
		t.Errorf("snapshots left: %v", names)
	}
}

func TestLabQueryChangedDiskAreasProtocol(t *testing.T) {
	l := labtest.Start(t, lab.Options{CBTPageSize: 3 << 20}) // 8 MiB disk: pages of 3, 3, 2 MiB
	ctx := context.Background()
	c := l.Admin().Client
	vm := labVM(t, l, "DC0_C0_RP0_VM0")
	info, _ := l.Disk("DC0_C0_RP0_VM0", 0)
	q := func(snap *types.ManagedObjectReference, off int64, id string) (types.DiskChangeInfo, error) {
		res, err := methods.QueryChangedDiskAreas(ctx, c, &types.QueryChangedDiskAreas{This: vm.Reference(), Snapshot: snap, DeviceKey: info.Key, StartOffset: off, ChangeId: id})
		if err != nil {
			return types.DiskChangeInfo{}, err
		}
		return res.Returnval, nil
	}
	if _, err := q(nil, 0, "*"); !fault.Is(err, &types.NotSupported{}) {
		t.Errorf("QCDA without CBT: %v", err)
	}
	task, err := vm.Reconfigure(ctx, types.VirtualMachineConfigSpec{ChangeTrackingEnabled: types.NewBool(true)})
	if err != nil {
		t.Fatal(err)
	}
	if err := task.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.WriteDisk("DC0_C0_RP0_VM0", 0, 7<<20, bytes.Repeat([]byte{1}, 10)); err != nil {
		t.Fatal(err)
	}
	snap, err := snapshot(t, vm, "q", false)
	if err != nil {
		t.Fatal(err)
	}
	var s mo.VirtualMachineSnapshot
	if err := vm.Properties(ctx, snap, []string{"config.hardware.device"}, &s); err != nil {
		t.Fatal(err)
	}
	disks := object.VirtualDeviceList(s.Config.Hardware.Device).SelectByType((*types.VirtualDisk)(nil))
	if len(disks) != 1 || disks[0].(*types.VirtualDisk).Backing.(*types.VirtualDiskFlatVer2BackingInfo).ChangeId == "" {
		t.Fatal("the snapshot's disk carries no change id")
	}
	var pages []types.DiskChangeInfo
	for off := int64(0); off < info.Capacity; {
		p, err := q(&snap, off, "*")
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, p)
		off = p.StartOffset + p.Length
	}
	if len(pages) != 3 || pages[2].Length != 2<<20 || len(pages[2].ChangedArea) != 1 || pages[2].ChangedArea[0].Start != 7<<20 {
		t.Errorf("pages = %+v", pages)
	}
	if _, err := q(&snap, info.Capacity, "*"); !fault.Is(err, &types.InvalidArgument{}) {
		t.Errorf("offset past the end: %v", err)
	}
	if _, err := q(&snap, 0, "not a change id"); !fault.Is(err, &types.InvalidArgument{}) {
		t.Errorf("garbage change id: %v", err)
	}
	if _, err := q(&snap, 0, "52 00 00 00 00 00 00 00-00 00 00 00 00 00 00 00/1"); !fault.Is(err, &types.FileFault{}) {
		t.Errorf("change id of another epoch: %v", err)
	}
}

func TestLabFaults(t *testing.T) {
	l := labtest.Start(t, lab.Options{ToolsNotRunning: true})
	vm := labVM(t, l, "DC0_H0_VM0")
	if _, err := snapshot(t, vm, "q", true); !fault.Is(err, &types.ToolsUnavailable{}) {
		t.Errorf("quiesce without Tools: %v", err)
	}
	if err := l.SetToolsRunning("DC0_H0_VM0", true); err != nil {
		t.Fatal(err)
	}
	if err := l.FailNextQuiesce("DC0_H0_VM0", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot(t, vm, "q", true); !fault.Is(err, &types.ApplicationQuiesceFault{}) {
		t.Errorf("injected quiesce fault: %v", err)
	}
	if _, err := snapshot(t, vm, "q", true); err != nil {
		t.Errorf("second quiesce: %v", err)
	}
	if err := l.FailNextSnapshot("DC0_H0_VM0", &types.TaskInProgress{}); err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot(t, vm, "x", false); !fault.Is(err, &types.TaskInProgress{}) {
		t.Errorf("injected snapshot fault: %v", err)
	}
	l.FailMethod("PowerOffVM_Task", &types.InvalidState{}, 1)
	if _, err := vm.PowerOff(context.Background()); !fault.Is(err, &types.InvalidState{}) {
		t.Errorf("method fault: %v", err)
	}
	// Datastore read faults are counted and consumed.
	info, _ := l.Disk("DC0_H0_VM0", 0)
	ds, _ := l.DatastoreDir("LocalDS_0")
	if ds == "" || info.FlatPath == "" {
		t.Fatal("no datastore dir")
	}
	u := l.URL()
	u.Path = "/folder/DC0_H0_VM0/disk1-flat.vmdk"
	u.RawQuery = "dcPath=DC0&dsName=LocalDS_0"
	l.InjectReadFault(lab.ReadFault{Status: http.StatusTeapot})
	hc := l.Admin().Client.Client
	res, err := hc.DownloadRequest(context.Background(), u, &soapDownload)
	if err != nil || res.StatusCode != http.StatusTeapot {
		t.Fatalf("status fault: %v %v", res, err)
	}
	res.Body.Close()
	res, err = hc.DownloadRequest(context.Background(), u, &soapDownload)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("after the fault: %v %v", res, err)
	}
	res.Body.Close()
	if l.FolderGets() != 2 {
		t.Errorf("folder GETs = %d", l.FolderGets())
	}
}

var soapDownload = soap.Download{Method: http.MethodGet}
