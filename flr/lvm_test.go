package flr_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/flr"
	"github.com/vmvault/vmvault/flr/flrtest"
)

// TestLVMTwoDisks: a GPT disk whose partition 2 is a PV and a whole second
// disk that is a PV, one VG, an ext4 LV of three segments alternating
// between the two PVs (so on both disks), and a second LV on one disk.
func TestLVMTwoDisks(t *testing.T) {
	flrtest.Need(t, true, "mkfs.ext4", "pvcreate", "sgdisk", "losetup")
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	flrtest.MakeTree(t, src, flrtest.Options{Symlinks: true, BigDir: 1000, SparseMiB: 16, Modes: true})
	// 45 MiB of data in a 60 MiB file system: it spans all three segments.
	big := make([]byte, 45<<20)
	rand.Read(big)
	if err := os.WriteFile(filepath.Join(src, "big.bin"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	fsimg := filepath.Join(dir, "root.img")
	flrtest.Ext4(t, fsimg, src, 60)
	home := filepath.Join(dir, "home.img")
	hsrc := filepath.Join(dir, "hsrc")
	flrtest.MakeTree(t, hsrc, flrtest.Options{})
	flrtest.Ext4(t, home, hsrc, 16, "-L", "home")

	d0 := filepath.Join(dir, "d0.img")
	flrtest.GPT(t, d0, 100, flrtest.Part{SizeMiB: 16, Type: "ef00"}, flrtest.Part{SizeMiB: 80, Type: "8e00"})
	d1 := filepath.Join(dir, "d1.img")
	if err := os.WriteFile(d1, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Truncate(d1, 64<<20)
	vg := fmt.Sprintf("vgflr%d", os.Getpid())
	flrtest.LVM(t, vg, []flrtest.PVSpec{{Image: d0, Offset: 17 << 20, Size: 80 << 20}, {Image: d1}},
		flrtest.LV{Name: "root", Parts: []flrtest.LVPart{{PV: 0, SizeMiB: 20}, {PV: 1, SizeMiB: 20}, {PV: 0, SizeMiB: 20}}, Image: fsimg},
		flrtest.LV{Name: "home-data", Parts: []flrtest.LVPart{{PV: 1, SizeMiB: 16}}, Image: home})

	disks := []flr.Disk{diskOf(t, d0), diskOf(t, d1)}
	vols, err := flr.Volumes(context.Background(), disks)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]flr.Volume{}
	for _, v := range vols {
		byID[v.ID] = v
	}
	root, okr := byID["lvm-"+vg+"-root"]
	hv, okh := byID["lvm-"+vg+"-home--data"]
	if !okr || !okh || root.FS != flr.KindExt4 || root.Size != 60<<20 || root.LV != vg+"/root" || root.DiskIndex != -1 ||
		hv.FS != flr.KindExt4 || hv.Label != "home" || hv.DiskIndex != 1 {
		t.Fatalf("volumes: %+v", vols)
	}
	if pv := byID["d0p2"]; pv.FS != flr.KindLVM2PV || pv.Browsable || !strings.Contains(pv.Reason, vg) {
		t.Errorf("PV partition: %+v", pv)
	}
	f, err := flr.Open(context.Background(), disks, root.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	flrtest.Compare(t, f, src, flrtest.CompareOptions{Modes: true, Mtimes: true, Symlinks: true, Ignore: ignoreLostFound})
	h, err := flr.Open(context.Background(), disks, hv.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	flrtest.Compare(t, h, hsrc, flrtest.CompareOptions{Ignore: ignoreLostFound})

	// Without the second disk the root LV cannot be assembled: listed with
	// a reason, not an error for the point.
	vols, err = flr.Volumes(context.Background(), disks[:1])
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vols {
		if v.LV == vg+"/root" && (v.Browsable || !strings.Contains(v.Reason, "not on any disk")) {
			t.Errorf("root LV without its second PV: %+v", v)
		}
	}
}
