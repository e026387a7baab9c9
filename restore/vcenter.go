package restore

import (
	"context"
	"io"

	"github.com/vmvault/vmvault/vsphere"
)

// The engine's view of vCenter is split by what each step needs, so a unit
// test can fake one seam (a failing disk sink, say) and assert what the
// engine does about it; *vsphere.Client implements all of them.

// Finder reads the inventory a restore validates against and finds VMs.
type Finder interface {
	Inventory(ctx context.Context) (*vsphere.Inventory, error)
	DatastoreInfo(ctx context.Context, datacenter, name string) (vsphere.Datastore, error)
	// FindVM finds a VM by name, inventory path or managed object id.
	FindVM(ctx context.Context, id string) (vsphere.VM, error)
	VM(ctx context.Context, ref vsphere.VMRef) (vsphere.VM, error)
	// VMsNamed lists the VMs with exactly this name.
	VMsNamed(ctx context.Context, name string) ([]vsphere.VMRef, error)
	// VMNotes lists every VM with its notes and instance UUID.
	VMNotes(ctx context.Context) ([]vsphere.VMNote, error)
}

// VMBuilder creates, changes, powers and removes VMs.
type VMBuilder interface {
	// CheckVMSpec validates a spec against vCenter without creating
	// anything.
	CheckVMSpec(ctx context.Context, spec vsphere.VMSpec) error
	CreateVM(ctx context.Context, spec vsphere.VMSpec) (vsphere.VM, error)
	DestroyVM(ctx context.Context, vm vsphere.VMRef) error
	AttachDisk(ctx context.Context, vm vsphere.VMRef, spec vsphere.AttachDiskSpec) (vsphere.Disk, error)
	DetachDisk(ctx context.Context, vm vsphere.VMRef, diskKey int32) error
	PowerOn(ctx context.Context, vm vsphere.VMRef) error
	PowerOff(ctx context.Context, vm vsphere.VMRef) error
	// ResetCBT invalidates every change id of the VM's disks.
	ResetCBT(ctx context.Context, vm vsphere.VMRef) error
}

// DiskSink takes disk bytes into vSphere.
type DiskSink interface {
	// UploadDisk writes size bytes from r over an existing disk of vm.
	UploadDisk(ctx context.Context, vm vsphere.VMRef, diskKey int32, r io.Reader, size int64, progress func(done int64)) error
	// ImportVM creates a VM through an NFC import, fill writing each
	// disk's content; a failure may leave a half-made VM named spec.Name.
	ImportVM(ctx context.Context, spec vsphere.VMSpec, fill vsphere.DiskFiller, progress func(sent int64)) (vsphere.VM, error)
}

// VCenter is everything the engine needs from vCenter.
type VCenter interface {
	Finder
	VMBuilder
	DiskSink
}

var _ VCenter = (*vsphere.Client)(nil)
