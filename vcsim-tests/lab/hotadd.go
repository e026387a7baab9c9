package lab

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vmvault/vmvault/vsphere"
)

// ApplianceName is the name AddAppliance gives the appliance's own VM.
const ApplianceName = "vmvault-appliance"

// AddAppliance adds the VM vmvault runs in (powered on, one disk of its
// own on a PVSCSI controller) to the first cluster and returns its moref:
// HotAdd attaches the disks it backs up to this VM.
func (l *Lab) AddAppliance(ctx context.Context) (string, error) {
	folder, pool, ds, err := l.placement(ctx)
	if err != nil {
		return "", err
	}
	if err := l.createVM(ctx, folder, pool, ds, ApplianceName); err != nil {
		return "", err
	}
	moref, err := l.MoRef(ApplianceName)
	if err != nil {
		return "", err
	}
	vm := object.NewVirtualMachine(l.admin.Client, types.ManagedObjectReference{Type: "VirtualMachine", Value: moref})
	task, err := vm.PowerOn(ctx)
	if err != nil {
		return "", fmt.Errorf("lab: power on the appliance: %w", err)
	}
	if err := task.Wait(ctx); err != nil {
		return "", fmt.Errorf("lab: power on the appliance: %w", err)
	}
	return moref, nil
}

// BIOSUUIDFile writes vm's BIOS UUID (config.uuid) into dir as Linux's
// /sys/class/dmi/id/product_uuid shows it, and returns the file's path.
func (l *Lab) BIOSUUIDFile(vm, dir string) (string, error) {
	var uuid string
	if err := l.withVM(vm, func(v *simulator.VirtualMachine) error { uuid = v.Config.Uuid; return nil }); err != nil {
		return "", err
	}
	p := filepath.Join(dir, "product_uuid")
	return p, os.WriteFile(p, []byte(strings.ToUpper(uuid)+"\n"), 0o644)
}

// HotAdded lists the datastore paths of the disks attached to vm that are
// not in its own folder (what HotAdd attached and has not detached yet).
func (l *Lab) HotAdded(vm string) ([]string, error) {
	var out []string
	err := l.withVM(vm, func(v *simulator.VirtualMachine) error {
		dir := path.Dir(v.Config.Files.VmPathName)
		for _, d := range object.VirtualDeviceList(v.Config.Hardware.Device).SelectByType((*types.VirtualDisk)(nil)) {
			fb, ok := d.(*types.VirtualDisk).Backing.(types.BaseVirtualDeviceFileBackingInfo)
			if !ok {
				continue
			}
			if f := fb.GetVirtualDeviceFileBackingInfo().FileName; !strings.HasPrefix(f, dir+"/") {
				out = append(out, f)
			}
		}
		return nil
	})
	return out, err
}

// HotAddLocator is the lab's vsphere.DeviceLocator: a disk attached to the
// appliance VM "appears" as the frozen disk's flat file (or, when the VM's
// own snapshots sit under the backup's, a file holding the chain
// consolidated up to the newest snapshot), and every byte read through it
// is counted.
type HotAddLocator struct {
	l         *Lab
	appliance string
	// rescans, opens and forgets count the calls; Hidden makes Locate find
	// nothing (a guest without disk.EnableUUID).
	rescans, opens, forgets, open atomic.Int64
	bytesRead                     atomic.Int64
	Hidden                        atomic.Bool
	// FailAfter, when positive, makes device reads fail with EIO once that
	// many bytes have been read through this locator (a disk that goes bad
	// mid-backup).
	FailAfter atomic.Int64
}

var _ vsphere.DeviceLocator = (*HotAddLocator)(nil)

// HotAddLocator returns the locator for disks attached to appliance.
func (l *Lab) HotAddLocator(appliance string) *HotAddLocator {
	return &HotAddLocator{l: l, appliance: appliance}
}

// BytesRead is the bytes read through devices this locator opened.
func (h *HotAddLocator) BytesRead() int64 { return h.bytesRead.Load() }

// OpenDevices is the devices opened and not yet closed.
func (h *HotAddLocator) OpenDevices() int64 { return h.open.Load() }

// Opens is the number of devices opened so far.
func (h *HotAddLocator) Opens() int64 { return h.opens.Load() }

// Rescan counts the rescan.
func (h *HotAddLocator) Rescan(context.Context) error { h.rescans.Add(1); return nil }

// Forget counts the call.
func (h *HotAddLocator) Forget(context.Context, string) error { h.forgets.Add(1); return nil }

