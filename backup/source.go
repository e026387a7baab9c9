package backup

import (
	"context"
	"io"
	"time"

	"github.com/vmvault/vmvault/vmconfig"
	"github.com/vmvault/vmvault/vsphere"
)

// VMSource resolves VMs.
type VMSource interface {
	// FindVM finds a VM by name, inventory path or managed object id.
	FindVM(ctx context.Context, id string) (vsphere.VM, error)
}

// DetailSource is optionally implemented by a VMSource that can read the
// configuration details vsphere.VM lacks (firmware, cores per socket,
// annotation, extra config).
type DetailSource interface {
	ConfigDetails(ctx context.Context, vm vsphere.VMRef) (ConfigDetails, error)
}

// Snapshotter takes and removes vmvault's backup snapshots.
type Snapshotter interface {
	CreateSnapshot(ctx context.Context, vm vsphere.VMRef, opts vsphere.SnapshotOptions) (*vsphere.Snapshot, error)
	RemoveSnapshot(ctx context.Context, vm vsphere.VMRef, moref string) error
	// RemoveStaleSnapshots removes this appliance's snapshots of vm created
	// before `before` (left by a crash or a failed removal).
	RemoveStaleSnapshots(ctx context.Context, vm vsphere.VMRef, before time.Time) ([]vsphere.SnapshotEntry, error)
}

// ChangeTracker is changed block tracking.
type ChangeTracker interface {
	EnableCBT(ctx context.Context, vm vsphere.VMRef) error
	// ChangedAreas returns the areas changed since prevChangeID, or the
	// allocated ones for vsphere.AllocatedAreas.
	ChangedAreas(ctx context.Context, snap *vsphere.Snapshot, diskKey int32, prevChangeID string) ([]vsphere.Extent, error)
}

// DiskSource is a snapshotted disk's bytes. ReadAt is called from one
// goroutine, in increasing offsets, with large buffers.
type DiskSource interface {
	io.ReaderAt
	Size() int64
}

// DiskOpener opens a snapshotted disk for reading. Reads stop when ctx is
// cancelled.
type DiskOpener interface {
	OpenDisk(ctx context.Context, snap *vsphere.Snapshot, diskKey int32) (DiskSource, error)
}

// DiskExporter is optionally implemented by a VSphere that can read a
// snapshotted disk through NFC export: for disks the datastore file service
// cannot serve (vSAN, vVols, 403/404 answers) and for VMs whose own
// snapshots sit under ours (ESXi consolidates the chain into the stream).
// Only the extents in keep (nil: all) are kept from the stream; the source
// refuses reads outside them. progress, when set, gets the stream bytes
// received so far.
type DiskExporter interface {
	ExportDisk(ctx context.Context, snap *vsphere.Snapshot, diskKey int32, keep []vsphere.Extent, dir string, progress func(received int64)) (DiskSource, error)
}

// VSphere is everything the engine needs from vCenter.
type VSphere interface {
	VMSource
	Snapshotter
	ChangeTracker
	DiskOpener
}

// FromClient adapts a vsphere client to VSphere. readOpts tune the disk
// readers (zero: vsphere's defaults).
func FromClient(c *vsphere.Client, readOpts vsphere.ReaderOptions) VSphere {
	return &clientSource{Client: c, ropts: readOpts}
}

// FromClientHotAdd is FromClient with HotAdd through h (the appliance's
// own VM): the engine's auto transport then tries HotAdd first.
func FromClientHotAdd(c *vsphere.Client, readOpts vsphere.ReaderOptions, h *vsphere.HotAdder) VSphere {
	return &hotAddClientSource{clientSource: &clientSource{Client: c, ropts: readOpts}, h: h}
}

type hotAddClientSource struct {
	*clientSource
	h *vsphere.HotAdder
}

// HotAddDisk attaches the frozen disk to the appliance VM
// (vsphere.HotAdder.Open); closing the source detaches it.
func (s *hotAddClientSource) HotAddDisk(ctx context.Context, snap *vsphere.Snapshot, diskKey int32) (DiskSource, error) {
	return s.h.Open(ctx, snap, diskKey)
}

type clientSource struct {
	*vsphere.Client
	ropts vsphere.ReaderOptions
}

func (c *clientSource) OpenDisk(ctx context.Context, snap *vsphere.Snapshot, diskKey int32) (DiskSource, error) {
	return c.Client.OpenDisk(ctx, snap, diskKey, c.ropts)
}

// ExportDisk reads the disk through NFC export (vsphere.Client.OpenExport).
func (c *clientSource) ExportDisk(ctx context.Context, snap *vsphere.Snapshot, diskKey int32, keep []vsphere.Extent, dir string, progress func(received int64)) (DiskSource, error) {
	return c.Client.OpenExport(ctx, snap, diskKey, keep, vsphere.ExportOptions{Dir: dir, NFCOptions: vsphere.NFCOptions{Progress: progress}})
}

// ConfigDetails reads firmware, cores per socket, notes and advanced
// settings (vsphere.Client.Details).
func (c *clientSource) ConfigDetails(ctx context.Context, vm vsphere.VMRef) (ConfigDetails, error) {
	d, err := c.Client.Details(ctx, vm)
	if err != nil {
		return ConfigDetails{}, err
	}
	det := ConfigDetails{Firmware: d.Firmware, CoresPerSocket: d.CoresPerSocket, Annotation: d.Annotation,
		ExtraConfig: d.ExtraConfig, ControllerModels: d.ControllerModels}
	for _, hd := range d.HostDevices {
		det.HostDevices = append(det.HostDevices, vmconfig.HostDeviceConfig{Kind: hd.Kind, Label: hd.Label})
	}
	return det, nil
}
