package s3store

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/vmvault/vmvault/repository/storage"
	"github.com/vmvault/vmvault/repository/storage/storagetest"
)

func TestStoreAgainstVersitygw(t *testing.T) {
	st, _ := NewTestStore(t, "vmvault-unit", "site/a")
	ctx := context.Background()

	if _, err := st.Stat(ctx, "config"); !storage.IsNotExist(err) {
		t.Fatalf("Stat of a missing object: %v, want ErrNotExist", err)
	}
	if err := storage.PutBytes(ctx, st, "config", []byte("hello"), storage.Steps{}); err != nil {
		t.Fatal(err)
	}
	if b, err := storage.ReadAll(ctx, st, "config"); err != nil || string(b) != "hello" {
		t.Fatalf("ReadAll = %q, %v", b, err)
	}
	// A pack larger than a part goes multipart and reads back byte for byte.
	big := make([]byte, 11<<20+123)
	rand.Read(big)
	w, err := st.Create(ctx, "packs/ab/abcdef")
	if err != nil {
		t.Fatal(err)
	}
	w.Write(big[:1<<20])
	w.Write(big[1<<20:])
	if err := w.Commit(ctx, storage.Steps{}); err != nil {
		t.Fatal(err)
	}
	o, err := st.Open(ctx, "packs/ab/abcdef")
	if err != nil {
		t.Fatal(err)
	}
	if o.Size() != int64(len(big)) {
		t.Fatalf("size %d, want %d", o.Size(), len(big))
	}
	p := make([]byte, 4096)
	if _, err := o.ReadAt(p, 7<<20+5); err != nil || !bytes.Equal(p, big[7<<20+5:7<<20+5+4096]) {
		t.Fatalf("ReadAt across a part boundary: %v", err)
	}
	// Packs are never overwritten.
	w, _ = st.Create(ctx, "packs/ab/abcdef")
	w.Write([]byte("evil"))
	if err := w.Commit(ctx, storage.Steps{}); !errors.Is(err, ErrExists) {
		t.Fatalf("overwriting a pack: %v, want ErrExists", err)
	}
	if n, _ := st.Stat(ctx, "packs/ab/abcdef"); n != int64(len(big)) {
		t.Fatalf("pack overwritten: size %d", n)
	}
	var names []string
	if err := st.List(ctx, "", func(n string, _ int64) error { names = append(names, n); return nil }); err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	if want := []string{"config", "packs/ab/abcdef"}; len(names) != 2 || names[0] != want[0] || names[1] != want[1] {
		t.Fatalf("List = %v, want %v", names, want)
	}
	if err := st.Delete(ctx, "config"); err != nil {
		t.Fatal(err)
	}
	if err := st.Delete(ctx, "config"); err != nil {
		t.Fatalf("deleting a missing object: %v", err)
	}
	if _, err := st.Stat(ctx, "config"); !storage.IsNotExist(err) {
		t.Fatalf("after Delete: %v", err)
	}
}

func TestLeaseExcludesAndExpires(t *testing.T) {
	st, _ := NewTestStore(t, "vmvault-lease", "")
	ctx := context.Background()
	old := LeaseTTL
	LeaseTTL = 3 * time.Second
	t.Cleanup(func() { LeaseTTL = old })
	rel, err := st.AcquireLease(ctx, "first", 0)
	if err != nil {
		t.Fatal(err)
	}
	var le *LockedError
	if _, err := st.AcquireLease(ctx, "second", 0); !errors.As(err, &le) || le.Lease.Holder != "first" {
		t.Fatalf("second lease: %v, want LockedError naming first", err)
	}
	// Renewal keeps it alive past its TTL.
	time.Sleep(4 * time.Second)
	if _, err := st.AcquireLease(ctx, "second", 0); !errors.As(err, &le) {
		t.Fatalf("lease not renewed: %v", err)
	}
	if err := rel(); err != nil {
		t.Fatal(err)
	}
	rel2, err := st.AcquireLease(ctx, "second", 0)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	rel2()
}

func TestS3Conformance(t *testing.T) {
	srv := StartTestServer(t)
	n := 0
	storagetest.Run(t, func(t *testing.T) storage.Storage {
		n++
		tg, err := ParseTarget(srv.Location("conformance", fmt.Sprintf("run%d", n))[len("s3:"):])
		if err != nil {
			t.Fatal(err)
		}
		st, err := New(context.Background(), tg, Options{StageDir: t.TempDir(), CreateBucket: true, PartSize: 5 << 20})
		if err != nil {
			t.Fatal(err)
		}
		return st
	})
}

// A multipart upload a crash interrupted is no object, but it holds space
// on the server until aborted: Clean (run at Open under the lock) aborts
// every incomplete upload under the prefix, and only those.
func TestCleanAbortsInterruptedUploads(t *testing.T) {
	st, srv := NewTestStore(t, "vmvault-mpu", "mine")
	ctx := context.Background()
	core := minio.Core{Client: st.c}
	for _, key := range []string{"mine/packs/ab/ab01", "other/packs/cd/cd01"} {
		id, err := core.NewMultipartUpload(ctx, "vmvault-mpu", key, minio.PutObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		part := make([]byte, 5<<20)
		if _, err := core.PutObjectPart(ctx, "vmvault-mpu", key, id, 1, bytes.NewReader(part), int64(len(part)), minio.PutObjectPartOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	uploads := func(prefix string) int {
		n := 0
		for u := range st.c.ListIncompleteUploads(ctx, "vmvault-mpu", prefix, true) {
			if u.Err != nil {
				t.Fatalf("list uploads: %v", u.Err)
			}
			n++
		}
		return n
	}
	if n := uploads("mine/"); n != 1 {
		t.Fatalf("%d incomplete uploads under mine/ before Clean, want 1 (server %s)", n, srv.Endpoint)
	}
	if err := st.Clean(ctx); err != nil {
		t.Fatal(err)
	}
	if n := uploads("mine/"); n != 0 {
		t.Fatalf("%d incomplete uploads left under mine/ after Clean", n)
	}
	if n := uploads("other/"); n != 1 {
		t.Fatalf("Clean touched another prefix's upload: %d left, want 1", n)
	}
}
