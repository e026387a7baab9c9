package vsphere

import (
	"context"
	"errors"
	"fmt"
	"path"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// Instant recovery's vSphere side: mount the appliance's NFS export of a
// restore point as a datastore on one host, run a VM whose disks are the
// export's files (CreateVM with existing disk backings, so vSphere never
// parses a .vmx we generated), move it to production with Storage
// vMotion, and take it all down again. Every step is idempotent so a
// restarted appliance can replay or undo it.

// NFSMount is an NFS v3 export to mount as a datastore.
type NFSMount struct {
	Host       string // host inventory path or name ("" = the only host)
	Datacenter string
	RemoteHost string // the appliance's address as the host reaches it
	RemotePath string // the export path
	Name       string // the datastore's name
}

// MountNFS mounts m on its host (HostDatastoreSystem.CreateNasDatastore)
// and returns the datastore. A datastore of that name already mounted from
// the same export is returned as it is (a resumed session); one of that
// name from elsewhere is an error wrapping ErrInUse.
func (c *Client) MountNFS(ctx context.Context, m NFSMount) (Datastore, error) {
	op := fmt.Sprintf("mount NFS %s:%s as %s", m.RemoteHost, m.RemotePath, m.Name)
	if m.Name == "" || m.RemoteHost == "" || m.RemotePath == "" {
		return Datastore{}, fmt.Errorf("%s: name, remote host and path are required", op)
	}
	host, err := c.findHost(ctx, m.Datacenter, m.Host)
	if err != nil {
		return Datastore{}, fmt.Errorf("%s: %w", op, err)
	}
	if ds, ok, err := c.nasOnHost(ctx, host, m.Name); err != nil {
		return Datastore{}, fmt.Errorf("%s: %w", op, err)
	} else if ok {
		if ds.remoteHost != m.RemoteHost || ds.remotePath != m.RemotePath {
			return Datastore{}, fmt.Errorf("%s: %w: datastore %s is mounted from %s:%s", op, ErrInUse, m.Name, ds.remoteHost, ds.remotePath)
		}
		return ds.Datastore, nil
	}
	dss, err := host.ConfigManager().DatastoreSystem(ctx)
	if err != nil {
		return Datastore{}, fmt.Errorf("%s: %w", op, err)
	}
	ref, err := dss.CreateNasDatastore(ctx, types.HostNasVolumeSpec{
		RemoteHost: m.RemoteHost, RemotePath: m.RemotePath, LocalPath: m.Name,
		AccessMode: string(types.HostMountModeReadWrite), Type: string(types.HostFileSystemVolumeFileSystemTypeNFS),
	})
	if err != nil {
		return Datastore{}, mapFault(op, err)
	}
	var md mo.Datastore
	if err := c.retrieveOne(ctx, ref.Reference(), []string{"summary"}, &md); err != nil {
		return Datastore{}, fmt.Errorf("%s: %w", op, err)
	}
	return datastoreOf(ref.Reference(), md.Summary), nil
}

// UnmountNFS removes the NFS datastore name from its host. A datastore
// that is already gone is not an error; one that still holds VMs is
// refused by vSphere (the error says so).
func (c *Client) UnmountNFS(ctx context.Context, datacenter, hostName, name string) error {
	op := "unmount NFS datastore " + name
	host, err := c.findHost(ctx, datacenter, hostName)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	ds, ok, err := c.nasOnHost(ctx, host, name)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if !ok {
		return nil
	}
	dss, err := host.ConfigManager().DatastoreSystem(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := dss.Remove(ctx, object.NewDatastore(c.vim, types.ManagedObjectReference{Type: "Datastore", Value: ds.MoRef})); err != nil {
		if isNotFound(err) {
			return nil
		}
		return mapFault(op, err)
	}
	return nil
}

// datastoreOf is a datastore's record from its summary.
func datastoreOf(ref types.ManagedObjectReference, s types.DatastoreSummary) Datastore {
	return Datastore{MoRef: ref.Value, Name: s.Name, Type: s.Type, CapacityBytes: s.Capacity, FreeBytes: s.FreeSpace, Accessible: s.Accessible}
}

type nasDatastore struct {
	Datastore
	remoteHost, remotePath string
}

func (c *Client) nasOnHost(ctx context.Context, host *object.HostSystem, name string) (nasDatastore, bool, error) {
	var mh mo.HostSystem
	if err := c.retrieveOne(ctx, host.Reference(), []string{"datastore"}, &mh); err != nil {
		return nasDatastore{}, false, err
	}
	for _, ref := range mh.Datastore {
		var md mo.Datastore
		if err := c.retrieveOne(ctx, ref, []string{"summary", "info"}, &md); err != nil {
			if isNotFound(err) {
				continue
			}
			return nasDatastore{}, false, err
		}
		if md.Summary.Name != name {
			continue
		}
		out := nasDatastore{Datastore: datastoreOf(ref, md.Summary)}
		if ni, ok := md.Info.(*types.NasDatastoreInfo); ok && ni.Nas != nil {
			out.remoteHost, out.remotePath = ni.Nas.RemoteHost, ni.Nas.RemotePath
		}
		return out, true, nil
	}
	return nasDatastore{}, false, nil
}

func (c *Client) findHost(ctx context.Context, datacenter, name string) (*object.HostSystem, error) {
	f := find.NewFinder(c.vim, false)
	dc, err := f.DatacenterOrDefault(ctx, datacenter)
	if err != nil {
		return nil, fmt.Errorf("datacenter: %w: %v", ErrNotFound, err)
	}
	f.SetDatacenter(dc)
	var h *object.HostSystem
	if name == "" {
		h, err = f.DefaultHostSystem(ctx)
	} else {
		h, err = f.HostSystem(ctx, name)
		if err != nil {
			// A bare host name: look under every compute resource.
			var hs []*object.HostSystem
			if hs, err = f.HostSystemList(ctx, "*/"+name); err == nil && len(hs) == 1 {
				h = hs[0]
			} else if err == nil {
				err = fmt.Errorf("%d hosts named %q", len(hs), name)
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("host %q: %w: %v", name, ErrNotFound, err)
	}
	return h, nil
}

// HostOf returns the inventory path of the host a VM runs on.
func (c *Client) HostOf(ctx context.Context, vm VMRef) (string, error) {
	var m mo.VirtualMachine
	if err := c.retrieveOne(ctx, vmMoRef(vm), []string{"runtime.host"}, &m); err != nil {
		return "", fmt.Errorf("host of %s: %w", vmLabel(vm), err)
	}
	if m.Runtime.Host == nil {
		return "", fmt.Errorf("host of %s: %w", vmLabel(vm), ErrNotFound)
	}
	el, err := find.NewFinder(c.vim, false).ObjectReference(ctx, *m.Runtime.Host)
	if err != nil {
		return "", fmt.Errorf("host of %s: %w", vmLabel(vm), err)
	}
	if h, ok := el.(*object.HostSystem); ok {
		return h.InventoryPath, nil
	}
	return "", fmt.Errorf("host of %s: %w", vmLabel(vm), ErrNotFound)
}

// Relocate moves a running (or stopped) VM's files and every disk to the
// datastore named ds (Storage vMotion) and waits, reporting the task's
// percentage.
func (c *Client) Relocate(ctx context.Context, vm VMRef, datacenter, ds string, progress func(pct int32)) error {
	return c.relocate(ctx, vm, datacenter, ds, nil, progress)
}

// relocate moves the disks keys (nil: the VM's files and every disk) to ds.
func (c *Client) relocate(ctx context.Context, vm VMRef, datacenter, ds string, keys []int32, progress func(pct int32)) error {
	op := fmt.Sprintf("move %s to datastore %s", vmLabel(vm), ds)
	if keys != nil {
		op = fmt.Sprintf("move disks %v of %s to datastore %s", keys, vmLabel(vm), ds)
	}
	f := find.NewFinder(c.vim, false)
	dc, err := f.DatacenterOrDefault(ctx, datacenter)
	if err != nil {
		return fmt.Errorf("%s: datacenter: %w: %v", op, ErrNotFound, err)
	}
	f.SetDatacenter(dc)
	target, err := f.Datastore(ctx, ds)
	if err != nil {
		return fmt.Errorf("%s: %w: %v", op, ErrNotFound, err)
	}
	ref := target.Reference()
	var spec types.VirtualMachineRelocateSpec
	if keys == nil {
		v, err := c.VM(ctx, vm)
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		spec.Datastore = &ref
		for _, d := range v.Disks {
			keys = append(keys, d.Key)
		}
	}
	for _, k := range keys {
		spec.Disk = append(spec.Disk, types.VirtualMachineRelocateSpecDiskLocator{DiskId: k, Datastore: ref})
	}
	task, err := c.vmObject(vm).Relocate(ctx, spec, types.VirtualMachineMovePriorityDefaultPriority)
	if err != nil {
		return mapFault(op, err)
	}
	if _, err := c.waitTask(ctx, task.Reference(), progress); err != nil {
		return mapFault(op, err)
	}
	return nil
}

// UnregisterVM powers a VM off and removes it from the inventory, leaving
// its files: the disks of an instant recovery are the export's, which a
// Destroy would try to delete. The VM's home directory is returned (a
// datastore path) so the caller can delete what the VM wrote there. A VM
// that is already gone is not an error ("" is returned).
func (c *Client) UnregisterVM(ctx context.Context, vm VMRef) (home string, err error) {
	op := "unregister VM " + vmLabel(vm)
	var m mo.VirtualMachine
	if err := c.retrieveOne(ctx, vmMoRef(vm), []string{"config.files"}, &m); err != nil {
		if isNotFound(err) {
			return "", nil
		}
		return "", fmt.Errorf("%s: %w", op, err)
	}
	if m.Config != nil {
		home = homeDir(m.Config.Files.VmPathName)
	}
	if err := c.PowerOff(ctx, vm); err != nil && !isNotFound(err) {
		return home, fmt.Errorf("%s: %w", op, err)
	}
	if err := c.vmObject(vm).Unregister(ctx); err != nil && !isNotFound(err) {
		return home, mapFault(op, err)
	}
	return home, nil
}

// DeleteDatastoreFile deletes a file or directory given as a datastore
// path ("[ds] dir"). A path that is already gone is not an error.
func (c *Client) DeleteDatastoreFile(ctx context.Context, datacenter, dsPath string) error {
	op := "delete " + dsPath
	f := find.NewFinder(c.vim, false)
	dc, err := f.DatacenterOrDefault(ctx, datacenter)
	if err != nil {
		return fmt.Errorf("%s: datacenter: %w: %v", op, ErrNotFound, err)
	}
	task, err := object.NewFileManager(c.vim).DeleteDatastoreFile(ctx, dsPath, dc)
	if err != nil {
		return mapFault(op, err)
	}
	if _, err := task.WaitForResult(ctx); err != nil {
		if isFault(err, &types.FileNotFound{}) || errors.Is(mapFault(op, err), ErrNotFound) {
			return nil
		}
		return mapFault(op, err)
	}
	return nil
}

// AttachExistingDisk attaches the disk file dsPath ("[ds] name.vmdk") to
// a VM, hot-added when it runs (instant disk recovery), and returns it.
// Nothing is created: the file is used as it is.
func (c *Client) AttachExistingDisk(ctx context.Context, vm VMRef, dsPath string) (Disk, error) {
	op := fmt.Sprintf("attach %s to %s", dsPath, vmLabel(vm))
	var dp object.DatastorePath
	if !dp.FromString(dsPath) {
		return Disk{}, fmt.Errorf("%s: bad datastore path", op)
	}
	ovm := c.vmObject(vm)
	devs, err := ovm.Device(ctx)
	if err != nil {
		return Disk{}, mapFault(op, err)
	}
	before := map[int32]bool{}
	for _, d := range devs.SelectByType((*types.VirtualDisk)(nil)) {
		before[d.GetVirtualDevice().Key] = true
	}
	ctl, err := devs.FindDiskController("scsi")
	if err != nil {
		return Disk{}, fmt.Errorf("%s: %w: %v", op, ErrNotFound, err)
	}
	v, err := c.VM(ctx, vm)
	if err != nil {
		return Disk{}, fmt.Errorf("%s: %w", op, err)
	}
	f := find.NewFinder(c.vim, false)
	if dc, err := f.DatacenterOrDefault(ctx, v.Datacenter); err == nil {
		f.SetDatacenter(dc)
	}
	ds, err := f.Datastore(ctx, dp.Datastore)
	if err != nil {
		return Disk{}, fmt.Errorf("%s: datastore: %w: %v", op, ErrNotFound, err)
	}
	disk := devs.CreateDisk(ctl, ds.Reference(), dsPath)
	disk.Backing.(*types.VirtualDiskFlatVer2BackingInfo).ThinProvisioned = nil
	// CapacityInKB 0: govmomi's AddDevice then attaches the file as it is
	// (no file operation).
	return c.addDisk(ctx, op, vm, ovm, disk, before)
}

// addDisk adds disk to the VM and returns it as the VM now shows it (the
// disk whose key was not in before).
func (c *Client) addDisk(ctx context.Context, op string, vm VMRef, ovm *object.VirtualMachine, disk *types.VirtualDisk, before map[int32]bool) (Disk, error) {
	if err := ovm.AddDevice(ctx, disk); err != nil {
		return Disk{}, mapFault(op, err)
	}
	v, err := c.VM(ctx, vm)
	if err != nil {
		return Disk{}, fmt.Errorf("%s: %w", op, err)
	}
	for _, d := range v.Disks {
		if !before[d.Key] {
			return d, nil
		}
	}
	return Disk{}, fmt.Errorf("%s: the new disk does not show on the VM", op)
}

// DetachDiskKeepFile removes a disk from a VM and leaves its file (an
// instant disk recovery's disk is the export's). A disk or VM already gone
// is not an error.
func (c *Client) DetachDiskKeepFile(ctx context.Context, vm VMRef, diskKey int32) error {
	err := c.removeDisk(ctx, fmt.Sprintf("detach disk %d of %s", diskKey, vmLabel(vm)), vm, diskKey, true)
	if isNotFound(err) {
		return nil
	}
	return err
}

// RelocateDisks moves some disks of a VM to the datastore ds (Storage
// vMotion of those disks only; the VM's own files stay).
func (c *Client) RelocateDisks(ctx context.Context, vm VMRef, datacenter, ds string, keys []int32, progress func(pct int32)) error {
	if keys == nil {
		keys = []int32{}
	}
	return c.relocate(ctx, vm, datacenter, ds, keys, progress)
}

// homeDir is the directory of a VM's configuration file ("[ds] vm/vm.vmx"
// -> "[ds] vm"). A VM whose files sit at the datastore's root has no home
// directory of its own: "" (never the root itself, which a caller deletes).
func homeDir(vmPathName string) string {
	var p object.DatastorePath
	if !p.FromString(vmPathName) {
		return ""
	}
	dir := path.Dir(p.Path)
	if dir == "." || dir == "/" || dir == "" {
		return ""
	}
	p.Path = dir
	return p.String()
}
