package vsphere

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// ideControllerKey is the device key of the built-in IDE controller of bus
// 0; bus 1 is the next key. vCenter (and vcsim) add both to every new VM.
const ideControllerKey = 200

func newController(devs object.VirtualDeviceList, cs ControllerSpec) (types.BaseVirtualController, error) {
	var dev types.BaseVirtualDevice
	var err error
	switch cs.Type {
	case "ide":
		if cs.Bus < 0 || cs.Bus > 1 {
			return nil, fmt.Errorf("IDE bus %d does not exist", cs.Bus)
		}
		return &types.VirtualIDEController{VirtualController: types.VirtualController{
			VirtualDevice: types.VirtualDevice{Key: ideControllerKey + cs.Bus}, BusNumber: cs.Bus}}, nil
	case "sata":
		dev, err = devs.CreateSATAController()
	case "nvme":
		dev, err = devs.CreateNVMEController()
	case "pvscsi", "lsilogic", "lsilogic-sas", "buslogic":
		dev, err = devs.CreateSCSIController(cs.Type)
	default:
		return nil, fmt.Errorf("unknown controller type %q", cs.Type)
	}
	if err != nil {
		return nil, err
	}
	ctl := dev.(types.BaseVirtualController)
	ctl.GetVirtualController().BusNumber = cs.Bus
	return ctl, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// CheckVMSpec resolves everything spec names (datacenter, folder, pool,
// host, datastores, networks) and builds the configuration without creating
// anything: the validation a restore runs before it changes the inventory.
// Unknown names wrap ErrNotFound.
func (c *Client) CheckVMSpec(ctx context.Context, spec VMSpec) error {
	if spec.CoresPerSocket > 0 && spec.NumCPU%spec.CoresPerSocket != 0 {
		return fmt.Errorf("check VM %s: %d CPUs are not a multiple of %d cores per socket", spec.Name, spec.NumCPU, spec.CoresPerSocket)
	}
	_, err := c.buildVM(ctx, "check VM "+spec.Name, spec)
	return err
}

// VMsNamed returns every VM with exactly this name (any datacenter).
func (c *Client) VMsNamed(ctx context.Context, name string) ([]VMRef, error) {
	all, err := c.vmNames(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("VMs named %q: %w", name, err)
	}
	var out []VMRef
	for _, v := range all {
		if v.Name == name {
			out = append(out, v.VMRef)
		}
	}
	return out, nil
}

// VMNote is a VM's name with its annotation ("notes").
type VMNote struct {
	VMRef
	Annotation string `json:"annotation,omitempty"`
}

// VMNotes lists every VM with its annotation (one retrieve): what finds the
// VMs an appliance made (rehearsals carry a marker in their notes).
func (c *Client) VMNotes(ctx context.Context) ([]VMNote, error) {
	out, err := c.vmNames(ctx, []string{"config.annotation"})
	if err != nil {
		return nil, fmt.Errorf("VM notes: %w", err)
	}
	return out, nil
}

func (c *Client) vmNames(ctx context.Context, extra []string) ([]VMNote, error) {
	props := append([]string{"name", "config.instanceUuid"}, extra...)
	ocs, err := c.retrieveViews(ctx, []types.ManagedObjectReference{c.vim.ServiceContent.RootFolder}, map[string][]string{"VirtualMachine": props})
	if err != nil {
		return nil, err
	}
	var out []VMNote
	for _, oc := range ocs {
		n := VMNote{VMRef: VMRef{MoRef: oc.Obj.Value}}
		for _, p := range oc.PropSet {
			switch p.Name {
			case "name":
				n.Name, _ = p.Val.(string)
			case "config.instanceUuid":
				n.InstanceUUID, _ = p.Val.(string)
			case "config.annotation":
				n.Annotation, _ = p.Val.(string)
			}
		}
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].MoRef < out[j].MoRef })
	return out, nil
}

