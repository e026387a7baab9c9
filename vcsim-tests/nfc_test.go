package vcsimtests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/vmvault/vmvault/disk/vmdk"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vcsim-tests/lab/labtest"
	"github.com/vmvault/vmvault/vsphere"
)

// TestNFCExport reads a snapshot through an NFC export lease: the lab serves
// streamOptimized VMDK encoded from the snapshot-time flat file, vsphere
// decodes it with the vmdk package.
func TestNFCExport(t *testing.T) {
	l := labtest.Start(t, lab.Options{})
	c := connect(t, l)
	ctx := context.Background()
	vm := findVM(t, c, "DC0_C0_RP0_VM1")
	size := l.Options().DiskCapacity
	want := make([]byte, size)
	copy(want[0:], pattern(300<<10, 1))
	copy(want[5<<20:], pattern(100<<10, 2))
	if err := l.WriteDiskFrom(vm.Name, 0, bytes.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	s, err := c.CreateSnapshot(ctx, vm.VMRef, vsphere.SnapshotOptions{Name: "nfc"})
	if err != nil {
		t.Fatal(err)
	}
	// A write during the export must not show.
	if err := l.WriteDisk(vm.Name, 0, 0, []byte("later")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, size)
	var grains, received int64
	err = c.ExportDisk(ctx, s, vm.Disks[0].Key, vsphere.NFCOptions{Progress: func(n int64) { received = n }}, func(off int64, data []byte) error {
		grains++
		copy(got[off:], data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("NFC export differs from the snapshot content")
	}
	if l.NFCGets() != 1 {
		t.Errorf("NFC GETs = %d, want 1 (the lab did not serve the stream)", l.NFCGets())
	}
	// 300 KiB + 100 KiB of data in 64 KiB grains; zero grains are not sent.
	if grains != 5+2 || received == 0 || received > size/4 {
		t.Errorf("grains = %d, received = %d bytes", grains, received)
	}
	// A dropped stream fails the export (and aborts the lease).
	l.InjectReadFault(lab.ReadFault{PathContains: "/nfc/", AfterBytes: 2000})
	err = c.ExportDisk(ctx, s, vm.Disks[0].Key, vsphere.NFCOptions{}, func(int64, []byte) error { return nil })
	if err == nil {
		t.Error("export over a dropped connection succeeded")
	}
	// The callback's error stops the export.
	stop := errors.New("stop")
	if err := c.ExportDisk(ctx, s, vm.Disks[0].Key, vsphere.NFCOptions{}, func(int64, []byte) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("callback error: %v", err)
	}
}

// TestNFCImport restores into a new VM through ImportVApp + an NFC upload of
// streamOptimized VMDK encoded on the fly; the lab decodes it into the flat
// file.
func TestNFCImport(t *testing.T) {
	l := labtest.Start(t, lab.Options{})
	c := connect(t, l)
	ctx := context.Background()
	size := l.Options().DiskCapacity
	want := make([]byte, size)
	copy(want[100:], pattern(200<<10, 9))
	copy(want[6<<20:], pattern(64<<10, 4))
	spec := vsphere.VMSpec{
		Name: "imported", Datastore: "LocalDS_0", ResourcePool: "/DC0/host/DC0_C0/Resources",
		Disks: []vsphere.DiskSpec{{CapacityBytes: size, Thin: true}},
		NICs:  []vsphere.NICSpec{{Network: "VM Network"}},
	}
	var sent int64
	vm, err := c.ImportVM(ctx, spec, func(ctx context.Context, disk int, w *vmdk.StreamWriter) error {
		if disk != 0 {
			return fmt.Errorf("unexpected disk %d", disk)
		}
		for off := int64(0); off < size; off += 1 << 20 {
			if err := w.WriteGrainsAt(want[off:off+1<<20], off); err != nil {
				return err
			}
		}
		return nil
	}, func(n int64) { sent = n })
	if err != nil {
		t.Fatal(err)
	}
	if vm.Name != "imported" || len(vm.Disks) != 1 || len(vm.NICs) != 1 {
		t.Fatalf("imported VM = %+v", vm)
	}
	if l.NFCPuts() != 1 {
		t.Fatalf("NFC uploads decoded by the lab = %d, want 1", l.NFCPuts())
	}
	got, err := l.ReadDisk("imported", 0, 0, int(size))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("imported disk differs")
	}
	if pushed := c.Stats().BytesPushed; pushed == 0 || pushed > size/4 || sent != pushed {
		t.Errorf("pushed %d bytes for %d bytes of data (zeros must not be sent)", pushed, 264<<10)
	}
	// A failing source aborts the import.
	spec.Name = "imported2"
	boom := errors.New("source failed")
	if _, err := c.ImportVM(ctx, spec, func(context.Context, int, *vmdk.StreamWriter) error { return boom }, nil); err == nil {
		t.Error("import with a failing source succeeded")
	}
}
