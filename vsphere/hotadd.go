package vsphere

// HotAdd: the transport VMware's own backup appliances used. The appliance
// runs as a VM; the frozen disk of a snapshotted VM is attached to it with
// ReconfigVM_Task, shows up in the guest as a SCSI disk and is read with
// pread at local speed, random access, so CBT extents are read exactly.
//
// How the disk is attached, and why (VDDK's HotAdd does the same in
// substance: the disk is added to the proxy with a redo log, so the base
// is never written, and released before the snapshot is deleted —
// "Best Practices for HotAdd Transport", VDDK Programming Guide):
//   - the file attached is the top of the chain the snapshot froze
//     (Disk.FrozenFileName: the parent of the live delta), an existing file
//     (no FileOperation: nothing is created, nothing can be destroyed);
//   - disk mode independent_nonpersistent: ESXi opens the chain read-only
//     and sends any write (a guest's stray partition probe) to a redo log
//     it discards on detach, and the appliance's own snapshots (if anyone
//     takes one) neither include nor lock it;
//   - the same reconfigure sets an extraConfig marker
//     "vmvault.hotadd.<hash>" = "<applianceID>|<vm>|<snapshot>|<file>", so
//     the start-up sweep knows, after a crash, which attached disks are
//     this appliance's to detach;
//   - detach removes the device without FileOperation (the file stays) and
//     clears the marker in one reconfigure, after the guest has been told
//     to forget the device, whatever happened to the read.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// ErrHotAddUnavailable: HotAdd cannot read this disk here (the appliance
// is not a VM of this vCenter, the disk's datastore is not visible to the
// appliance's host, no SCSI slot is free, the disk is not a VMDK…). The
// error says which requirement failed; another transport may still work.
var ErrHotAddUnavailable = errors.New("vsphere: HotAdd unavailable")

// ErrDeviceNotFound: the disk was attached but no block device with its
// UUID appeared in the appliance's guest in time.
var ErrDeviceNotFound = errors.New("vsphere: hot-added disk not visible in the guest")

// hotAddMarker prefixes the appliance VM's extraConfig keys that record
// which attached disks are this appliance's.
const hotAddMarker = "vmvault.hotadd."

// BlockDevice is an opened hot-added disk.
type BlockDevice interface {
	io.ReaderAt
	io.Closer
}

// DeviceLocator finds, in the appliance's own guest, the block device of a
// disk vSphere just attached. SysfsLocator is the Linux implementation;
// the lab hands out the frozen flat file instead.
type DeviceLocator interface {
	// Rescan asks the guest kernel to look for new or removed devices.
	Rescan(ctx context.Context) error
	// Locate returns the path of the device whose serial/WWID is the disk
	// UUID, "" (and no error) when there is none yet.
	Locate(ctx context.Context, diskUUID string) (string, error)
	// Open opens the device read-only.
	Open(path string) (BlockDevice, error)
	// Forget tells the guest the device is about to go (Linux: delete the
	// SCSI device), so that detaching it is not a surprise removal.
	Forget(ctx context.Context, path string) error
}

// HotAddOptions configure a HotAdder.
type HotAddOptions struct {
	// ApplianceVM names the appliance's own VM (name, inventory path or
	// moref); "" finds it by this machine's BIOS UUID.
	ApplianceVM string
	// BIOSUUIDFile is read when ApplianceVM is empty (default
	// /sys/class/dmi/id/product_uuid).
	BIOSUUIDFile string
	// Locator finds the attached disk (default SysfsLocator{}).
	Locator DeviceLocator
	// DeviceTimeout bounds the wait for the device after the attach
	// (default 60 s); PollEvery is the rescan interval (default 250 ms).
	DeviceTimeout time.Duration
	PollEvery     time.Duration
	// DetachTimeout bounds the detach, which runs with a context of its own
	// (default 5 min).
	DetachTimeout time.Duration
}

