package vcsimtests

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vsphere"
)

// TestNFCExport reads a snapshot through an NFC export lease: the lab serves
// streamOptimized VMDK encoded from the snapshot-time flat file, vsphere
// decodes it with the vmdk package.
func TestNFCExport(t *testing.T) {
	l := startLab(t, lab.Options{})
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
