package repository

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []TestOption
	}{
		{"encrypted", nil},
		{"unencrypted", []TestOption{WithNoEncryption()}},
		{"small packs", []TestOption{WithPackSize(200 << 10)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := TestRepository(t, tc.opts...)
			img1, img2 := testDisk(1, 3<<20+12345), testDisk(2, 1<<20)
			p := backup(t, r, "vm1", testTime, img1, img2)
			if len(p.ID) != 64 || p.LogicalBytes != int64(len(img1)+len(img2)) || len(p.Disks) != 2 {
				t.Fatalf("bad point %+v", p)
			}
			verifyPoint(t, r, p.ID, img1, img2)
			cfg, err := r.LoadConfigBlob(context.Background(), p)
			if err != nil || string(cfg) != `{"vm":"vm1"}` {
				t.Fatalf("config blob %q, %v", cfg, err)
			}
			size, ext, err := r.DiskExtents(context.Background(), p.ID[:8], 0)
			if err != nil || size != int64(len(img1)) {
				t.Fatalf("DiskExtents: %d %v", size, err)
			}
			var holes int
			for i, e := range ext {
				if i > 0 && e.Zero && ext[i-1].Zero {
					t.Fatal("adjacent holes were not coalesced")
				}
				if e.Zero {
					holes++
				}
			}
			if holes == 0 {
				t.Fatal("test image has no holes")
			}
			requireClean(t, r)
			if r.Config().Encrypted != (tc.name != "unencrypted") {
				t.Fatalf("Encrypted = %v", r.Config().Encrypted)
			}
		})
	}
}

func TestStreamLeavesHolesSparse(t *testing.T) {
	r := TestRepository(t)
	img := make([]byte, 64<<20)
	copy(img[10<<20:], testDisk(3, 1<<20))
	for i := 50 << 20; i < 51<<20; i++ {
		img[i] = byte(i)
	}
	p := backup(t, r, "sparse", testTime, img)
	out := filepath.Join(t.TempDir(), "out.raw")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(int64(len(img)))
	d, err := r.OpenDisk(context.Background(), p.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Stream(context.Background(), f, nil); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var st syscall.Stat_t
	if err := syscall.Stat(out, &st); err != nil {
		t.Fatal(err)
	}
	if alloc := st.Blocks * 512; alloc > 8<<20 {
		t.Fatalf("restored file allocates %d bytes; holes were written", alloc)
	}
	verifyPoint(t, r, p.ID, img)
}

func TestWrongPassword(t *testing.T) {
	dir := t.TempDir()
	r := TestRepository(t, WithDir(dir))
	r.Close()
	_, err := Open(context.Background(), dir, []byte("nope"), OpenOptions{NoFsync: true})
	if !errors.Is(err, ErrWrongPassword) {
		t.Fatalf("Open with wrong passphrase: %v, want ErrWrongPassword", err)
	}
	r2, err := Open(context.Background(), dir, []byte(TestPassword), OpenOptions{NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	r2.Close()
}

func TestInitRefusesNonEmptyAndBadChunker(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "x"), []byte("x"), 0o600)
	if err := Init(context.Background(), dir, []byte("p"), InitOptions{Chunker: TestChunker, KDF: TestKDF}); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("Init on non-empty dir: %v", err)
	}
	bad := TestChunker
	bad.MinSize = bad.MaxSize * 2
	if err := Init(context.Background(), t.TempDir(), []byte("p"), InitOptions{Chunker: bad, KDF: TestKDF}); err == nil {
		t.Fatal("Init accepted min > max")
	}
	if err := Init(context.Background(), t.TempDir(), []byte("p"), InitOptions{Chunker: TestChunker, KDF: TestKDF, CompressionLevel: "ultra"}); err == nil {
		t.Fatal("Init accepted an unknown compression level")
	}
	if err := Init(context.Background(), t.TempDir(), nil, InitOptions{Chunker: TestChunker, KDF: TestKDF}); err == nil {
		t.Fatal("Init accepted an encrypted repository without passphrase")
	}
}

func TestRepositoryLock(t *testing.T) {
	dir := t.TempDir()
	r := TestRepository(t, WithDir(dir))
	_, err := Open(context.Background(), dir, []byte(TestPassword), OpenOptions{NoFsync: true})
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "repo.lock") {
		t.Fatalf("second Open: %v, want ErrLocked naming the lock file", err)
	}
	r.Close()
	r2, err := Open(context.Background(), dir, []byte(TestPassword), OpenOptions{NoFsync: true})
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	r2.Close()
}