// HotAdder attaches snapshotted disks to the appliance VM. It is safe for
// concurrent use; reconfigures of the appliance VM are serialised.
type HotAdder struct {
	c    *Client
	opts HotAddOptions
	vm   VM
	mu   sync.Mutex // one reconfigure of the appliance at a time
	live sync.WaitGroup
}

// HotAdder finds the appliance's own VM and returns a HotAdder for it. An
// appliance that is not a VM of this vCenter gets ErrHotAddUnavailable.
func (c *Client) HotAdder(ctx context.Context, opts HotAddOptions) (*HotAdder, error) {
	if opts.Locator == nil {
		opts.Locator = SysfsLocator{}
	}
	if opts.BIOSUUIDFile == "" {
		opts.BIOSUUIDFile = "/sys/class/dmi/id/product_uuid"
	}
	if opts.DeviceTimeout <= 0 {
		opts.DeviceTimeout = time.Minute
	}
	if opts.PollEvery <= 0 {
		opts.PollEvery = 250 * time.Millisecond
	}
	if opts.DetachTimeout <= 0 {
		opts.DetachTimeout = 5 * time.Minute
	}
	h := &HotAdder{c: c, opts: opts}
	if opts.ApplianceVM != "" {
		vm, err := c.FindVM(ctx, opts.ApplianceVM)
		if err != nil {
			return nil, fmt.Errorf("%w: appliance VM %q: %w", ErrHotAddUnavailable, opts.ApplianceVM, err)
		}
		h.vm = vm
		return h, nil
	}
	raw, err := os.ReadFile(opts.BIOSUUIDFile)
	if err != nil {
		return nil, fmt.Errorf("%w: the appliance is not a VM (or cannot read its BIOS UUID: %v); set the appliance VM in the settings", ErrHotAddUnavailable, err)
	}
	uuid := strings.ToLower(strings.TrimSpace(string(raw)))
	// SMBIOS before 2.6 stored the first three fields little-endian, and
	// some guests print them that way: try both forms.
	for _, u := range []string{uuid, swapUUID(uuid)} {
		if u == "" {
			continue
		}
		res, err := methods.FindByUuid(ctx, c.vim, &types.FindByUuid{This: *c.vim.ServiceContent.SearchIndex, Uuid: u, VmSearch: true})
		if err != nil {
			return nil, mapFault("find the appliance VM by BIOS UUID", err)
		}
		if res.Returnval != nil {
			vm, err := c.VM(ctx, VMRef{MoRef: res.Returnval.Value})
			if err != nil {
				return nil, fmt.Errorf("appliance VM: %w", err)
			}
			h.vm = vm
			return h, nil
		}
	}
	return nil, fmt.Errorf("%w: no VM of this vCenter has the appliance's BIOS UUID %s (is the appliance a VM here?)", ErrHotAddUnavailable, uuid)
}

// swapUUID byte-swaps the first three fields of a textual UUID.
func swapUUID(u string) string {
	parts := strings.Split(u, "-")
	if len(parts) != 5 {
		return ""
	}
	for i := 0; i < 3; i++ {
		b, err := hex.DecodeString(parts[i])
		if err != nil {
			return ""
		}
		for l, r := 0, len(b)-1; l < r; l, r = l+1, r-1 {
			b[l], b[r] = b[r], b[l]
		}
		parts[i] = hex.EncodeToString(b)
	}
	return strings.Join(parts, "-")
}

// Appliance is the appliance's own VM.
func (h *HotAdder) Appliance() VMRef { return h.vm.VMRef }

// HotAddSource is a snapshotted disk attached to the appliance VM and
// opened as a local block device. It implements io.ReaderAt like
// DiskReader; Close detaches the disk.
type HotAddSource struct {
	h      *HotAdder
	ctx    context.Context
	dev    BlockDevice
	path   string
	file   string // datastore path attached
	key    int32  // device key on the appliance VM
	marker string
	size   int64
	read   atomic.Int64
	once   sync.Once
	cerr   error
}

// Size is the disk's capacity.
func (s *HotAddSource) Size() int64 { return s.size }

// Path is the guest device path the disk is read from.
func (s *HotAddSource) Path() string { return s.path }

