package verify

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/guestfs"
	"github.com/vmvault/vmvault/guestfs/guestfstest"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/service/filerestore"
	"github.com/vmvault/vmvault/service/filerestore/frtest"
)

var pointTime = time.Date(2026, 3, 4, 5, 0, 0, 0, time.UTC)

// counts is what a tree holds, as the walk counts it.
type counts struct{ dirs, files, links, bytes int64 }

// treeCounts counts the tree under dir, its root included.
func treeCounts(t *testing.T, dir string) counts {
	t.Helper()
	var c counts
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			c.dirs++
		case d.Type()&fs.ModeSymlink != 0:
			c.links++
		case d.Type().IsRegular():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			c.files++
			c.bytes += fi.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func resultCounts(v VolumeResult) counts { return counts{v.Dirs, v.Files, v.Symlinks, v.Bytes} }

// ext4Image makes an ext4 image (4 KiB blocks, so that a block number
// from debugfs is an offset) of the tree under src.
func ext4Image(t *testing.T, src string, sizeMiB int, extra ...string) string {
	t.Helper()
	img := filepath.Join(t.TempDir(), "ext4.img")
	guestfstest.Ext4(t, img, src, sizeMiB, append([]string{"-b", "4096"}, extra...)...)
	return img
}

// randomFile writes n random bytes: a partition no reader recognises.
func randomFile(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	rand.Read(b)
	p := filepath.Join(t.TempDir(), "random.img")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// backup commits one point of the disk images into a fresh repository
// and returns a Service over it.
func backup(t *testing.T, images ...string) (*Service, repository.Point) {
	t.Helper()
	r := repository.TestRepository(t)
	p := frtest.Backup(t, r, "web01", pointTime, images...)
	s, err := New(filerestore.Single("main", r), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s, p
}

func volumeByID(t *testing.T, rep Report, id string) VolumeResult {
	t.Helper()
	for _, v := range rep.Volumes {
		if v.ID == id {
			return v
		}
	}
	t.Fatalf("no volume %s in %+v", id, rep.Volumes)
	return VolumeResult{}
}

// TestVerifyPointPasses backs up an MBR disk holding ext4, FAT16 and a
// partition of random bytes, and verifies it: the two file systems are
// walked whole (every entry counted as it went in), the random partition
// is listed with its reason, and the point passes.
func TestVerifyPointPasses(t *testing.T) {
	guestfstest.Need(t, false, "mkfs.ext4", "mkfs.vfat", "mcopy", "sfdisk", "dd")
	src := filepath.Join(t.TempDir(), "src")
	guestfstest.MakeTree(t, src, guestfstest.Options{Symlinks: true, Unicode: true, BigDir: 300, SparseMiB: 8})
	fatSrc := filepath.Join(t.TempDir(), "fat")
	guestfstest.MakeTree(t, fatSrc, guestfstest.Options{ShortOnly: true})
	fatImg := filepath.Join(t.TempDir(), "fat.img")
	guestfstest.FAT(t, fatImg, 16, 16<<10, fatSrc)
	disk := filepath.Join(t.TempDir(), "disk.img")
	guestfstest.MBR(t, disk, 64,
		guestfstest.Part{SizeMiB: 32, Type: "83", Image: ext4Image(t, src, 32)},
		guestfstest.Part{SizeMiB: 16, Type: "e", Image: fatImg},
		guestfstest.Part{SizeMiB: 4, Type: "83", Image: randomFile(t, 4<<20)})
	s, p := backup(t, disk)

	extWant := treeCounts(t, src)
	extWant.dirs++ // lost+found
	fatWant := treeCounts(t, fatSrc)
	for _, tc := range []struct {
		name     string
		readData bool
	}{{"metadata", false}, {"read data", true}} {
		t.Run(tc.name, func(t *testing.T) {
			var last Progress
			calls := 0
			rep, err := s.VerifyPoint(context.Background(), p.ID[:10], Options{ReadData: tc.readData, Progress: func(pr Progress) { last = pr; calls++ }})
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Passed || rep.Verdict != StatusPassed || rep.RestorePoint != p.ID || rep.VM != "web01" || rep.Repository != "main" {
				t.Fatalf("report %+v", rep)
			}
			if !strings.Contains(rep.Reason, "2 volume(s) walked") || !strings.Contains(rep.Reason, "1 not browsable") {
				t.Errorf("reason %q", rep.Reason)
			}
			ext := volumeByID(t, rep, "d0p1")
			if ext.Status != StatusPassed || ext.FS != guestfs.KindExt4 || resultCounts(ext) != extWant || ext.ErrorCount != 0 {
				t.Errorf("ext4: %+v, want counts %+v", ext, extWant)
			}
			fat := volumeByID(t, rep, "d0p2")
			if fat.Status != StatusPassed || fat.FS != guestfs.KindVFAT || resultCounts(fat) != fatWant || fat.ErrorCount != 0 {
				t.Errorf("fat: %+v, want counts %+v", fat, fatWant)
			}
			rnd := volumeByID(t, rep, "d0p5")
			if rnd.Status != StatusSkipped || rnd.Reason != "no known file system" || rnd.Entries() != 0 {
				t.Errorf("random partition: %+v", rnd)
			}
			// The 8 MiB sparse file holds three small runs of data: read
			// data reads the data, not the holes.
			sparse := int64(8 << 20)
			if tc.readData {
				if ext.BytesRead < ext.Bytes-sparse || ext.BytesRead >= ext.Bytes || fat.BytesRead != fat.Bytes {
					t.Errorf("read %d of ext4's %d bytes, %d of fat's %d", ext.BytesRead, ext.Bytes, fat.BytesRead, fat.Bytes)
				}
			} else if ext.BytesRead != 0 || fat.BytesRead != 0 {
				t.Errorf("metadata walk read %d+%d bytes of data", ext.BytesRead, fat.BytesRead)
			}
			if want := ext.Entries() + fat.Entries(); calls == 0 || last.VolumesDone != 3 || last.Volumes != 3 || last.Entries != want {
				t.Errorf("%d progress calls, last %+v, want %d entries", calls, last, want)
			}
		})
	}
}

// debugfs runs a debugfs request on an image and returns its output.
func debugfs(t *testing.T, img string, write bool, req string) string {
	t.Helper()
	args := []string{"-R", req, img}
	if write {
		args = append([]string{"-w"}, args...)
	}
	var out, errb bytes.Buffer
	cmd := exec.Command("debugfs", args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("debugfs %s: %v\n%s", req, err, errb.String())
	}
	return out.String()
}

// overwrite writes n bytes of 0xFF at off in img.
func overwrite(t *testing.T, img string, off int64, n int) {
	t.Helper()
	f, err := os.OpenFile(img, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xFF}, n), off); err != nil {
		t.Fatal(err)
	}
}

// TestVerifyFindsDamage damages ext4 images the ways disks and bugs do,
// backs each up on a GPT disk and checks that the walk fails, naming the
// volume and the damaged path, and keeps walking the rest of the tree.
func TestVerifyFindsDamage(t *testing.T) {
	guestfstest.Need(t, false, "mkfs.ext4", "debugfs", "sgdisk", "dd")
	src := filepath.Join(t.TempDir(), "src")
	guestfstest.MakeTree(t, src, guestfstest.Options{Symlinks: true, BigDir: 300})
	want := treeCounts(t, src)
	for _, tc := range []struct {
		name    string
		damage  func(t *testing.T, img string)
		path    string // the error's path
		op      string
		message string
	}{
		{"directory block", func(t *testing.T, img string) {
			// /etc's first (only) block: every record length becomes 0xFFFF.
			blk, err := strconv.ParseInt(strings.Fields(debugfs(t, img, false, "blocks /etc"))[0], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			overwrite(t, img, blk*4096, 4096)
		}, "/etc", "readdir", "bad record"},
		{"inode table", func(t *testing.T, img string) {
			// /data/random-300k.bin's inode: its size becomes impossible.
			m := regexp.MustCompile(`located at block (\d+), offset 0x([0-9a-f]+)`).FindStringSubmatch(debugfs(t, img, false, "imap /data/random-300k.bin"))
			if m == nil {
				t.Fatal("debugfs imap: no location")
			}
			blk, _ := strconv.ParseInt(m[1], 10, 64)
			off, _ := strconv.ParseInt(m[2], 16, 64)
			overwrite(t, img, blk*4096+off, 128)
		}, "/data/random-300k.bin", "lstat", "claims"},
		{"directory hard link", func(t *testing.T, img string) {
			// A second name for /etc, as a damaged or hostile image has.
			debugfs(t, img, true, "ln /etc /data/etc-again")
		}, "/data/etc-again", "walk", ErrLoop.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img := ext4Image(t, src, 24)
			tc.damage(t, img)
			disk := filepath.Join(t.TempDir(), "disk.img")
			guestfstest.GPT(t, disk, 32, guestfstest.Part{SizeMiB: 26, Type: "8300", Image: img})
			s, p := backup(t, disk)
			rep, err := s.VerifyPoint(context.Background(), p.ID, Options{ReadData: true})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Passed || rep.Verdict != StatusFailed || !strings.Contains(rep.Reason, "d0p1 (ext4)") || !strings.Contains(rep.Reason, tc.path) {
				t.Fatalf("verdict %s: %s", rep.Verdict, rep.Reason)
			}
			v := volumeByID(t, rep, "d0p1")
			if v.Status != StatusFailed || v.ErrorCount != int64(len(v.Errors)) || len(v.Errors) == 0 {
				t.Fatalf("volume %+v", v)
			}
			e := v.Errors[0]
			if e.Path != tc.path || e.Op != tc.op || !strings.Contains(e.Error, tc.message) {
				t.Errorf("first error %+v, want %s at %s containing %q (all: %+v)", e, tc.op, tc.path, tc.message, v.Errors)
			}
			// The damage costs what it holds, not the rest of the tree.
			if v.Files < want.files/2 || v.Dirs < 3 {
				t.Errorf("walked only %d files, %d dirs of %+v", v.Files, v.Dirs, want)
			}
		})
	}
}

// TestVerifyHostileNames: names no path can name (a "/" or a NUL inside a
// name) are damage, reported on their directory.
func TestVerifyHostileNames(t *testing.T) {
	s, p := backup(t, frtest.HostileNamesDisk(t))
	rep, err := s.VerifyPoint(context.Background(), p.ID, Options{})
	if err != nil {
		t.Fatal(err)
	}
	v := volumeByID(t, rep, "d0p1")
	if rep.Passed || v.ErrorCount != 2 {
		t.Fatalf("passed %v, volume %+v", rep.Passed, v)
	}
	for _, e := range v.Errors {
		if e.Path != "/h" || e.Op != "readdir" || !strings.Contains(e.Error, ErrUnsafeName.Error()) {
			t.Errorf("error %+v", e)
		}
	}
}

// TestVerifyDamagedRepositoryData flips a byte of file data inside the
// repository: the metadata walk cannot see it, the data walk names the
// file whose blob no longer verifies.
func TestVerifyDamagedRepositoryData(t *testing.T) {
	guestfstest.Need(t, false, "mkfs.ext4", "sgdisk", "dd")
	src := filepath.Join(t.TempDir(), "src")
	if err := os.MkdirAll(filepath.Join(src, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Random data dominates every pack (it does not compress; the file
	// system's metadata does): a byte in the middle of the biggest pack is
	// this file's.
	big := make([]byte, 8<<20)
	rand.Read(big)
	if err := os.WriteFile(filepath.Join(src, "data", "big.bin"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	disk := filepath.Join(t.TempDir(), "disk.img")
	guestfstest.GPT(t, disk, 24, guestfstest.Part{SizeMiB: 18, Type: "8300", Image: ext4Image(t, src, 16)})
	dir := t.TempDir()
	r := repository.TestRepository(t, repository.WithDir(dir))
	p := frtest.Backup(t, r, "web01", pointTime, disk)
	r.Close()

	var victim string
	var size int64
	filepath.WalkDir(filepath.Join(dir, "packs"), func(p string, d fs.DirEntry, err error) error {
		if fi, err := d.Info(); err == nil && fi.Mode().IsRegular() && fi.Size() > size {
			victim, size = p, fi.Size()
		}
		return nil
	})
	orig, err := os.ReadFile(victim)
	if err != nil {
		t.Fatal(err)
	}
	// Chunk boundaries follow the content (random here), so the byte at a
	// given place in the pack may be in a chunk that also holds file system
	// metadata: try a few places until one hides from the metadata walk.
	var s *Service
	var r2 *repository.Repository
	found := false
	for _, frac := range []float64{0.5, 0.4, 0.6, 0.3, 0.7} {
		b := append([]byte(nil), orig...)
		b[int(float64(len(b))*frac)] ^= 0x40
		if err := os.WriteFile(victim, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if r2, err = repository.Open(context.Background(), dir, []byte(repository.TestPassword), repository.OpenOptions{NoFsync: true}); err != nil {
			t.Fatal(err)
		}
		if s, err = New(filerestore.Single("main", r2), nil); err != nil {
			t.Fatal(err)
		}
		rep, err := s.VerifyPoint(context.Background(), p.ID, Options{})
		if err == nil && rep.Passed {
			found = true
			break
		}
		r2.Close()
	}
	if !found {
		t.Fatal("every corrupted place was found by the metadata walk: no data-only blob to test with")
	}
	defer r2.Close()

	rep, err := s.VerifyPoint(context.Background(), p.ID, Options{ReadData: true})
	if err != nil {
		t.Fatal(err)
	}
	v := volumeByID(t, rep, "d0p1")
	if rep.Passed || len(v.Errors) != 1 || v.Errors[0].Path != "/data/big.bin" || v.Errors[0].Op != "read" {
		t.Fatalf("data walk: %s; errors %+v", rep.Reason, v.Errors)
	}
	t.Logf("found: %s", v.Errors[0].Error)
}

// TestVerifyNothingBrowsable: a point whose only disk holds random bytes
// (or encrypted data) passes with nothing walked and says so; a disk whose
// partition table is damaged fails.
func TestVerifyNothingBrowsable(t *testing.T) {
	guestfstest.Need(t, false, "mkfs.ext4", "sgdisk", "dd")
	s, p := backup(t, randomFile(t, 2<<20))
	rep, err := s.VerifyPoint(context.Background(), p.ID, Options{ReadData: true})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Passed || len(rep.Volumes) != 1 || rep.Volumes[0].Status != StatusSkipped || !strings.Contains(rep.Reason, "nothing was walked") {
		t.Fatalf("random disk: %+v", rep)
	}

	src := filepath.Join(t.TempDir(), "src")
	guestfstest.MakeTree(t, src, guestfstest.Options{})
	disk := frtest.Ext4Disk(t, src)
	fi, err := os.Stat(disk)
	if err != nil {
		t.Fatal(err)
	}
	overwrite(t, disk, 512+16, 4)           // the primary GPT header's CRC
	overwrite(t, disk, fi.Size()-512+16, 4) // and its backup's
	s, p = backup(t, disk)
	rep, err = s.VerifyPoint(context.Background(), p.ID, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Passed || !strings.Contains(rep.Reason, "d0 (unknown)") || !strings.Contains(rep.Reason, "partition table") {
		t.Fatalf("damaged GPT: %+v", rep)
	}
}

// TestVerifyCancel cancels a walk from its progress callback: it stops at
// once with the context's error and the volumes done so far.
func TestVerifyCancel(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	guestfstest.MakeTree(t, src, guestfstest.Options{BigDir: 3000})
	s, p := backup(t, frtest.Ext4Disk(t, src))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var at int64
	rep, err := s.VerifyPoint(ctx, p.ID, Options{Progress: func(pr Progress) {
		if at == 0 {
			at = pr.Entries
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	if rep.Passed || len(rep.Volumes) != 1 || rep.Volumes[0].Status != StatusFailed || rep.Volumes[0].ErrorCount != 0 {
		t.Fatalf("report %+v", rep)
	}
	// Cancelled at the first progress call: no more than one more entry.
	if got := rep.Volumes[0].Entries(); at == 0 || got > at+1 || got >= 3000 {
		t.Fatalf("walked %d entries after cancelling at %d", got, at)
	}
}

// TestWalkDepthLimit: a tree deeper than MaxDepth is an error at the
// first directory too deep, not a crash, and the rest is walked.
func TestWalkDepthLimit(t *testing.T) {
	guestfstest.Need(t, false, "mkfs.ext4")
	src := filepath.Join(t.TempDir(), "src")
	deep := filepath.Join(src, strings.Repeat("d/", 40))
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "top.txt"), []byte("top"), 0o644); err != nil {
		t.Fatal(err)
	}
	img := ext4Image(t, src, 8)
	f, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	disks := []guestfs.Disk{{Name: "disk0", R: f, Size: fi.Size()}}
	for _, tc := range []struct {
		max    int
		passed bool
		dirs   int64
	}{{0, true, 1 + 40 + 1}, {40, true, 42}, {16, false, 1 + 17 + 1}} {
		t.Run(fmt.Sprint(tc.max), func(t *testing.T) {
			rep, err := Walk(context.Background(), disks, Options{MaxDepth: tc.max})
			if err != nil {
				t.Fatal(err)
			}
			v := volumeByID(t, rep, "d0")
			if rep.Passed != tc.passed || v.Dirs != tc.dirs || v.Files != 1 {
				t.Fatalf("max %d: passed %v, %d dirs, %d files: %s", tc.max, rep.Passed, v.Dirs, v.Files, rep.Reason)
			}
			if !tc.passed {
				want := "/" + strings.Repeat("d/", tc.max) + "d"
				if len(v.Errors) != 1 || v.Errors[0].Path != want || !strings.Contains(v.Errors[0].Error, ErrTooDeep.Error()) {
					t.Fatalf("errors %+v, want one at %s", v.Errors, want)
				}
			}
		})
	}
}

// TestErrorsCapped: every error is counted, the first MaxErrors kept.
func TestErrorsCapped(t *testing.T) {
	guestfstest.Need(t, false, "mkfs.ext4")
	src := filepath.Join(t.TempDir(), "src")
	for i := range 12 {
		if err := os.MkdirAll(filepath.Join(src, fmt.Sprintf("d%02d", i), "x"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	img := ext4Image(t, src, 8)
	// Twelve directories, each made too deep by MaxDepth 1: twelve errors.
	f, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	rep, err := Walk(context.Background(), []guestfs.Disk{{Name: "d", R: f, Size: fi.Size()}}, Options{MaxDepth: 1, MaxErrors: 5})
	if err != nil {
		t.Fatal(err)
	}
	v := rep.Volumes[0]
	if v.ErrorCount != 12 || len(v.Errors) != 5 || v.Errors[0].Path != "/d00/x" || !strings.Contains(v.Reason, "12 error(s), first at /d00/x") {
		t.Fatalf("volume %+v", v)
	}
}
