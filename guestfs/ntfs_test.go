package guestfs_test

import (
	"bytes"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/guestfs"
	"github.com/vmvault/vmvault/guestfs/guestfstest"
)

// TestNTFS: mkntfs + ntfs-3g (loop mount, cp -a): resident and
// non-resident data, Unicode and long names, a 10,000-entry directory, a
// sparse file, LZNT1-compressed files and an alternate data stream.
func TestNTFS(t *testing.T) {
	guestfstest.Need(t, true, "mkntfs", "ntfs-3g", "setfattr", "mount")
	src := t.TempDir()
	guestfstest.MakeTree(t, src, guestfstest.Options{Unicode: true, BigDir: 10000, SparseMiB: 64})
	text := bytes.Repeat([]byte("compressible text, compressible text.\n"), 20000)
	os.MkdirAll(filepath.Join(src, "compressed"), 0o755)
	os.WriteFile(filepath.Join(src, "compressed", "text.txt"), text, 0o644)
	rnd := make([]byte, 200_000)
	for i := range rnd {
		rnd[i] = byte(i * 7919 >> 3)
	}
	os.WriteFile(filepath.Join(src, "compressed", "mixed.bin"), append(rnd, text...), 0o644)
	img := filepath.Join(t.TempDir(), "ntfs.img")
	guestfstest.Mounted(t, img, 200, src, "ntfs-3g", func(mnt string) {
		// Compression is set on the directory and applies to files created
		// in it afterwards: copy them again.
		c := filepath.Join(mnt, "compressed")
		os.RemoveAll(c)
		os.Mkdir(c, 0o755)
		guestfstest.Run(t, "setfattr", "-h", "-v", "0x00000800", "-n", "system.ntfs_attrib_be", c)
		guestfstest.Run(t, "cp", "-a", filepath.Join(src, "compressed")+"/.", c+"/")
		if a := guestfstest.Run(t, "getfattr", "-h", "-e", "hex", "-n", "system.ntfs_attrib_be", filepath.Join(c, "text.txt")); !strings.Contains(a, "0x00000800") && !strings.Contains(a, "0x00000820") {
			t.Fatalf("text.txt is not compressed: %s", a)
		}
		guestfstest.Run(t, "setfattr", "-n", "user.Zone.Identifier", "-v", "[ZoneTransfer]", filepath.Join(mnt, "etc", "hostname"))
		guestfstest.Run(t, "cp", "--sparse=always", "--preserve=timestamps", filepath.Join(src, "sparse.img"), filepath.Join(mnt, "sparse.img"))
	}, "mkntfs", "-Q", "-F", "-q", "-L", "WinData")
	vols, err := guestfs.Volumes(t.Context(), []guestfs.Disk{diskOf(t, img)})
	if err != nil || len(vols) != 1 || vols[0].FS != guestfs.KindNTFS || vols[0].Label != "WinData" {
		t.Fatalf("volumes %+v %v", vols, err)
	}
	f := openOnly(t, []guestfs.Disk{diskOf(t, img)}, guestfs.KindNTFS)
	n := guestfstest.Compare(t, f, src, guestfstest.CompareOptions{Mtimes: true, Ignore: func(p string) bool {
		return strings.Contains(p, ":") || p == "System Volume Information"
	}})
	if n < 10000 {
		t.Fatalf("compared %d files", n)
	}
	ents, err := guestfs.List(f, "etc")
	if err != nil {
		t.Fatal(err)
	}
	var ads *guestfs.Entry
	for i, e := range ents {
		if e.Name == "hostname:Zone.Identifier" {
			ads = &ents[i]
		}
	}
	if ads == nil || ads.Type != "file" || ads.Size != int64(len("[ZoneTransfer]")) {
		t.Fatalf("alternate data stream not listed: %+v", ents)
	}
	fl, err := f.Open("etc/hostname:Zone.Identifier")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(fl)
	if string(b) != "[ZoneTransfer]" {
		t.Errorf("ADS content %q", b)
	}
	// Case-insensitive lookup, as on Windows.
	if _, err := f.Stat("ETC/HOSTNAME"); err != nil {
		t.Errorf("case-insensitive Stat: %v", err)
	}
	// The sparse file's holes are known.
	sf, err := f.OpenFile("sparse.img")
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := sf.(guestfs.Sparse).DataExtents(); !ok || len(r) == 0 || r[0][1] >= 32<<20 {
		t.Errorf("sparse file extents %v %v", r, ok)
	}
}

// TestNTFSConcurrent: the API reads one volume from many requests at once.
func TestNTFSConcurrent(t *testing.T) {
	guestfstest.Need(t, true, "mkntfs", "ntfs-3g", "mount")
	src := t.TempDir()
	guestfstest.MakeTree(t, src, guestfstest.Options{BigDir: 200})
	img := filepath.Join(t.TempDir(), "ntfs.img")
	guestfstest.Mounted(t, img, 32, src, "ntfs-3g", nil, "mkntfs", "-Q", "-F", "-q")
	f := openOnly(t, []guestfs.Disk{diskOf(t, img)}, guestfs.KindNTFS)
	want, _ := os.ReadFile(filepath.Join(src, "data", "random-1m.bin"))
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		go func() {
			b, err := fs.ReadFile(f, "data/random-1m.bin")
			if err == nil && !bytes.Equal(b, want) {
				err = io.ErrUnexpectedEOF
			}
			if err == nil {
				_, err = f.ReadDir("big")
			}
			errs <- err
		}()
	}
	for i := 0; i < 8; i++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