// File is the datastore path of the attached (frozen) disk.
func (s *HotAddSource) File() string { return s.file }

// BytesRead is the bytes read from the device so far.
func (s *HotAddSource) BytesRead() int64 { return s.read.Load() }

// ReadAt reads the attached disk; bytes past the end of a device shorter
// than the disk read as zeros. Reads stop when the context given to Open
// is cancelled.
func (s *HotAddSource) ReadAt(p []byte, off int64) (int, error) {
	if err := s.ctx.Err(); err != nil {
		return 0, fmt.Errorf("hot-added %s: %w", s.file, err)
	}
	if off < 0 {
		return 0, fmt.Errorf("hot-added %s: negative offset %d", s.file, off)
	}
	if off >= s.size {
		return 0, io.EOF
	}
	var eof error
	if rem := s.size - off; int64(len(p)) > rem {
		p, eof = p[:rem], io.EOF
	}
	n, err := s.dev.ReadAt(p, off)
	s.read.Add(int64(n))
	if err == io.EOF {
		clear(p[n:])
		n, err = len(p), nil
	}
	if err != nil {
		return n, fmt.Errorf("hot-added %s (%s) at %d: %w", s.file, s.path, off, err)
	}
	return n, eof
}

// Close closes the device and detaches the disk from the appliance VM,
// with a context of its own: a cancelled backup still detaches. It is safe
// to call more than once.
func (s *HotAddSource) Close() error {
	s.once.Do(func() {
		defer s.h.live.Done()
		var errs []error
		if err := s.dev.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", s.path, err))
		}
		dctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), s.h.opts.DetachTimeout)
		defer cancel()
		if err := s.h.opts.Locator.Forget(dctx, s.path); err != nil {
			errs = append(errs, fmt.Errorf("forget %s: %w", s.path, err))
		}
		if err := s.h.detach(dctx, s.key, s.marker); err != nil {
			errs = append(errs, err)
		}
		s.cerr = errors.Join(errs...)
	})
	return s.cerr
}

// Wait blocks until every source opened so far is closed (a test's and a
// shutdown's way to know nothing is left attached).
func (h *HotAdder) Wait() { h.live.Wait() }

// Open attaches disk diskKey of snap to the appliance VM, waits for its
// block device and opens it. Requirements that fail give
// ErrHotAddUnavailable before anything is attached; once attached, any
// later failure detaches again before returning.
func (h *HotAdder) Open(ctx context.Context, snap *Snapshot, diskKey int32) (*HotAddSource, error) {
	d, ok := snap.Disk(diskKey)
	if !ok {
		return nil, fmt.Errorf("HotAdd disk %d of %s: %w", diskKey, snap.VM.Name, ErrNotFound)
	}
	file, err := h.check(ctx, snap, d)
	if err != nil {
		return nil, err
	}
	marker := hotAddMarker + markerHash(file)
	key, uuid, err := h.attach(ctx, snap, d, file, marker)
	if err != nil {
		return nil, err
	}
	h.live.Add(1)
	src := &HotAddSource{h: h, ctx: ctx, file: file, key: key, marker: marker, size: d.CapacityBytes}
	fail := func(err error) (*HotAddSource, error) {
		src.dev = nopDevice{}
		if cerr := src.Close(); cerr != nil {
			err = fmt.Errorf("%w (and detaching it: %v)", err, cerr)
		}
		return nil, err
	}
	p, err := h.waitDevice(ctx, uuid)
	if err != nil {
		return fail(fmt.Errorf("HotAdd %s disk %d (%s): %w", snap.VM.Name, diskKey, file, err))
	}
	src.path = p
	dev, err := h.opts.Locator.Open(p)
	if err != nil {
		return fail(fmt.Errorf("HotAdd %s disk %d: open %s: %w", snap.VM.Name, diskKey, p, err))
	}
	src.dev = dev
	return src, nil
}

type nopDevice struct{}

func (nopDevice) ReadAt([]byte, int64) (int, error) { return 0, io.EOF }
func (nopDevice) Close() error                      { return nil }

