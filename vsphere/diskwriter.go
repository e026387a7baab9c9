package vsphere

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// VMSpec describes a VM to create for a restore. Names and paths are
// resolved in Datacenter.
type VMSpec struct {
	Name       string
	Datacenter string // name or path; default: the only datacenter
	Folder     string // VM folder inventory path; default: the datacenter's vm folder
	// ResourcePool is an inventory path ("/DC0/host/DC0_C0/Resources");
	// default: the first cluster's or host's root pool.
	ResourcePool string
	Host         string // optional host inventory path
	Datastore    string // datastore name for the VM's files and disks
	GuestID      string // default "otherGuest"
	NumCPU       int32
	MemoryMB     int64
	Firmware     string // "bios" or "efi"
	Annotation   string
	// CoresPerSocket, when set, must divide NumCPU.
	CoresPerSocket int32
	// UUID (the BIOS UUID) and InstanceUUID, when set, keep an identity
	// (instant recovery with the original's identity); empty: vCenter
	// makes new ones.
	UUID, InstanceUUID string
	// ExtraConfig are advanced settings (key = value) set at creation.
	ExtraConfig map[string]string
	// Controllers, when set, are created as given and every disk names its
	// controller (DiskSpec.Controller) and unit; when empty, all disks go
	// on one paravirtual SCSI controller in order.
	Controllers []ControllerSpec
	Disks       []DiskSpec
	NICs        []NICSpec
}

// ControllerSpec is one disk controller to create. Type is "pvscsi",
// "lsilogic", "lsilogic-sas", "buslogic", "sata" or "nvme"; "ide" uses the
// VM's built-in IDE controller of that bus (every VM has IDE 0 and 1).
type ControllerSpec struct {
	Type string
	Bus  int32
}

// DiskSpec is one disk to create.
type DiskSpec struct {
	CapacityBytes int64
	Thin          bool
	// Controller indexes VMSpec.Controllers and Unit is the unit number on
	// it; both are used only when VMSpec.Controllers is set.
	Controller int
	Unit       int32
	// Datastore places this disk on another datastore than VMSpec.Datastore.
	Datastore string
	// ExistingFile, a datastore path ("[ds] name.vmdk"), attaches that
	// disk instead of creating one (instant recovery: the appliance's NFS
	// export holds it). CapacityBytes must be its size; Thin and
	// Datastore are ignored.
	ExistingFile string
}

// NICSpec is one network adapter. Network is the target network or port
// group name (the caller maps source networks to target ones).
type NICSpec struct {
	Network string
	Type    string // "vmxnet3" (default), "e1000e", "e1000", "pcnet32", "vmxnet2", …
	// Disconnected leaves the adapter unplugged and not connected at power
	// on (restore rehearsal: the copy must not talk to the production net).
	Disconnected bool
	// MAC, when set, is kept (manual address); empty: vCenter generates one.
	MAC string
}

// CreateVM creates a powered-off VM with new, empty disks and returns its
// record (disk keys for UploadDisk).
func (c *Client) CreateVM(ctx context.Context, spec VMSpec) (VM, error) {
	op := "create VM " + spec.Name
	b, err := c.buildVM(ctx, op, spec)
	if err != nil {
		return VM{}, err
	}
	task, err := b.folder.CreateVM(ctx, b.spec, b.pool, b.host)
	if err != nil {
		return VM{}, mapFault(op, err)
	}
	info, err := task.WaitForResult(ctx)
	if err != nil {
		return VM{}, mapFault(op, err)
	}
	ref, ok := info.Result.(types.ManagedObjectReference)
	if !ok {
		return VM{}, fmt.Errorf("%s: task returned %T", op, info.Result)
	}
	return c.VM(ctx, VMRef{MoRef: ref.Value})
}

// builtVM is a resolved VMSpec: where the VM goes and its config spec.
type builtVM struct {
	spec   types.VirtualMachineConfigSpec
	folder *object.Folder
	pool   *object.ResourcePool
	host   *object.HostSystem
}

