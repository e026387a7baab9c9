package restoree2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/vmvault/vmvault/restore"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vcsim-tests/lab/labtest"
)

// TestAttachDisk restores disk 1 of a point as a new disk of another VM (on
// the SATA controller and a second datastore), then shows that a failed
// upload removes the new disk again and leaves the VM's disks as they were.
func TestAttachDisk(t *testing.T) {
	l := labtest.Start(t, lab.Options{Datastores: 2})
	c := connect(t, l)
	r := labtest.Repo(t)
	ctx := context.Background()
	src, imgs := makeSource(t, l, c, "src-att", 6)
	pt := backUp(t, c, r, src.Name)
	target, _ := makeSource(t, l, c, "target-att", 7)
	if err := c.PowerOn(ctx, target.VMRef); err != nil {
		t.Fatal(err)
	}

	res, err := newEngine(r, c).AttachDisk(ctx, restore.AttachRequest{RestorePoint: pt, Disk: 1, VM: "target-att",
		Datastore: "LocalDS_1", ControllerType: "sata", Bus: 0, Thin: true})
	if err != nil {
		t.Fatalf("attach: %v", err)
	}
	got, err := c.VM(ctx, target.VMRef)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Disks) != 4 || res.Mode != "attach" || len(res.Disks) != 1 {
		t.Fatalf("after attach: %d disks, result %+v", len(got.Disks), res)
	}
	d := got.Disks[len(got.Disks)-1]
	for _, g := range got.Disks {
		if g.Key == res.Disks[0].TargetKey {
			d = g
		}
	}
	if d.ControllerType != "sata" || d.Datastore != "LocalDS_1" || d.CapacityBytes != int64(len(imgs[1])) || !d.Thin {
		t.Errorf("attached disk %+v", d)
	}
	labtest.SameBytes(t, "attached disk", diskByKey(t, l, "target-att", d.Key), imgs[1])
	if res.Disks[0].SHA256 != sha(imgs[1]) {
		t.Errorf("digest %s", res.Disks[0].SHA256)
	}

	// A failed upload: the new disk is detached and deleted.
	fp := newFailingProxy(t, l)
	pc := connectCfg(t, fp.config(l))
	files := dsFiles(t, l, ds0, "LocalDS_1")
	fp.failAfter.Store(512 << 10)
	_, err = newEngine(r, pc).AttachDisk(ctx, restore.AttachRequest{RestorePoint: pt, Disk: 0, VM: "target-att"})
	fp.failAfter.Store(0)
	if err == nil || !strings.Contains(err.Error(), "the new disk was removed") {
		t.Fatalf("failed attach: %v", err)
	}
	after, err := c.VM(ctx, target.VMRef)
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Disks) != 4 {
		t.Errorf("failed attach left %d disks", len(after.Disks))
	}
	if got := dsFiles(t, l, ds0, "LocalDS_1"); strings.Join(got, ",") != strings.Join(files, ",") {
		t.Errorf("datastore files changed: %v -> %v", files, got)
	}
	// Unknown VM, controller, datastore: clear errors, nothing added.
	for _, req := range []restore.AttachRequest{
		{RestorePoint: pt, Disk: 0, VM: "no-such-vm"},
		{RestorePoint: pt, Disk: 0, VM: "target-att", ControllerType: "nvme"},
		{RestorePoint: pt, Disk: 0, VM: "target-att", Datastore: "NoSuchDS"},
	} {
		if _, err := newEngine(r, c).AttachDisk(ctx, req); !errors.Is(err, restore.ErrTargetNotFound) {
			t.Errorf("%+v: %v, want ErrTargetNotFound", req, err)
		}
	}
	if _, err := newEngine(r, c).AttachDisk(ctx, restore.AttachRequest{RestorePoint: pt, Disk: 9, VM: "target-att"}); !errors.Is(err, restore.ErrInvalidRequest) {
		t.Errorf("disk 9: %v", err)
	}
	if v, _ := c.VM(ctx, target.VMRef); len(v.Disks) != 4 {
		t.Errorf("rejected attaches left %d disks", len(v.Disks))
	}
}

// TestDownloadDisk downloads a disk raw (sparse) and as a streamOptimized
// VMDK; qemu-img converts the VMDK back to the same bytes.
func TestDownloadDisk(t *testing.T) {
	qemu, err := exec.LookPath("qemu-img")
	if err != nil {
		t.Fatalf("install qemu-img (qemu-utils): make test does: %v", err)
	}
	l := labtest.Start(t, lab.Options{})
	c := connect(t, l)
	r := labtest.Repo(t)
	ctx := context.Background()
	src, imgs := makeSource(t, l, c, "src-dl", 8)
	pt := backUp(t, c, r, src.Name)
	dir := t.TempDir()
	e := restore.New(r, nil, restore.Options{})

	raw := filepath.Join(dir, "disk0.raw")
	res, err := e.DownloadDisk(ctx, restore.DownloadRequest{RestorePoint: pt, Disk: 0, Output: raw})
	if err != nil {
		t.Fatalf("raw: %v", err)
	}
	b, err := os.ReadFile(raw)
	if err != nil {
		t.Fatal(err)
	}
	labtest.SameBytes(t, "raw download", b, imgs[0])
	if res.Disks[0].SHA256 != sha(imgs[0]) || res.Disks[0].BytesWritten >= int64(len(imgs[0])) {
		t.Errorf("raw result %+v", res.Disks[0])
	}
	var st syscall.Stat_t
	if err := syscall.Stat(raw, &st); err != nil {
		t.Fatal(err)
	}
	if st.Blocks*512 >= int64(len(imgs[0])) {
		t.Errorf("raw download is not sparse: %d bytes allocated of %d", st.Blocks*512, len(imgs[0]))
	}

	vm := filepath.Join(dir, "disk2.vmdk")
	res, err = e.DownloadDisk(ctx, restore.DownloadRequest{RestorePoint: pt, Disk: 2, Output: vm, Format: restore.FormatVMDK})
	if err != nil {
		t.Fatalf("vmdk: %v", err)
	}
	if res.Disks[0].SHA256 != sha(imgs[2]) {
		t.Errorf("vmdk digest %s", res.Disks[0].SHA256)
	}
	back := filepath.Join(dir, "back.raw")
	if out, err := exec.Command(qemu, "convert", "-f", "vmdk", "-O", "raw", vm, back).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img convert: %v\n%s", err, out)
	}
	b, err = os.ReadFile(back)
	if err != nil {
		t.Fatal(err)
	}
	labtest.SameBytes(t, "VMDK converted back", b, imgs[2])

	// The output exists: refused. A cancelled download leaves no file.
	if _, err := e.DownloadDisk(ctx, restore.DownloadRequest{RestorePoint: pt, Disk: 0, Output: raw}); !errors.Is(err, restore.ErrInvalidRequest) {
		t.Errorf("existing output: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	part := filepath.Join(dir, "part.raw")
	_, err = e.DownloadDisk(cctx, restore.DownloadRequest{RestorePoint: pt, Disk: 0, Output: part, Progress: func(p restore.Progress) {
		if p.Done > 0 {
			cancel()
		}
	}})
	cancel()
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled download: %v", err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 3 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("files after the cancelled download: %v", names)
	}
	if _, err := e.DownloadDisk(ctx, restore.DownloadRequest{RestorePoint: pt, Disk: 0, Output: filepath.Join(dir, "x"), Format: "qcow2"}); !errors.Is(err, restore.ErrInvalidRequest) {
		t.Errorf("format qcow2: %v", err)
	}
}
