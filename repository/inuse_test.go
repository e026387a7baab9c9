package repository

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestHoldInUse: a point in use cannot be deleted until every hold on it
// is released; reclaim keeps its data meanwhile and it restores after.
func TestHoldInUse(t *testing.T) {
	ctx := context.Background()
	r := TestRepository(t)
	p := backup(t, r, "vm", testTime, testDisk(43, 1<<20))
	rel1, err := r.HoldInUse(ctx, p.ID[:12], "instant recovery a1")
	if err != nil {
		t.Fatal(err)
	}
	rel2, err := r.HoldInUse(ctx, p.ID, "verification b2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.HoldInUse(ctx, "ffffffffffff", "x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("hold of a missing point: %v", err)
	}
	wantLocked(t, r.Delete(ctx, p.ID), time.Time{}, "in use: instant recovery a1, verification b2")
	if _, err := r.Reclaim(ctx, nil); err != nil {
		t.Fatal(err)
	}
	rel1()
	rel1() // idempotent: must not release the other hold
	wantLocked(t, r.Delete(ctx, p.ID), time.Time{}, "in use: verification b2")
	if why, ok := r.InUse(p.ID); !ok || why != "verification b2" {
		t.Fatalf("InUse = %q, %v", why, ok)
	}
	requireClean(t, r)
	rel2()
	if _, ok := r.InUse(p.ID); ok {
		t.Fatal("still in use after every release")
	}
	if err := r.Delete(ctx, p.ID); err != nil {
		t.Fatalf("delete after release: %v", err)
	}
}
