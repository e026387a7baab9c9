package repository

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/failpoint"
)

// withFailpoints enables spec through the variable, the only switch.
func withFailpoints(t *testing.T, spec string) {
	t.Helper()
	t.Cleanup(func() { failpoint.Reload() }) // runs after t.Setenv restored it
	t.Setenv(failpoint.EnvVar, spec)
	if err := failpoint.Reload(); err != nil {
		t.Fatal(err)
	}
}

// A pack that fails to finalise (here: its rename) drops its blobs from the
// pending set without cataloguing them. The backup must fail with that
// error (ENOSPC: a DiskFullError), not with "blob ... not found" (it did
// before the fix), and commit nothing.
func TestFailedPackErrorReachesTheBackup(t *testing.T) {
	for _, tc := range []struct {
		act   string
		errno syscall.Errno
	}{{"eio", syscall.EIO}, {"enospc", syscall.ENOSPC}} {
		t.Run(tc.act, func(t *testing.T) {
			r := TestRepository(t, WithPackSize(64<<10))
			ctx := context.Background()
			// Incompressible: the first pack fills, fails and is done long
			// before PutDisk references its blobs.
			img := make([]byte, 1<<20)
			rand.NewChaCha8([32]byte{5}).Read(img)
			withFailpoints(t, "pack.rename="+tc.act+"@1")
			s, err := r.NewSession(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Abort()
			var ext []Extent
			for off := 0; off < len(img); off += 32 << 10 {
				c := img[off : off+32<<10]
				if isZero(c) {
					ext = append(ext, Extent{Offset: int64(off), Length: int64(len(c)), Zero: true})
					continue
				}
				id, _, _, err := s.PutChunk(ctx, c)
				if err != nil {
					t.Fatalf("PutChunk: %v", err) // appends succeed: the failure is in the finaliser
				}
				ext = append(ext, Extent{Offset: int64(off), Length: int64(len(c)), ID: id})
			}
			root, err := s.PutDisk(ctx, int64(len(img)), ext)
			if err == nil {
				_, err = s.Commit(ctx, NewPoint{Time: time.Now(), Disks: []NewDisk{{Capacity: int64(len(img)), Map: root}}})
			}
			switch {
			case err == nil:
				t.Fatal("backup with a failed pack committed")
			case errors.Is(err, ErrNotFound) || !errors.Is(err, tc.errno):
				t.Fatalf("error %v: want the pack's %v, not 'not found'", err, tc.errno)
			case tc.errno == syscall.ENOSPC && !strings.Contains(err.Error(), "repository's disk is full"):
				t.Fatalf("error %q does not say the disk is full", err)
			}
			pts, err := r.List(ctx)
			if err != nil || len(pts) != 0 {
				t.Fatalf("points after the failed backup: %v %v", pts, err)
			}
		})
	}
}
