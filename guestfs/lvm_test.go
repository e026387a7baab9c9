package guestfs_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/guestfs"
	"github.com/vmvault/vmvault/guestfs/guestfstest"
)

// TestLVMTwoDisks: a GPT disk whose partition 2 is a PV and a whole second
// disk that is a PV, one VG, an ext4 LV of three segments alternating
// between the two PVs (so on both disks), and a second LV on one disk.
func TestLVMTwoDisks(t *testing.T) {
	guestfstest.Need(t, true, "mkfs.ext4", "pvcreate", "sgdisk", "losetup")
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	guestfstest.MakeTree(t, src, guestfstest.Options{Symlinks: true, BigDir: 1000, SparseMiB: 16, Modes: true})
	// 45 MiB of data in a 60 MiB file system: it spans all three segments.
	big := make([]byte, 45<<20)
	rand.Read(big)
	if err := os.WriteFile(filepath.Join(src, "big.bin"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	fsimg := filepath.Join(dir, "root.img")
	guestfstest.Ext4(t, fsimg, src, 60)
	home := filepath.Join(dir, "home.img")
	hsrc := filepath.Join(dir, "hsrc")
	guestfstest.MakeTree(t, hsrc, guestfstest.Options{})
	guestfstest.Ext4(t, home, hsrc, 16, "-L", "home")

	d0 := filepath.Join(dir, "d0.img")
	guestfstest.GPT(t, d0, 100, guestfstest.Part{SizeMiB: 16, Type: "ef00"}, guestfstest.Part{SizeMiB: 80, Type: "8e00"})
	d1 := filepath.Join(dir, "d1.img")
	if err := os.WriteFile(d1, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Truncate(d1, 64<<20)
	vg := fmt.Sprintf("vgflr%d", os.Getpid())
	guestfstest.LVM(t, vg, []guestfstest.PVSpec{{Image: d0, Offset: 17 << 20, Size: 80 << 20}, {Image: d1}},
		guestfstest.LV{Name: "root", Parts: []guestfstest.LVPart{{PV: 0, SizeMiB: 20}, {PV: 1, SizeMiB: 20}, {PV: 0, SizeMiB: 20}}, Image: fsimg},
		guestfstest.LV{Name: "home-data", Parts: []guestfstest.LVPart{{PV: 1, SizeMiB: 16}}, Image: home})

	disks := []guestfs.Disk{diskOf(t, d0), diskOf(t, d1)}
	vols, err := guestfs.Volumes(context.Background(), disks)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]guestfs.Volume{}
	for _, v := range vols {
		byID[v.ID] = v
	}
	root, okr := byID["lvm-"+vg+"-root"]
	hv, okh := byID["lvm-"+vg+"-home--data"]
	if !okr || !okh || root.FS != guestfs.KindExt4 || root.Size != 60<<20 || root.LV != vg+"/root" || root.DiskIndex != -1 ||
		hv.FS != guestfs.KindExt4 || hv.Label != "home" || hv.DiskIndex != 1 {
		t.Fatalf("volumes: %+v", vols)
	}
	if pv := byID["d0p2"]; pv.FS != guestfs.KindLVM2PV || pv.Browsable || !strings.Contains(pv.Reason, vg) {
		t.Errorf("PV partition: %+v", pv)
	}
	f, err := guestfs.Open(context.Background(), disks, root.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	guestfstest.Compare(t, f, src, guestfstest.CompareOptions{Modes: true, Mtimes: true, Symlinks: true, Ignore: ignoreLostFound})
	h, err := guestfs.Open(context.Background(), disks, hv.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	guestfstest.Compare(t, h, hsrc, guestfstest.CompareOptions{Ignore: ignoreLostFound})

	// Without the second disk the root LV cannot be assembled: listed with
	// a reason, not an error for the point.
	vols, err = guestfs.Volumes(context.Background(), disks[:1])
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vols {
		if v.LV == vg+"/root" && (v.Browsable || !strings.Contains(v.Reason, "not on any disk")) {
			t.Errorf("root LV without its second PV: %+v", v)
		}
	}
}
