package repository

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func packFiles(t testing.TB, r *Repository) []string {
	t.Helper()
	m, err := r.listPackFiles()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for id := range m {
		out = append(out, id.String())
	}
	slices.Sort(out)
	return out
}

func reopen(t testing.TB, dir string) *Repository {
	t.Helper()
	r, err := Open(context.Background(), dir, []byte(TestPassword), OpenOptions{NoFsync: true, Logger: quietLogger})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// TestReclaimRefusesUnreadableRecord is the reproduction: flip one
// byte of points/<id>, remove index.db; reclaim used to remove the point's
// blobs (it marked from the catalog, which had skipped the record), so the
// point was gone once the record was repaired. Now reclaim stops with an
// error naming the record and deletes nothing.
func TestReclaimRefusesUnreadableRecord(t *testing.T) {
	for _, enc := range []bool{true, false} {
		t.Run(map[bool]string{true: "encrypted", false: "unencrypted"}[enc], func(t *testing.T) {
			dir := t.TempDir()
			opts := []TestOption{WithDir(dir), WithPackSize(256 << 10)}
			if !enc {
				opts = append(opts, WithNoEncryption())
			}
			r := TestRepository(t, opts...)
			ctx := context.Background()
			img := testDisk(400, 2<<20)
			p := backup(t, r, "vm", testTime, img)
			keep := testDisk(401, 1<<20)
			q := backup(t, r, "other", testTime.Add(time.Hour), keep)
			r.Close()

			recPath := filepath.Join(dir, "points", p.ID)
			good, err := os.ReadFile(recPath)
			if err != nil {
				t.Fatal(err)
			}
			bad := append([]byte(nil), good...)
			bad[len(bad)-3] ^= 0x01
			os.WriteFile(recPath, bad, 0o600)
			os.Remove(filepath.Join(dir, "index.db"))

			r2, err := Open(ctx, dir, []byte(TestPassword), OpenOptions{NoFsync: true, Logger: quietLogger})
			if err != nil {
				t.Fatal(err)
			}
			rep := mustCheck(t, r2, false)
			var named bool
			for _, pr := range rep.Problems {
				if strings.Contains(pr.Message, recPath) && slices.Contains(pr.Points, p.ID) {
					named = true
				}
			}
			if !named {
				t.Fatalf("check does not name the unreadable record %s: %v", recPath, rep.Problems)
			}
			before := packFiles(t, r2)
			_, err = r2.Reclaim(ctx, nil)
			if err == nil || !strings.Contains(err.Error(), recPath) || !strings.Contains(err.Error(), "nothing deleted") {
				t.Fatalf("reclaim with an unreadable record: %v, want an error naming %s", err, recPath)
			}
			if after := packFiles(t, r2); !slices.Equal(before, after) {
				t.Fatalf("reclaim deleted packs: %d -> %d", len(before), len(after))
			}
			r2.Close()

			// Repair the record: the point is whole again.
			os.WriteFile(recPath, good, 0o600)
			r3 := reopen(t, dir)
			verifyPoint(t, r3, p.ID, img)
			verifyPoint(t, r3, q.ID, keep)
			requireClean(t, r3)
			if _, err := r3.Reclaim(ctx, nil); err != nil {
				t.Fatal(err)
			}
			verifyPoint(t, r3, p.ID, img)
		})
	}
}

// TestReclaimKeepsPointWhoseCatalogWriteFailed: Commit wrote the record but
// its catalog transaction failed (session.go: "point is committed; reopen to
// repair"); a reclaim in the same process used to take the point for dead.
func TestReclaimKeepsPointWhoseCatalogWriteFailed(t *testing.T) {
	dir := t.TempDir()
	r := TestRepository(t, WithDir(dir), WithPackSize(256<<10))
	ctx := context.Background()
	img := testDisk(410, 2<<20)
	p := backup(t, r, "vm", testTime, img)
	dead := backup(t, r, "dead", testTime.Add(time.Hour), testDisk(411, 1<<20))
	if err := r.Delete(ctx, dead.ID); err != nil {
		t.Fatal(err)
	}
	// The state a failed catalog write leaves: record on disk, no entry.
	pid, _ := ParseID(p.ID)
	if err := r.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketPoints).Delete(pid[:]) }); err != nil {
		t.Fatal(err)
	}
	rep, err := r.Reclaim(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.PacksDeleted == 0 {
		t.Fatalf("reclaim removed nothing of the deleted point: %+v", rep)
	}
	r.Close()
	r2 := reopen(t, dir)
	verifyPoint(t, r2, p.ID, img)
	requireClean(t, r2)
}

