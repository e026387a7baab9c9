package repository

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestCheckPacksResumes: a range check stopped part way and resumed from its
// last cursor visits every pack exactly once, in id order, and reports a
// corrupt blob in the pack that holds it.
func TestCheckPacksResumes(t *testing.T) {
	ctx := context.Background()
	r := TestRepository(t, WithPackSize(64<<10))
	backup(t, r, "vm1", testTime, testDisk(1, 4<<20))
	var victim ID
	if err := r.db.View(func(tx *bolt.Tx) error {
		k, _ := tx.Bucket(bucketBlobs).Cursor().Last()
		victim = ID(k)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	badPack := flipByte(t, r, victim)

	var all []string
	if err := r.CheckPacks(ctx, "", func(pc PackCheck) error {
		if pc.Index != len(all)+1 || pc.Blobs == 0 || (len(pc.Problems) != 0) != (pc.Pack == badPack) || (pc.Quarantined == 1) != (pc.Pack == badPack) {
			t.Fatalf("pack %+v after %d (corrupt pack %s)", pc, len(all), badPack)
		}
		all = append(all, pc.Pack)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(all) < 4 || !slices.IsSorted(all) {
		t.Fatalf("packs %d sorted=%v", len(all), slices.IsSorted(all))
	}

	// Stop after the second pack, as a closing window would, and resume.
	stop := errors.New("window closed")
	var first []string
	err := r.CheckPacks(ctx, "", func(pc PackCheck) error {
		first = append(first, pc.Pack)
		if len(first) == 2 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || len(first) != 2 {
		t.Fatalf("stopped walk: %v after %d", err, len(first))
	}
	var rest []string
	if err := r.CheckPacks(ctx, first[1], func(pc PackCheck) error {
		if pc.Total != len(all) || pc.Index != len(first)+len(rest)+1 {
			t.Fatalf("resumed pack %+v", pc)
		}
		rest = append(rest, pc.Pack)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := append(first, rest...); !slices.Equal(got, all) {
		t.Fatalf("two-part walk %v, want each pack once: %v", got, all)
	}

	if err := r.CheckPacks(ctx, "not-a-pack", func(PackCheck) error { return nil }); !errors.Is(err, ErrBadCursor) {
		t.Fatal("bad cursor accepted")
	}
}

// TestCheckPacksBesideBackup: a backup commits while a range check is in
// the middle of its packs; the check completes clean and the new point is
// whole.
func TestCheckPacksBesideBackup(t *testing.T) {
	ctx := context.Background()
	r := TestRepository(t, WithPackSize(64<<10))
	backup(t, r, "vm1", testTime, testDisk(1, 2<<20))
	img := testDisk(2, 2<<20)
	committed := make(chan Point)
	go func() { committed <- backup(t, r, "vm2", testTime.Add(time.Hour), img) }()
	n, waited := 0, false
	if err := r.CheckPacks(ctx, "", func(pc PackCheck) error {
		n++
		if len(pc.Problems) != 0 {
			t.Errorf("pack %s: %v", pc.Pack, pc.Problems)
		}
		if !waited {
			waited = true
			select {
			case p := <-committed:
				verifyPoint(t, r, p.ID, img)
			case <-time.After(30 * time.Second):
				t.Fatal("the backup did not commit while the check ran")
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no pack checked")
	}
	requireClean(t, r)
}
