package guestfs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/guestfs"
	"github.com/vmvault/vmvault/guestfs/guestfstest"
)

// TestExFAT: exFAT made by mkfs.exfat (exfatprogs) and filled by
// exfat-fuse through a loop device (this kernel has no exfat module):
// long and Unicode names (more than one name entry), a 1,000-entry
// directory, nested and empty directories, 1 MiB files, mtimes; 4 KiB and
// 128 KiB clusters; the label comes from the root directory.
func TestExFAT(t *testing.T) {
	guestfstest.Need(t, true, "mkfs.exfat", "mount.exfat-fuse", "losetup")
	for _, tt := range []struct {
		name  string
		extra []string
	}{
		{"4k-clusters", []string{"-c", "4K"}},
		{"128k-clusters", []string{"-c", "128K"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := t.TempDir()
			guestfstest.MakeTree(t, src, guestfstest.Options{Unicode: true, BigDir: 1000})
			long := strings.Repeat("a-very-long-name-", 12) + ".txt" // 208 characters: 14 name entries
			os.WriteFile(filepath.Join(src, long), []byte("long\n"), 0o644)
			img := filepath.Join(t.TempDir(), "exfat.img")
			// Two files grown in turns are fragmented: exfat-fuse then
			// gives them FAT chains (files written at once are contiguous,
			// NoFatChain).
			frag := func(mnt string) {
				chunk := 128 << 10
				for _, d := range []string{src, mnt} {
					os.Mkdir(filepath.Join(d, "frag"), 0o755)
					a, _ := os.Create(filepath.Join(d, "frag", "frag-a"))
					b, _ := os.Create(filepath.Join(d, "frag", "frag-b"))
					for i := 0; i < 24; i++ {
						a.Write(bytes.Repeat([]byte{byte(i)}, chunk+i))
						a.Sync()
						b.Write(bytes.Repeat([]byte{byte(100 + i)}, chunk-i))
						b.Sync()
					}
					a.Close()
					b.Close()
				}
			}
			guestfstest.ExFAT(t, img, 200, src, "USBDATA", frag, tt.extra...)
			raw, err := os.ReadFile(img)
			if err != nil {
				t.Fatal(err)
			}
			if o := exfatEntry(t, raw, "frag-a"); raw[o+33]&0x02 != 0 {
				t.Errorf("frag-a is contiguous (NoFatChain): the FAT chain path is not tested")
			}
			if o := exfatEntry(t, raw, "random-1m.bin"); raw[o+33]&0x02 == 0 {
				t.Errorf("random-1m.bin has a FAT chain: the NoFatChain path is not tested")
			}
			f := openOnly(t, []guestfs.Disk{diskOf(t, img)}, guestfs.KindExFAT)
			if l := f.Volume().Label; l != "USBDATA" {
				t.Errorf("label %q", l)
			}
			if n := guestfstest.Compare(t, f, src, guestfstest.CompareOptions{Mtimes: true}); n < 1000 {
				t.Fatalf("compared %d files", n)
			}
			// Lookups ignore case, names are returned as stored.
			if b, err := readAll(f, "ETC/HOSTNAME"); err != nil || string(b) != "web01\n" {
				t.Errorf("case-insensitive lookup: %q, %v", b, err)
			}
			ents, err := guestfs.List(f, ".")
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, e := range ents {
				found = found || e.Name == "Long File Name With Spaces.document.txt"
			}
			if !found {
				t.Errorf("names not as stored: %+v", ents)
			}
		})
	}
}

func readAll(f guestfs.FS, name string) ([]byte, error) {
	fl, err := f.OpenFile(name)
	if err != nil {
		return nil, err
	}
	defer fl.Close()
	return io.ReadAll(fl)
}

// exfatImage makes a small real exFAT image (4 KiB clusters) with a few
// files and returns its bytes.
func exfatImage(t *testing.T, hook func(mnt string)) (img string, src string) {
	t.Helper()
	guestfstest.Need(t, true, "mkfs.exfat", "mount.exfat-fuse", "losetup")
	src = t.TempDir()
	guestfstest.MakeTree(t, src, guestfstest.Options{})
	img = filepath.Join(t.TempDir(), "exfat.img")
	guestfstest.ExFAT(t, img, 16, src, "HOSTILE", hook, "-c", "4K")
	return img, src
}

// exfatEntry finds the file entry set of name in the image (by its UTF-16
// name) and returns the byte offset of its file entry.
func exfatEntry(t *testing.T, img []byte, name string) int {
	t.Helper()
	var u []byte
	for _, r := range name {
		u = append(u, byte(r), 0)
	}
	for i := 0; i+32 <= len(img); i += 32 {
		if img[i] == 0xC1 && bytes.HasPrefix(img[i+2:i+32], u[:min(len(u), 30)]) && img[i-32] == 0xC0 && img[i-64] == 0x85 {
			return i - 64
		}
	}
	t.Fatalf("no entry set for %q", name)
	return 0
}

func fixSetChecksum(b []byte, off int) {
	n := 32 * (1 + int(b[off+1]))
	var s uint16
	for i, c := range b[off : off+n] {
		if i == 2 || i == 3 {
			continue
		}
		s = (s&1)<<15 | s>>1 + uint16(c)
	}
	b[off+2], b[off+3] = byte(s), byte(s>>8)
}

