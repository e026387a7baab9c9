package repository

import (
	"context"
	"encoding/binary"
	"github.com/vmvault/vmvault/repository/storage"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// biggestPack returns the path of the largest pack file of dir.
func biggestPack(t testing.TB, dir string) (string, packID) {
	t.Helper()
	var best string
	var size int64
	m, _ := filepath.Glob(filepath.Join(dir, "packs", "*", "*"))
	for _, p := range m {
		if st, err := os.Stat(p); err == nil && st.Size() > size {
			best, size = p, st.Size()
		}
	}
	id, err := parsePackID(filepath.Base(best))
	if err != nil {
		t.Fatal(err)
	}
	return best, id
}

// requireOnlyPackProblem asserts that check reports the damaged pack and
// nothing else: no blob of it is corrupt, nothing is quarantined.
func requireOnlyPackProblem(t *testing.T, r *Repository, pack packID) {
	t.Helper()
	for _, readData := range []bool{false, true} {
		rep := mustCheck(t, r, readData)
		if len(rep.Problems) != 1 || rep.Problems[0].Kind != ProblemBadPack || rep.Problems[0].Pack != pack.String() {
			t.Fatalf("check (read-data %v): %v, want exactly the bad-pack problem of %s", readData, rep.Problems, pack)
		}
		if rep.Quarantined != 0 || len(rep.DamagedPoints()) != 0 {
			t.Fatalf("check quarantined %d blobs, damaged points %v: the blobs verify", rep.Quarantined, rep.DamagedPoints())
		}
	}
}

// TestDamagedPackHeaderKeepsIntactBlobs: a damaged pack magic, trailer or
// header used to mark every blob of the pack corrupt and quarantine them,
// although each verifies against its id and the points restore. Now check
// reports only the pack; recatalog (with the old catalog's offsets, or by
// searching for the header when the catalog is gone) salvages its blobs.
func TestDamagedPackHeaderKeepsIntactBlobs(t *testing.T) {
	damages := map[string]struct {
		edit func(b []byte) []byte
		// findable: the header itself is intact, so salvage works without
		// any catalog; otherwise only the old catalog's offsets save the
		// blobs (the header alone names the blobs of a pack).
		findable bool
	}{
		"magic":         {func(b []byte) []byte { b[3] ^= 0xff; return b }, true},
		"trailer magic": {func(b []byte) []byte { b[len(b)-2] ^= 0xff; return b }, true},
		"trailer length": {func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[len(b)-16:], 0xfffff)
			return b
		}, true},
		"trailer crc":  {func(b []byte) []byte { b[len(b)-11] ^= 0x10; return b }, true},
		"header bytes": {func(b []byte) []byte { b[len(b)-40] ^= 0x01; return b }, false},
	}
	for _, enc := range []bool{true, false} {
		for name, d := range damages {
			t.Run(map[bool]string{true: "encrypted", false: "unencrypted"}[enc]+"/"+name, func(t *testing.T) {
				dir := t.TempDir()
				opts := []TestOption{WithDir(dir), WithPackSize(1 << 20)}
				if !enc {
					opts = append(opts, WithNoEncryption())
				}
				r := TestRepository(t, opts...)
				ctx := context.Background()
				imgA, imgB := testDisk(500, 3<<20), testDisk(501, 1<<20)
				pa := backup(t, r, "a", testTime, imgA)
				pb := backup(t, r, "b", testTime.Add(time.Hour), imgB)
				r.Close()
				path, pack := biggestPack(t, dir)
				b, _ := os.ReadFile(path)
				os.WriteFile(path, d.edit(b), 0o600)
				snapshot := t.TempDir()
				copyDir(t, dir, snapshot)

				r2 := reopen(t, dir)
				requireOnlyPackProblem(t, r2, pack)
				verifyPoint(t, r2, pa.ID, imgA)
				verifyPoint(t, r2, pb.ID, imgB)

				// Recatalog rebuilds from the files: the damaged pack's
				// blobs are salvaged, not lost.
				if err := r2.Recatalog(ctx, nil); err != nil {
					t.Fatal(err)
				}
				if ws := r2.Warnings(); len(ws) != 1 || !strings.Contains(ws[0], "salvaged") {
					t.Fatalf("warnings %q, want one saying the pack was salvaged", ws)
				}
				requireOnlyPackProblem(t, r2, pack)
				verifyPoint(t, r2, pa.ID, imgA)
				verifyPoint(t, r2, pb.ID, imgB)
				if _, err := r2.Reclaim(ctx, nil); err != nil {
					t.Fatal(err)
				}
				verifyPoint(t, r2, pa.ID, imgA)

				// Without any catalog: the header is searched for.
				if !d.findable {
					return
				}
				os.Remove(filepath.Join(snapshot, "index.db"))
				r3 := reopen(t, snapshot)
				requireOnlyPackProblem(t, r3, pack)
				verifyPoint(t, r3, pa.ID, imgA)
				verifyPoint(t, r3, pb.ID, imgB)
			})
		}
	}
}

