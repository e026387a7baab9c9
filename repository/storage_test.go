package repository

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vmvault/vmvault/repository/storage"
)

// tryBackup is backup without t.Fatal: it returns the first error.
func tryBackup(ctx context.Context, r *Repository, img []byte) (Point, error) {
	s, err := r.NewSession(ctx)
	if err != nil {
		return Point{}, err
	}
	defer s.Abort()
	var ext []Extent
	const chunk = 32 << 10
	for off := 0; off < len(img); off += chunk {
		id, _, _, err := s.PutChunk(ctx, img[off:off+chunk])
		if err != nil {
			return Point{}, err
		}
		ext = append(ext, Extent{Offset: int64(off), Length: chunk, ID: id})
	}
	root, err := s.PutDisk(ctx, int64(len(img)), ext)
	if err != nil {
		return Point{}, err
	}
	return s.Commit(ctx, NewPoint{VM: VMIdentity{Name: "vm"}, Time: time.Now(), Consistency: "crash", Disks: []NewDisk{{Capacity: int64(len(img)), Map: root}}})
}

// openFaulty opens the repository in dir over a Faulty local store.
func openFaulty(t *testing.T, dir string) (*Repository, *storage.Faulty) {
	t.Helper()
	f := storage.NewFaulty(storage.NewLocal(dir, true), nil)
	r, err := openWith(context.Background(), f, dir, []byte(TestPassword), OpenOptions{NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, f
}

// Storage failures through the storage seam (torn pack writes on a full
// disk, a failed commit-record upload, EIO on reads) fail the operation
// with the storage's error, commit nothing, and leave a repository that
// checks clean and takes the next backup once the storage recovers.
func TestStorageFaultsCommitNothing(t *testing.T) {
	img := make([]byte, 1<<20)
	rand.NewChaCha8([32]byte{9}).Read(img)
	tests := []struct {
		name  string
		fail  func(op, name string) error
		errno syscall.Errno
	}{
		{"torn pack write, disk full", func(op, name string) error {
			if op == "write" && strings.HasPrefix(name, "packs/") {
				return syscall.ENOSPC
			}
			return nil
		}, syscall.ENOSPC},
		{"pack commit EIO", func(op, name string) error {
			if op == "commit" && strings.HasPrefix(name, "packs/") {
				return syscall.EIO
			}
			return nil
		}, syscall.EIO},
		{"commit record put, disk full", func(op, name string) error {
			if op == "put" && strings.HasPrefix(name, "points/") {
				return syscall.ENOSPC
			}
			return nil
		}, syscall.ENOSPC},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			TestRepository(t, WithDir(dir), WithPackSize(64<<10)).Close()
			r, f := openFaulty(t, dir)
			ctx := context.Background()
			f.SetFail(tt.fail)
			_, err := tryBackup(ctx, r, img)
			if err == nil || !errors.Is(err, tt.errno) {
				t.Fatalf("backup over failing storage: %v, want %v", err, tt.errno)
			}
			if tt.errno == syscall.ENOSPC {
				var d *DiskFullError
				if !errors.As(err, &d) {
					t.Fatalf("ENOSPC not reported as a full disk: %v", err)
				}
			}
			if pts, err := r.List(ctx); err != nil || len(pts) != 0 {
				t.Fatalf("points after the failed backup: %v %v", pts, err)
			}
			f.SetFail(nil)
			requireClean(t, r)
			p, err := tryBackup(ctx, r, img)
			if err != nil {
				t.Fatalf("backup after the storage recovered: %v", err)
			}
			verifyPoint(t, r, p.ID, img)
		})
	}
}

func TestStorageReadEIOIsAnError(t *testing.T) {
	dir := t.TempDir()
	TestRepository(t, WithDir(dir), WithPackSize(64<<10)).Close()
	r, f := openFaulty(t, dir)
	ctx := context.Background()
	img := make([]byte, 1<<20)
	rand.NewChaCha8([32]byte{3}).Read(img)
	p, err := tryBackup(ctx, r, img)
	if err != nil {
		t.Fatal(err)
	}
	r.files.closeAll() // reads must go to the storage again
	f.SetFail(func(op, name string) error {
		if (op == "read" || op == "open") && strings.HasPrefix(name, "packs/") {
			return syscall.EIO
		}
		return nil
	})
	dr, err := r.OpenDisk(ctx, p.ID, 0)
	if err == nil {
		buf := make([]byte, 64<<10)
		_, err = dr.ReadAt(buf, 0)
		dr.Close()
	}
	if err == nil || !errors.Is(err, syscall.EIO) {
		t.Fatalf("read over failing storage: %v, want EIO", err)
	}
	f.SetFail(nil)
	verifyPoint(t, r, p.ID, img)
}
