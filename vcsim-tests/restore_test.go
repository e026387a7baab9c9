package vcsimtests

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vcsim-tests/lab/labtest"
	"github.com/vmvault/vmvault/vsphere"
)

// TestRestoreToNewVM: create a VM from a source VM's saved shape, stream the
// source snapshot's bytes into its disk, and compare.
func TestRestoreToNewVM(t *testing.T) {
	l := labtest.Start(t, lab.Options{})
	c := connect(t, l)
	ctx := context.Background()
	src := findVM(t, c, "DC0_C0_RP0_VM0")
	size := l.Options().DiskCapacity
	data := pattern(int(size), 11)
	copy(data[1<<20:], make([]byte, 2<<20)) // a hole in the middle
	if err := l.WriteDiskFrom(src.Name, 0, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	s, err := c.CreateSnapshot(ctx, src.VMRef, vsphere.SnapshotOptions{Name: "restore-src"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.OpenDisk(ctx, s, src.Disks[0].Key, vsphere.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec := vsphere.VMSpec{
		Name: "restored", Datastore: "LocalDS_0", ResourcePool: "/DC0/host/DC0_C0/Resources",
		GuestID: src.GuestID, NumCPU: src.NumCPU, MemoryMB: int64(src.MemoryMB),
		Disks: []vsphere.DiskSpec{{CapacityBytes: src.Disks[0].CapacityBytes, Thin: true}},
		NICs:  []vsphere.NICSpec{{Network: src.NICs[0].Network}},
	}
	vm, err := c.CreateVM(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if vm.Name != "restored" || len(vm.Disks) != 1 || vm.Disks[0].CapacityBytes != size || len(vm.NICs) != 1 || vm.NICs[0].Network != src.NICs[0].Network {
		t.Fatalf("restored VM = %+v", vm)
	}
	var last int64
	if err := c.UploadDisk(ctx, vm.VMRef, vm.Disks[0].Key, io.NewSectionReader(r, 0, r.Size()), size, func(n int64) { last = n }); err != nil {
		t.Fatal(err)
	}
	if last != size || c.Stats().BytesPushed != size {
		t.Errorf("progress %d, pushed %d, want %d", last, c.Stats().BytesPushed, size)
	}
	got, err := l.ReadDisk("restored", 0, 0, int(size))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("restored disk differs from the source")
	}
	// Errors: too much data, a short source, a missing disk, a bad network.
	if err := c.UploadDisk(ctx, vm.VMRef, vm.Disks[0].Key, bytes.NewReader(data), size+1, nil); err == nil {
		t.Error("upload larger than the disk accepted")
	}
	if err := c.UploadDisk(ctx, vm.VMRef, vm.Disks[0].Key, bytes.NewReader(data[:10]), size, nil); err == nil {
		t.Error("short source accepted")
	}
	if err := c.UploadDisk(ctx, vm.VMRef, 4242, bytes.NewReader(data), 10, nil); !errors.Is(err, vsphere.ErrNotFound) {
		t.Errorf("missing disk: %v", err)
	}
	spec.Name, spec.NICs = "restored2", []vsphere.NICSpec{{Network: "no such network"}}
	if _, err := c.CreateVM(ctx, spec); !errors.Is(err, vsphere.ErrNotFound) {
		t.Errorf("unknown network: %v, want ErrNotFound", err)
	}
}
