package flr_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/vmvault/vmvault/flr"
	"github.com/vmvault/vmvault/flr/flrtest"
)

// TestFAT: mkfs.vfat -F 12/16/32 + mcopy, long names, nested and empty
// directories, a 200-entry directory (mcopy takes 20 s for 1,000), 1 MiB files; the label comes from
// the boot sector.
func TestFAT(t *testing.T) {
	flrtest.Need(t, false, "mkfs.vfat", "mcopy")
	for _, tt := range []struct{ bits, kib int }{{12, 8 << 10}, {16, 32 << 10}, {32, 64 << 10}} {
		t.Run(fmt.Sprint("FAT", tt.bits), func(t *testing.T) {
			src := t.TempDir()
			flrtest.MakeTree(t, src, flrtest.Options{BigDir: 200, ShortOnly: true})
			img := filepath.Join(t.TempDir(), "fat.img")
			flrtest.FAT(t, img, tt.bits, tt.kib, src)
			disks := []flr.Disk{diskOf(t, img)}
			f := openOnly(t, disks, flr.KindVFAT)
			if l := f.Volume().Label; l != fmt.Sprintf("ESP%d", tt.bits) {
				t.Errorf("label %q", l)
			}
			if n := flrtest.Compare(t, f, src, flrtest.CompareOptions{Mtimes: true}); n < 200 {
				t.Fatalf("compared %d files", n)
			}
		})
	}
}
