package instant

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/vmvault/vmvault/disk/vmdk"
	"github.com/vmvault/vmvault/repository"
)

func readFile(t testing.TB, s *Session, name string, size int64) []byte {
	t.Helper()
	b := make([]byte, size)
	n, err := s.ReadAt(name, b, 0)
	if err != nil && !errors.Is(err, io.EOF) || int64(n) != size {
		t.Fatalf("read %s: %d, %v", name, n, err)
	}
	return b
}

func TestSessionFiles(t *testing.T) {
	ctx := context.Background()
	r := repository.TestRepository(t)
	img0, img1 := image(t, 6<<20, 1), image(t, 3<<20+512, 2)
	p := backupImages(t, r, "web 01", testConfig("web 01", 2), img0, img1)
	s, err := Open(ctx, r, Options{Point: p.ID[:12], Dir: filepath.Join(t.TempDir(), "s"), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var names []string
	for _, f := range s.Files() {
		names = append(names, f.Name)
	}
	want := "web_01.vmdk web_01-flat.vmdk web_01_1.vmdk web_01_1-flat.vmdk web_01.vmx"
	if strings.Join(names, " ") != want {
		t.Fatalf("files %v, want %s", names, want)
	}
	if !strings.HasPrefix(s.Export, "/vmvault/") || len(s.Export) < 30 {
		t.Fatalf("export path %q", s.Export)
	}
	for i, img := range []string{img0, img1} {
		src, _ := os.ReadFile(img)
		flat := s.Files()[2*i+1]
		if flat.Size != int64(len(src)) || !flat.Writable {
			t.Fatalf("%+v", flat)
		}
		if !bytes.Equal(readFile(t, s, flat.Name, flat.Size), src) {
			t.Fatalf("%s differs from the image", flat.Name)
		}
		desc := s.Files()[2*i]
		d, err := vmdk.ParseDescriptor(readFile(t, s, desc.Name, desc.Size))
		if err != nil {
			t.Fatal(err)
		}
		if d.CreateType != "monolithicFlat" || d.Extents[0].Filename != flat.Name || d.Capacity() != int64(len(src)) || d.DDB["ddb.thinProvisioned"] != "1" {
			t.Fatalf("descriptor %+v", d)
		}
	}
	vmx := string(readFile(t, s, "web_01.vmx", s.Files()[4].Size))
	for _, line := range []string{
		`displayName = "web 01"`, `guestOS = "ubuntu-64"`, `firmware = "efi"`, `numvcpus = "2"`, `memSize = "2048"`,
		`scsi0.present = "TRUE"`, `scsi0.virtualDev = "pvscsi"`, `scsi0:0.fileName = "web_01.vmdk"`, `scsi0:1.fileName = "web_01_1.vmdk"`,
		`ethernet0.virtualDev = "vmxnet3"`, `ethernet0.networkName = "VM |22Network|22"`, `uuid.bios = "42 10 a5 b2 1c 2d 3e 4f-5a 6b 7c 8d 9e 0f 1a 2b"`,
		`# disk "" not in the restore point (independent disk)`,
	} {
		if !strings.Contains(vmx, line+"\n") {
			t.Errorf("vmx lacks %s:\n%s", line, vmx)
		}
	}
}

func TestSessionWithoutConfigHasNoVMX(t *testing.T) {
	r := repository.TestRepository(t)
	p := backupImages(t, r, "img", nil, image(t, 2<<20, 3))
	s, err := Open(context.Background(), r, Options{Point: p.ID, Dir: t.TempDir(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if len(s.Files()) != 2 || strings.HasSuffix(s.Files()[1].Name, ".vmx") {
		t.Fatalf("files %+v", s.Files())
	}
}

// TestSessionRestart: writes survive a crash (the process gone without
// Close) and the restarted session has the same export path and keys.
func TestSessionRestart(t *testing.T) {
	ctx := context.Background()
	r := repository.TestRepository(t)
	img := image(t, 4<<20, 4)
	src, _ := os.ReadFile(img)
	p := backupImages(t, r, "db", nil, img)
	dir := filepath.Join(t.TempDir(), "s")
	s, err := Open(ctx, r, Options{Point: p.ID, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	flat := s.lookup("db-flat.vmdk")
	fs := &exportFS{s: s}
	f, err := fs.OpenFile("db-flat.vmdk", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Seek(1<<20+3, io.SeekStart)
	if _, err := f.Write([]byte("written through the export")); err != nil {
		t.Fatal(err)
	}
	want := bytes.Clone(src)
	copy(want[1<<20+3:], "written through the export")
	// "Crash": the overlay's files closed under it, no Close, no compaction.
	flat.disk.ov = nil
	for _, n := range s.nodes {
		if n.disk != nil {
			n.disk.base.Close()
		}
	}
	export, key := s.Export, string(s.key)

	s2, err := Open(ctx, r, Options{Point: p.ID, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if s2.Export != export || string(s2.key) != key {
		t.Fatal("export path or handle key changed across a restart")
	}
	if !bytes.Equal(readFile(t, s2, "db-flat.vmdk", int64(len(src))), want) {
		t.Fatal("write lost across a restart")
	}
	if _, err := Open(ctx, r, Options{Point: backupImages(t, r, "other", nil, img).ID, Dir: dir}); !errors.Is(err, ErrOtherPoint) {
		t.Fatalf("directory of another point: %v", err)
	}
}

func TestSessionReadOnlyAndNoSpace(t *testing.T) {
	r := repository.TestRepository(t)
	img := image(t, 2<<20, 5)
	src, _ := os.ReadFile(img)
	p := backupImages(t, r, "vm", testConfig("vm", 1), img)
	s, err := Open(context.Background(), r, Options{Point: p.ID, Dir: t.TempDir(), OverlayLimit: 64 << 10, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fs := &exportFS{s: s}
	for _, name := range []string{"vm.vmdk", "vm.vmx"} {
		if _, err := fs.OpenFile(name, os.O_RDWR, 0); !errors.Is(err, os.ErrPermission) {
			t.Errorf("%s opened for writing: %v", name, err)
		}
	}
	if _, err := fs.OpenFile("vm.vmx", os.O_RDWR|os.O_CREATE, 0o644); !errors.Is(err, os.ErrPermission) {
		t.Errorf("create over the .vmx: %v", err)
	}
	if fs.Remove("vm.vmx") == nil || fs.Rename("vm.vmx", "x") == nil || fs.MkdirAll("d", 0o755) == nil {
		t.Error("namespace change of the point's files accepted")
	}
	f, _ := fs.OpenFile("vm-flat.vmdk", os.O_RDWR, 0)
	if _, err := f.Write(make([]byte, 60<<10)); err != nil {
		t.Fatal(err)
	}
	f.Seek(1<<20, io.SeekStart)
	if _, err := f.Write(make([]byte, 8<<10)); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write past the cap: %v", err)
	}
	got := readFile(t, s, "vm-flat.vmdk", int64(len(src)))
	if !bytes.Equal(got[60<<10:], src[60<<10:]) || !bytes.Equal(got[:60<<10], make([]byte, 60<<10)) {
		t.Fatal("the refused write changed the disk")
	}
	if f.Truncate(1) == nil || f.Truncate(int64(len(src))) != nil {
		t.Fatal("truncate")
	}
}

// TestSessionDirNeverAdopted: a directory of other files is refused, and
// Remove deletes only the session's files.
func TestSessionDirNeverAdopted(t *testing.T) {
	ctx := context.Background()
	r := repository.TestRepository(t)
	p := backupImages(t, r, "vm", nil, image(t, 1<<20, 9))
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "precious"), []byte("x"), 0o600)
	if _, err := Open(ctx, r, Options{Point: p.ID, Dir: dir, NoSync: true}); !errors.Is(err, ErrNotSessionDir) {
		t.Fatalf("adopted a directory of other files: %v", err)
	}
	sdir := filepath.Join(t.TempDir(), "s")
	s, err := Open(ctx, r, Options{Point: p.ID, Dir: sdir, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sdir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("session directory left: %v", err)
	}
}

func TestGuestOS(t *testing.T) {
	for id, want := range map[string]string{
		"ubuntu64Guest": "ubuntu-64", "windows2019srv_64Guest": "windows2019srv-64", "otherGuest64": "other-64",
		"otherGuest": "other", "rhel7_64Guest": "rhel7-64", "otherLinux64Guest": "otherlinux-64", "": "", "bad\"Guest": "",
	} {
		if got := guestOS(id); got != want {
			t.Errorf("%q: %q, want %q", id, got, want)
		}
	}
}
