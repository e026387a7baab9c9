package backupe2e

import (
	"context"
	"os"
	"testing"

	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vsphere"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"
)

// adminVM is the govmomi handle of a lab VM, for reconfigurations vmvault
// itself never makes (adding disks, changing modes, toggling CBT).
func adminVM(t *testing.T, l *lab.Lab, vm string) *object.VirtualMachine {
	t.Helper()
	moref, err := l.MoRef(vm)
	if err != nil {
		t.Fatal(err)
	}
	return object.NewVirtualMachine(l.Admin().Client, types.ManagedObjectReference{Type: "VirtualMachine", Value: moref})
}

func vmDisks(t *testing.T, ovm *object.VirtualMachine) []*types.VirtualDisk {
	t.Helper()
	devs, err := ovm.Device(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []*types.VirtualDisk
	for _, d := range devs.SelectByType((*types.VirtualDisk)(nil)) {
		out = append(out, d.(*types.VirtualDisk))
	}
	return out
}

// sizeFlat makes disk idx's flat extent exist with the disk's capacity.
func sizeFlat(t *testing.T, l *lab.Lab, vm string, idx int) {
	t.Helper()
	info, err := l.Disk(vm, idx)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(info.FlatPath, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if st, _ := f.Stat(); st.Size() < info.Capacity {
		if err := f.Truncate(info.Capacity); err != nil {
			t.Fatal(err)
		}
	}
}

// addDisk adds a thin disk on the VM's first disk's datastore and controller.
func addDisk(t *testing.T, l *lab.Lab, vm string, capacity int64) {
	t.Helper()
	ctx := context.Background()
	ovm := adminVM(t, l, vm)
	devs, err := ovm.Device(ctx)
	if err != nil {
		t.Fatal(err)
	}
	first := vmDisks(t, ovm)[0]
	ctl := devs.FindByKey(first.ControllerKey).(types.BaseVirtualController)
	ds := first.Backing.(*types.VirtualDiskFlatVer2BackingInfo).Datastore
	disk := devs.CreateDisk(ctl, *ds, "")
	disk.CapacityInBytes, disk.CapacityInKB = capacity, capacity/1024
	disk.Backing.(*types.VirtualDiskFlatVer2BackingInfo).ThinProvisioned = types.NewBool(true)
	if err := ovm.AddDevice(ctx, disk); err != nil {
		t.Fatalf("add disk: %v", err)
	}
	sizeFlat(t, l, vm, len(vmDisks(t, ovm))-1)
}

func removeDisk(t *testing.T, l *lab.Lab, vm string, idx int) {
	t.Helper()
	ovm := adminVM(t, l, vm)
	if err := ovm.RemoveDevice(context.Background(), true, vmDisks(t, ovm)[idx]); err != nil {
		t.Fatalf("remove disk: %v", err)
	}
}

func setCBT(t *testing.T, l *lab.Lab, vm string, on bool) {
	t.Helper()
	ctx := context.Background()
	task, err := adminVM(t, l, vm).Reconfigure(ctx, types.VirtualMachineConfigSpec{ChangeTrackingEnabled: types.NewBool(on)})
	if err == nil {
		err = task.Wait(ctx)
	}
	if err != nil {
		t.Fatalf("set CBT %v: %v", on, err)
	}
}

// createVM makes a VM with disks of the given sizes, flat files in place.
func createVM(t *testing.T, l *lab.Lab, c *vsphere.Client, name string, sizes ...int64) vsphere.VM {
	t.Helper()
	spec := vsphere.VMSpec{Name: name, Datastore: "LocalDS_0", ResourcePool: "/DC0/host/DC0_C0/Resources", NumCPU: 2, MemoryMB: 256,
		GuestID: "otherLinux64Guest", Annotation: "made by backupe2e", Firmware: "efi", CoresPerSocket: 2,
		ExtraConfig: map[string]string{"disk.EnableUUID": "TRUE", "guestinfo.scratch": "not restored"}}
	for _, s := range sizes {
		spec.Disks = append(spec.Disks, vsphere.DiskSpec{CapacityBytes: s, Thin: true})
	}
	vm, err := c.CreateVM(context.Background(), spec)
	if err != nil {
		t.Fatalf("create VM: %v", err)
	}
	for i := range sizes {
		sizeFlat(t, l, name, i)
	}
	return vm
}