// TestDamagedPackHeaderStillReportsBadBlob: in a pack with a damaged magic,
// a blob that does not verify is still reported (and quarantined), the
// others are not.
func TestDamagedPackHeaderStillReportsBadBlob(t *testing.T) {
	dir := t.TempDir()
	r := TestRepository(t, WithDir(dir), WithPackSize(1<<20))
	img := testDisk(510, 3<<20)
	backup(t, r, "a", testTime, img)
	r.Close()
	path, pack := biggestPack(t, dir)
	b, _ := os.ReadFile(path)
	b[0] ^= 0xff            // magic
	b[packStart+40] ^= 0x01 // inside the first blob
	os.WriteFile(path, b, 0o600)
	r2 := reopen(t, dir)
	rep := mustCheck(t, r2, true)
	var packProblems, blobProblems int
	for _, p := range rep.Problems {
		switch {
		case p.Kind == ProblemBadPack && p.Pack == pack.String():
			packProblems++
		case p.Kind == ProblemCorruptBlob && p.Pack == pack.String():
			blobProblems++
		}
	}
	if packProblems != 1 || blobProblems != 1 || rep.Quarantined != 1 || len(rep.Problems) != 2 {
		t.Fatalf("problems %v (quarantined %d): want the pack and exactly its one bad blob", rep.Problems, rep.Quarantined)
	}
}

// TestReclaimKeepsUnindexedPackAPointNeeds: a pack whose sealed header is
// damaged cannot be salvaged without a catalog, so it stays unindexed.
// Reclaim used to delete it as an orphan file, destroying blobs that a
// saved catalog could still locate; it now keeps every orphan while a
// restore point references a blob that is not indexed.
func TestReclaimKeepsUnindexedPackAPointNeeds(t *testing.T) {
	dir := t.TempDir()
	r := TestRepository(t, WithDir(dir), WithPackSize(256<<10))
	ctx := context.Background()
	img := testDisk(520, 3<<20)
	p := backup(t, r, "a", testTime, img)
	// A pack of data blobs only: marking (which reads maps and manifests)
	// succeeds without it.
	meta, data := map[packID]bool{}, map[packID]bool{}
	r.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketBlobs).ForEach(func(k, v []byte) error {
			l, _ := decodeBlobLoc(v)
			if l.Type == BlobData {
				data[l.Pack] = true
			} else {
				meta[l.Pack] = true
			}
			return nil
		})
	})
	var victim packID
	for id := range data {
		if !meta[id] {
			victim = id
		}
	}
	if victim == (packID{}) {
		t.Fatal("no pack holds only data blobs")
	}
	r.Close()
	path := r.packPath(victim)
	b, _ := os.ReadFile(path)
	b[len(b)-40] ^= 0x01 // inside the sealed header
	os.WriteFile(path, b, 0o600)
	saved, _ := os.ReadFile(filepath.Join(dir, "index.db"))
	os.Remove(filepath.Join(dir, "index.db"))

	r2, err := Open(ctx, dir, []byte(TestPassword), OpenOptions{NoFsync: true, Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r2.Reclaim(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil || rep.OrphanFiles != 0 || rep.OrphanFilesKept != 1 {
		t.Fatalf("reclaim %+v deleted the unindexed pack a point needs (%v)", rep, err)
	}
	r2.Close()
	// The saved catalog still locates its blobs: the point is whole.
	os.WriteFile(filepath.Join(dir, "index.db"), saved, 0o600)
	r3 := reopen(t, dir)
	verifyPoint(t, r3, p.ID, img)
	if err := r3.Recatalog(ctx, nil); err != nil {
		t.Fatal(err)
	}
	verifyPoint(t, r3, p.ID, img)
}

// FuzzSalvagePack: whatever a pack file holds, salvage returns only blobs
// that verify and never panics.
func FuzzSalvagePack(f *testing.F) {
	var pid packID
	pid[0] = 0x55
	for _, enc := range []bool{false, true} {
		pack, _ := goldenPack(nil, goldenCodec(f, enc), pid)
		f.Add(pack, enc)
		damaged := append([]byte(nil), pack...)
		damaged[0] ^= 0xff
		damaged[len(damaged)-1] ^= 0xff
		f.Add(damaged, enc)
	}
	codecs := map[bool]*codec{false: goldenCodec(f, false), true: goldenCodec(f, true)}
	f.Fuzz(func(t *testing.T, b []byte, enc bool) {
		dir := t.TempDir()
		r := &Repository{dir: dir, store: storage.NewLocal(dir, true), codec: codecs[enc]}
		path := r.packPath(pid)
		os.MkdirAll(filepath.Dir(path), 0o700)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		entries, _, err := r.salvagePack(pid, nil)
		if err != nil {
			return
		}
		for _, e := range entries {
			stored := append([]byte(nil), b[e.Offset:e.Offset+uint64(e.StoredLen)]...)
			if _, err := r.codec.decode(nil, e, stored); err != nil {
				t.Fatalf("salvaged blob %s does not verify: %v", e.ID, err)
			}
		}
	})
}
