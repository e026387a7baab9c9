package lab_test

import (
	"context"
	"io"
	"os"
	"testing"

	"github.com/vmvault/vmvault/guestfs"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
)

// The fourth and fifth sample VMs carry the layouts of real estates: a
// RHEL-style disk (GPT, LVM, XFS on vg/root) and a Windows data disk (GPT,
// NTFS). File-level restore finds the file system of each and reads the
// generated files back.
func TestSampleLayouts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP: the XFS-on-LVM and NTFS sample layouts need root (loop devices, mount)")
	}
	for _, tool := range [][2]string{{"mkfs.xfs", "xfsprogs"}, {"pvcreate", "lvm2"}, {"mkntfs", "ntfs-3g"}, {"ntfs-3g", "ntfs-3g"}, {"sgdisk", "gdisk"}} {
		needTool(t, tool[0], tool[1])
	}
	ctx := context.Background()
	l, err := lab.Start(ctx, lab.Options{DiskCapacity: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	const capacity = 64 << 20
	specs := lab.DefaultSampleVMs(5, capacity)[3:]
	if specs[0].Name != "app-01" || specs[0].FS != lab.FSXFSLVM || specs[1].Name != "win-01" || specs[1].FS != lab.FSNTFS {
		t.Fatalf("specs %+v", specs)
	}
	samples, err := l.AddSampleVMs(ctx, t.TempDir(), specs)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct{ fs, lv, file, content string }{
		{guestfs.KindXFS, "vg_app01/root", "etc/hostname", "app-01\n"},
		{guestfs.KindNTFS, "", "README.TXT", "Data disk of win-01\r\n"},
	} {
		s := samples[i]
		size := specs[i].Capacity
		f, err := os.Open(dumpDisk(t, l, s.MoRef, size))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		disks := []guestfs.Disk{{Name: "disk0", R: f, Size: size}}
		vols, err := guestfs.Volumes(ctx, disks)
		if err != nil {
			t.Fatal(err)
		}
		var vol *guestfs.Volume
		for j := range vols {
			if vols[j].FS == want.fs && vols[j].Browsable {
				vol = &vols[j]
			}
		}
		if vol == nil || vol.LV != want.lv {
			t.Fatalf("%s: no browsable %s volume (lv %q): %+v", s.Name, want.fs, want.lv, vols)
		}
		fsys, err := guestfs.Open(ctx, disks, vol.ID)
		if err != nil {
			t.Fatal(err)
		}
		r, err := fsys.Open(want.file)
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		b, _ := io.ReadAll(r)
		r.Close()
		if string(b) != want.content {
			t.Errorf("%s: %s = %q, want %q", s.Name, want.file, b, want.content)
		}
		if len(s.DataAreas) == 0 || s.Files < 5 {
			t.Errorf("%s: %d files, %d data areas", s.Name, s.Files, len(s.DataAreas))
		}
		fsys.Close()
	}
}