func markerHash(file string) string {
	sum := sha256.Sum256([]byte(file))
	return hex.EncodeToString(sum[:8])
}

// check verifies HotAdd's requirements and returns the file to attach.
func (h *HotAdder) check(ctx context.Context, snap *Snapshot, d Disk) (string, error) {
	no := func(format string, args ...any) (string, error) {
		return "", fmt.Errorf("%w: %s disk %d: %s", ErrHotAddUnavailable, snap.VM.Name, d.Key, fmt.Sprintf(format, args...))
	}
	switch {
	case d.Unsupported != "":
		return no("%s", d.Unsupported)
	case d.Independent:
		return no("independent disks are not in snapshots")
	case d.RDM == "physicalMode":
		return no("physical-mode RDM")
	case snap.MoRef == "":
		return no("no snapshot: HotAdd reads a frozen disk only")
	case snap.VM.MoRef == h.vm.MoRef:
		return no("the appliance cannot back itself up through HotAdd")
	}
	file := d.FrozenFileName
	if file == "" {
		file = d.BaseFileName
	}
	var dp object.DatastorePath
	if !dp.FromString(file) {
		return no("bad backing file name %q", file)
	}
	app, err := h.appliance(ctx)
	if err != nil {
		return "", err
	}
	src, err := h.c.VM(ctx, snap.VM)
	if err != nil {
		return "", fmt.Errorf("HotAdd: %w", err)
	}
	if src.Datacenter != app.Datacenter {
		return no("the VM is in datacenter %s, the appliance in %s", src.Datacenter, app.Datacenter)
	}
	var host mo.HostSystem
	if app.hostRef.Value == "" {
		return no("the appliance VM has no host")
	}
	if err := h.c.retrieveOne(ctx, app.hostRef, []string{"datastore"}, &host); err != nil {
		return "", fmt.Errorf("HotAdd: appliance host: %w", err)
	}
	seen := false
	if len(host.Datastore) > 0 {
		spec := types.PropertyFilterSpec{PropSet: []types.PropertySpec{{Type: "Datastore", PathSet: []string{"name"}}}}
		for _, r := range host.Datastore {
			spec.ObjectSet = append(spec.ObjectSet, types.ObjectSpec{Obj: r})
		}
		ocs, err := h.c.retrieve(ctx, spec)
		if err != nil {
			return "", fmt.Errorf("HotAdd: datastores of the appliance host: %w", err)
		}
		for _, oc := range ocs {
			for _, p := range oc.PropSet {
				if p.Name == "name" && p.Val == dp.Datastore {
					seen = true
				}
			}
		}
	}
	if !seen {
		return no("datastore %s is not visible to the appliance's host", dp.Datastore)
	}
	if _, _, ok := freeSCSISlot(app.devices); !ok {
		return no("the appliance VM has no SCSI controller with a free slot")
	}
	return file, nil
}

type applianceState struct {
	Datacenter string
	hostRef    types.ManagedObjectReference
	devices    object.VirtualDeviceList
	extra      map[string]string
	dir        string // "[ds] appliance/"
}

func (h *HotAdder) appliance(ctx context.Context) (*applianceState, error) {
	var v mo.VirtualMachine
	if err := h.c.retrieveOne(ctx, vmMoRef(h.vm.VMRef), []string{"config.hardware.device", "config.extraConfig", "config.files.vmPathName", "runtime.host"}, &v); err != nil {
		return nil, fmt.Errorf("HotAdd: appliance VM %s: %w", h.vm.Name, err)
	}
	st := &applianceState{Datacenter: h.vm.Datacenter, extra: map[string]string{}}
	if v.Runtime.Host != nil {
		st.hostRef = *v.Runtime.Host
	}
	if v.Config != nil {
		st.devices = v.Config.Hardware.Device
		for _, o := range v.Config.ExtraConfig {
			ov := o.GetOptionValue()
			if s, ok := ov.Value.(string); ok {
				st.extra[ov.Key] = s
			}
		}
		st.dir = path.Dir(v.Config.Files.VmPathName)
	}
	return st, nil
}

