package imagefile

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/vmvault/vmvault/disk/vmdk"
)

func need(t *testing.T, name, pkg string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, d := range []string{"/usr/sbin", "/sbin"} {
		if _, err := os.Stat(filepath.Join(d, name)); err == nil {
			return filepath.Join(d, name)
		}
	}
	t.Fatalf("%s not found: install %s (make test does)", name, pkg)
	return ""
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

// sparseFile makes a file with truncate and writes at offsets; it returns
// the written ranges.
func sparseFile(t *testing.T, path string, size int64, writes []Extent) []byte {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	img := make([]byte, size)
	r := rand.New(rand.NewPCG(1, 1))
	for _, w := range writes {
		b := make([]byte, w.Length)
		for i := range b {
			b[i] = byte(r.Uint32()) | 1
		}
		copy(img[w.Offset:], b)
		if _, err := f.WriteAt(b, w.Offset); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	return img
}

// TestRawAllocatedHoles asserts SEEK_DATA/SEEK_HOLE reports holes as holes
// on this file system (ext4/xfs/btrfs/tmpfs all support it; 4 KiB blocks).
func TestRawAllocatedHoles(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "sparse.raw")
	const mib = 1 << 20
	writes := []Extent{{0, 4096}, {3 * mib, 8192}, {10*mib + 4096, mib}, {64*mib - 4096, 4096}}
	img := sparseFile(t, p, 64*mib, writes)
	im, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	if im.Format() != "raw" || im.Size() != 64*mib {
		t.Fatalf("Format %q Size %d", im.Format(), im.Size())
	}
	ext, err := im.Allocated()
	if err != nil {
		t.Fatal(err)
	}
	// File systems may allocate around a write in larger units; require
	// every write covered and most of the file reported as hole.
	var total int64
	for _, e := range ext {
		total += e.Length
	}
	for _, w := range writes {
		covered := false
		for _, e := range ext {
			if e.Offset <= w.Offset && w.Offset+w.Length <= e.Offset+e.Length {
				covered = true
			}
		}
		if !covered {
			t.Errorf("write %+v not inside Allocated %+v", w, ext)
		}
	}
	if total > 8*mib {
		t.Fatalf("Allocated reports %d bytes of a 64 MiB file with 1.02 MiB written: holes not detected (%+v)", total, ext)
	}
	got := make([]byte, im.Size())
	if n, err := im.ReadAt(got, 0); n != len(got) || (err != nil && err != io.EOF) {
		t.Fatalf("ReadAt: %d %v", n, err)
	}
	if !bytes.Equal(got, img) {
		t.Fatal("raw ReadAt differs")
	}
	if n, err := im.ReadAt(make([]byte, 1), im.Size()); n != 0 || err != io.EOF {
		t.Fatalf("ReadAt past end: %d %v", n, err)
	}

	// An all-hole file has no extents.
	empty := filepath.Join(dir, "empty.raw")
	sparseFile(t, empty, 16*mib, nil)
	im2, err := Open(empty)
	if err != nil {
		t.Fatal(err)
	}
	defer im2.Close()
	if ext, err := im2.Allocated(); err != nil || len(ext) != 0 {
		t.Fatalf("all-hole file: %+v %v", ext, err)
	}
}

// TestOpenDetects opens the same disk as raw and as each qemu-img VMDK
// subformat, by content not by file name, and compares bytes.
func TestOpenDetects(t *testing.T) {
	qemu := need(t, "qemu-img", "qemu-utils")
	dir := t.TempDir()
	raw := filepath.Join(dir, "disk.img")
	img := sparseFile(t, raw, 4<<20, []Extent{{0, 512}, {70000, 100000}, {4<<20 - 512, 512}})
	cases := []struct{ sub, format string }{
		{"", "raw"},
		{"monolithicSparse", "monolithicSparse"},
		{"streamOptimized", "streamOptimized"},
		{"monolithicFlat", "monolithicFlat"},
	}
	for _, c := range cases {
		t.Run(c.format, func(t *testing.T) {
			p := raw
			if c.sub != "" {
				p = filepath.Join(dir, c.sub+".img") // no .vmdk suffix on purpose
				run(t, qemu, "convert", "-f", "raw", "-O", "vmdk", "-o", "subformat="+c.sub, raw, p)
			}
			im, err := Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer im.Close()
			if im.Format() != c.format || im.Size() != int64(len(img)) {
				t.Fatalf("Format %q Size %d", im.Format(), im.Size())
			}
			got := make([]byte, im.Size())
			if _, err := im.ReadAt(got, 0); err != nil && err != io.EOF {
				t.Fatal(err)
			}
			if !bytes.Equal(got, img) {
				t.Fatal("bytes differ")
			}
			ext, err := im.Allocated()
			if err != nil {
				t.Fatal(err)
			}
			var prev int64
			for _, e := range ext {
				for _, b := range got[prev:e.Offset] {
					if b != 0 {
						t.Fatalf("data outside Allocated before %d", e.Offset)
					}
				}
				prev = e.Offset + e.Length
			}
			for _, b := range got[prev:] {
				if b != 0 {
					t.Fatal("data after the last extent")
				}
			}
		})
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing file opened")
	}
	if _, err := Open(dir); err == nil {
		t.Error("directory opened as an image")
	}
	bad := filepath.Join(dir, "bad.vmdk")
	if err := os.WriteFile(bad, []byte("# Disk DescriptorFile\ncreateType=\"monolithicFlat\"\nRW 8 FLAT \"../escape\" 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(bad); err == nil {
		t.Error("escaping descriptor opened")
	}
	// A corrupt sparse header is reported, not read as raw.
	hdr := make([]byte, 4096)
	copy(hdr, []byte{'K', 'D', 'M', 'V', 9})
	p := filepath.Join(dir, "hdr.img")
	if err := os.WriteFile(p, hdr, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(p); !errors.Is(err, vmdk.ErrUnsupported) {
		t.Errorf("sparse header of version 9: %v, want vmdk.ErrUnsupported", err)
	}

	// A zero-length .vmdk used to open as an empty raw disk (and back up as
	// an empty point); a .vmdk that is not whole sectors is parsed as a
	// descriptor so its error is reported.
	empty := filepath.Join(dir, "empty.vmdk")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if im, err := Open(empty); !errors.Is(err, vmdk.ErrNotVMDK) {
		if err == nil {
			im.Close()
		}
		t.Errorf("empty .vmdk: %v, want vmdk.ErrNotVMDK", err)
	}
	text := filepath.Join(dir, "typo.VMDK")
	if err := os.WriteFile(text, []byte("version=1\ncreateType=\"monolithicFlat\"\nRW 8 FLAT \"missing.bin\" 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if im, err := Open(text); err == nil {
		im.Close()
		t.Errorf("descriptor without its header line opened as %s", im.Format())
	}
}
