package repository

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/vmvault/vmvault/repository/s3store"
	"github.com/vmvault/vmvault/repository/storage"
)

func storePackBytes(t testing.TB, r *Repository) int64 {
	t.Helper()
	var n int64
	if err := r.store.List(context.Background(), "packs/", func(_ string, size int64) error { n += size; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

func mwOpenLoc(t testing.TB, loc, appliance string) *Repository {
	t.Helper()
	r, err := Open(context.Background(), loc, []byte(TestPassword), OpenOptions{Appliance: appliance, CacheDir: filepath.Join(t.TempDir(), "cache-"+appliance)})
	if err != nil {
		t.Fatalf("open writer %s: %v", appliance, err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// Three writers on S3 (versitygw): conditional creates decide the index
// log and the leases; clones 2 and 3 deduplicate against clone 1; three
// writers racing on new data store it up to three times and a reclaim
// keeps one copy; a reclaim by one writer while another's session holds
// the deleted point's blobs; every point restores, check is clean.
func TestS3MultiWriter(t *testing.T) {
	srv := s3store.StartTestServer(t)
	ctx := context.Background()
	init := InitOptions{Chunker: TestChunker, KDF: TestKDF, PackSize: 1 << 20, CreateBucket: true, MultiWriter: true}
	base := testDisk(31, 6<<20)
	clones := [][]byte{clone(base, 1), clone(base, 2), clone(base, 3)}

	solo := srv.Location("vmvault-mw", "solo")
	if err := Init(ctx, solo, []byte(TestPassword), init); err != nil {
		t.Fatal(err)
	}
	rs := mwOpenLoc(t, solo, "solo")
	// The ideal: one writer backs up the three clones one after another.
	for i, c := range clones {
		if _, err := mwBackup(ctx, rs, "clone", testTime.Add(time.Duration(i)*time.Minute), c, nil); err != nil {
			t.Fatal(err)
		}
	}
	one := storePackBytes(t, rs)

	loc := srv.Location("vmvault-mw", "shared")
	init.CreateBucket = false
	if err := Init(ctx, loc, []byte(TestPassword), init); err != nil {
		t.Fatal(err)
	}
	ws := []*Repository{mwOpenLoc(t, loc, "app-1"), mwOpenLoc(t, loc, "app-2"), mwOpenLoc(t, loc, "app-3")}
	pts := make([]Point, 3)
	errs := make([]error, 3)
	p, err := mwBackup(ctx, ws[0], "clone-1", testTime, clones[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	pts[0] = p
	var wg sync.WaitGroup
	for i := 1; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pts[i], errs[i] = mwBackup(ctx, ws[i], fmt.Sprintf("clone-%d", i+1), testTime.Add(time.Duration(i)*time.Minute), clones[i], nil)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("writer %d: %v", i+1, err)
		}
	}
	total := storePackBytes(t, ws[0])
	t.Logf("S3: three clones by one writer %d bytes; by three writers %d (%.3fx)", one, total, float64(total)/float64(one))
	if float64(total) > 1.05*float64(one) {
		t.Errorf("three clones by three writers store %d bytes, more than 1.05 x one writer's %d", total, one)
	}

	// Lockstep: new data by all three at once.
	fresh := testDisk(32, 4<<20)
	var lock [3]Point
	for i := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lock[i], errs[i] = mwBackup(ctx, ws[i], "fresh", testTime.Add(time.Hour+time.Duration(i)*time.Second), fresh, nil)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("lockstep writer %d: %v", i+1, err)
		}
	}

	// Writer 1 deletes clone 1's point and reclaims while writer 2's
	// session holds the same blobs.
	atBarrier := make(chan struct{})
	var once sync.Once
	done := make(chan error, 1)
	p4, err := mwBackup(ctx, ws[1], "clone-1-again", testTime.Add(2*time.Hour), clones[0], func() {
		if err := ws[0].Delete(ctx, pts[0].ID); err != nil {
			t.Error(err)
		}
		go func() {
			_, err := ws[0].Reclaim(ctx, func(p Progress) {
				if p.Phase == "wait for other writers' backups" {
					once.Do(func() { close(atBarrier) })
				}
			})
			once.Do(func() { close(atBarrier) })
			done <- err
		}()
		<-atBarrier
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		list, err := w.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 6 {
			t.Fatalf("%s lists %d points, want 6", w.Appliance(), len(list))
		}
		for i := 1; i < 3; i++ {
			verifyPoint(t, w, pts[i].ID, clones[i])
		}
		for _, lp := range lock {
			verifyPoint(t, w, lp.ID, fresh)
		}
		verifyPoint(t, w, p4.ID, clones[0])
		if _, err := w.Point(ctx, pts[0].ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("deleted point: %v", err)
		}
	}
	requireClean(t, ws[2])
	if rep := mustCheck(t, ws[1], true); rep.BlobsRead == 0 {
		t.Fatalf("check --read-data read nothing")
	}
	// The conditional create the protocol rests on.
	ex := ws[0].store.(storage.Exclusive)
	if err := ex.PutExclusive(ctx, "index/00000000000000000001", []byte("{}")); !errors.Is(err, storage.ErrExists) {
		t.Fatalf("exclusive create over an existing log entry: %v, want ErrExists", err)
	}
}
