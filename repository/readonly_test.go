package repository

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/repository/s3store"
	"github.com/vmvault/vmvault/repository/storage"
)

// objectsOf lists every object of a repository's backend (name → size).
func objectsOf(t *testing.T, r *Repository) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	if err := r.store.List(context.Background(), "", func(name string, size int64) error {
		out[name] = size
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func sameObjects(a, b map[string]int64) error {
	var diff []string
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			diff = append(diff, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			diff = append(diff, k)
		}
	}
	if len(diff) > 0 {
		sort.Strings(diff)
		return fmt.Errorf("%d objects differ, e.g. %s", len(diff), diff[0])
	}
	return nil
}

func pointIDs(t *testing.T, r *Repository) []string {
	t.Helper()
	pts, err := r.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, p := range pts {
		ids = append(ids, p.ID)
	}
	return ids
}

// TestReadOnlyWhileOwnerWrites: appliance A owns a repository and keeps
// writing; appliance B opens it read-only (no lock, no lease, its own
// catalog cache), lists and restores A's points byte-identically, sees
// points A commits later (on demand, and by itself when an id is not
// found), forgets what A deleted and reclaimed, and every write of B is
// refused with ErrReadOnly without touching an object. On a local
// directory and on S3 (versitygw).
func TestReadOnlyWhileOwnerWrites(t *testing.T) {
	backends := []struct {
		name string
		loc  func(t *testing.T) string
	}{
		{"local", func(t *testing.T) string { return t.TempDir() }},
		{"s3", func(t *testing.T) string {
			return s3store.StartTestServer(t).Location("vmvault-ro", "appliance-a")
		}},
	}
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			ctx := context.Background()
			loc := be.loc(t)
			if err := Init(ctx, loc, []byte(TestPassword), InitOptions{Chunker: TestChunker, KDF: TestKDF, PackSize: 256 << 10, CreateBucket: true}); err != nil {
				t.Fatal(err)
			}
			t.Setenv("VMVAULT_CACHE_DIR", t.TempDir())
			a, err := Open(ctx, loc, []byte(TestPassword), OpenOptions{NoFsync: true})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			img1, img2, img3 := testDisk(11, 3<<20), testDisk(12, 2<<20), testDisk(13, 1<<20)
			p1 := backup(t, a, "web", time.Now(), img1)

			// An upload of A in flight (a .tmp file locally) while B opens:
			// B must not clean it up as a crash's leftover.
			inflight, err := a.store.Create(ctx, "packs/ab/"+strings.Repeat("ab", 16))
			if err != nil {
				t.Fatal(err)
			}
			inflight.Write([]byte("a pack being written"))

			// B opens while A holds its lock and lease, with the default
			// cache directory: its catalog is not A's.
			b, err := Open(ctx, loc, []byte(TestPassword), OpenOptions{ReadOnly: true})
			if err != nil {
				t.Fatalf("read-only Open while the owner holds the repository: %v", err)
			}
			defer b.Close()
			if !b.ReadOnly() || a.ReadOnly() {
				t.Fatalf("ReadOnly() = %v (B), %v (A)", b.ReadOnly(), a.ReadOnly())
			}
			if b.Dir() == a.Dir() {
				t.Fatalf("read-only catalog cache %s is the owner's", b.Dir())
			}
			if ids := pointIDs(t, b); len(ids) != 1 || ids[0] != p1.ID {
				t.Fatalf("B lists %v, want [%s]", ids, p1.ID)
			}
			verifyPoint(t, b, p1.ID, img1)
			if err := b.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			if err := inflight.Commit(ctx, storage.Steps{}); err != nil {
				t.Fatalf("the owner's upload in flight failed after a read-only open: %v", err)
			}
			if err := a.store.Delete(ctx, "packs/ab/"+strings.Repeat("ab", 16)); err != nil {
				t.Fatal(err)
			}

			// A writes a point while B reads: B finds it by id without an
			// explicit Refresh (a miss refreshes), and restores it.
			done := make(chan Point)
			go func() { done <- backup(t, a, "db", time.Now(), img2) }()
			for i := 0; i < 20; i++ { // reads and refreshes during A's session
				if err := b.Refresh(ctx); err != nil {
					t.Errorf("Refresh while the owner writes: %v", err)
					break
				}
				verifyPoint(t, b, p1.ID, img1)
			}
			p2 := <-done
			if _, err := b.Point(ctx, p2.ID); err != nil {
				t.Fatalf("B does not find the owner's new point %s: %v", p2.ID, err)
			}
			verifyPoint(t, b, p2.ID, img2)

			// Writes are refused with the sentinel and change no object.
			before := objectsOf(t, a)
			refusals := map[string]error{}
			_, refusals["NewSession"] = b.NewSession(ctx)
			refusals["Delete"] = b.Delete(ctx, p1.ID)
			refusals["Lock"] = b.Lock(ctx, p1.ID)
			refusals["Unlock"] = b.Unlock(ctx, p1.ID)
			refusals["LockUntil"] = b.LockUntil(ctx, p1.ID, time.Now().Add(time.Hour))
			_, refusals["Reclaim"] = b.Reclaim(ctx, nil)
			refusals["SaveApplianceConfig"] = b.SaveApplianceConfig(ctx, []byte("{}"))
			_, refusals["Copy"] = Copy(ctx, TestRepository(t), b, CopyOptions{})
			for op, err := range refusals {
				if !errors.Is(err, ErrReadOnly) {
					t.Errorf("%s on a read-only repository: %v, want ErrReadOnly", op, err)
				}
			}
			if err := sameObjects(before, objectsOf(t, a)); err != nil {
				t.Fatalf("refused writes changed the repository: %v", err)
			}
			// Reading and checking write nothing either, and a read-only
			// close leaves the owner's lock and lease alone.
			requireClean(t, b)
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			if err := sameObjects(before, objectsOf(t, a)); err != nil {
				t.Fatalf("check and close of a read-only repository changed it: %v", err)
			}
			if _, err := Open(ctx, loc, []byte(TestPassword), OpenOptions{NoFsync: true, CacheDir: t.TempDir()}); !errors.Is(err, ErrLocked) {
				t.Fatalf("a second writer after B closed: %v, want ErrLocked (A still holds the repository)", err)
			}

			// A deletes p1, reclaims and writes p3; B, reopened on its
			// existing cache, forgets p1 and restores p2 and p3.
			if err := a.Delete(ctx, p1.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := a.Reclaim(ctx, nil); err != nil {
				t.Fatal(err)
			}
			p3 := backup(t, a, "app", time.Now(), img3)
			b, err = Open(ctx, loc, []byte(TestPassword), OpenOptions{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			ids := pointIDs(t, b)
			sort.Strings(ids)
			want := []string{p2.ID, p3.ID}
			sort.Strings(want)
			if fmt.Sprint(ids) != fmt.Sprint(want) {
				t.Fatalf("B lists %v after the owner deleted %s, want %v", ids, p1.ID, want)
			}
			if _, err := b.OpenDisk(ctx, p1.ID, 0); !errors.Is(err, ErrNotFound) {
				t.Fatalf("OpenDisk of a deleted point: %v, want ErrNotFound", err)
			}
			verifyPoint(t, b, p2.ID, img2)
			verifyPoint(t, b, p3.ID, img3)
			requireClean(t, b)
		})
	}
}

// TestReadOnlyOpenOfMissingRepository: a read-only open of nothing fails
// with ErrNotFound and creates no directory there.
func TestReadOnlyOpenOfMissingRepository(t *testing.T) {
	t.Setenv("VMVAULT_CACHE_DIR", t.TempDir())
	dir := t.TempDir() + "/nothing"
	if _, err := Open(context.Background(), dir, []byte(TestPassword), OpenOptions{ReadOnly: true}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("read-only Open of a missing directory: %v, want ErrNotFound", err)
	}
	if _, err := storage.NewLocal(dir, true).Stat(context.Background(), "config"); !storage.IsNotExist(err) {
		t.Fatalf("the read-only open created %s: %v", dir, err)
	}
}

// TestReadOnlyRestoreAfterOwnerRepacks: the owner's reclaim moves the
// blobs of a point B already knows into new packs and deletes the old
// one; B's restore of that point finds them (a failed pack read refreshes
// the read-only catalog once) instead of failing.
func TestReadOnlyRestoreAfterOwnerRepacks(t *testing.T) {
	// On S3 only: locally B's open file of the deleted pack still reads.
	srv := s3store.StartTestServer(t)
	loc := srv.Location("vmvault-ro-repack", "a")
	ctx := context.Background()
	if err := Init(ctx, loc, []byte(TestPassword), InitOptions{Chunker: TestChunker, KDF: TestKDF, PackSize: 16 << 20, CreateBucket: true}); err != nil {
		t.Fatal(err)
	}
	a, err := Open(ctx, loc, []byte(TestPassword), OpenOptions{NoFsync: true, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	imgX, imgY := testDisk(21, 6<<20), testDisk(22, 1<<20)
	p1 := backup(t, a, "both", time.Now(), imgX, imgY) // one pack: X's and Y's blobs
	p2 := backup(t, a, "y", time.Now(), imgY)          // Y deduplicated into p1's pack
	b, err := Open(ctx, loc, []byte(TestPassword), OpenOptions{ReadOnly: true, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := a.Delete(ctx, p1.ID); err != nil {
		t.Fatal(err)
	}
	rep, err := a.Reclaim(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.PacksRepacked == 0 {
		t.Fatalf("the owner's reclaim repacked nothing (%+v): the test needs Y's blobs moved", rep)
	}
	verifyPoint(t, b, p2.ID, imgY)
}
