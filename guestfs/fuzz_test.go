package guestfs

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"testing"
	"time"
)

// Fuzz inputs are compact images: a little-endian uint32 count of 512-byte
// sectors, then (uint32 sector number, 512 bytes) for each non-zero sector,
// so that seeds taken from real images made by mkfs stay small.
const fuzzMaxSectors = 1 << 20 // 512 MiB of virtual disk (XFS needs 300 MiB)

func compact(img []byte) []byte {
	var out bytes.Buffer
	binary.Write(&out, binary.LittleEndian, uint32(len(img)/512))
	zero := make([]byte, 512)
	for s := 0; s+512 <= len(img); s += 512 {
		if !bytes.Equal(img[s:s+512], zero) {
			binary.Write(&out, binary.LittleEndian, uint32(s/512))
			out.Write(img[s : s+512])
		}
	}
	return out.Bytes()
}

type sparseImage struct {
	size    int64
	sectors map[int64][]byte
}

func expand(b []byte) *sparseImage {
	im := &sparseImage{sectors: map[int64][]byte{}}
	if len(b) < 4 {
		return im
	}
	im.size = int64(min(binary.LittleEndian.Uint32(b), fuzzMaxSectors)) * 512
	for b = b[4:]; len(b) >= 4; {
		s := int64(binary.LittleEndian.Uint32(b))
		b = b[4:]
		n := min(512, len(b))
		if s*512 < im.size {
			sec := make([]byte, 512)
			copy(sec, b[:n])
			im.sectors[s] = sec
		}
		b = b[n:]
	}
	return im
}

func (im *sparseImage) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off >= im.size {
		return 0, io.EOF
	}
	n := 0
	for n < len(p) && off+int64(n) < im.size {
		pos := off + int64(n)
		c := int(min(int64(len(p)-n), 512-pos%512, im.size-pos))
		if sec, ok := im.sectors[pos/512]; ok {
			copy(p[n:n+c], sec[pos%512:])
		} else {
			clear(p[n : n+c])
		}
		n += c
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// exercise lists every volume, opens each browsable one and walks it,
// reading every file, within bounds.
func exercise(t testing.TB, im io.ReaderAt, size int64) {
	ctx := context.Background()
	disks := []Disk{{Name: "fuzz", R: im, Size: size}}
	vols, err := Volumes(ctx, disks)
	if err != nil {
		return
	}
	for _, v := range vols {
		if !v.Browsable {
			continue
		}
		f, err := Open(ctx, disks, v.ID)
		if err != nil {
			continue
		}
		budget := 2000
		var walk func(dir string, depth int)
		walk = func(dir string, depth int) {
			ents, err := List(f, dir)
			if err != nil || depth > 8 {
				return
			}
			for _, e := range ents {
				if budget--; budget < 0 {
					return
				}
				p := path.Join(dir, e.Name)
				switch e.Type {
				case "dir":
					walk(p, depth+1)
				case "file":
					if fl, err := f.OpenFile(p); err == nil {
						buf := make([]byte, 64<<10)
						for off := int64(0); off < min(fl.Size(), 1<<20); off += int64(len(buf)) {
							if _, err := fl.ReadAt(buf, off); err != nil {
								break
							}
						}
						if s, ok := fl.(Sparse); ok {
							s.DataExtents()
						}
					}
				case "symlink":
					f.Stat(p)
				}
			}
		}
		walk(".", 0)
		f.Close()
	}
}

// seedImages makes small real images with the tools, when installed.
func seedImages(t testing.TB) map[string][]byte {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	os.MkdirAll(filepath.Join(src, "d", "e"), 0o755)
	os.WriteFile(filepath.Join(src, "d", "e", "f.txt"), []byte("hello\n"), 0o644)
	os.WriteFile(filepath.Join(src, "big"), bytes.Repeat([]byte("0123456789abcdef"), 300), 0o644)
	os.Symlink("d/e/f.txt", filepath.Join(src, "link"))
	out := map[string][]byte{}
	try := func(name string, size int64, cmds ...[]string) {
		img := filepath.Join(dir, name+".img")
		f, _ := os.Create(img)
		f.Truncate(size)
		f.Close()
		for _, c := range cmds {
			args := make([]string, len(c))
			for i, a := range c {
				if a == "IMG" {
					a = img
				}
				if a == "SRC" {
					a = src
				}
				args[i] = a
			}
			if err := exec.Command(args[0], args[1:]...).Run(); err != nil {
				return
			}
		}
		b, err := os.ReadFile(img)
		if err == nil {
			out[name] = compact(b)
		}
	}
	try("ext4", 1<<20, []string{"mkfs.ext4", "-q", "-F", "-b", "1024", "-N", "32", "-d", "SRC", "IMG"})
	try("ext4-inline", 1<<20, []string{"mkfs.ext4", "-q", "-F", "-b", "1024", "-N", "32", "-O", "inline_data,^has_journal", "-d", "SRC", "IMG"})
	try("fat12", 1<<20, []string{"mkfs.vfat", "-F", "12", "IMG"}, []string{"mcopy", "-s", "-i", "IMG", filepath.Join(src, "d"), filepath.Join(src, "big"), "::/"})
	try("gpt-ext4", 3<<20, []string{"sgdisk", "-o", "-n", "1:2048:+1M", "IMG"})
	if os.Geteuid() == 0 {
		// Populated through a loop mount: these seeds are made at run time
		// only (the NTFS one is 2 MiB even compacted).
		mnt := t.TempDir()
		cp := []string{"cp", "-a", src + "/.", mnt + "/"}
		try("xfs", 300<<20, []string{"mkfs.xfs", "-q", "-f", "IMG"}, []string{"mount", "-o", "loop", "IMG", mnt}, cp, []string{"umount", mnt})
		try("ntfs", 8<<20, []string{"mkntfs", "-Q", "-F", "-q", "IMG"}, []string{"mount", "-t", "ntfs-3g", "-o", "loop", "IMG", mnt},
			[]string{"cp", "-r", src + "/d", mnt + "/"}, []string{"umount", mnt})
		// exFAT: exfat-fuse wants a block device (see guestfstest.ExFAT);
		// exFAT has no symlinks, so only d/ and big are copied.
		sh := fmt.Sprintf("d=$(losetup -f --show %s/exfat.img) && mount.exfat-fuse $d %s && cp -r %s/d %s/big %s/; r=$?; umount %s; losetup -d $d; exit $r", dir, mnt, src, src, mnt, mnt)
		try("exfat", 1<<20, []string{"mkfs.exfat", "-c", "4K", "-b", "4K", "IMG"}, []string{"sh", "-c", sh})
		exec.Command("umount", mnt).Run() // if a step failed half-way
	}
	return out
}

func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("FLR_WRITE_SEEDS") == "" {
		t.Skip("set FLR_WRITE_SEEDS=1 to regenerate testdata/fuzz/FuzzVolumes from real images")
	}
	d := filepath.Join("testdata", "fuzz", "FuzzVolumes")
	os.MkdirAll(d, 0o755)
	for name, b := range seedImages(t) {
		if len(b) > 64<<10 {
			continue // made at run time instead: too big to commit
		}
		if err := os.WriteFile(filepath.Join(d, name), fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", b), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d bytes", name, len(b))
	}
}

