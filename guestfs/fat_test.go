package guestfs_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/vmvault/vmvault/guestfs"
	"github.com/vmvault/vmvault/guestfs/guestfstest"
)

// TestFAT: mkfs.vfat -F 12/16/32 + mcopy, long names, nested and empty
// directories, a 200-entry directory (mcopy takes 20 s for 1,000), 1 MiB files; the label comes from
// the boot sector.
func TestFAT(t *testing.T) {
	guestfstest.Need(t, false, "mkfs.vfat", "mcopy")
	for _, tt := range []struct{ bits, kib int }{{12, 8 << 10}, {16, 32 << 10}, {32, 64 << 10}} {
		t.Run(fmt.Sprint("FAT", tt.bits), func(t *testing.T) {
			src := t.TempDir()
			guestfstest.MakeTree(t, src, guestfstest.Options{BigDir: 200, ShortOnly: true})
			img := filepath.Join(t.TempDir(), "fat.img")
			guestfstest.FAT(t, img, tt.bits, tt.kib, src)
			disks := []guestfs.Disk{diskOf(t, img)}
			f := openOnly(t, disks, guestfs.KindVFAT)
			if l := f.Volume().Label; l != fmt.Sprintf("ESP%d", tt.bits) {
				t.Errorf("label %q", l)
			}
			if n := guestfstest.Compare(t, f, src, guestfstest.CompareOptions{Mtimes: true}); n < 200 {
				t.Fatalf("compared %d files", n)
			}
		})
	}
}
