package repository

import (
	"context"
	"testing"
	"time"

	"github.com/vmvault/vmvault/repository/s3store"
)

// TestSeveralAppliancesOneBucket: repositories of three appliances in one
// bucket — two side by side ("site/a", "site/ab": one prefix a string
// prefix of the other) and one inside another's prefix ("site/a/nested")
// — list only their own points; deleting everything in one and reclaiming
// (which deletes packs and aborts interrupted uploads) leaves every object
// of the others, which still restore and check clean.
func TestSeveralAppliancesOneBucket(t *testing.T) {
	srv := s3store.StartTestServer(t)
	ctx := context.Background()
	prefixes := []string{"site/a", "site/ab", "site/a/nested"}
	repos := map[string]*Repository{}
	imgs := map[string][]byte{}
	pts := map[string]Point{}
	for i, p := range prefixes {
		loc := srv.Location("vmvault-shared", p)
		if err := Init(ctx, loc, []byte(TestPassword), InitOptions{Chunker: TestChunker, KDF: TestKDF, PackSize: 256 << 10, CreateBucket: true}); err != nil {
			t.Fatalf("init %s: %v", p, err)
		}
		r, err := Open(ctx, loc, []byte(TestPassword), OpenOptions{CacheDir: t.TempDir()})
		if err != nil {
			t.Fatalf("open %s: %v", p, err)
		}
		defer r.Close()
		repos[p] = r
		// The same first MiB in every repository: dedup must not reach
		// across repositories.
		img := testDisk(uint64(40+i), 2<<20)
		copy(img, testDisk(99, 1<<20))
		imgs[p] = img
		pts[p] = backup(t, r, "vm-"+p, time.Now(), img)
	}
	for _, p := range prefixes {
		if ids := pointIDs(t, repos[p]); len(ids) != 1 || ids[0] != pts[p].ID {
			t.Fatalf("%s lists %v, want only its own %s", p, ids, pts[p].ID)
		}
		// A fresh cache rebuilt from the bucket finds only its own too.
		r2, err := Open(ctx, srv.Location("vmvault-shared", p), []byte(TestPassword), OpenOptions{ReadOnly: true, CacheDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		if ids := pointIDs(t, r2); len(ids) != 1 || ids[0] != pts[p].ID {
			t.Fatalf("%s rebuilt from the bucket lists %v, want only %s", p, ids, pts[p].ID)
		}
		r2.Close()
	}
	others := func(victim string) map[string]map[string]int64 {
		out := map[string]map[string]int64{}
		for _, p := range prefixes {
			if p != victim {
				out[p] = objectsOf(t, repos[p])
			}
		}
		return out
	}
	for _, victim := range []string{"site/a", "site/ab"} {
		before := others(victim)
		r := repos[victim]
		if err := r.Delete(ctx, pts[victim].ID); err != nil {
			t.Fatal(err)
		}
		rep, err := r.Reclaim(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if rep.BytesFreed == 0 {
			t.Fatalf("reclaim of %s freed nothing", victim)
		}
		if n := len(objectsOf(t, r)); n == 0 {
			t.Fatalf("%s has no objects left (not even its config)", victim)
		}
		for p, objs := range others(victim) {
			if err := sameObjects(before[p], objs); err != nil {
				t.Fatalf("reclaim of %s changed %s: %v", victim, p, err)
			}
		}
	}
	p := "site/a/nested"
	verifyPoint(t, repos[p], pts[p].ID, imgs[p])
	requireClean(t, repos[p])
}
