package vcsimtests

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vcsim-tests/lab/labtest"
	"github.com/vmvault/vmvault/vsphere"
)

// TestReadSnapshotWhileGuestWrites: the reader sees the disk as it was at
// snapshot time while the guest keeps writing; removing the snapshot merges.
func TestReadSnapshotWhileGuestWrites(t *testing.T) {
	l := labtest.Start(t, lab.Options{})
	c := connect(t, l)
	ctx := context.Background()
	vm := findVM(t, c, "DC0_C0_RP0_VM1")
	size := l.Options().DiskCapacity
	before := pattern(int(size), 7)
	if err := l.WriteDiskFrom(vm.Name, 0, bytes.NewReader(before)); err != nil {
		t.Fatal(err)
	}
	s, err := c.CreateSnapshot(ctx, vm.VMRef, vsphere.SnapshotOptions{Name: "r", Quiesce: true})
	if err != nil {
		t.Fatal(err)
	}
	during := []byte("written by the guest during the backup")
	if err := l.WriteDisk(vm.Name, 0, 4096+100, during); err != nil {
		t.Fatal(err)
	}
	var progress atomic.Int64
	r, err := c.OpenDisk(ctx, s, vm.Disks[0].Key, vsphere.ReaderOptions{ChunkSize: 1 << 20, Parallel: 3, Progress: func(n int64) { progress.Add(n) }})
	if err != nil {
		t.Fatal(err)
	}
	if r.Size() != size {
		t.Fatalf("size = %d, want %d", r.Size(), size)
	}
	got := make([]byte, size)
	n, err := r.ReadAt(got, 0)
	if err != nil && !errors.Is(err, io.EOF) || int64(n) != size {
		t.Fatalf("ReadAt = %d, %v", n, err)
	}
	if !bytes.Equal(got, before) {
		t.Fatal("snapshot read differs from the snapshot-time content")
	}
	if progress.Load() != size {
		t.Errorf("progress reported %d bytes, want %d", progress.Load(), size)
	}
	live, _ := l.ReadDisk(vm.Name, 0, 4096+100, len(during))
	if !bytes.Equal(live, during) {
		t.Error("the guest does not see its own write")
	}
	// Reads at the end: short read with io.EOF, then io.EOF.
	tail := make([]byte, 100)
	if n, err := r.ReadAt(tail, size-10); n != 10 || !errors.Is(err, io.EOF) {
		t.Errorf("tail read = %d, %v; want 10, EOF", n, err)
	}
	if _, err := r.ReadAt(tail, size); !errors.Is(err, io.EOF) {
		t.Errorf("read past end = %v, want EOF", err)
	}
	if err := c.RemoveSnapshot(ctx, vm.VMRef, s.MoRef); err != nil {
		t.Fatal(err)
	}
	base, _ := l.ReadBase(vm.Name, 0, 4096+100, len(during))
	if !bytes.Equal(base, during) {
		t.Error("removing the snapshot did not merge the guest's write")
	}
}