// FuzzVolumes feeds damaged images to every parser: partition tables, the
// LVM reader and the file-system readers, with panics not recovered.
func FuzzVolumes(f *testing.F) {
	recoverPanics = false
	f.Cleanup(func() { recoverPanics = true })
	for _, b := range seedImages(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		im := expand(b)
		done := make(chan struct{})
		go func() {
			defer close(done)
			exercise(t, im, im.size)
		}()
		// A hang is a failure too: the engine keeps the input.
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("input took more than 10 s")
		}
	})
}

// TestSeedsRead: the committed seeds are real file systems the readers
// open and walk (so the fuzzer starts from valid structures).
func TestSeedsRead(t *testing.T) {
	d := filepath.Join("testdata", "fuzz", "FuzzVolumes")
	for _, name := range []string{"ext4", "ext4-inline", "fat12", "exfat"} {
		raw, err := os.ReadFile(filepath.Join(d, name))
		if err != nil {
			t.Fatal(err)
		}
		var s string
		if _, err := fmt.Sscanf(string(raw), "go test fuzz v1\n[]byte(%q)", &s); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		im := expand([]byte(s))
		disks := []Disk{{Name: name, R: im, Size: im.size}}
		vols, err := Volumes(context.Background(), disks)
		if err != nil || len(vols) != 1 || !vols[0].Browsable {
			t.Fatalf("%s: volumes %+v %v", name, vols, err)
		}
		f, err := Open(context.Background(), disks, vols[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		b, err := fs.ReadFile(f, "d/e/f.txt")
		if err != nil || string(b) != "hello\n" {
			t.Errorf("%s: d/e/f.txt = %q, %v", name, b, err)
		}
	}
	if os.Geteuid() != 0 {
		return
	}
	// The run-time seeds are real too.
	seeds := seedImages(t)
	for name, kind := range map[string]string{"xfs": KindXFS, "ntfs": KindNTFS} {
		b, ok := seeds[name]
		if !ok {
			t.Errorf("no %s seed", name)
			continue
		}
		im := expand(b)
		disks := []Disk{{Name: name, R: im, Size: im.size}}
		f, err := Open(context.Background(), disks, "d0")
		if err != nil || f.Volume().FS != kind {
			t.Errorf("%s seed: %v", name, err)
			continue
		}
		if b, err := fs.ReadFile(f, "d/e/f.txt"); err != nil || string(b) != "hello\n" {
			t.Errorf("%s seed: d/e/f.txt = %q, %v", name, b, err)
		}
	}
}
