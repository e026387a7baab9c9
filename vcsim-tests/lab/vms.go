package lab

import (
	"context"
	"fmt"
	"os"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"
	"golang.org/x/sync/errgroup"
)

// CreateVMs adds n powered-off VMs named prefix0000… with one thin disk of
// the lab's DiskCapacity to the first cluster's root pool. vcsim's own model
// builder waits on each VM in turn (about 40 ms each); this creates them in
// parallel, so a 1,000-VM inventory starts in seconds.
func (l *Lab) CreateVMs(ctx context.Context, n int, prefix string) error {
	c := l.admin.Client
	f := find.NewFinder(c, true)
	dc, err := f.DefaultDatacenter(ctx)
	if err != nil {
		return fmt.Errorf("lab: datacenter: %w", err)
	}
	f.SetDatacenter(dc)
	folders, err := dc.Folders(ctx)
	if err != nil {
		return fmt.Errorf("lab: folders: %w", err)
	}
	pools, err := f.ResourcePoolList(ctx, "*/Resources")
	if err != nil || len(pools) == 0 {
		return fmt.Errorf("lab: resource pool: %v", err)
	}
	pool := pools[0]
	dss, err := f.DatastoreList(ctx, "*")
	if err != nil || len(dss) == 0 {
		return fmt.Errorf("lab: datastore: %v", err)
	}
	ds := dss[0]
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("%s%04d", prefix, i)
		g.Go(func() error { return l.createVM(gctx, folders.VmFolder, pool, ds, name) })
	}
	return g.Wait()
}

func (l *Lab) createVM(ctx context.Context, folder *object.Folder, pool *object.ResourcePool, ds *object.Datastore, name string) error {
	var devs object.VirtualDeviceList
	ctl, err := devs.CreateSCSIController("pvscsi")
	if err != nil {
		return err
	}
	devs = append(devs, ctl)
	disk := devs.CreateDisk(ctl.(types.BaseVirtualController), ds.Reference(), "")
	disk.CapacityInKB = l.opts.DiskCapacity / 1024
	disk.CapacityInBytes = l.opts.DiskCapacity
	disk.Backing.(*types.VirtualDiskFlatVer2BackingInfo).ThinProvisioned = types.NewBool(true)
	devs = append(devs, disk)
	changes, err := devs.ConfigSpec(types.VirtualDeviceConfigSpecOperationAdd)
	if err != nil {
		return err
	}
	for _, ch := range changes {
		if s := ch.GetVirtualDeviceConfigSpec(); s.Device == disk {
			s.FileOperation = types.VirtualDeviceConfigSpecFileOperationCreate
		}
	}
	spec := types.VirtualMachineConfigSpec{
		Name: name, GuestId: "otherGuest", NumCPUs: 1, MemoryMB: 32,
		Files:        &types.VirtualMachineFileInfo{VmPathName: "[" + ds.Name() + "]"},
		DeviceChange: changes,
	}
	task, err := folder.CreateVM(ctx, spec, pool, nil)
	if err != nil {
		return fmt.Errorf("lab: create VM %s: %w", name, err)
	}
	res, err := task.WaitForResult(ctx)
	if err != nil {
		return fmt.Errorf("lab: create VM %s: %w", name, err)
	}
	ref, ok := res.Result.(types.ManagedObjectReference)
	if !ok {
		return fmt.Errorf("lab: create VM %s: task returned %T", name, res.Result)
	}
	info, err := l.Disk(ref.Value, 0)
	if err != nil {
		return err
	}
	if err := os.Truncate(info.FlatPath, l.opts.DiskCapacity); err != nil {
		return fmt.Errorf("lab: size disk of %s: %w", name, err)
	}
	return nil
}
