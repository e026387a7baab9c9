package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/guestfs/guestfstest"
)

// TestFilesEveryFS: a VM of three disks as administrators have them —
// disk 0 GPT with an EFI system partition (FAT32) and an LVM PV, disk 1 a
// whole-disk PV, disk 2 MBR with NTFS — the VG's XFS root LV in three
// segments across both PVs. Backed up with image backup; every file of
// every volume comes back through `files get` byte-identical.
func TestFilesEveryFS(t *testing.T) {
	guestfstest.Need(t, true, "mkfs.xfs", "mkntfs", "ntfs-3g", "mkfs.vfat", "mcopy", "pvcreate", "sgdisk", "sfdisk", "losetup")
	dir := t.TempDir()
	mk := func(name string, o guestfstest.Options) string {
		p := filepath.Join(dir, name)
		guestfstest.MakeTree(t, p, o)
		return p
	}
	xsrc := mk("xsrc", guestfstest.Options{Symlinks: true, Unicode: true, BigDir: 3000, SparseMiB: 32, Modes: true})
	nsrc := mk("nsrc", guestfstest.Options{Unicode: true, BigDir: 500, SparseMiB: 16})
	fsrc := mk("fsrc", guestfstest.Options{BigDir: 50, ShortOnly: true})

	ximg := filepath.Join(dir, "x.img")
	guestfstest.Mounted(t, ximg, 300, xsrc, "xfs", nil, "mkfs.xfs", "-q", "-f")
	nimg := filepath.Join(dir, "n.img")
	guestfstest.Mounted(t, nimg, 64, nsrc, "ntfs-3g", nil, "mkntfs", "-Q", "-F", "-q")
	fimg := filepath.Join(dir, "f.img")
	guestfstest.FAT(t, fimg, 32, 40<<10, fsrc)

	d0 := filepath.Join(dir, "d0.img")
	guestfstest.GPT(t, d0, 300, guestfstest.Part{SizeMiB: 40, Type: "ef00", Image: fimg}, guestfstest.Part{SizeMiB: 250, Type: "8e00"})
	d1 := filepath.Join(dir, "d1.img")
	os.WriteFile(d1, nil, 0o644)
	os.Truncate(d1, 160<<20)
	vg := fmt.Sprintf("vgall%d", os.Getpid())
	guestfstest.LVM(t, vg, []guestfstest.PVSpec{{Image: d0, Offset: 41 << 20, Size: 250 << 20}, {Image: d1}},
		guestfstest.LV{Name: "root", Parts: []guestfstest.LVPart{{PV: 0, SizeMiB: 100}, {PV: 1, SizeMiB: 100}, {PV: 0, SizeMiB: 100}}, Image: ximg})
	d2 := filepath.Join(dir, "d2.img")
	guestfstest.MBR(t, d2, 80, guestfstest.Part{SizeMiB: 8, Type: "83"}, guestfstest.Part{SizeMiB: 64, Type: "7", Image: nimg})
	os.Remove(ximg)

	repo := initRepo(t)
	point := lastLine(mustCLI(t, "image", "backup", "--repo", repo, "--vm", "app01", d0, d1, d2))
	vols := mustCLI(t, "files", "volumes", "--repo", repo, "--restore-point", point)
	for _, want := range []string{"d0p1", "vfat", "lvm-" + vg + "-root", "xfs", "d2p2", "ntfs", "lvm2-pv"} {
		if !strings.Contains(vols, want) {
			t.Fatalf("volumes lack %q:\n%s", want, vols)
		}
	}
	for _, c := range []struct {
		vol, src string
		exact    bool // modes, link targets and exact mtimes survive
	}{
		{"lvm-" + vg + "-root", xsrc, true},
		{"d2p2", nsrc, false},
		{"d0p1", fsrc, false},
	} {
		t.Run(c.vol, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			mustCLI(t, "files", "get", "--repo", repo, "--restore-point", point, "--volume", c.vol, "--output", out, "/")
			os.RemoveAll(filepath.Join(out, "System Volume Information"))
			if c.exact {
				sameTree(t, c.src, out)
				assertSparse(t, filepath.Join(out, "sparse.img"))
				return
			}
			sameBytes(t, c.src, out)
		})
	}
}

// sameBytes compares names, types and bytes, and mtimes to FAT's 2 s.
func sameBytes(t *testing.T, want, got string) {
	t.Helper()
	n := 0
	filepath.WalkDir(want, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(want, p)
		g := filepath.Join(got, rel)
		gi, err := os.Lstat(g)
		if err != nil {
			t.Fatalf("missing %s", rel)
		}
		if gi.IsDir() != d.IsDir() {
			t.Fatalf("%s: type differs", rel)
		}
		if d.Type().IsRegular() {
			a, _ := os.ReadFile(p)
			b, _ := os.ReadFile(g)
			if !bytes.Equal(a, b) {
				t.Fatalf("%s: %d bytes differ from the %d that went in", rel, len(b), len(a))
			}
			wi, _ := d.Info()
			if dt := gi.ModTime().Sub(wi.ModTime()); dt < -2*time.Second || dt > 2*time.Second {
				t.Errorf("%s: mtime %v, want %v", rel, gi.ModTime(), wi.ModTime())
			}
			n++
		}
		return nil
	})
	if n == 0 {
		t.Fatal("no files compared")
	}
}