// Locate finds the disk with diskUUID among those attached to the
// appliance VM and returns the file that stands for its device.
func (h *HotAddLocator) Locate(_ context.Context, diskUUID string) (string, error) {
	if h.Hidden.Load() {
		return "", nil
	}
	var file string
	err := h.l.withVM(h.appliance, func(v *simulator.VirtualMachine) error {
		dir := path.Dir(v.Config.Files.VmPathName)
		for _, d := range object.VirtualDeviceList(v.Config.Hardware.Device).SelectByType((*types.VirtualDisk)(nil)) {
			b, ok := d.(*types.VirtualDisk).Backing.(*types.VirtualDiskFlatVer2BackingInfo)
			if ok && strings.EqualFold(b.Uuid, diskUUID) && !strings.HasPrefix(b.FileName, dir+"/") {
				file = b.FileName
			}
		}
		return nil
	})
	if err != nil || file == "" {
		return "", err
	}
	flat, err := h.l.flatOf(file)
	if err != nil {
		return "", err
	}
	h.l.mu.Lock()
	defer h.l.mu.Unlock()
	d := h.l.disks[flat]
	if d == nil || len(d.frozen) == 0 {
		return flat, nil
	}
	// The newest snapshot sees flat + every frozen delta.
	return h.l.consolidate(d)
}

// consolidate writes flat + frozen deltas into a sparse temporary file;
// l.mu is held.
func (l *Lab) consolidate(d *disk) (string, error) {
	f, err := os.CreateTemp("", "lab-hotadd-*.raw")
	if err != nil {
		return "", fmt.Errorf("lab: hot-add view: %w", err)
	}
	defer f.Close()
	if err := f.Truncate(d.capacity); err != nil {
		return "", err
	}
	buf := make([]byte, 1<<20)
	for off := int64(0); off < d.capacity; off += int64(len(buf)) {
		b := buf[:min(int64(len(buf)), d.capacity-off)]
		if err := d.readLevels(b, off, d.frozen); err != nil {
			return "", err
		}
		if allZero(b) {
			continue
		}
		if _, err := f.WriteAt(b, off); err != nil {
			return "", err
		}
	}
	return f.Name(), f.Close()
}

// Open opens the file standing for the device and counts what is read.
func (h *HotAddLocator) Open(p string) (vsphere.BlockDevice, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	h.opens.Add(1)
	h.open.Add(1)
	temp := strings.HasPrefix(filepath.Base(p), "lab-hotadd-")
	return &labDevice{f: f, h: h, temp: temp}, nil
}

type labDevice struct {
	f    *os.File
	h    *HotAddLocator
	temp bool
	done atomic.Bool
}

func (d *labDevice) ReadAt(p []byte, off int64) (int, error) {
	var failed error
	if lim := d.h.FailAfter.Load(); lim > 0 {
		left := lim - d.h.bytesRead.Load()
		if left < int64(len(p)) {
			failed = &os.PathError{Op: "read", Path: d.f.Name(), Err: syscall.EIO}
			p = p[:max(0, left)]
		}
	}
	n, err := d.f.ReadAt(p, off)
	if failed != nil {
		d.h.bytesRead.Add(int64(n))
		return n, failed
	}
	d.h.bytesRead.Add(int64(n))
	if err == io.EOF && n == len(p) {
		err = nil
	}
	return n, err
}

func (d *labDevice) Close() error {
	if d.done.Swap(true) {
		return nil
	}
	d.h.open.Add(-1)
	err := d.f.Close()
	if d.temp {
		_ = os.Remove(d.f.Name())
	}
	return err
}

// LockRunningExtents makes the datastore file service answer GETs of a
// powered-on VM's disk extents with 403 "file locked", as standard ESXi
// does for a running VM's snapshot chain (issue 30): only HotAdd or NFC
// can then read them.
func (l *Lab) LockRunningExtents(on bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lockRunning = on
}

// LockedRefusals counts the GETs refused by LockRunningExtents.
func (l *Lab) LockedRefusals() int64 { return atomic.LoadInt64(&l.lockedRefused) }

// runningExtent reports whether a /folder request reads the disk extent of
// a powered-on VM.
func (l *Lab) runningExtent(r *http.Request) bool {
	l.mu.Lock()
	on := l.lockRunning
	l.mu.Unlock()
	if !on {
		return false
	}
	rel := strings.TrimPrefix(r.URL.Path, "/folder/")
	if !strings.HasSuffix(rel, "-flat.vmdk") {
		return false
	}
	dir, ok := l.dsDirs[r.URL.Query().Get("dsName")]
	if !ok {
		return false
	}
	want := filepath.Join(dir, filepath.FromSlash(rel))
	m := l.model.Map()
	for _, e := range m.All("VirtualMachine") {
		v := e.(*simulator.VirtualMachine)
		hit := false
		m.WithLock(l.lctx, v, func() {
			if v.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOn {
				return
			}
			for _, d := range l.vmDisks(v.Config.Hardware.Device) {
				if d.flat == want {
					hit = true
				}
			}
		})
		if hit {
			return true
		}
	}
	return false
}
