package guestfs_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/vmvault/vmvault/guestfs"
	"github.com/vmvault/vmvault/guestfs/guestfstest"
)

// diskOf opens an image file as a guestfs.Disk.
func diskOf(t testing.TB, img string) guestfs.Disk {
	t.Helper()
	f, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	st, _ := f.Stat()
	return guestfs.Disk{Name: filepath.Base(img), R: f, Size: st.Size()}
}

func openOnly(t testing.TB, disks []guestfs.Disk, wantFS string) guestfs.FS {
	t.Helper()
	vols, err := guestfs.Volumes(context.Background(), disks)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vols {
		if v.FS == wantFS {
			if !v.Browsable {
				t.Fatalf("volume %+v is not browsable", v)
			}
			f, err := guestfs.Open(context.Background(), disks, v.ID)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			return f
		}
	}
	t.Fatalf("no %s volume in %+v", wantFS, vols)
	return nil
}

func ignoreLostFound(p string) bool { return p == "lost+found" }

func TestExt(t *testing.T) {
	guestfstest.Need(t, false, "mkfs.ext4")
	tests := []struct {
		name  string
		kind  string
		big   int
		extra []string
	}{
		{"ext4", guestfs.KindExt4, 10000, nil},
		{"ext4-inline-64bit", guestfs.KindExt4, 3000, []string{"-O", "inline_data,64bit"}},
		{"ext4-1k-blocks", guestfs.KindExt4, 3000, []string{"-b", "1024"}},
		{"ext3", guestfs.KindExt3, 3000, []string{"-t", "ext3"}},
		{"ext2", guestfs.KindExt2, 3000, []string{"-t", "ext2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := t.TempDir()
			guestfstest.MakeTree(t, src, guestfstest.Options{Symlinks: true, Unicode: true, BigDir: tt.big, SparseMiB: 64, Modes: true})
			img := filepath.Join(t.TempDir(), "fs.img")
			guestfstest.Ext4(t, img, src, 128, tt.extra...)
			f := openOnly(t, []guestfs.Disk{diskOf(t, img)}, tt.kind)
			n := guestfstest.Compare(t, f, src, guestfstest.CompareOptions{Modes: true, Mtimes: true, Symlinks: true, Ignore: ignoreLostFound})
			if n < tt.big {
				t.Fatalf("compared %d files", n)
			}
			checkLinks(t, f)
		})
	}
}

// checkLinks: symbolic links resolve inside the volume, never outside it.
func checkLinks(t *testing.T, f guestfs.FS) {
	t.Helper()
	b, err := fs.ReadFile(f, "etc/abs-link")
	if err != nil || len(b) != 6000 {
		t.Errorf("absolute link: %d bytes, %v", len(b), err)
	}
	if b, err := fs.ReadFile(f, "etc/host-link"); err != nil || string(b) != "web01\n" {
		t.Errorf("relative link: %q, %v", b, err)
	}
	if _, err := f.Stat("escape-link"); !errors.Is(err, guestfs.ErrNotExist) {
		t.Errorf("escape-link resolves to %v; want not found inside the volume", err)
	}
	if ents, err := f.ReadDir("data-link"); err != nil || len(ents) != 2 {
		t.Errorf("ReadDir through a link: %d entries, %v", len(ents), err)
	}
	if fi, err := f.Lstat("data-link"); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("Lstat follows the link: %v %v", fi, err)
	}
	fl, err := f.OpenFile("sparse.img")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 6)
	if _, err := fl.ReadAt(buf, 32<<20); err != nil || string(buf) != "middle" {
		t.Errorf("ReadAt in the sparse file: %q %v", buf, err)
	}
	if n, err := fl.ReadAt(buf, fl.Size()-3); err != io.EOF || string(buf[:n]) != "end" {
		t.Errorf("ReadAt at the end: %q %v", buf[:n], err)
	}
	if _, err := f.OpenFile("etc"); !errors.Is(err, guestfs.ErrIsDir) {
		t.Errorf("OpenFile(dir) = %v", err)
	}
	if _, err := f.Stat("no/such"); !errors.Is(err, guestfs.ErrNotExist) {
		t.Errorf("Stat(missing) = %v", err)
	}
}
