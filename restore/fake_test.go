package restore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/vmvault/vmvault/disk/vmdk"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/vmconfig"
	"github.com/vmvault/vmvault/vsphere"
)

// fakeVC is an in-memory vCenter behind the engine's small interfaces. It
// records every call that changes something, so a test can assert what a
// failing step left behind and which context the clean-up ran on.
type fakeVC struct {
	mu              sync.Mutex
	free            int64
	vms             map[string]vsphere.VM // by moref
	next            int
	calls           []string
	uploaded        map[int32][]byte
	uploadErr       func(done int64) error // non-nil: fail once done bytes were read
	importErr       error
	destroyErr      error
	destroyCtxs     []error // ctx.Err() of every DestroyVM/DetachDisk call
	cancelMidUpload context.CancelFunc
}

func newFakeVC() *fakeVC {
	return &fakeVC{free: 1 << 40, vms: map[string]vsphere.VM{}, uploaded: map[int32][]byte{}}
}

func (f *fakeVC) record(format string, a ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf(format, a...))
}

func (f *fakeVC) called(prefix string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

func (f *fakeVC) Inventory(context.Context) (*vsphere.Inventory, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	inv := &vsphere.Inventory{
		Datacenters: []vsphere.Datacenter{{Name: "DC0", Path: "/DC0"}},
		Datastores:  []vsphere.Datastore{{Name: "ds1", Path: "/DC0/datastore/ds1", FreeBytes: f.free, Accessible: true}},
		Networks:    []vsphere.Network{{Name: "VM Network", MoRef: "network-1"}},
	}
	for _, v := range f.vms {
		inv.VMs = append(inv.VMs, v)
	}
	return inv, nil
}

func (f *fakeVC) DatastoreInfo(_ context.Context, _, name string) (vsphere.Datastore, error) {
	if name != "ds1" {
		return vsphere.Datastore{}, fmt.Errorf("datastore %s: %w", name, vsphere.ErrNotFound)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return vsphere.Datastore{Name: name, FreeBytes: f.free, Accessible: true}, nil
}

func (f *fakeVC) FindVM(_ context.Context, id string) (vsphere.VM, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, v := range f.vms {
		if v.Name == id || v.MoRef == id {
			return v, nil
		}
	}
	return vsphere.VM{}, fmt.Errorf("VM %s: %w", id, vsphere.ErrNotFound)
}

func (f *fakeVC) VM(ctx context.Context, ref vsphere.VMRef) (vsphere.VM, error) {
	return f.FindVM(ctx, ref.MoRef)
}

func (f *fakeVC) VMsNamed(_ context.Context, name string) ([]vsphere.VMRef, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []vsphere.VMRef
	for _, v := range f.vms {
		if v.Name == name {
			out = append(out, v.VMRef)
		}
	}
	return out, nil
}

func (f *fakeVC) VMNotes(context.Context) ([]vsphere.VMNote, error) { return nil, nil }

func (f *fakeVC) CheckVMSpec(context.Context, vsphere.VMSpec) error { return nil }

// addVM makes the VM a spec describes (caller holds no lock).
func (f *fakeVC) addVM(spec vsphere.VMSpec) vsphere.VM {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	vm := vsphere.VM{VMRef: vsphere.VMRef{MoRef: fmt.Sprintf("vm-%d", f.next), Name: spec.Name}, PowerState: "poweredOff"}
	for i, d := range spec.Disks {
		c := spec.Controllers[d.Controller]
		vm.Disks = append(vm.Disks, vsphere.Disk{Key: int32(2000 + i), CapacityBytes: d.CapacityBytes, ControllerType: "scsi",
			Bus: c.Bus, Unit: d.Unit, FileName: fmt.Sprintf("[ds1] %s/%s_%d.vmdk", spec.Name, spec.Name, i)})
	}
	f.vms[vm.MoRef] = vm
	return vm
}

func (f *fakeVC) CreateVM(_ context.Context, spec vsphere.VMSpec) (vsphere.VM, error) {
	f.record("CreateVM %s", spec.Name)
	return f.addVM(spec), nil
}

func (f *fakeVC) DestroyVM(ctx context.Context, vm vsphere.VMRef) error {
	f.record("DestroyVM %s", vm.MoRef)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.destroyCtxs = append(f.destroyCtxs, ctx.Err())
	if f.destroyErr != nil {
		return f.destroyErr
	}
	delete(f.vms, vm.MoRef)
	return nil
}

func (f *fakeVC) AttachDisk(_ context.Context, vm vsphere.VMRef, spec vsphere.AttachDiskSpec) (vsphere.Disk, error) {
	f.record("AttachDisk %s", vm.MoRef)
	f.mu.Lock()
	defer f.mu.Unlock()
	v := f.vms[vm.MoRef]
	d := vsphere.Disk{Key: int32(2000 + len(v.Disks)), CapacityBytes: spec.CapacityBytes, FileName: "[ds1] new.vmdk"}
	v.Disks = append(v.Disks, d)
	f.vms[vm.MoRef] = v
	return d, nil
}

func (f *fakeVC) DetachDisk(ctx context.Context, vm vsphere.VMRef, key int32) error {
	f.record("DetachDisk %s %d", vm.MoRef, key)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.destroyCtxs = append(f.destroyCtxs, ctx.Err())
	v := f.vms[vm.MoRef]
	for i, d := range v.Disks {
		if d.Key == key {
			v.Disks = append(v.Disks[:i], v.Disks[i+1:]...)
			break
		}
	}
	f.vms[vm.MoRef] = v
	return nil
}

func (f *fakeVC) PowerOn(_ context.Context, vm vsphere.VMRef) error {
	f.record("PowerOn %s", vm.MoRef)
	return nil
}

func (f *fakeVC) PowerOff(_ context.Context, vm vsphere.VMRef) error {
	f.record("PowerOff %s", vm.MoRef)
	return nil
}

func (f *fakeVC) ResetCBT(_ context.Context, vm vsphere.VMRef) error {
	f.record("ResetCBT %s", vm.MoRef)
	return nil
}

var errSinkBroke = errors.New("datastore PUT broke")

func (f *fakeVC) UploadDisk(ctx context.Context, vm vsphere.VMRef, key int32, r io.Reader, size int64, progress func(int64)) error {
	f.record("UploadDisk %s %d", vm.MoRef, key)
	var buf bytes.Buffer
	chunk := make([]byte, 64<<10)
	for {
		if f.uploadErr != nil {
			if err := f.uploadErr(int64(buf.Len())); err != nil {
				return err
			}
		}
		if f.cancelMidUpload != nil && buf.Len() > 0 {
			f.cancelMidUpload()
			<-ctx.Done()
			return ctx.Err()
		}
		n, err := r.Read(chunk)
		buf.Write(chunk[:n])
		if progress != nil {
			progress(int64(buf.Len()))
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	if int64(buf.Len()) != size {
		return fmt.Errorf("short body: %d of %d", buf.Len(), size)
	}
	f.mu.Lock()
	f.uploaded[key] = buf.Bytes()
	f.mu.Unlock()
	return nil
}

func (f *fakeVC) ImportVM(ctx context.Context, spec vsphere.VMSpec, fill vsphere.DiskFiller, _ func(int64)) (vsphere.VM, error) {
	f.record("ImportVM %s", spec.Name)
	// An NFC import registers the VM before the disks stream, so a failure
	// leaves a VM of that name behind.
	vm := f.addVM(spec)
	for i, d := range spec.Disks {
		w, err := vmdk.NewStreamWriter(io.Discard, d.CapacityBytes, vmdk.StreamWriterOptions{})
		if err != nil {
			return vsphere.VM{}, err
		}
		if err := fill(ctx, i, w); err != nil {
			return vsphere.VM{}, err
		}
		if f.importErr != nil {
			return vsphere.VM{}, f.importErr
		}
	}
	return vm, nil
}

// vmPoint commits a one-disk restore point whose configuration puts the
// disk on ds1 and a NIC on "VM Network".
func vmPoint(t *testing.T, r *repository.Repository) (string, []byte) {
	t.Helper()
	cfg := vmconfig.VMConfig{Version: 1, Name: "web01", NumCPU: 1, MemoryMB: 128, GuestID: "otherGuest64",
		Datastores:  []string{"ds1"},
		Controllers: []vmconfig.ControllerConfig{{Key: 1000, Type: "scsi", Bus: 0, Model: "pvscsi"}},
		Disks: []vmconfig.DiskConfig{{Key: 2000, Index: 0, Label: "Hard disk 1", ControllerKey: 1000, ControllerType: "scsi",
			Unit: 0, Datastore: "ds1"}},
		NICs: []vmconfig.NICConfig{{Key: 4000, Label: "Network adapter 1", Network: "VM Network", Type: "vmxnet3"}},
	}
	parts := [][]byte{random(11, 300<<10), make([]byte, 1<<20), random(12, 200<<10)}
	var size int64
	for _, p := range parts {
		size += int64(len(p))
	}
	cfg.Disks[0].CapacityBytes = size
	b, err := vmconfig.Encode(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return point(t, r, b, parts...)
}

// TestFakeRestoreVM: a successful PUT restore sends the disk's exact bytes
// to the sink, reports their digest, and powers on only at the end.
func TestFakeRestoreVM(t *testing.T) {
	r := repository.TestRepository(t)
	pt, img := vmPoint(t, r)
	vc := newFakeVC()
	res, err := New(r, vc, Options{}).RestoreVM(context.Background(), VMRequest{RestorePoint: pt, Name: "web01-copy", PowerOn: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := vc.uploaded[res.Disks[0].TargetKey]; !bytes.Equal(got, img) {
		t.Fatalf("sink got %d bytes, want the disk's %d", len(got), len(img))
	}
	sum := sha256.Sum256(img)
	if res.Disks[0].SHA256 != hex.EncodeToString(sum[:]) || !res.PoweredOn {
		t.Errorf("result %+v", res)
	}
	if want := []string{"CreateVM web01-copy", "UploadDisk vm-1 2000", "PowerOn vm-1"}; fmt.Sprint(vc.calls) != fmt.Sprint(want) {
		t.Errorf("calls %q, want %q", vc.calls, want)
	}
}

// TestFakeSinkFailureRemovesVM: whichever way the disk sink fails after the
// VM exists, the engine removes the half-made VM, on a live context even
// when the caller's was cancelled, never powers it on, and says so.
func TestFakeSinkFailureRemovesVM(t *testing.T) {
	r := repository.TestRepository(t)
	pt, _ := vmPoint(t, r)
	for _, tc := range []struct {
		name      string
		transport string
		setup     func(vc *fakeVC, cancel context.CancelFunc)
		want      error
	}{
		{"put fails midway", TransportPUT, func(vc *fakeVC, _ context.CancelFunc) {
			vc.uploadErr = func(done int64) error {
				if done >= 256<<10 {
					return errSinkBroke
				}
				return nil
			}
		}, errSinkBroke},
		{"put cancelled", TransportPUT, func(vc *fakeVC, cancel context.CancelFunc) { vc.cancelMidUpload = cancel }, context.Canceled},
		{"nfc import fails", TransportNFC, func(vc *fakeVC, _ context.CancelFunc) { vc.importErr = errSinkBroke }, errSinkBroke},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vc := newFakeVC()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			tc.setup(vc, cancel)
			res, err := New(r, vc, Options{}).RestoreVM(ctx, VMRequest{RestorePoint: pt, Name: "web01-copy", PowerOn: true, Transport: tc.transport})
			if !errors.Is(err, tc.want) {
				t.Fatalf("RestoreVM: %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), "the half-made VM was removed") {
				t.Errorf("error does not say the VM was removed: %v", err)
			}
			if len(vc.vms) != 0 {
				t.Errorf("VMs left behind: %v", vc.vms)
			}
			if vc.called("DestroyVM") != 1 || vc.called("PowerOn") != 0 {
				t.Errorf("calls %q", vc.calls)
			}
			for _, e := range vc.destroyCtxs {
				if e != nil {
					t.Errorf("clean-up ran on a dead context: %v", e)
				}
			}
			if res.VM.MoRef != "" || len(res.Disks) != 0 {
				t.Errorf("result still names what was removed: %+v", res)
			}
		})
	}
}

// TestFakeCleanupFailureSaysSo: when removing the half-made VM fails too,
// the error keeps the cause, names the VM to remove by hand, and the result
// still points at it.
func TestFakeCleanupFailureSaysSo(t *testing.T) {
	r := repository.TestRepository(t)
	pt, _ := vmPoint(t, r)
	vc := newFakeVC()
	vc.uploadErr = func(int64) error { return errSinkBroke }
	vc.destroyErr = errors.New("task failed")
	res, err := New(r, vc, Options{}).RestoreVM(context.Background(), VMRequest{RestorePoint: pt, Name: "web01-copy"})
	if !errors.Is(err, errSinkBroke) || !strings.Contains(err.Error(), "remove it by hand") || !strings.Contains(err.Error(), "vm-1") {
		t.Fatalf("RestoreVM: %v", err)
	}
	if res.VM.MoRef != "vm-1" {
		t.Errorf("result lost the VM left behind: %+v", res.VM)
	}
}

// TestFakeValidationChangesNothing: a restore refused in validation (no
// room, name taken) makes no call that changes vCenter.
func TestFakeValidationChangesNothing(t *testing.T) {
	r := repository.TestRepository(t)
	pt, img := vmPoint(t, r)
	for _, tc := range []struct {
		name  string
		setup func(vc *fakeVC)
		req   VMRequest
		want  error
	}{
		{"no room", func(vc *fakeVC) { vc.free = int64(len(img)) - 1 }, VMRequest{Name: "x"}, ErrNoSpace},
		{"name taken", func(vc *fakeVC) { vc.addVM(vsphere.VMSpec{Name: "web01"}) }, VMRequest{}, ErrNameInUse},
		{"unknown network", func(*fakeVC) {}, VMRequest{Name: "x", NetworkMap: map[string]string{"VM Network": "nope"}}, ErrTargetNotFound},
		// AnyNetwork maps the NIC no other key names.
		{"any network to an unknown one", func(*fakeVC) {}, VMRequest{Name: "x", NetworkMap: map[string]string{AnyNetwork: "nope"}}, ErrTargetNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vc := newFakeVC()
			tc.setup(vc)
			vc.calls = nil
			tc.req.RestorePoint = pt
			if _, err := New(r, vc, Options{}).RestoreVM(context.Background(), tc.req); !errors.Is(err, tc.want) {
				t.Fatalf("RestoreVM: %v, want %v", err, tc.want)
			}
			if len(vc.calls) != 0 {
				t.Errorf("validation changed vCenter: %q", vc.calls)
			}
		})
	}
}

// TestFakeAttachFailureDetaches: a disk attached to an existing VM is
// detached again when its upload fails, and the VM itself is kept.
func TestFakeAttachFailureDetaches(t *testing.T) {
	r := repository.TestRepository(t)
	pt, _ := vmPoint(t, r)
	vc := newFakeVC()
	target := vc.addVM(vsphere.VMSpec{Name: "app01"})
	vc.uploadErr = func(done int64) error {
		if done > 0 {
			return errSinkBroke
		}
		return nil
	}
	_, err := New(r, vc, Options{}).AttachDisk(context.Background(), AttachRequest{RestorePoint: pt, Disk: 0, VM: "app01"})
	if !errors.Is(err, errSinkBroke) || !strings.Contains(err.Error(), "the new disk was removed") {
		t.Fatalf("AttachDisk: %v", err)
	}
	if vc.called("DetachDisk "+target.MoRef+" 2000") != 1 || vc.called("DestroyVM") != 0 {
		t.Errorf("calls %q", vc.calls)
	}
	if len(vc.vms[target.MoRef].Disks) != 0 {
		t.Errorf("the attached disk stayed: %+v", vc.vms[target.MoRef].Disks)
	}
}

// TestNilClientIsNoVCenter: a nil *vsphere.Client (a daemon without a
// vCenter) is refused cleanly, not dereferenced.
func TestNilClientIsNoVCenter(t *testing.T) {
	var c *vsphere.Client
	if _, err := New(nil, c, Options{}).CleanupRehearsals(context.Background(), 0); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("CleanupRehearsals without vCenter: %v", err)
	}
}
