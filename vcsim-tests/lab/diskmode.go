package lab

import (
	"fmt"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
)

// SetDiskMode sets the disk mode of disk idx of vm ("persistent",
// "independent_persistent", "independent_nonpersistent", …) in the VM's
// configuration, as an administrator would.
func (l *Lab) SetDiskMode(vm string, idx int, mode string) error {
	return l.editDisk(vm, idx, func(vd *types.VirtualDisk) error {
		b, ok := vd.Backing.(*types.VirtualDiskFlatVer2BackingInfo)
		if !ok {
			return fmt.Errorf("lab: disk %d of %s is not a flat disk (%T)", idx, vm, vd.Backing)
		}
		b.DiskMode = mode
		return nil
	})
}

// SetPhysicalRDM turns disk idx of vm into a physical-mode raw device
// mapping (same file name: the lab only needs the backing's shape).
func (l *Lab) SetPhysicalRDM(vm string, idx int) error {
	return l.editDisk(vm, idx, func(vd *types.VirtualDisk) error {
		fb := vd.Backing.(types.BaseVirtualDeviceFileBackingInfo).GetVirtualDeviceFileBackingInfo()
		vd.Backing = &types.VirtualDiskRawDiskMappingVer1BackingInfo{
			DeviceName:                   "vml.0200000000600508b1001c",
			VirtualDeviceFileBackingInfo: types.VirtualDeviceFileBackingInfo{FileName: fb.FileName, Datastore: fb.Datastore},
			CompatibilityMode:            string(types.VirtualDiskCompatibilityModePhysicalMode),
			DiskMode:                     string(types.VirtualDiskModeIndependent_persistent),
		}
		return nil
	})
}

func (l *Lab) editDisk(vm string, idx int, f func(*types.VirtualDisk) error) error {
	return l.withVM(vm, func(v *simulator.VirtualMachine) error {
		ds := object.VirtualDeviceList(v.Config.Hardware.Device).SelectByType((*types.VirtualDisk)(nil))
		if idx < 0 || idx >= len(ds) {
			return fmt.Errorf("lab: VM %s has %d disks, no disk %d", vm, len(ds), idx)
		}
		return f(ds[idx].(*types.VirtualDisk))
	})
}

// SetDatastoreType changes a datastore's summary.type ("vsan", "VVOL",
// "VMFS", …): vSAN and vVols datastores have no flat extent over the file
// service, so vmvault must read their disks through NFC export.
func (l *Lab) SetDatastoreType(name, typ string) error {
	for _, ref := range l.model.Map().All("Datastore") {
		ds, ok := ref.(*simulator.Datastore)
		if !ok || ds.Name != name {
			continue
		}
		l.model.Map().WithLock(l.lctx, ds, func() {
			l.model.Map().Update(l.lctx, ds, []types.PropertyChange{{Name: "summary.type", Val: typ}})
		})
		return nil
	}
	return fmt.Errorf("lab: no datastore %q", name)
}
