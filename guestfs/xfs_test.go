package guestfs_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/guestfs"
	"github.com/vmvault/vmvault/guestfs/guestfstest"
)

// TestXFS: XFS written by the kernel (mkfs.xfs, loop mount, cp -a): short
// form, block, leaf and node directories (10,000 entries), a remote link,
// a sparse file and a preallocated (unwritten) file; v5 with and without
// bigtime. (v4 is not tested: this kernel is built without XFS v4, so
// nothing here can write one.)
func mtimeOf(t *testing.T, p string) time.Time {
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.ModTime()
}

func TestXFS(t *testing.T) {
	guestfstest.Need(t, true, "mkfs.xfs", "mount", "fallocate")
	for _, tt := range []struct {
		name string
		mkfs []string
	}{
		{"v5", []string{"mkfs.xfs", "-q", "-f"}},
		{"v5-bigtime-16k-dirblocks", []string{"mkfs.xfs", "-q", "-f", "-m", "bigtime=1", "-n", "size=16k"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := t.TempDir()
			guestfstest.MakeTree(t, src, guestfstest.Options{Symlinks: true, Unicode: true, BigDir: 10000, SparseMiB: 64, Modes: true})
			if err := os.Symlink(strings.Repeat("remote/", 130), filepath.Join(src, "remote-link")); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 40; i++ { // a leaf directory: bigger than one block, smaller than node
				os.WriteFile(filepath.Join(src, "etc", strings.Repeat("n", 60)+string(rune('a'+i%26))+strings.Repeat("x", i)), []byte{byte(i)}, 0o644)
			}
			// An unwritten extent reads as zeros: fallocate on the mounted
			// file system, a sparse file of zeros in the tree to compare.
			os.WriteFile(filepath.Join(src, "prealloc"), nil, 0o644)
			os.Truncate(filepath.Join(src, "prealloc"), 3<<20)
			img := filepath.Join(t.TempDir(), "xfs.img")
			guestfstest.Mounted(t, img, 300, src, "xfs", func(mnt string) {
				os.Remove(filepath.Join(mnt, "prealloc"))
				guestfstest.Run(t, "fallocate", "-l", "3M", filepath.Join(mnt, "prealloc"))
				os.Chtimes(filepath.Join(mnt, "prealloc"), mtimeOf(t, filepath.Join(src, "prealloc")), mtimeOf(t, filepath.Join(src, "prealloc")))
			}, tt.mkfs...)
			f := openOnly(t, []guestfs.Disk{diskOf(t, img)}, guestfs.KindXFS)
			n := guestfstest.Compare(t, f, src, guestfstest.CompareOptions{Modes: true, Mtimes: true, Symlinks: true})
			if n < 10000 {
				t.Fatalf("compared %d files", n)
			}
			checkLinks(t, f)
		})
	}
}