func (c *Client) buildVM(ctx context.Context, op string, spec VMSpec) (*builtVM, error) {
	if spec.Name == "" || spec.Datastore == "" {
		return nil, fmt.Errorf("%s: name and datastore are required", op)
	}
	f := find.NewFinder(c.vim, false)
	dc, err := f.DatacenterOrDefault(ctx, spec.Datacenter)
	if err != nil {
		return nil, fmt.Errorf("%s: datacenter: %w: %v", op, ErrNotFound, err)
	}
	f.SetDatacenter(dc)
	var folder *object.Folder
	if spec.Folder != "" {
		folder, err = f.Folder(ctx, spec.Folder)
	} else {
		var fs *object.DatacenterFolders
		if fs, err = dc.Folders(ctx); err == nil {
			folder = fs.VmFolder
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: folder: %w: %v", op, ErrNotFound, err)
	}
	var pool *object.ResourcePool
	if spec.ResourcePool != "" {
		pool, err = f.ResourcePool(ctx, spec.ResourcePool)
	} else {
		var pools []*object.ResourcePool
		if pools, err = f.ResourcePoolList(ctx, "*/Resources"); err == nil {
			pool = pools[0]
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: resource pool: %w: %v", op, ErrNotFound, err)
	}
	var host *object.HostSystem
	if spec.Host != "" {
		if host, err = f.HostSystem(ctx, spec.Host); err != nil {
			return nil, fmt.Errorf("%s: host: %w: %v", op, ErrNotFound, err)
		}
	}
	ds, err := f.Datastore(ctx, spec.Datastore)
	if err != nil {
		return nil, fmt.Errorf("%s: datastore: %w: %v", op, ErrNotFound, err)
	}
	var devs object.VirtualDeviceList
	existing := map[*types.VirtualDisk]bool{}
	dsRef := map[string]types.ManagedObjectReference{ds.Name(): ds.Reference()}
	diskDS := func(name string) (types.ManagedObjectReference, error) {
		if name == "" {
			return ds.Reference(), nil
		}
		if ref, ok := dsRef[name]; ok {
			return ref, nil
		}
		d, err := f.Datastore(ctx, name)
		if err != nil {
			return types.ManagedObjectReference{}, fmt.Errorf("%s: datastore %q: %w: %v", op, name, ErrNotFound, err)
		}
		dsRef[name] = d.Reference()
		return d.Reference(), nil
	}
	addDisk := func(ctl types.BaseVirtualController, d DiskSpec) error {
		ref, err := diskDS(d.Datastore)
		if err != nil {
			return err
		}
		name := ""
		if d.Datastore != "" && d.Datastore != ds.Name() {
			name = "[" + d.Datastore + "]"
		}
		if d.ExistingFile != "" {
			var dp object.DatastorePath
			if !dp.FromString(d.ExistingFile) {
				return fmt.Errorf("%s: bad disk path %q", op, d.ExistingFile)
			}
			if ref, err = diskDS(dp.Datastore); err != nil {
				return err
			}
			name = d.ExistingFile
		}
		disk := devs.CreateDisk(ctl, ref, name)
		if d.ExistingFile != "" {
			existing[disk] = true
			// An instant VM's disk is the export's: never snapshotted into
			// CBT files there, never thin-converted.
			disk.Backing.(*types.VirtualDiskFlatVer2BackingInfo).DiskMode = string(types.VirtualDiskModePersistent)
		}
		if d.ExistingFile == "" {
			disk.CapacityInBytes = d.CapacityBytes
			disk.CapacityInKB = (d.CapacityBytes + 1023) / 1024
			disk.Backing.(*types.VirtualDiskFlatVer2BackingInfo).ThinProvisioned = types.NewBool(d.Thin)
		} else {
			// An existing disk's size is its descriptor's: vSphere reads it.
			disk.Backing.(*types.VirtualDiskFlatVer2BackingInfo).ThinProvisioned = nil
		}
		if len(spec.Controllers) > 0 {
			disk.UnitNumber = types.NewInt32(d.Unit)
		}
		devs = append(devs, disk)
		return nil
	}
	if len(spec.Controllers) > 0 {
		ctls := make([]types.BaseVirtualController, len(spec.Controllers))
		for i, cs := range spec.Controllers {
			ctl, err := newController(devs, cs)
			if err != nil {
				return nil, fmt.Errorf("%s: controller %d: %w", op, i, err)
			}
			if _, ide := ctl.(*types.VirtualIDEController); !ide {
				devs = append(devs, ctl.(types.BaseVirtualDevice))
			}
			ctls[i] = ctl
		}
		for i, d := range spec.Disks {
			if d.Controller < 0 || d.Controller >= len(ctls) {
				return nil, fmt.Errorf("%s: disk %d names controller %d of %d", op, i, d.Controller, len(ctls))
			}
			if err := addDisk(ctls[d.Controller], d); err != nil {
				return nil, err
			}
		}
	} else if len(spec.Disks) > 0 {
		ctl, err := devs.CreateSCSIController("pvscsi")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		devs = append(devs, ctl)
		for _, d := range spec.Disks {
			if err := addDisk(ctl.(types.BaseVirtualController), d); err != nil {
				return nil, err
			}
		}
	}
	for _, n := range spec.NICs {
		net, err := f.Network(ctx, n.Network)
		if err != nil {
			return nil, fmt.Errorf("%s: network %q: %w: %v", op, n.Network, ErrNotFound, err)
		}
		backing, err := net.EthernetCardBackingInfo(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: network %q: %w", op, n.Network, err)
		}
		typ := n.Type
		if typ == "" {
			typ = "vmxnet3"
		}
		card, err := devs.CreateEthernetCard(typ, backing)
		if err != nil {
			return nil, fmt.Errorf("%s: NIC: %w", op, err)
		}
		if n.Disconnected {
			card.GetVirtualDevice().Connectable = &types.VirtualDeviceConnectInfo{StartConnected: false, Connected: false, AllowGuestControl: true}
		}
		if n.MAC != "" {
			if eth, ok := card.(types.BaseVirtualEthernetCard); ok {
				e := eth.GetVirtualEthernetCard()
				e.AddressType, e.MacAddress = string(types.VirtualEthernetCardMacTypeManual), n.MAC
			}
		}
		devs = append(devs, card)
	}
	changes, err := devs.ConfigSpec(types.VirtualDeviceConfigSpecOperationAdd)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	for _, ch := range changes {
		s := ch.GetVirtualDeviceConfigSpec()
		if d, ok := s.Device.(*types.VirtualDisk); ok {
			s.FileOperation = types.VirtualDeviceConfigSpecFileOperationCreate
			if existing[d] {
				s.FileOperation = "" // attach the file as it is
			}
		}
	}
	guest := spec.GuestID
	if guest == "" {
		guest = "otherGuest"
	}
	cs := types.VirtualMachineConfigSpec{
		Name: spec.Name, GuestId: guest, NumCPUs: max(spec.NumCPU, 1), MemoryMB: max(spec.MemoryMB, 4),
		Firmware: spec.Firmware, Annotation: spec.Annotation,
		Files:        &types.VirtualMachineFileInfo{VmPathName: "[" + ds.Name() + "]"},
		DeviceChange: changes,
	}
	if spec.CoresPerSocket > 0 {
		cs.NumCoresPerSocket = types.NewInt32(spec.CoresPerSocket)
	}
	cs.Uuid, cs.InstanceUuid = spec.UUID, spec.InstanceUUID
	for _, k := range sortedKeys(spec.ExtraConfig) {
		cs.ExtraConfig = append(cs.ExtraConfig, &types.OptionValue{Key: k, Value: spec.ExtraConfig[k]})
	}
	return &builtVM{spec: cs, folder: folder, pool: pool, host: host}, nil
}

// UploadDisk streams size bytes from r over the flat extent of a VM's disk
// through the datastore file service (one PUT, no buffering of the whole
// disk). It is for disks created by CreateVM and not yet in use.
func (c *Client) UploadDisk(ctx context.Context, vm VMRef, diskKey int32, r io.Reader, size int64, progress func(done int64)) error {
	op := fmt.Sprintf("upload disk %d of %s", diskKey, vm.Name)
	v, err := c.VM(ctx, vm)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	var disk *Disk
	for i := range v.Disks {
		if v.Disks[i].Key == diskKey {
			disk = &v.Disks[i]
		}
	}
	if disk == nil {
		return fmt.Errorf("%s: %w", op, ErrNotFound)
	}
	if size > disk.CapacityBytes {
		return fmt.Errorf("%s: %d bytes do not fit a %d-byte disk", op, size, disk.CapacityBytes)
	}
	if disk.ChainDepth > 0 {
		return fmt.Errorf("%s: the disk has snapshots; refusing to overwrite its base", op)
	}
	var ml mo.VirtualMachine
	if err := c.retrieveOne(ctx, vmMoRef(vm), []string{"layoutEx"}, &ml); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	flat := flatExtent(ml.LayoutEx, diskKey, disk.FileName)
	var dp object.DatastorePath
	if !dp.FromString(flat) {
		return fmt.Errorf("%s: bad extent %q", op, flat)
	}
	dcPath := strings.TrimPrefix(v.Path, "/")
	if i := strings.Index(dcPath, "/"); i >= 0 {
		dcPath = dcPath[:i]
	}
	u := c.datastoreURL(dcPath, dp.Datastore, dp.Path)
	body := &countingReader{r: io.LimitReader(r, size), c: c, progress: progress}
	p := soap.Upload{Method: http.MethodPut, ContentLength: size, Type: "application/octet-stream"}
	if err := c.sc.Upload(ctx, body, u, &p); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if body.n != size {
		return fmt.Errorf("%s: source ended after %d of %d bytes", op, body.n, size)
	}
	return nil
}

type countingReader struct {
	r        io.Reader
	n        int64
	c        *Client
	progress func(int64)
}

func (cr *countingReader) Read(p []byte) (int, error) {
	n, err := cr.r.Read(p)
	cr.n += int64(n)
	cr.c.pushed.Add(int64(n))
	if n > 0 && cr.progress != nil {
		cr.progress(cr.n)
	}
	return n, err
}
