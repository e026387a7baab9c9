package repository

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// damageManifest flips a byte of a point's manifest blob in its pack.
func damageManifest(t *testing.T, r *Repository, dir, id string) {
	t.Helper()
	pid, _ := ParseID(id)
	loc, ok, err := r.lookup(pid)
	if err != nil || !ok {
		t.Fatalf("manifest of %s not in the catalog: %v", id, err)
	}
	pack := filepath.Join(dir, filepath.FromSlash(packName(loc.Pack)))
	b, err := os.ReadFile(pack)
	if err != nil {
		t.Fatal(err)
	}
	b[int(loc.Offset)+int(loc.StoredLen)/2] ^= 0x40
	if err := os.WriteFile(pack, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// A point the catalog still lists whose commit record is missing or
// damaged: check calls it damaged and says to run repair; Repair rewrites
// the record from the catalog and the verified manifest (keeping the lock
// flag) and check is clean again. A point whose manifest cannot be read is
// reported and left alone (issue 24).
func TestRepairRewritesRecords(t *testing.T) {
	dir := t.TempDir()
	r := TestRepository(t, WithDir(dir), WithPackSize(256<<10))
	ctx := context.Background()
	imgA, imgB, imgC := testDisk(500, 1<<20), testDisk(501, 1<<20), testDisk(502, 1<<20)
	a := backup(t, r, "missing", testTime, imgA)
	b := backup(t, r, "damaged", testTime.Add(time.Hour), imgB)
	c := backup(t, r, "lost", testTime.Add(2*time.Hour), imgC)
	if err := r.Lock(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	r.Close()

	os.Remove(filepath.Join(dir, "points", a.ID))
	for _, id := range []string{b.ID, c.ID} {
		rec := filepath.Join(dir, "points", id)
		bad, err := os.ReadFile(rec)
		if err != nil {
			t.Fatal(err)
		}
		bad[len(bad)-3] ^= 0x01
		os.WriteFile(rec, bad, 0o600)
	}
	r2 := reopen(t, dir)
	damageManifest(t, r2, dir, c.ID)
	r2.Close()

	r3 := reopen(t, dir)
	rep := mustCheck(t, r3, false)
	for _, id := range []string{a.ID, b.ID} {
		found := false
		for _, p := range rep.Problems {
			if (p.Kind == ProblemMissingRecord || p.Kind == ProblemBadPoint) && strings.Contains(p.Message, id) {
				found = true
				if !strings.Contains(p.Message, "appliance repo repair") {
					t.Errorf("check's problem for %s does not say to run repair: %s", id, p.Message)
				}
			}
		}
		if !found {
			t.Fatalf("check does not name %s: %v", id, rep.Problems)
		}
	}

	res, err := r3.Repair(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, x := range res.Results {
		got[x.Point] = x.Action
	}
	want := map[string]string{a.ID: RepairRewritten, b.ID: RepairRewritten, c.ID: RepairUnreadableManifest}
	if len(got) != len(want) {
		t.Fatalf("repair: %+v, want %v", res.Results, want)
	}
	for id, w := range want {
		if got[id] != w {
			t.Fatalf("repair of %s: %q, want %q (%+v)", id, got[id], w, res.Results)
		}
	}
	if res.Rewritten() != 2 || res.Unrepaired() != 1 {
		t.Fatalf("rewritten %d, unrepaired %d", res.Rewritten(), res.Unrepaired())
	}
	// c's damaged record was not touched.
	if _, err := r3.readRecord(mustID(t, c.ID)); err == nil {
		t.Fatal("the record of the point with an unreadable manifest was rewritten")
	}
	r3.Close()

	// From the files alone (a fresh catalog), a and b are whole again and
	// b is still locked.
	os.Remove(filepath.Join(dir, "index.db"))
	r4 := reopen(t, dir)
	verifyPoint(t, r4, a.ID, imgA)
	verifyPoint(t, r4, b.ID, imgB)
	pb, err := r4.Point(ctx, b.ID)
	if err != nil || !pb.Locked {
		t.Fatalf("point %s after repair: %+v, %v; want locked", b.ID, pb, err)
	}
	// A second repair of a sound repository does nothing.
	res, err = r4.Repair(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range res.Results {
		if x.Action == RepairRewritten {
			t.Fatalf("second repair rewrote %s", x.Point)
		}
	}
}

// In an immutable repository a damaged record still under its retention
// cannot be overwritten: Repair reports it and writes nothing; a missing one
// is written.
func TestRepairImmutableLockedRecord(t *testing.T) {
	dir := t.TempDir()
	r := TestRepository(t, WithDir(dir), WithPackSize(256<<10))
	ctx := context.Background()
	a := backup(t, r, "missing", testTime, testDisk(510, 1<<20))
	b := backup(t, r, "damaged", testTime.Add(time.Hour), testDisk(511, 1<<20))
	r.Close()
	os.Remove(filepath.Join(dir, "points", a.ID))
	rec := filepath.Join(dir, "points", b.ID)
	bad, _ := os.ReadFile(rec)
	bad[len(bad)-3] ^= 0x01
	os.WriteFile(rec, bad, 0o600)

	r2 := reopen(t, dir)
	// A directory cannot hold Object Lock; the repository's own rule
	// (a record is kept for the period after its write) is what is tested.
	r2.cfg.ObjectLock = &ObjectLock{Mode: "governance", Days: 1}
	res, err := r2.Repair(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]RepairResult{}
	for _, x := range res.Results {
		got[x.Point] = x
	}
	if got[a.ID].Action != RepairRewritten {
		t.Fatalf("missing record: %+v", got[a.ID])
	}
	if x := got[b.ID]; x.Action != RepairLocked || !strings.Contains(x.Message, "cannot be overwritten") {
		t.Fatalf("locked damaged record: %+v", x)
	}
	if now, _ := os.ReadFile(rec); string(now) != string(bad) {
		t.Fatal("the locked record was overwritten")
	}
}

func mustID(t *testing.T, s string) ID {
	t.Helper()
	id, err := ParseID(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