// freeSCSISlot finds a SCSI controller and a free unit on it (unit 7 is
// the controller's own).
func freeSCSISlot(devs object.VirtualDeviceList) (int32, int32, bool) {
	var ctls []types.BaseVirtualSCSIController
	for _, d := range devs {
		if c, ok := d.(types.BaseVirtualSCSIController); ok {
			ctls = append(ctls, c)
		}
	}
	sort.Slice(ctls, func(i, j int) bool {
		return ctls[i].GetVirtualSCSIController().BusNumber < ctls[j].GetVirtualSCSIController().BusNumber
	})
	for _, c := range ctls {
		vc := c.GetVirtualSCSIController()
		used := map[int32]bool{7: true}
		for _, d := range devs {
			if vd := d.GetVirtualDevice(); vd.ControllerKey == vc.Key && vd.UnitNumber != nil {
				used[*vd.UnitNumber] = true
			}
		}
		for u := int32(0); u < 16; u++ {
			if !used[u] {
				return vc.Key, u, true
			}
		}
	}
	return 0, 0, false
}

// attach adds the disk to the appliance VM and returns its device key and
// the UUID the guest sees.
func (h *HotAdder) attach(ctx context.Context, snap *Snapshot, d Disk, file, marker string) (int32, string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	app, err := h.appliance(ctx)
	if err != nil {
		return 0, "", err
	}
	for _, dev := range app.devices.SelectByType((*types.VirtualDisk)(nil)) {
		if backingFile(dev.(*types.VirtualDisk)) == file {
			return 0, "", fmt.Errorf("%w: %s is already attached to the appliance VM (another backup reads it, or the start-up sweep has not run)", ErrHotAddUnavailable, file)
		}
	}
	ctl, unit, ok := freeSCSISlot(app.devices)
	if !ok {
		return 0, "", fmt.Errorf("%w: the appliance VM has no SCSI controller with a free slot", ErrHotAddUnavailable)
	}
	disk := &types.VirtualDisk{
		VirtualDevice: types.VirtualDevice{
			Key: -1, ControllerKey: ctl, UnitNumber: types.NewInt32(unit),
			Backing: &types.VirtualDiskFlatVer2BackingInfo{
				VirtualDeviceFileBackingInfo: types.VirtualDeviceFileBackingInfo{FileName: file},
				DiskMode:                     string(types.VirtualDiskModeIndependent_nonpersistent),
			},
		},
		CapacityInBytes: d.CapacityBytes, CapacityInKB: d.CapacityBytes / 1024,
	}
	spec := types.VirtualMachineConfigSpec{
		DeviceChange: []types.BaseVirtualDeviceConfigSpec{&types.VirtualDeviceConfigSpec{
			Operation: types.VirtualDeviceConfigSpecOperationAdd, Device: disk,
		}},
		ExtraConfig: []types.BaseOptionValue{&types.OptionValue{Key: marker,
			Value: strings.Join([]string{h.c.cfg.ApplianceID, snap.VM.MoRef, snap.MoRef, file}, "|")}},
	}
	if err := h.reconfigure(ctx, spec); err != nil {
		// The reconfigure may have gone through before the error (a lost
		// reply): detach whatever carries our file.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.opts.DetachTimeout)
		defer cancel()
		if app, aerr := h.appliance(dctx); aerr == nil {
			for _, dev := range app.devices.SelectByType((*types.VirtualDisk)(nil)) {
				if backingFile(dev.(*types.VirtualDisk)) == file {
					_ = h.detachLocked(dctx, dev.GetVirtualDevice().Key, marker)
				}
			}
		}
		return 0, "", fmt.Errorf("HotAdd: attach %s to the appliance VM %s: %w", file, h.vm.Name, err)
	}
	app, err = h.appliance(ctx)
	if err == nil {
		for _, dev := range app.devices.SelectByType((*types.VirtualDisk)(nil)) {
			vd := dev.(*types.VirtualDisk)
			if backingFile(vd) == file {
				uuid := d.UUID
				if b, ok := vd.Backing.(*types.VirtualDiskFlatVer2BackingInfo); ok && b.Uuid != "" {
					uuid = b.Uuid
				}
				return vd.Key, uuid, nil
			}
		}
		err = errors.New("the reconfigure succeeded but the disk is not on the appliance VM")
	}
	return 0, "", fmt.Errorf("HotAdd: attach %s: %w", file, err)
}