// TestMissingRecordIsReportedNotDropped: a record the catalog lists but the
// disk lacks used to be dropped at Open without a word (FORMAT.md §13
// promises check reports it). Now Open warns, check reports it, reclaim
// keeps its data, and deleting the point resolves it.
func TestMissingRecordIsReportedNotDropped(t *testing.T) {
	dir := t.TempDir()
	r := TestRepository(t, WithDir(dir), WithPackSize(256<<10))
	ctx := context.Background()
	img := testDisk(420, 1<<20)
	p := backup(t, r, "vm", testTime, img)
	imgQ := testDisk(421, 1<<20)
	q := backup(t, r, "gone", testTime.Add(time.Hour), imgQ)
	r.Close()
	recPath := filepath.Join(dir, "points", q.ID)
	saved, _ := os.ReadFile(recPath)
	os.Remove(recPath)

	r2 := reopen(t, dir)
	if ws := r2.Warnings(); len(ws) != 1 || !strings.Contains(ws[0], q.ID) {
		t.Fatalf("warnings %q, want one naming %s", ws, q.ID)
	}
	if _, err := r2.Point(ctx, q.ID); err != nil {
		t.Fatalf("the catalog entry was dropped: %v", err)
	}
	rep := mustCheck(t, r2, false)
	if len(rep.Problems) != 1 || rep.Problems[0].Kind != ProblemMissingRecord || !slices.Equal(rep.Problems[0].Points, []string{q.ID}) {
		t.Fatalf("check: %v, want one missing-record problem naming %s", rep.Problems, q.ID)
	}
	if _, err := r2.Reclaim(ctx, nil); err != nil {
		t.Fatal(err)
	}
	verifyPoint(t, r2, q.ID, imgQ) // its data survived reclaim
	r2.Close()
	os.WriteFile(recPath, saved, 0o600)
	r3 := reopen(t, dir)
	requireClean(t, r3)
	verifyPoint(t, r3, q.ID, imgQ)
	verifyPoint(t, r3, p.ID, img)
	// Deleting it while the record is missing resolves the finding.
	os.Remove(recPath)
	if err := r3.Delete(ctx, q.ID); err != nil {
		t.Fatal(err)
	}
	requireClean(t, r3)
}

func catalogBlobs(t testing.TB, r *Repository) int {
	t.Helper()
	var n int
	r.db.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(bucketBlobs).Stats().KeyN
		return nil
	})
	return n
}

// TestReclaimReportCountsWhatItRemoved: the summary used to count every
// dead blob of the catalog, including those left in mostly-live packs.
func TestReclaimReportCountsWhatItRemoved(t *testing.T) {
	r := TestRepository(t, WithPackSize(8<<20))
	ctx := context.Background()
	img1, img2 := testDisk(430, 3<<20), testDisk(431, 256<<10)
	img2[0] = 1
	p1 := backup(t, r, "vm", testTime, img1, img2) // one pack: img1 (stays live) and img2 (dies)
	p2 := backup(t, r, "vm", testTime.Add(time.Hour), img1)
	small := testDisk(432, 128<<10)
	small[0] = 2
	p3 := backup(t, r, "other", testTime.Add(2*time.Hour), small) // a pack of its own that dies whole
	for _, id := range []string{p1.ID, p3.ID} {
		if err := r.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	before := catalogBlobs(t, r)
	rep, err := r.Reclaim(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	removed := before - catalogBlobs(t, r)
	if rep.DeadBlobs != removed || removed == 0 {
		t.Fatalf("report says %d dead blobs removed, the catalog lost %d", rep.DeadBlobs, removed)
	}
	if rep.DeadBlobsKept == 0 {
		t.Fatalf("report %+v: the dead blobs left in the mostly-live pack are not counted as kept", rep)
	}
	verifyPoint(t, r, p2.ID, img1)
	requireClean(t, r)
}