func TestReaderRetriesDroppedAndStalledReads(t *testing.T) {
	l := labtest.Start(t, lab.Options{})
	c := connect(t, l)
	ctx := context.Background()
	vm := findVM(t, c, "DC0_H0_VM1")
	size := l.Options().DiskCapacity
	want := pattern(int(size), 3)
	if err := l.WriteDiskFrom(vm.Name, 0, bytes.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	s, err := c.CreateSnapshot(ctx, vm.VMRef, vsphere.SnapshotOptions{Name: "f"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.OpenDisk(ctx, s, vm.Disks[0].Key, vsphere.ReaderOptions{ChunkSize: 2 << 20, Parallel: 2, RequestTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		fault lab.ReadFault
	}{
		{"dropped after 100000 bytes twice", lab.ReadFault{AfterBytes: 100000, Times: 2}},
		{"dropped before any byte", lab.ReadFault{AfterBytes: 0}},
		{"stalled after 1 MiB", lab.ReadFault{AfterBytes: 1 << 20, Stall: true}},
		{"503 busy", lab.ReadFault{Status: http.StatusServiceUnavailable, Times: 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			retries := c.Stats().Retries
			l.InjectReadFault(tc.fault)
			got := make([]byte, size)
			if _, err := r.ReadAt(got, 0); err != nil && !errors.Is(err, io.EOF) {
				t.Fatalf("read: %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatal("content differs after retries")
			}
			if c.Stats().Retries == retries {
				t.Error("no retry happened: the fault did not fire")
			}
		})
	}
	// 401 from the file service: the session is re-established, then retried.
	l.InjectReadFault(lab.ReadFault{Status: http.StatusUnauthorized})
	if _, err := r.ReadAt(make([]byte, 4096), 0); err != nil {
		t.Errorf("read after 401: %v", err)
	}
	if c.Stats().Relogins != 1 {
		t.Errorf("relogins after 401 = %d, want 1", c.Stats().Relogins)
	}
	// Permanent errors are not retried.
	retries := c.Stats().Retries
	l.InjectReadFault(lab.ReadFault{Status: http.StatusNotFound})
	if _, err := r.ReadAt(make([]byte, 4096), 0); !errors.Is(err, vsphere.ErrNotFound) {
		t.Errorf("404: %v, want ErrNotFound", err)
	}
	if c.Stats().Retries != retries {
		t.Error("404 was retried")
	}
	// A fault that outlasts the policy surfaces as ErrTransient.
	l.InjectReadFault(lab.ReadFault{Status: http.StatusBadGateway, Times: 100})
	if _, err := r.ReadAt(make([]byte, 4096), 0); !errors.Is(err, vsphere.ErrTransient) {
		t.Errorf("persistent 502: %v, want ErrTransient", err)
	}
	l.ClearReadFaults()
}

func TestOpenDiskRefusesUnsupported(t *testing.T) {
	l := labtest.Start(t, lab.Options{})
	c := connect(t, l)
	ctx := context.Background()
	vm := findVM(t, c, "DC0_H0_VM0")
	// A user's snapshot under ours: the frozen data spans a chain.
	ovm := object.NewVirtualMachine(l.Admin().Client, types.ManagedObjectReference{Type: "VirtualMachine", Value: vm.MoRef})
	task, err := ovm.CreateSnapshot(ctx, "user", "", false, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := task.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := c.CreateSnapshot(ctx, vm.VMRef, vsphere.SnapshotOptions{Name: "chain"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.OpenDisk(ctx, s, vm.Disks[0].Key, vsphere.ReaderOptions{})
	// The base flat file holds only the user's snapshot's state: the
	// chain must be read through NFC export, which ESXi consolidates.
	if !errors.Is(err, vsphere.ErrNeedsExport) || errors.Is(err, vsphere.ErrUnsupportedDisk) {
		t.Errorf("open with older snapshot: %v, want ErrNeedsExport", err)
	}
	if _, err := c.OpenDisk(ctx, s, 99999, vsphere.ReaderOptions{}); !errors.Is(err, vsphere.ErrNotFound) {
		t.Errorf("missing disk key: %v", err)
	}
}

// TestReadRealFilesystemImage puts an ext4 image made by mkfs.ext4 -d into a
// VM and reads it back through a snapshot.
func TestReadRealFilesystemImage(t *testing.T) {
	mkfs, err := exec.LookPath("mkfs.ext4")
	if err != nil {
		t.Fatalf("install e2fsprogs (mkfs.ext4): make test does: %v", err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "root")
	if err := os.MkdirAll(filepath.Join(src, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "etc", "hostname"), []byte("lab-vm\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, "disk.img")
	if out, err := exec.Command(mkfs, "-q", "-F", "-d", src, img, "4M").CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v\n%s", err, out)
	}
	l := labtest.Start(t, lab.Options{})
	c := connect(t, l)
	ctx := context.Background()
	vm := findVM(t, c, "DC0_C0_RP0_VM0")
	if err := l.SetDiskImage(vm.Name, 0, img); err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(img)
	if err := c.EnableCBT(ctx, vm.VMRef); err != nil {
		t.Fatal(err)
	}
	s, err := c.CreateSnapshot(ctx, vm.VMRef, vsphere.SnapshotOptions{Name: "img"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.OpenDisk(ctx, s, vm.Disks[0].Key, vsphere.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Read only the allocated extents, as a full backup does.
	areas, err := c.ChangedAreas(ctx, s, vm.Disks[0].Key, vsphere.AllocatedAreas)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(want))
	var read int64
	for _, a := range areas {
		if a.Offset >= int64(len(got)) {
			t.Fatalf("allocated area %+v beyond the image", a)
		}
		end := min(a.End(), int64(len(got)))
		if _, err := r.ReadAt(got[a.Offset:end], a.Offset); err != nil {
			t.Fatal(err)
		}
		read += end - a.Offset
	}
	if !bytes.Equal(got, want) {
		t.Fatal("image read through allocated extents differs")
	}
	if read >= int64(len(want)) {
		t.Errorf("read %d bytes of a %d-byte sparse image: holes were not skipped", read, len(want))
	}
	if !bytes.Contains(got, []byte("lab-vm\n")) {
		t.Error("file content not found in the image")
	}
}

// TestReaderShortRangesAndShortFiles: a server that caps ranges is followed
// without counting failures; a flat file shorter than the disk reads as
// zeros past its end.
func TestReaderShortRangesAndShortFiles(t *testing.T) {
	l := labtest.Start(t, lab.Options{MaxRangeBytes: 300 << 10})
	c := connect(t, l)
	ctx := context.Background()
	vm := findVM(t, c, "DC0_C0_RP0_VM0")
	size := l.Options().DiskCapacity
	want := pattern(int(size), 5)
	if err := l.WriteDiskFrom(vm.Name, 0, bytes.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	s, err := c.CreateSnapshot(ctx, vm.VMRef, vsphere.SnapshotOptions{Name: "cap"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.OpenDisk(ctx, s, vm.Disks[0].Key, vsphere.ReaderOptions{ChunkSize: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, size)
	if _, err := r.ReadAt(got, 0); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("content differs under a range cap")
	}
	if st := c.Stats(); st.Retries != 0 || st.RangeGets < size/(300<<10) {
		t.Errorf("stats under a range cap: %+v", st)
	}
	info, _ := l.Disk(vm.Name, 0)
	if err := os.Truncate(info.FlatPath, size/2); err != nil {
		t.Fatal(err)
	}
	clear(want[size/2:])
	if _, err := r.ReadAt(got, 0); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("a short flat file did not read as zeros past its end")
	}
}

// TestReaderCancellation: cancelling the context ends a stalled read at
// once, whatever the per-request timeout.
func TestReaderCancellation(t *testing.T) {
	l := labtest.Start(t, lab.Options{})
	c := connect(t, l)
	vm := findVM(t, c, "DC0_H0_VM0")
	s, err := c.CreateSnapshot(context.Background(), vm.VMRef, vsphere.SnapshotOptions{Name: "cancel"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.OpenDisk(context.Background(), s, vm.Disks[0].Key, vsphere.ReaderOptions{RequestTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	l.InjectReadFault(lab.ReadFault{AfterBytes: 1000, Stall: true, Times: 10})
	defer l.ClearReadFaults()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = r.ReadAtContext(ctx, make([]byte, 1<<20), 0)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("cancelled read: %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("cancelled read took %v", d)
	}
}
