package s3store

import (
	"context"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/vmvault/vmvault/repository/storage"
)

// TestNestedPrefixesStaySeparate: two stores in one bucket, one prefix
// inside the other ("site" and "site/b"), list only their own objects, and
// Clean of the outer one (run at every Open) never aborts the inner one's
// multipart upload in flight — before the fix it aborted every incomplete
// upload whose key began with "site/".
func TestNestedPrefixesStaySeparate(t *testing.T) {
	outer, srv := NewTestStore(t, "vmvault-nested", "site")
	tg, err := ParseTarget(srv.Location("vmvault-nested", "site/b")[len("s3:"):])
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	inner, err := New(ctx, tg, Options{StageDir: t.TempDir(), PartSize: 5 << 20})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*Store{outer, inner} {
		if err := storage.PutBytes(ctx, s, "config", []byte(s.t.Prefix), storage.Steps{}); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	if err := outer.List(ctx, "", func(n string, _ int64) error { names = append(names, n); return nil }); err != nil {
		t.Fatal(err)
	}
	// The outer listing of everything sees b/config (S3 has no folders);
	// the repository lists only its own top-level names (packs/, points/,
	// …), which never begin with another repository's prefix segment.
	var packs []string
	outer.List(ctx, "packs/", func(n string, _ int64) error { packs = append(packs, n); return nil })
	if len(packs) != 0 {
		t.Fatalf("outer packs/ lists %v", packs)
	}

	core := minio.Core{Client: inner.c}
	key := inner.key("packs/ab/abcd")
	id, err := core.NewMultipartUpload(ctx, inner.t.Bucket, key, minio.PutObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	uploads := func() int {
		n := 0
		for u := range inner.c.ListIncompleteUploads(ctx, inner.t.Bucket, key, true) {
			if u.Err != nil {
				t.Fatalf("list uploads: %v", u.Err)
			}
			if u.UploadID == id {
				n++
			}
		}
		return n
	}
	if uploads() != 1 {
		t.Fatalf("the server does not list the incomplete upload %s", key)
	}
	if err := outer.Clean(ctx); err != nil {
		t.Fatal(err)
	}
	if uploads() != 1 {
		t.Fatalf("Clean of prefix %q aborted the upload of prefix %q in flight", outer.t.Prefix, inner.t.Prefix)
	}
	if err := inner.Clean(ctx); err != nil {
		t.Fatal(err)
	}
	if uploads() != 0 {
		t.Fatalf("Clean of prefix %q left its own interrupted upload", inner.t.Prefix)
	}
}