func backingFile(vd *types.VirtualDisk) string {
	if fb, ok := vd.Backing.(types.BaseVirtualDeviceFileBackingInfo); ok {
		return fb.GetVirtualDeviceFileBackingInfo().FileName
	}
	return ""
}

func (h *HotAdder) reconfigure(ctx context.Context, spec types.VirtualMachineConfigSpec) error {
	res, err := methods.ReconfigVM_Task(ctx, h.c.vim, &types.ReconfigVM_Task{This: vmMoRef(h.vm.VMRef), Spec: spec})
	if err != nil {
		return mapFault("reconfigure "+h.vm.Name, err)
	}
	if _, err := h.c.waitTask(ctx, res.Returnval, nil); err != nil {
		return mapFault("reconfigure "+h.vm.Name, err)
	}
	return nil
}

// detach removes the device (never its file) and the marker, retrying
// transient failures.
func (h *HotAdder) detach(ctx context.Context, key int32, marker string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.detachLocked(ctx, key, marker)
}

func (h *HotAdder) detachLocked(ctx context.Context, key int32, marker string) error {
	var err error
	for attempt := 1; ; attempt++ {
		err = h.detachOnce(ctx, key, marker)
		if err == nil || !transient(err) || attempt >= h.c.retry.Attempts || ctx.Err() != nil {
			break
		}
		if berr := h.c.retry.backoff(ctx, attempt); berr != nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("HotAdd: detach device %d from the appliance VM %s (the start-up sweep retries): %w", key, h.vm.Name, err)
	}
	return nil
}

func (h *HotAdder) detachOnce(ctx context.Context, key int32, marker string) error {
	app, err := h.appliance(ctx)
	if err != nil {
		return err
	}
	var spec types.VirtualMachineConfigSpec
	if dev := app.devices.FindByKey(key); dev != nil {
		spec.DeviceChange = append(spec.DeviceChange, &types.VirtualDeviceConfigSpec{
			Operation: types.VirtualDeviceConfigSpecOperationRemove, Device: dev,
		})
	}
	if _, ok := app.extra[marker]; ok && marker != "" {
		spec.ExtraConfig = append(spec.ExtraConfig, &types.OptionValue{Key: marker, Value: ""})
	}
	if len(spec.DeviceChange) == 0 && len(spec.ExtraConfig) == 0 {
		return nil // already gone
	}
	return h.reconfigure(ctx, spec)
}

// waitDevice rescans until the device with uuid shows up.
func (h *HotAdder) waitDevice(ctx context.Context, uuid string) (string, error) {
	wctx, cancel := context.WithTimeout(ctx, h.opts.DeviceTimeout)
	defer cancel()
	t := time.NewTicker(h.opts.PollEvery)
	defer t.Stop()
	for {
		if err := h.opts.Locator.Rescan(wctx); err != nil && wctx.Err() == nil {
			return "", fmt.Errorf("rescan: %w", err)
		}
		p, err := h.opts.Locator.Locate(wctx, uuid)
		if err != nil {
			return "", fmt.Errorf("find the device of disk %s: %w", uuid, err)
		}
		if p != "" {
			return p, nil
		}
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return "", ctx.Err()
			}
			return "", fmt.Errorf("%w: no device with serial %s after %s (is disk.EnableUUID=TRUE set on the appliance VM?)",
				ErrDeviceNotFound, uuid, h.opts.DeviceTimeout)
		case <-t.C:
		}
	}
}