// DatastoreInfo returns one datastore's type and space, found by name in
// datacenter ("" = the only one). A missing datastore wraps ErrNotFound.
func (c *Client) DatastoreInfo(ctx context.Context, datacenter, name string) (Datastore, error) {
	op := "datastore " + name
	f := find.NewFinder(c.vim, false)
	dc, err := f.DatacenterOrDefault(ctx, datacenter)
	if err != nil {
		return Datastore{}, fmt.Errorf("%s: datacenter: %w: %v", op, ErrNotFound, err)
	}
	f.SetDatacenter(dc)
	ds, err := f.Datastore(ctx, name)
	if err != nil {
		return Datastore{}, fmt.Errorf("%s: %w: %v", op, ErrNotFound, err)
	}
	var m mo.Datastore
	if err := c.retrieveOne(ctx, ds.Reference(), []string{"summary"}, &m); err != nil {
		return Datastore{}, fmt.Errorf("%s: %w", op, err)
	}
	d := datastoreOf(m.Self, m.Summary)
	d.Path = ds.InventoryPath
	return d, nil
}

func (c *Client) vmObject(vm VMRef) *object.VirtualMachine {
	return object.NewVirtualMachine(c.vim, vmMoRef(vm))
}

// PowerOn powers a VM on and waits for the task.
func (c *Client) PowerOn(ctx context.Context, vm VMRef) error {
	op := "power on " + vmLabel(vm)
	t, err := c.vmObject(vm).PowerOn(ctx)
	if err != nil {
		return mapFault(op, err)
	}
	if _, err := t.WaitForResult(ctx); err != nil {
		return mapFault(op, err)
	}
	return nil
}

// PowerOff powers a VM off (hard) and waits; a VM already off is fine.
func (c *Client) PowerOff(ctx context.Context, vm VMRef) error {
	op := "power off " + vmLabel(vm)
	var m mo.VirtualMachine
	if err := c.retrieveOne(ctx, vmMoRef(vm), []string{"runtime.powerState"}, &m); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if m.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOff {
		return nil
	}
	t, err := c.vmObject(vm).PowerOff(ctx)
	if err != nil {
		return mapFault(op, err)
	}
	if _, err := t.WaitForResult(ctx); err != nil {
		return mapFault(op, err)
	}
	return nil
}

// DestroyVM powers a VM off and deletes it with its files (the clean-up of
// a failed restore and the removal of rehearsals). A VM that is already gone
// is not an error.
func (c *Client) DestroyVM(ctx context.Context, vm VMRef) error {
	op := "destroy VM " + vmLabel(vm)
	if err := c.PowerOff(ctx, vm); err != nil {
		if isNotFound(err) {
			return nil
		}
		return fmt.Errorf("%s: %w", op, err)
	}
	t, err := c.vmObject(vm).Destroy(ctx)
	if err != nil {
		if isNotFound(err) {
			return nil
		}
		return mapFault(op, err)
	}
	if _, err := t.WaitForResult(ctx); err != nil {
		return mapFault(op, err)
	}
	return nil
}

func isNotFound(err error) bool {
	return err != nil && (isFault(err, &types.ManagedObjectNotFound{}) || strings.Contains(err.Error(), ErrNotFound.Error()))
}

func vmLabel(vm VMRef) string {
	if vm.Name != "" {
		return vm.Name
	}
	return vm.MoRef
}

// AttachDiskSpec is a new, empty disk to add to an existing VM.
type AttachDiskSpec struct {
	CapacityBytes int64
	Thin          bool
	// Datastore for the disk file; default: the datastore of the VM's files.
	Datastore string
	// ControllerType ("scsi", "sata", "nvme", "ide") and Bus choose an
	// existing controller of the VM; empty ControllerType takes the first
	// SCSI controller.
	ControllerType string
	Bus            int32
}