// TestExFATDamaged: real images damaged in place. A bad entry-set
// checksum, a first cluster past the heap, a FAT chain that loops, a size
// of 2^60 and a directory whose chain is a cycle each fail with ErrCorrupt
// (and the rest still reads); a damaged boot region fails the open with an
// error naming the volume.
func TestExFATDamaged(t *testing.T) {
	img, src := exfatImage(t, nil)
	orig, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	le16 := func(b []byte, o int, v uint16) { b[o], b[o+1] = byte(v), byte(v>>8) }
	le32 := func(b []byte, o int, v uint32) {
		for i := 0; i < 4; i++ {
			b[o+i] = byte(v >> (8 * i))
		}
	}
	le64 := func(b []byte, o int, v uint64) {
		for i := 0; i < 8; i++ {
			b[o+i] = byte(v >> (8 * i))
		}
	}
	fatOff := int(uint32(orig[80])|uint32(orig[81])<<8|uint32(orig[82])<<16|uint32(orig[83])<<24) * 512
	for _, tt := range []struct {
		name   string
		damage func(b []byte)
		path   string // fails with ErrCorrupt (open or read)
	}{
		{"set checksum", func(b []byte) {
			o := exfatEntry(t, b, "hostname")
			le16(b, o+2, ^(uint16(b[o+2]) | uint16(b[o+3])<<8))
		}, "etc/hostname"},
		{"cluster past the heap", func(b []byte) {
			o := exfatEntry(t, b, "random-1m.bin")
			le32(b, o+32+20, 0x7ffffff0)
			fixSetChecksum(b, o)
		}, "data/random-1m.bin"},
		{"looping FAT chain", func(b []byte) {
			o := exfatEntry(t, b, "random-1m.bin")
			b[o+32+1] &^= 0x02 // through the FAT
			fixSetChecksum(b, o)
			first := uint32(b[o+52]) | uint32(b[o+53])<<8 | uint32(b[o+54])<<16 | uint32(b[o+55])<<24
			le32(b, fatOff+int(first)*4, first) // points at itself
		}, "data/random-1m.bin"},
		{"size 2^60", func(b []byte) {
			o := exfatEntry(t, b, "hostname")
			le64(b, o+32+24, 1<<60)
			le64(b, o+32+8, 1<<60)
			fixSetChecksum(b, o)
		}, "etc/hostname"},
		{"directory cycle through the FAT", func(b []byte) {
			o := exfatEntry(t, b, "nginx")
			b[o+32+1] &^= 0x02
			le64(b, o+32+24, 1<<20) // 256 clusters claimed
			le64(b, o+32+8, 1<<20)
			fixSetChecksum(b, o)
			first := uint32(b[o+52]) | uint32(b[o+53])<<8 | uint32(b[o+54])<<16 | uint32(b[o+55])<<24
			le32(b, fatOff+int(first)*4, first)
		}, "etc/nginx/nginx.conf"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := bytes.Clone(orig)
			tt.damage(b)
			p := filepath.Join(t.TempDir(), "bad.img")
			os.WriteFile(p, b, 0o644)
			f := openOnly(t, []guestfs.Disk{diskOf(t, p)}, guestfs.KindExFAT)
			done := make(chan error, 1)
			go func() {
				_, err := readAll(f, tt.path)
				if err == nil {
					_, err = f.ReadDir(filepath.Dir(tt.path))
				}
				done <- err
			}()
			select {
			case err := <-done:
				if !errors.Is(err, guestfs.ErrCorrupt) {
					t.Errorf("%s: %v, want ErrCorrupt", tt.path, err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: no answer in 10 s", tt.path)
			}
			want, _ := os.ReadFile(filepath.Join(src, "data/random-300k.bin"))
			{
				if got, err := readAll(f, "data/random-300k.bin"); err != nil || !bytes.Equal(got, want) {
					t.Errorf("undamaged file: %d bytes, %v", len(got), err)
				}
			}
		})
	}
	t.Run("valid data length", func(t *testing.T) {
		// Bytes past ValidDataLength read as zeros (exFAT spec 7.6.5);
		// exfat-fuse never leaves such a file, so it is made here.
		b := bytes.Clone(orig)
		o := exfatEntry(t, b, "random-300k.bin")
		le64(b, o+32+8, 1000)
		fixSetChecksum(b, o)
		p := filepath.Join(t.TempDir(), "vdl.img")
		os.WriteFile(p, b, 0o644)
		f := openOnly(t, []guestfs.Disk{diskOf(t, p)}, guestfs.KindExFAT)
		want, _ := os.ReadFile(filepath.Join(src, "data/random-300k.bin"))
		clear(want[1000:])
		if got, err := readAll(f, "data/random-300k.bin"); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%d bytes, %v", len(got), err)
		}
	})
	t.Run("boot checksum", func(t *testing.T) {
		b := bytes.Clone(orig)
		b[100] ^= 0xff // the serial number: only the checksum notices
		p := filepath.Join(t.TempDir(), "bad.img")
		os.WriteFile(p, b, 0o644)
		disks := []guestfs.Disk{diskOf(t, p)}
		vols, err := guestfs.Volumes(context.Background(), disks)
		if err != nil || len(vols) != 1 {
			t.Fatalf("%+v %v", vols, err)
		}
		_, err = guestfs.Open(context.Background(), disks, vols[0].ID)
		if !errors.Is(err, guestfs.ErrCorrupt) || !strings.Contains(err.Error(), vols[0].ID) {
			t.Errorf("open: %v, want ErrCorrupt naming volume %s", err, vols[0].ID)
		}
	})
	_ = fmt.Sprint
}