// SweptDisk is a disk the start-up sweep detached.
type SweptDisk struct {
	File     string `json:"file"`
	VM       string `json:"vm,omitempty"`       // the backed-up VM's moref
	Snapshot string `json:"snapshot,omitempty"` // the snapshot it was read from
	Why      string `json:"why"`
}

// Sweep detaches the disks a crashed run left attached to the appliance
// VM: those carrying this appliance's marker, and unmarked
// independent-nonpersistent disks outside the appliance's own folder
// whose file is the frozen disk of a VM under one of this appliance's
// snapshots. Nothing else is touched — not the appliance's own disks, not
// another appliance's, and never a disk of any other VM.
func (h *HotAdder) Sweep(ctx context.Context) ([]SweptDisk, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	app, err := h.appliance(ctx)
	if err != nil {
		return nil, err
	}
	byFile := map[string]string{} // file -> marker key
	meta := map[string][]string{}
	for k, v := range app.extra {
		if !strings.HasPrefix(k, hotAddMarker) || v == "" {
			continue
		}
		parts := strings.SplitN(v, "|", 4)
		if len(parts) != 4 || parts[0] != h.c.cfg.ApplianceID {
			continue // another appliance's, or not ours to judge
		}
		byFile[parts[3]] = k
		meta[parts[3]] = parts
	}
	var frozen map[string][2]string // file -> (vm, snapshot) of our snapshots
	var out []SweptDisk
	var errs []error
	for _, dev := range app.devices.SelectByType((*types.VirtualDisk)(nil)) {
		vd := dev.(*types.VirtualDisk)
		file := backingFile(vd)
		sd := SweptDisk{File: file}
		marker, marked := byFile[file]
		switch {
		case marked:
			sd.VM, sd.Snapshot, sd.Why = meta[file][1], meta[file][2], "marked as attached by this appliance"
		default:
			b, ok := vd.Backing.(*types.VirtualDiskFlatVer2BackingInfo)
			if !ok || b.DiskMode != string(types.VirtualDiskModeIndependent_nonpersistent) || strings.HasPrefix(file, app.dir+"/") {
				continue
			}
			if frozen == nil {
				if frozen, err = h.frozenFiles(ctx); err != nil {
					return out, err
				}
			}
			owner, ok := frozen[file]
			if !ok {
				continue
			}
			sd.VM, sd.Snapshot, sd.Why = owner[0], owner[1], "frozen disk of a VM under this appliance's snapshot"
			marker = hotAddMarker + markerHash(file)
		}
		if err := h.detachLocked(ctx, vd.Key, marker); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(byFile, file)
		out = append(out, sd)
	}
	// Markers whose disk is already gone (a crash between the two steps of
	// nothing: detach is one reconfigure, but an administrator may have
	// removed the disk by hand).
	var stale []types.BaseOptionValue
	for _, k := range byFile {
		stale = append(stale, &types.OptionValue{Key: k, Value: ""})
	}
	if len(stale) > 0 {
		sort.Slice(stale, func(i, j int) bool { return stale[i].GetOptionValue().Key < stale[j].GetOptionValue().Key })
		if err := h.reconfigure(ctx, types.VirtualMachineConfigSpec{ExtraConfig: stale}); err != nil {
			errs = append(errs, fmt.Errorf("HotAdd sweep: clear stale markers: %w", err))
		}
	}
	return out, errors.Join(errs...)
}

