package repository

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/vmvault/vmvault/repository/s3store"
)

// The repository on S3 (versitygw on loopback): backup, read back, check
// with data, the bucket locked against a second writer, the catalog
// rebuilt from the bucket alone in a fresh cache, delete + reclaim.
func TestS3Repository(t *testing.T) {
	srv := s3store.StartTestServer(t)
	loc := srv.Location("vmvault-repo", "a/b")
	ctx := context.Background()
	init := InitOptions{Chunker: TestChunker, KDF: TestKDF, PackSize: 256 << 10, CreateBucket: true}
	if err := Init(ctx, loc, []byte(TestPassword), init); err != nil {
		t.Fatal(err)
	}
	if err := Init(ctx, loc, []byte(TestPassword), init); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("second Init: %v, want ErrNotEmpty", err)
	}
	cache1 := t.TempDir()
	r, err := Open(ctx, loc, []byte(TestPassword), OpenOptions{CacheDir: cache1})
	if err != nil {
		t.Fatal(err)
	}
	if r.Location() != loc {
		t.Fatalf("Location() = %q", r.Location())
	}
	img1, img2 := testDisk(1, 3<<20), testDisk(2, 2<<20)
	p1 := backup(t, r, "web", time.Now(), img1)
	p2 := backup(t, r, "db", time.Now(), img2)
	verifyPoint(t, r, p1.ID, img1)
	requireClean(t, r)
	if rep := mustCheck(t, r, true); rep.BlobsRead == 0 {
		t.Fatalf("check --read-data read no blobs: %+v", rep)
	}
	// Another appliance (another cache) is refused while r holds the lease.
	if _, err := Open(ctx, loc, []byte(TestPassword), OpenOptions{CacheDir: t.TempDir()}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}

	// A fresh cache: the catalog is rebuilt from the bucket.
	r, err = Open(ctx, loc, []byte(TestPassword), OpenOptions{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	pts, err := r.List(ctx)
	if err != nil || len(pts) != 2 {
		t.Fatalf("points from a fresh cache: %v %v", pts, err)
	}
	verifyPoint(t, r, p2.ID, img2)
	if err := r.Delete(ctx, p1.ID); err != nil {
		t.Fatal(err)
	}
	rep, err := r.Reclaim(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.BytesFreed == 0 {
		t.Fatalf("reclaim freed nothing after deleting a point: %+v", rep)
	}
	verifyPoint(t, r, p2.ID, img2)
	requireClean(t, r)
}
