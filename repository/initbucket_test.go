package repository

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/repository/s3store"
)

// Init never creates a bucket unless told to (issue 24): a mistyped bucket
// name is an error that says how to create it, and nothing is created; an
// immutable init without CreateBucket needs an existing bucket that already
// has Object Lock.
func TestInitBucketNeedsCreateBucket(t *testing.T) {
	ctx := context.Background()
	srv := s3store.StartTestServer(t)
	init := InitOptions{Chunker: TestChunker, KDF: TestKDF, PackSize: 256 << 10}
	typo := srv.Location("vmvault-tpyo", "repo")
	err := Init(ctx, typo, []byte(TestPassword), init)
	if !errors.Is(err, ErrNoBucket) || !strings.Contains(err.Error(), "bucket vmvault-tpyo does not exist (add --create-bucket to create it)") {
		t.Fatalf("init in a missing bucket: %v", err)
	}
	// Nothing was created: a second try still finds no bucket.
	if err := Init(ctx, typo, []byte(TestPassword), init); !errors.Is(err, ErrNoBucket) {
		t.Fatalf("second init in a missing bucket: %v (was the bucket created?)", err)
	}
	locked := init
	locked.ObjectLock = &ObjectLock{Mode: "governance", Days: 1}
	lockedLoc := srv.Location("vmvault-lock", "repo")
	if err := Init(ctx, lockedLoc, []byte(TestPassword), locked); !errors.Is(err, ErrNoBucket) || !strings.Contains(err.Error(), "with Object Lock") {
		t.Fatalf("immutable init in a missing bucket: %v", err)
	}
	// CreateBucket creates it, with Object Lock for an immutable one.
	locked.CreateBucket = true
	if err := Init(ctx, lockedLoc, []byte(TestPassword), locked); err != nil {
		t.Fatal(err)
	}
	// An existing bucket with Object Lock takes another immutable
	// repository without CreateBucket.
	locked.CreateBucket = false
	if err := Init(ctx, srv.Location("vmvault-lock", "other"), []byte(TestPassword), locked); err != nil {
		t.Fatalf("immutable init in an existing locked bucket: %v", err)
	}
	// An existing bucket takes a plain one without CreateBucket too.
	if err := Init(ctx, srv.Location("vmvault-lock", "plain"), []byte(TestPassword), init); err != nil {
		t.Fatalf("init in an existing bucket: %v", err)
	}
	r, err := Open(ctx, lockedLoc, []byte(TestPassword), OpenOptions{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
}