// frozenFiles maps the frozen disk files of every VM that carries one of
// this appliance's snapshots to that VM and snapshot.
func (h *HotAdder) frozenFiles(ctx context.Context) (map[string][2]string, error) {
	ocs, err := h.c.retrieveViews(ctx, []types.ManagedObjectReference{h.c.vim.ServiceContent.RootFolder},
		map[string][]string{"VirtualMachine": {"snapshot", "config.hardware.device"}})
	if err != nil {
		return nil, fmt.Errorf("HotAdd sweep: VMs: %w", err)
	}
	out := map[string][2]string{}
	for _, oc := range ocs {
		if oc.Obj.Value == h.vm.MoRef {
			continue
		}
		var v mo.VirtualMachine
		if err := mo.LoadObjectContent([]types.ObjectContent{oc}, &v); err != nil || v.Snapshot == nil || v.Config == nil {
			continue
		}
		snap := ""
		var walk func([]types.VirtualMachineSnapshotTree)
		walk = func(l []types.VirtualMachineSnapshotTree) {
			for _, t := range l {
				if h.c.isOurs(t.Name, t.Description) {
					snap = t.Snapshot.Value
				}
				walk(t.ChildSnapshotList)
			}
		}
		walk(v.Snapshot.RootSnapshotList)
		if snap == "" {
			continue
		}
		for _, d := range disksFrom(v.Config.Hardware.Device, false) {
			for _, f := range []string{d.FrozenFileName, d.BaseFileName, d.FileName} {
				if f != "" {
					out[f] = [2]string{oc.Obj.Value, snap}
				}
			}
		}
	}
	return out, nil
}

// SysfsLocator finds hot-added disks in a Linux guest: by serial or WWID
// (VMware exposes the disk UUID as both when disk.EnableUUID=TRUE), in
// /dev/disk/by-id and /sys/block/*/device/{wwid,serial,vpd_pg80}. Root
// prefixes every path ("" is "/"), for tests.
type SysfsLocator struct{ Root string }

func (s SysfsLocator) p(elem ...string) string {
	return filepath.Join(append([]string{s.Root, "/"}, elem...)...)
}

// Rescan writes "- - -" to every /sys/class/scsi_host/*/scan.
func (s SysfsLocator) Rescan(ctx context.Context) error {
	hosts, err := filepath.Glob(s.p("sys", "class", "scsi_host", "*", "scan"))
	if err != nil {
		return err
	}
	var errs []error
	for _, h := range hosts {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := os.WriteFile(h, []byte("- - -"), 0); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == len(hosts) && len(hosts) > 0 {
		return errors.Join(errs...)
	}
	return nil
}

// normUUID is a disk UUID as hex digits only, lower case ("6000C29…").
func normUUID(u string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(u) {
		if (r >= '0' && r <= '9') || (r >= 'a' && r <= 'f') {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Locate finds the device whose identity contains the disk UUID.
func (s SysfsLocator) Locate(ctx context.Context, diskUUID string) (string, error) {
	want := normUUID(diskUUID)
	if len(want) < 16 {
		return "", fmt.Errorf("disk UUID %q too short to match a device", diskUUID)
	}
	// /dev/disk/by-id/scsi-36000c29…, wwn-0x6000c29…: whole disks only.
	ids, _ := filepath.Glob(s.p("dev", "disk", "by-id", "*"))
	for _, id := range ids {
		base := filepath.Base(id)
		if strings.Contains(base, "-part") {
			continue
		}
		if strings.Contains(normUUID(base), want) {
			if t, err := filepath.EvalSymlinks(id); err == nil {
				return t, nil
			}
			return id, nil
		}
	}
	blocks, _ := filepath.Glob(s.p("sys", "block", "*"))
	for _, b := range blocks {
		for _, f := range []string{"wwid", "serial", "vpd_pg80", "vpd_pg83"} {
			raw, err := os.ReadFile(filepath.Join(b, "device", f))
			if err != nil {
				continue
			}
			if strings.Contains(normUUID(string(raw)), want) {
				return s.p("dev", filepath.Base(b)), nil
			}
		}
	}
	return "", nil
}

// Open opens the device read-only.
func (SysfsLocator) Open(path string) (BlockDevice, error) { return os.Open(path) }

// Forget deletes the SCSI device from the guest before the detach.
func (s SysfsLocator) Forget(_ context.Context, dev string) error {
	if dev == "" {
		return nil
	}
	del := s.p("sys", "block", filepath.Base(dev), "device", "delete")
	if _, err := os.Stat(del); err != nil {
		return nil // not a SCSI disk (or already gone)
	}
	return os.WriteFile(del, []byte("1"), 0)
}