func TestNewerFormatRefused(t *testing.T) {
	dir := t.TempDir()
	r := TestRepository(t, WithDir(dir))
	r.Close()
	path := filepath.Join(dir, "config")
	b, _ := os.ReadFile(path)
	var m map[string]any
	json.Unmarshal(b, &m)
	m["version"] = map[string]int{"major": 3, "minor": 1}
	b, _ = json.Marshal(m)
	os.WriteFile(path, b, 0o600)
	_, err := Open(context.Background(), dir, []byte(TestPassword), OpenOptions{NoFsync: true})
	if !errors.Is(err, ErrNewerFormat) {
		t.Fatalf("Open: %v, want ErrNewerFormat", err)
	}
	want := "repository format v3.1 is newer than this vmvault supports (v2.0); upgrade vmvault"
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not say %q", err, want)
	}
}

func TestDedup(t *testing.T) {
	r := TestRepository(t)
	ctx := context.Background()
	img := testDisk(4, 2<<20)
	p1 := backup(t, r, "a", testTime, img)
	st1, _ := r.Stats(ctx)
	s, _ := r.NewSession(ctx)
	root, stored := putImage(t, s, img, 256<<10)
	if stored != 0 {
		t.Fatalf("second copy stored %d bytes", stored)
	}
	if root != p1.Disks[0].Map {
		t.Fatal("same image gave a different map root")
	}
	s.Abort()
	p2 := backup(t, r, "a", testTime.Add(time.Hour), img)
	st2, _ := r.Stats(ctx)
	if st2.UniqueBytes-st1.UniqueBytes > 4096 {
		t.Fatalf("second backup added %d unique bytes", st2.UniqueBytes-st1.UniqueBytes)
	}
	if st2.DedupRatio < 1.9 {
		t.Fatalf("dedup ratio %.2f", st2.DedupRatio)
	}
	// Within one session, concurrent identical chunks are stored once.
	s3, _ := r.NewSession(ctx)
	defer s3.Abort()
	data := testDisk(99, 1<<20)
	data[0] = 1
	added := make(chan bool, 8)
	for range 8 {
		go func() {
			_, a, _, err := s3.PutChunk(ctx, data)
			if err != nil {
				t.Error(err)
			}
			added <- a
		}()
	}
	n := 0
	for range 8 {
		if <-added {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d of 8 concurrent identical puts reported added", n)
	}
	verifyPoint(t, r, p2.ID, img)
}

func TestIncrementalSharesSegments(t *testing.T) {
	r := TestRepository(t)
	ctx := context.Background()
	const size = 1 << 30 // logical; only a few chunks are data
	chunk := 1 << 20
	s, _ := r.NewSession(ctx)
	var ext []Extent
	var off int64
	put := func(seed uint64) Extent {
		id, _, _, err := s.PutChunk(ctx, testDisk(seed, chunk))
		if err != nil {
			t.Fatal(err)
		}
		return Extent{Offset: off, Length: int64(chunk), ID: id}
	}
	// One data chunk every 64 MiB, holes between: 4 segments of 4 chunks.
	for off < size {
		ext = append(ext, put(uint64(off)))
		off += int64(chunk)
		ext = append(ext, Extent{Offset: off, Length: 64<<20 - int64(chunk), Zero: true})
		off += 64<<20 - int64(chunk)
	}
	root1, err := s.PutDisk(ctx, size, ext)
	if err != nil {
		t.Fatal(err)
	}
	p1, err := s.Commit(ctx, NewPoint{VM: VMIdentity{Name: "big"}, Time: testTime, Disks: []NewDisk{{Capacity: size, Map: root1}}})
	if err != nil {
		t.Fatal(err)
	}
	st1, _ := r.Stats(ctx)

	s2, _ := r.NewSession(ctx)
	ext2 := append([]Extent(nil), ext...)
	id, _, _, err := s2.PutChunk(ctx, testDisk(777, chunk))
	if err != nil {
		t.Fatal(err)
	}
	ext2[2*9].ID = id // a chunk in the third segment (offset 576 MiB)
	root2, err := s2.PutDisk(ctx, size, ext2)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := s2.Commit(ctx, NewPoint{VM: VMIdentity{Name: "big"}, Time: testTime.Add(time.Hour), Parent: p1.ID, Disks: []NewDisk{{Capacity: size, Map: root2}}})
	if err != nil {
		t.Fatal(err)
	}
	st2, _ := r.Stats(ctx)
	// New blobs: the chunk, one segment, the root, the manifest.
	if d := st2.Blobs - st1.Blobs; d != 4 {
		t.Fatalf("incremental added %d blobs, want 4 (chunk, segment, root, manifest)", d)
	}
	r1, _ := r.loadRoot(ctx, root1)
	r2, _ := r.loadRoot(ctx, root2)
	if len(r1.Segs) != 4 || len(r2.Segs) != 4 {
		t.Fatalf("want 4 segments, got %d and %d", len(r1.Segs), len(r2.Segs))
	}
	diff := 0
	for i := range r1.Segs {
		if r1.Segs[i].ID != r2.Segs[i].ID {
			diff++
		}
	}
	if diff != 1 {
		t.Fatalf("%d segments differ, want 1", diff)
	}
	if st2.PerPoint[1].UniqueBytes > int64(chunk)+64<<10 {
		t.Fatalf("incremental point has %d unique bytes", st2.PerPoint[1].UniqueBytes)
	}
	d, _ := r.OpenDisk(ctx, p2.ID, 0)
	buf := make([]byte, chunk)
	d.ReadAt(buf, ext2[18].Offset)
	if string(buf) != string(testDisk(777, chunk)) {
		t.Fatal("changed chunk reads back wrong")
	}
	d.ReadAt(buf, ext2[18].Offset+int64(chunk))
	if !isZero(buf) {
		t.Fatal("hole reads back non-zero")
	}
}

func TestPutDiskValidation(t *testing.T) {
	r := TestRepository(t)
	ctx := context.Background()
	s, _ := r.NewSession(ctx)
	defer s.Abort()
	id, _, _, _ := s.PutChunk(ctx, []byte("hello"))
	for _, tc := range []struct {
		name string
		size int64
		ext  []Extent
	}{
		{"gap", 10, []Extent{{Offset: 0, Length: 5, ID: id}, {Offset: 6, Length: 4, Zero: true}}},
		{"short", 10, []Extent{{Offset: 0, Length: 5, ID: id}}},
		{"unknown blob", 5, []Extent{{Offset: 0, Length: 5, ID: ID{1}}}},
		{"wrong length", 6, []Extent{{Offset: 0, Length: 6, ID: id}}},
		{"no id", 5, []Extent{{Offset: 0, Length: 5}}},
		{"zero length", 5, []Extent{{Offset: 0, Length: 0, Zero: true}, {Offset: 0, Length: 5, ID: id}}},
	} {
		if _, err := s.PutDisk(ctx, tc.size, tc.ext); err == nil {
			t.Errorf("%s: PutDisk accepted a bad map", tc.name)
		}
	}
	if _, err := s.PutDisk(ctx, 5, []Extent{{Offset: 0, Length: 5, ID: id}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutDisk(ctx, 0, nil); err != nil {
		t.Fatalf("empty disk: %v", err)
	}
}

func TestPointsLockDeletePrefix(t *testing.T) {
	r := TestRepository(t)
	ctx := context.Background()
	p1 := backup(t, r, "a", testTime, testDisk(5, 300<<10))
	p2 := backup(t, r, "b", testTime.Add(time.Minute), testDisk(6, 300<<10))
	list, _ := r.List(ctx)
	if len(list) != 2 || list[0].ID != p1.ID || list[1].ID != p2.ID {
		t.Fatalf("List order wrong: %v", list)
	}
	if _, err := r.Point(ctx, p1.ID[:10]); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Point(ctx, "zz"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Point(zz): %v", err)
	}
	common := 0
	for common < 64 && p1.ID[common] == p2.ID[common] {
		common++
	}
	if _, err := r.Point(ctx, p1.ID[:common]); common > 0 && !errors.Is(err, ErrAmbiguous) {
		t.Fatalf("ambiguous prefix: %v", err)
	}
	if err := r.Lock(ctx, p1.ID); err != nil {
		t.Fatal(err)
	}
	if err := r.Delete(ctx, p1.ID); !errors.Is(err, ErrPointLocked) {
		t.Fatalf("Delete locked: %v", err)
	}
	if p, _ := r.Point(ctx, p1.ID); !p.Locked {
		t.Fatal("not locked")
	}
	if err := r.Unlock(ctx, p1.ID); err != nil {
		t.Fatal(err)
	}
	if err := r.Delete(ctx, p1.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Point(ctx, p1.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted point still found: %v", err)
	}
	if _, err := r.OpenDisk(ctx, p2.ID, 5); !errors.Is(err, ErrNotFound) {
		t.Fatalf("OpenDisk bad index: %v", err)
	}
}

// flipByte corrupts one byte in the middle of a blob's stored bytes.
func flipByte(t *testing.T, r *Repository, id ID) string {
	t.Helper()
	loc, ok, err := r.lookup(id)
	if err != nil || !ok {
		t.Fatalf("lookup %s: %v %v", id, ok, err)
	}
	path := r.packPath(loc.Pack)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	off := int64(loc.Offset) + int64(loc.StoredLen)/2
	b := []byte{0}
	f.ReadAt(b, off)
	b[0] ^= 0x40
	f.WriteAt(b, off)
	r.files.forget(loc.Pack)
	return loc.Pack.String()
}

func TestCorruptionIsReportedWithPoints(t *testing.T) {
	for _, enc := range []bool{true, false} {
		t.Run(map[bool]string{true: "encrypted", false: "unencrypted"}[enc], func(t *testing.T) {
			var opts []TestOption
			if !enc {
				opts = append(opts, WithNoEncryption())
			}
			r := TestRepository(t, opts...)
			ctx := context.Background()
			imgA, imgB := testDisk(10, 2<<20), testDisk(11, 2<<20)
			imgA[0] = 0xAA // make sure the first chunk is data
			pa := backup(t, r, "a", testTime, imgA)
			pb := backup(t, r, "b", testTime.Add(time.Minute), imgB)
			// pc shares every blob with pa and holds imgA as its second disk.
			pc := backup(t, r, "c", testTime.Add(2*time.Minute), imgB, imgA)
			_, ext, _ := r.DiskExtents(ctx, pa.ID, 0)
			victim := ext[0].ID
			pack := flipByte(t, r, victim)

			if rep := mustCheck(t, r, false); !rep.Clean() {
				t.Fatalf("quick check should not read data: %v", rep.Problems)
			}
			rep := mustCheck(t, r, true)
			if rep.Clean() {
				t.Fatal("check --read-data is clean after corruption")
			}
			var found bool
			for _, p := range rep.Problems {
				if p.Blob == victim.String() {
					found = true
					if p.Kind != ProblemCorruptBlob || p.Pack != pack || len(p.Points) != 2 || p.Points[0] != pa.ID || p.Points[1] != pc.ID ||
						len(p.Disks) != 2 || p.Disks[0] != (DiskRef{pa.ID, 0}) || p.Disks[1] != (DiskRef{pc.ID, 1}) {
						t.Fatalf("problem %+v does not name exactly %s disk 0 and %s disk 1", p, pa.ID, pc.ID)
					}
				}
			}
			if !found {
				t.Fatalf("no problem names blob %s: %v", victim, rep.Problems)
			}
			if got := rep.DamagedPoints(); len(got) != 2 {
				t.Fatalf("damaged points %v", got)
			}
			d, _ := r.OpenDisk(ctx, pa.ID, 0)
			buf := make([]byte, 4096)
			_, err := d.ReadAt(buf, 0)
			var cbe *CorruptBlobError
			if !errors.As(err, &cbe) || cbe.Blob != victim || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), victim.String()) {
				t.Fatalf("ReadAt of corrupt blob: %v", err)
			}
			if err := d.Stream(ctx, discardAt{}, nil); !errors.As(err, &cbe) || !strings.Contains(err.Error(), victim.String()) {
				t.Fatalf("Stream of corrupt blob: %v", err)
			}
			if _, err := d.WriteTo(io.Discard); !errors.As(err, &cbe) || !strings.Contains(err.Error(), victim.String()) {
				t.Fatalf("WriteTo of corrupt blob: %v", err)
			}
			if _, err := r.LoadBlob(ctx, victim); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("LoadBlob: %v", err)
			}
			verifyPoint(t, r, pb.ID, imgB)

			// Check quarantined the blob: the next backup of the same data
			// stores a fresh copy, and the new point is healthy.
			if rep.Quarantined != 1 {
				t.Fatalf("quarantined %d blobs, want 1", rep.Quarantined)
			}
			s, _ := r.NewSession(ctx)
			_, stored := putImage(t, s, imgA, 256<<10)
			s.Abort()
			if stored == 0 {
				t.Fatal("backup after quarantine deduplicated against the corrupt blob")
			}
			pd := backup(t, r, "a-again", testTime.Add(time.Hour), imgA)
			verifyPoint(t, r, pd.ID, imgA)
			verifyPoint(t, r, pa.ID, imgA) // healed: the id now resolves to the fresh copy
			requireClean(t, r)
		})
	}
}

type discardAt struct{}

func (discardAt) WriteAt(p []byte, off int64) (int, error) { return len(p), nil }

func TestRecatalog(t *testing.T) {
	dir := t.TempDir()
	r := TestRepository(t, WithDir(dir), WithPackSize(256<<10))
	ctx := context.Background()
	imgs := [][]byte{testDisk(20, 1<<20), testDisk(21, 1<<20), testDisk(22, 1<<20)}
	var pts []Point
	for i, img := range imgs {
		pts = append(pts, backup(t, r, "vm", testTime.Add(time.Duration(i)*time.Hour), img))
	}
	r.Lock(ctx, pts[0].ID)
	r.Delete(ctx, pts[1].ID)
	before, _ := r.List(ctx)
	stBefore, _ := r.Stats(ctx)
	if err := r.Recatalog(ctx, nil); err != nil {
		t.Fatal(err)
	}
	compare := func(r *Repository) {
		t.Helper()
		after, _ := r.List(ctx)
		stAfter, _ := r.Stats(ctx)
		a, _ := json.Marshal(before)
		b, _ := json.Marshal(after)
		if string(a) != string(b) {
			t.Fatalf("List differs after recatalog:\n%s\n%s", a, b)
		}
		stBefore.DiskBytes, stAfter.DiskBytes = 0, 0
		a, _ = json.Marshal(stBefore)
		b, _ = json.Marshal(stAfter)
		if string(a) != string(b) {
			t.Fatalf("Stats differ after recatalog:\n%s\n%s", a, b)
		}
		verifyPoint(t, r, pts[2].ID, imgs[2])
		requireClean(t, r)
	}
	compare(r)
	// Delete index.db entirely: Open rebuilds it from files.
	r.Close()
	os.Remove(filepath.Join(dir, "index.db"))
	r2, err := Open(ctx, dir, []byte(TestPassword), OpenOptions{NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	compare(r2)
	if p, _ := r2.Point(ctx, pts[0].ID); !p.Locked {
		t.Fatal("lock state lost")
	}
}

func TestReclaimFreesSpace(t *testing.T) {
	r := TestRepository(t, WithPackSize(512<<10))
	ctx := context.Background()
	shared := testDisk(30, 1<<20)
	imgA := append(append([]byte(nil), shared...), testDisk(31, 2<<20)...)
	imgB := append(append([]byte(nil), shared...), testDisk(32, 2<<20)...)
	pa := backup(t, r, "a", testTime, imgA)
	pb := backup(t, r, "b", testTime.Add(time.Minute), imgB)
	before, _ := r.Stats(ctx)
	if err := r.Delete(ctx, pa.ID); err != nil {
		t.Fatal(err)
	}
	rep, err := r.Reclaim(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	after, _ := r.Stats(ctx)
	if rep.BytesFreed == 0 || after.DiskBytes >= before.DiskBytes {
		t.Fatalf("reclaim freed %d bytes; disk %d -> %d", rep.BytesFreed, before.DiskBytes, after.DiskBytes)
	}
	if after.Blobs >= before.Blobs {
		t.Fatalf("blobs %d -> %d", before.Blobs, after.Blobs)
	}
	verifyPoint(t, r, pb.ID, imgB)
	requireClean(t, r)
	// Locked points survive reclaim.
	pc := backup(t, r, "c", testTime.Add(time.Hour), testDisk(33, 1<<20))
	r.Lock(ctx, pc.ID)
	if _, err := r.Reclaim(ctx, nil); err != nil {
		t.Fatal(err)
	}
	verifyPoint(t, r, pc.ID, testDisk(33, 1<<20))
	// A second reclaim with nothing to do deletes nothing.
	rep, err = r.Reclaim(ctx, nil)
	if err != nil || rep.PacksDeleted != 0 || rep.OrphanFiles != 0 {
		t.Fatalf("idle reclaim: %+v %v", rep, err)
	}
}

func TestCrashRecovery(t *testing.T) {
	dir := t.TempDir()
	r := TestRepository(t, WithDir(dir), WithPackSize(256<<10))
	ctx := context.Background()
	img := testDisk(40, 2<<20)
	p := backup(t, r, "vm", testTime, img)
	// An abandoned session: data written, never committed.
	s, _ := r.NewSession(ctx)
	putImage(t, s, testDisk(41, 2<<20), 128<<10)
	s.Abort()
	r.Close()

	// Leftovers of a crash: a half-written pack, a half-written record, and a
	// pack that was renamed but never indexed.
	os.WriteFile(filepath.Join(dir, "packs", "ab", "ab000000000000000000000000000000.tmp"), []byte("partial"), 0o600)
	os.MkdirAll(filepath.Join(dir, "packs", "ab"), 0o700)
	os.WriteFile(filepath.Join(dir, "packs", "ab", "ab000000000000000000000000000000.tmp"), []byte("partial"), 0o600)
	os.WriteFile(filepath.Join(dir, "points", p.ID+".tmp"), []byte("partial"), 0o600)
	db, err := bolt.Open(filepath.Join(dir, "index.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	var unindexed packID
	db.Update(func(tx *bolt.Tx) error {
		// Forget the last pack of the abandoned session.
		c := tx.Bucket(bucketBlobs).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			l, _ := decodeBlobLoc(v)
			if l.Type == BlobRoot {
				unindexed = l.Pack
			}
		}
		c = tx.Bucket(bucketBlobs).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if l, _ := decodeBlobLoc(v); l.Pack == unindexed {
				c.Delete()
			}
		}
		return tx.Bucket(bucketPacks).Delete(unindexed[:])
	})
	db.Close()

	r2, err := Open(ctx, dir, []byte(TestPassword), OpenOptions{NoFsync: true})
	if err != nil {
		t.Fatalf("reopen after crash: %v", err)
	}
	defer r2.Close()
	if m, _ := filepath.Glob(filepath.Join(dir, "*", "*", "*.tmp")); len(m) > 0 {
		t.Fatalf("temp files survived: %v", m)
	}
	if _, ok, _ := r2.lookup(ID{}); ok {
		t.Fatal("zero id indexed")
	}
	if loc, ok := func() (blobLoc, bool) {
		var l blobLoc
		var found bool
		r2.db.View(func(tx *bolt.Tx) error {
			found = tx.Bucket(bucketPacks).Get(unindexed[:]) != nil
			return nil
		})
		return l, found
	}(); !ok {
		_ = loc
		t.Fatal("renamed-but-unindexed pack was not indexed at open")
	}
	requireClean(t, r2)
	verifyPoint(t, r2, p.ID, img)
	before, _ := r2.Stats(ctx)
	rep, err := r2.Reclaim(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	after, _ := r2.Stats(ctx)
	if rep.PacksDeleted == 0 || after.DiskBytes >= before.DiskBytes {
		t.Fatalf("reclaim did not remove orphans: %+v", rep)
	}
	requireClean(t, r2)
	verifyPoint(t, r2, p.ID, img)
}

func TestInterruptedReclaimRecovers(t *testing.T) {
	dir := t.TempDir()
	r := TestRepository(t, WithDir(dir), WithPackSize(256<<10))
	ctx := context.Background()
	img := testDisk(50, 1<<20)
	p := backup(t, r, "keep", testTime, img)
	d := backup(t, r, "drop", testTime.Add(time.Minute), testDisk(51, 1<<20))
	r.Delete(ctx, d.ID)
	r.Close()
	// Simulate a reclaim that condemned every pack of the deleted point and
	// deleted one of them before crashing.
	db, _ := bolt.Open(filepath.Join(dir, "index.db"), 0o600, nil)
	var victim packID
	db.Update(func(tx *bolt.Tx) error {
		tx.Bucket(bucketMeta).Put(metaReclaim, []byte{1})
		return tx.Bucket(bucketBlobs).ForEach(func(k, v []byte) error {
			l, _ := decodeBlobLoc(v)
			if l.Type == BlobManifest && ID(k).String() == d.ID {
				victim = l.Pack
			}
			return nil
		})
	})
	db.Update(func(tx *bolt.Tx) error {
		pi, _ := decodePackInfo(tx.Bucket(bucketPacks).Get(victim[:]))
		pi.State = blobStateCondemned
		return tx.Bucket(bucketPacks).Put(victim[:], encodePackInfo(pi))
	})
	db.Close()
	s := victim.String()
	os.Remove(filepath.Join(dir, "packs", s[:2], s))
	r2, err := Open(ctx, dir, []byte(TestPassword), OpenOptions{NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	requireClean(t, r2)
	verifyPoint(t, r2, p.ID, img)
}

func TestCommitAfterAbortFails(t *testing.T) {
	r := TestRepository(t)
	ctx := context.Background()
	s, _ := r.NewSession(ctx)
	s.Abort()
	s.Abort()
	if _, _, _, err := s.PutChunk(ctx, []byte("x")); !errors.Is(err, ErrSessionClosed) {
		t.Fatalf("PutChunk after Abort: %v", err)
	}
	if _, err := s.Commit(ctx, NewPoint{Time: testTime}); err == nil {
		t.Fatal("Commit after Abort succeeded")
	}
}

func TestGarbageCatalogIsRebuilt(t *testing.T) {
	dir := t.TempDir()
	r := TestRepository(t, WithDir(dir))
	img := testDisk(70, 1<<20)
	p := backup(t, r, "vm", testTime, img)
	r.Close()
	if err := os.WriteFile(filepath.Join(dir, "index.db"), []byte("this is not a bbolt file at all, just garbage bytes"), 0o600); err != nil {
		t.Fatal(err)
	}
	r2, err := Open(context.Background(), dir, []byte(TestPassword), OpenOptions{NoFsync: true})
	if err != nil {
		t.Fatalf("Open with a garbage index.db: %v", err)
	}
	defer r2.Close()
	verifyPoint(t, r2, p.ID, img)
	requireClean(t, r2)
}

func TestReclaimMergesSmallPacks(t *testing.T) {
	r := TestRepository(t, WithPackSize(4<<20))
	ctx := context.Background()
	var pts []Point
	var imgs [][]byte
	for i := range 10 {
		img := testDisk(uint64(80+i), 128<<10)
		img[0] = 1
		imgs = append(imgs, img)
		pts = append(pts, backup(t, r, "small", testTime.Add(time.Duration(i)*time.Minute), img))
	}
	before, _ := r.Stats(ctx)
	rep, err := r.Reclaim(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	after, _ := r.Stats(ctx)
	if rep.PacksRepacked < 8 || after.Packs >= before.Packs {
		t.Fatalf("small packs not merged: %+v, packs %d -> %d", rep, before.Packs, after.Packs)
	}
	for i, p := range pts {
		verifyPoint(t, r, p.ID, imgs[i])
	}
	requireClean(t, r)
}

func TestCompressionLevels(t *testing.T) {
	for _, lv := range []string{"fastest", "default", "better"} {
		t.Run(lv, func(t *testing.T) {
			dir := t.TempDir()
			if err := Init(context.Background(), dir, []byte("p"), InitOptions{Chunker: TestChunker, KDF: TestKDF, CompressionLevel: lv}); err != nil {
				t.Fatal(err)
			}
			r, err := Open(context.Background(), dir, []byte("p"), OpenOptions{NoFsync: true})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if r.Config().CompressionLevel != lv {
				t.Fatalf("level %q", r.Config().CompressionLevel)
			}
			img := testDisk(95, 1<<20)
			p := backup(t, r, "z", testTime, img)
			verifyPoint(t, r, p.ID, img)
		})
	}
}

// TestRepositoryLockAcrossProcesses: a second process gets ErrLocked too.
func TestRepositoryLockAcrossProcesses(t *testing.T) {
	if dir := os.Getenv("VMVAULT_LOCK_CHILD"); dir != "" {
		_, err := Open(context.Background(), dir, []byte(TestPassword), OpenOptions{NoFsync: true})
		if errors.Is(err, ErrLocked) {
			os.Exit(3)
		}
		os.Exit(0)
	}
	dir := t.TempDir()
	TestRepository(t, WithDir(dir))
	cmd := exec.Command(os.Args[0], "-test.run=^TestRepositoryLockAcrossProcesses$")
	cmd.Env = append(os.Environ(), "VMVAULT_LOCK_CHILD="+dir)
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("child process Open: %v, want exit 3 (ErrLocked)", err)
	}
}