// AttachDisk creates a new disk on an existing VM and returns it (with its
// key for UploadDisk). The VM may be powered on: the disk is hot-added.
func (c *Client) AttachDisk(ctx context.Context, vm VMRef, spec AttachDiskSpec) (Disk, error) {
	op := "attach disk to " + vmLabel(vm)
	if spec.CapacityBytes <= 0 {
		return Disk{}, fmt.Errorf("%s: capacity %d", op, spec.CapacityBytes)
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
	var ctl types.BaseVirtualController
	for _, d := range devs {
		var typ string
		var bus int32
		switch x := d.(type) {
		case types.BaseVirtualSCSIController:
			typ, bus = "scsi", x.GetVirtualSCSIController().BusNumber
		case types.BaseVirtualSATAController:
			typ, bus = "sata", x.GetVirtualSATAController().BusNumber
		case *types.VirtualNVMEController:
			typ, bus = "nvme", x.BusNumber
		case *types.VirtualIDEController:
			typ, bus = "ide", x.BusNumber
		default:
			continue
		}
		want := spec.ControllerType
		if want == "" {
			want = "scsi"
		} else if bus != spec.Bus {
			continue
		}
		if typ == want {
			ctl = d.(types.BaseVirtualController)
			break
		}
	}
	if ctl == nil {
		return Disk{}, fmt.Errorf("%s: no %s controller on bus %d: %w", op, spec.ControllerType, spec.Bus, ErrNotFound)
	}
	var vmds mo.VirtualMachine
	if err := c.retrieveOne(ctx, vmMoRef(vm), []string{"datastore", "config.files"}, &vmds); err != nil {
		return Disk{}, fmt.Errorf("%s: %w", op, err)
	}
	var dsRef types.ManagedObjectReference
	name := ""
	if spec.Datastore != "" {
		f := find.NewFinder(c.vim, false)
		// The datastore is looked up in the VM's datacenter.
		dcName := ""
		if v, err := c.VM(ctx, vm); err == nil {
			dcName = v.Datacenter
		}
		if dc, err := f.DatacenterOrDefault(ctx, dcName); err == nil {
			f.SetDatacenter(dc)
		}
		ds, err := f.Datastore(ctx, spec.Datastore)
		if err != nil {
			return Disk{}, fmt.Errorf("%s: datastore %q: %w: %v", op, spec.Datastore, ErrNotFound, err)
		}
		dsRef, name = ds.Reference(), "["+spec.Datastore+"]"
	} else {
		var dp object.DatastorePath
		if vmds.Config == nil || !dp.FromString(vmds.Config.Files.VmPathName) || len(vmds.Datastore) == 0 {
			return Disk{}, fmt.Errorf("%s: cannot tell the VM's datastore; name one", op)
		}
		dsRef, name = vmds.Datastore[0], "["+dp.Datastore+"]"
	}
	disk := devs.CreateDisk(ctl, dsRef, name)
	disk.CapacityInBytes = spec.CapacityBytes
	disk.CapacityInKB = (spec.CapacityBytes + 1023) / 1024
	disk.Backing.(*types.VirtualDiskFlatVer2BackingInfo).ThinProvisioned = types.NewBool(spec.Thin)
	return c.addDisk(ctx, op, vm, ovm, disk, before)
}

// DetachDisk removes a disk from a VM and deletes its files (the clean-up of
// a failed single-disk restore).
func (c *Client) DetachDisk(ctx context.Context, vm VMRef, diskKey int32) error {
	return c.removeDisk(ctx, fmt.Sprintf("remove disk %d of %s", diskKey, vmLabel(vm)), vm, diskKey, false)
}

// removeDisk removes a disk device (keepFiles: its files stay); a disk
// already gone is not an error.
func (c *Client) removeDisk(ctx context.Context, op string, vm VMRef, diskKey int32, keepFiles bool) error {
	ovm := c.vmObject(vm)
	devs, err := ovm.Device(ctx)
	if err != nil {
		return mapFault(op, err)
	}
	d := devs.FindByKey(diskKey)
	if d == nil {
		return nil
	}
	if err := ovm.RemoveDevice(ctx, keepFiles, d); err != nil {
		return mapFault(op, err)
	}
	return nil
}

// VMDetails are configuration items vsphere.VM does not carry.
type VMDetails struct {
	Firmware       string            `json:"firmware,omitempty"`
	CoresPerSocket int32             `json:"coresPerSocket,omitempty"`
	Annotation     string            `json:"annotation,omitempty"`
	ExtraConfig    map[string]string `json:"extraConfig,omitempty"`
	// ControllerModels maps a disk controller's key to its model
	// ("pvscsi", "lsilogic", "sata", "nvme", "ide", …).
	ControllerModels map[int32]string `json:"controllerModels,omitempty"`
	// HostDevices are devices tied to the source host (USB, serial and
	// parallel ports, PCI passthrough, floppy) that a restore elsewhere
	// cannot recreate: backup records them so restore can say so.
	HostDevices []HostDevice `json:"hostDevices,omitempty"`
}

// HostDevice is one device a restore does not recreate.
type HostDevice struct {
	Kind  string `json:"kind"` // usb-controller, usb, serial, parallel, pci-passthrough, floppy
	Label string `json:"label"`
}

// hostDeviceKind classifies devices that depend on the source host; "" for
// everything a restore can rebuild or regenerates.
func hostDeviceKind(dev types.BaseVirtualDevice) string {
	switch dev.(type) {
	case *types.VirtualUSBController, *types.VirtualUSBXHCIController:
		return "usb-controller"
	case *types.VirtualUSB:
		return "usb"
	case *types.VirtualSerialPort:
		return "serial"
	case *types.VirtualParallelPort:
		return "parallel"
	case *types.VirtualPCIPassthrough:
		return "pci-passthrough"
	case *types.VirtualFloppy:
		return "floppy"
	}
	return ""
}

// Details reads a VM's firmware, cores per socket, notes, advanced
// settings and controller models.
func (c *Client) Details(ctx context.Context, vm VMRef) (VMDetails, error) {
	var m mo.VirtualMachine
	if err := c.retrieveOne(ctx, vmMoRef(vm), []string{"config.firmware", "config.hardware.numCoresPerSocket", "config.annotation", "config.extraConfig", "config.hardware.device"}, &m); err != nil {
		return VMDetails{}, fmt.Errorf("details of %s: %w", vmLabel(vm), err)
	}
	d := VMDetails{ControllerModels: map[int32]string{}}
	if m.Config == nil {
		return d, nil
	}
	d.Firmware, d.Annotation = m.Config.Firmware, m.Config.Annotation
	if p := m.Config.Hardware.NumCoresPerSocket; p != nil {
		d.CoresPerSocket = *p
	}
	for _, o := range m.Config.ExtraConfig {
		if ov := o.GetOptionValue(); ov != nil {
			if d.ExtraConfig == nil {
				d.ExtraConfig = map[string]string{}
			}
			d.ExtraConfig[ov.Key] = fmt.Sprint(ov.Value)
		}
	}
	list := object.VirtualDeviceList(m.Config.Hardware.Device)
	for _, dev := range list {
		if kind := hostDeviceKind(dev); kind != "" {
			d.HostDevices = append(d.HostDevices, HostDevice{Kind: kind, Label: deviceLabel(dev)})
			continue
		}
		if _, ok := dev.(types.BaseVirtualController); ok {
			d.ControllerModels[dev.GetVirtualDevice().Key] = list.Type(dev)
		}
	}
	return d, nil
}

// ResetCBT switches changed block tracking off and on again when it is on,
// so every change id handed out before becomes invalid (ErrCBTReset) and the
// next backup reads the disks in full. A restore over the original must do
// this: its datastore writes bypass the tracking, so an incremental from an
// older change id would miss them. The VM should be powered off (tracking
// restarts without a stun); a VM without CBT is left alone.
func (c *Client) ResetCBT(ctx context.Context, vm VMRef) error {
	op := "reset CBT on " + vmLabel(vm)
	var v mo.VirtualMachine
	if err := c.retrieveOne(ctx, vmMoRef(vm), []string{"config.changeTrackingEnabled"}, &v); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if v.Config == nil || v.Config.ChangeTrackingEnabled == nil || !*v.Config.ChangeTrackingEnabled {
		return nil
	}
	for _, on := range []bool{false, true} {
		// Setting the flag is idempotent, so a transient failure is retried:
		// a reset that stopped between off and on would leave the VM without
		// tracking while the error says nothing was changed.
		for attempt := 1; ; attempt++ {
			err := c.setCBT(ctx, vm, on)
			if err == nil {
				break
			}
			if ctx.Err() != nil || !transient(err) || attempt >= c.retry.Attempts {
				if !on {
					return mapFault(op, err)
				}
				return mapFault(op+" (tracking is off on the VM now: its next backup turns it on and reads every disk)", err)
			}
			c.retries.Add(1)
			if berr := c.retry.backoff(ctx, attempt); berr != nil {
				return mapFault(op, err)
			}
		}
	}
	return nil
}

func (c *Client) setCBT(ctx context.Context, vm VMRef, on bool) error {
	t, err := c.vmObject(vm).Reconfigure(ctx, types.VirtualMachineConfigSpec{ChangeTrackingEnabled: types.NewBool(on)})
	if err != nil {
		return err
	}
	_, err = t.WaitForResult(ctx)
	return err
}

// deviceLabel is the device's label as the vSphere client shows it.
func deviceLabel(dev types.BaseVirtualDevice) string {
	if info := dev.GetVirtualDevice().DeviceInfo; info != nil {
		if d := info.GetDescription(); d != nil && d.Label != "" {
			return d.Label
		}
	}
	return fmt.Sprintf("device %d", dev.GetVirtualDevice().Key)
}
