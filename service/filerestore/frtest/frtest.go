// Package frtest backs real disk images up into a real repository for the
// tests of file-level restore (the service, the API, the console). Only
// tests import it.
package frtest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vmvault/vmvault/backup"
	"github.com/vmvault/vmvault/dedup"
	"github.com/vmvault/vmvault/guestfs/guestfstest"
	"github.com/vmvault/vmvault/repository"
)

// Backup commits one restore point of vm whose disks are the image files,
// read through the real backup pipeline (chunking, dedup, encryption).
func Backup(t testing.TB, r *repository.Repository, vm string, at time.Time, images ...string) repository.Point {
	t.Helper()
	return BackupWithConfig(t, r, vm, at, nil, images...)
}

// BackupWithConfig is Backup with config (an encoded vmconfig, or nil) as
// the point's VM configuration.
func BackupWithConfig(t testing.TB, r *repository.Repository, vm string, at time.Time, config []byte, images ...string) repository.Point {
	t.Helper()
	ctx := context.Background()
	cc := r.Config().Chunker
	ch, err := dedup.New(dedup.Params{Algorithm: cc.Algorithm, Polynomial: cc.Polynomial, MinSize: cc.MinSize, AvgSize: cc.AvgSize, MaxSize: cc.MaxSize})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := r.NewSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Abort()
	np := repository.NewPoint{VM: repository.VMIdentity{Name: vm, InstanceUUID: "uuid-" + vm}, Time: at, Config: config}
	for i, img := range images {
		f, err := os.Open(img)
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := f.Stat()
		res, err := backup.WriteDisk(ctx, sess, ch, backup.DiskInput{Source: f, Size: fi.Size()}, backup.Options{Workers: 2})
		f.Close()
		if err != nil {
			t.Fatalf("back up %s: %v", img, err)
		}
		root, err := sess.PutDisk(ctx, fi.Size(), res.Extents)
		if err != nil {
			t.Fatal(err)
		}
		np.Disks = append(np.Disks, repository.NewDisk{Key: int32(2000 + i), Label: filepath.Base(img), Capacity: fi.Size(), Map: root})
	}
	p, err := sess.Commit(ctx, np)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Ext4Disk makes a GPT disk image with one ext4 partition (number 1,
// volume "d0p1") holding the tree under src, and returns its path.
func Ext4Disk(t testing.TB, src string) string {
	t.Helper()
	guestfstest.Need(t, false, "mkfs.ext4", "sgdisk", "dd")
	dir := t.TempDir()
	fsimg := filepath.Join(dir, "ext4.img")
	guestfstest.Ext4(t, fsimg, src, 64)
	disk := filepath.Join(dir, "disk.img")
	guestfstest.GPT(t, disk, 72, guestfstest.Part{SizeMiB: 66, Type: "8300", Image: fsimg})
	os.Remove(fsimg)
	return disk
}

// HostileTree adds the names an archive must not let escape to a tree:
// backslash and drive-letter names (separators for Windows extractors) and
// links pointing outside the volume.
func HostileTree(t testing.TB, dir string) {
	t.Helper()
	w := func(name, data string) {
		p := filepath.Join(dir, "hostile", name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w(`..\..\evil.txt`, "backslashes")
	w(`C:evil.txt`, "drive")
	w(`..`+"\u2215"+`x`, "division slash") // looks like "../x", is one name
	for name, target := range map[string]string{"abs-passwd": "/etc/passwd", "up-passwd": "../../../../../etc/passwd"} {
		if err := os.Symlink(target, filepath.Join(dir, "hostile", name)); err != nil {
			t.Fatal(err)
		}
	}
}

// HostileNamesDisk is a GPT disk whose ext4 volume holds /h/ok and two
// entries a hostile image can plant: "zz1/zz1" (a "/" in a name) and
// "zz2\x00zz2" (a NUL), made by patching the names mkfs.ext4 -d wrote
// (no metadata_csum, no dir_index: the directory block has no checksum).
func HostileNamesDisk(t testing.TB) string {
	t.Helper()
	guestfstest.Need(t, false, "mkfs.ext4", "sgdisk", "dd")
	src := filepath.Join(t.TempDir(), "src")
	os.MkdirAll(filepath.Join(src, "h"), 0o755)
	for n, data := range map[string]string{"ok": "fine", "zz1Qzz1": "slash", "zz2Qzz2": "nul"} {
		if err := os.WriteFile(filepath.Join(src, "h", n), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	img := filepath.Join(dir, "ext4.img")
	guestfstest.Ext4(t, img, src, 16, "-O", "^metadata_csum,^dir_index")
	b, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	for from, to := range map[string]string{"zz1Qzz1": "zz1/zz1", "zz2Qzz2": "zz2\x00zz2"} {
		if n := bytes.Count(b, []byte(from)); n != 1 {
			t.Fatalf("%q found %d times in the image", from, n)
		}
		i := bytes.Index(b, []byte(from))
		copy(b[i:], to)
	}
	if err := os.WriteFile(img, b, 0o600); err != nil {
		t.Fatal(err)
	}
	disk := filepath.Join(dir, "disk.img")
	guestfstest.GPT(t, disk, 24, guestfstest.Part{SizeMiB: 18, Type: "8300", Image: img})
	return disk
}
