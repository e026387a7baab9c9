package repository

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/vmvault/vmvault/repository/s3store"
	"github.com/vmvault/vmvault/repository/storage"
)

// copyFixture is a source repository with three points of two VMs: web
// (a full and an incremental that shares most of its blobs) and db.
type copyFixture struct {
	src              *Repository
	web1, web2, db1  Point
	imgW1, imgW2, im []byte
}

func newCopyFixture(t *testing.T) *copyFixture {
	t.Helper()
	f := &copyFixture{src: TestRepository(t)}
	f.imgW1 = testDisk(11, 3<<20)
	f.imgW2 = slices.Clone(f.imgW1)
	copy(f.imgW2[1<<20:], testDisk(12, 300<<10)) // one region changed
	f.im = testDisk(13, 2<<20)
	f.web1 = backup(t, f.src, "web", testTime, f.imgW1)
	f.web2 = backup(t, f.src, "web", testTime.Add(time.Hour), f.imgW2)
	f.db1 = backup(t, f.src, "db", testTime.Add(2*time.Hour), f.im)
	return f
}

// targetPoint finds the copy of a source point in dst by its tag.
func targetPoint(t *testing.T, src, dst *Repository, srcPoint string) Point {
	t.Helper()
	pts, err := dst.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pts {
		if p.Tags[CopySourceTag] == src.Config().ID+":"+srcPoint {
			return p
		}
	}
	t.Fatalf("no copy of %s in the target", srcPoint)
	return Point{}
}

func TestCopyLocalToLocal(t *testing.T) {
	ctx := context.Background()
	f := newCopyFixture(t)
	// Another passphrase and key, unencrypted, and another pack size: the
	// blobs must be re-encoded, not copied as bytes.
	for _, tc := range []struct {
		name string
		opts []TestOption
	}{
		{"encrypted", []TestOption{WithPassword(TestPassword), WithPackSize(128 << 10)}},
		{"unencrypted", []TestOption{WithNoEncryption()}},
		// A format 1.2 target keeps HMAC-SHA-256 ids; the source has BLAKE3.
		{"hmac-sha256 target", []TestOption{WithIDMAC(IDMACHMACSHA256)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := TestRepository(t, tc.opts...)
			var progress []CopyProgress
			res, err := Copy(ctx, f.src, dst, CopyOptions{Progress: func(p CopyProgress) { progress = append(progress, p) }})
			if err != nil {
				t.Fatal(err)
			}
			if res.PointsCopied != 3 || res.PointsSkipped != 0 || res.BlobsSent == 0 || res.BytesSent == 0 {
				t.Fatalf("result %+v", res)
			}
			if res.BlobsVerified != res.BlobsSent {
				t.Fatalf("verified %d of %d blobs sent", res.BlobsVerified, res.BlobsSent)
			}
			// The incremental shares its parent's blobs: it sends only the
			// changed region (300 KiB over 256 KiB chunks: at most 3).
			if w2 := res.Points[1]; w2.BlobsSent > 3 || w2.BlobsReused == 0 {
				t.Fatalf("incremental sent %d blobs, reused %d", w2.BlobsSent, w2.BlobsReused)
			}
			if last := progress[len(progress)-1]; last.PointsDone != 3 || last.BlobsSent != res.BlobsSent {
				t.Fatalf("last progress %+v", last)
			}
			w1, w2, d1 := targetPoint(t, f.src, dst, f.web1.ID), targetPoint(t, f.src, dst, f.web2.ID), targetPoint(t, f.src, dst, f.db1.ID)
			verifyPoint(t, dst, w1.ID, f.imgW1)
			verifyPoint(t, dst, w2.ID, f.imgW2)
			verifyPoint(t, dst, d1.ID, f.im)
			if w2.Parent != "" && w2.Parent != w1.ID {
				t.Fatalf("copied incremental's parent %q, want %q or none", w2.Parent, w1.ID)
			}
			if w1.ID == f.web1.ID && tc.name != "unencrypted" {
				t.Fatal("the copy has the source's point id: ids were not recomputed under the target's key")
			}
			if !w1.Time.Equal(f.web1.Time) || w1.VM.Name != "web" || w1.Disks[0].Capacity != int64(len(f.imgW1)) {
				t.Fatalf("copied point %+v", w1)
			}
			cfg, err := dst.LoadConfigBlob(ctx, w1)
			if err != nil || string(cfg) != `{"vm":"web"}` {
				t.Fatalf("VM configuration %q, %v", cfg, err)
			}
			requireClean(t, dst)
			if rep := mustCheck(t, dst, true); len(rep.Problems) != 0 {
				t.Fatalf("check --read-data: %+v", rep.Problems)
			}

			// Idempotent: a second copy reads nothing and sends nothing.
			packs := packFiles(t, dst)
			res2, err := Copy(ctx, f.src, dst, CopyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if res2.PointsCopied != 0 || res2.PointsSkipped != 3 || res2.BlobsSent != 0 || res2.BytesSent != 0 {
				t.Fatalf("second copy %+v", res2)
			}
			if got := packFiles(t, dst); !slices.Equal(got, packs) {
				t.Fatalf("second copy wrote packs: %d before, %d after", len(packs), len(got))
			}
			// And back: the copies are recognised as the originals.
			back, err := Copy(ctx, dst, f.src, CopyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if back.PointsCopied != 0 || back.PointsSkipped != 3 || back.BlobsSent != 0 {
				t.Fatalf("copy back %+v", back)
			}
		})
	}
}

func TestCopyFilters(t *testing.T) {
	ctx := context.Background()
	f := newCopyFixture(t)
	for _, tc := range []struct {
		name string
		opts CopyOptions
		want []string
		err  error
	}{
		{"vm", CopyOptions{VMs: []string{"db"}}, []string{f.db1.ID}, nil},
		{"point prefix", CopyOptions{Points: []string{f.web2.ID[:12]}}, []string{f.web2.ID}, nil},
		{"point and vm", CopyOptions{Points: []string{f.web1.ID, f.db1.ID}, VMs: []string{"web"}}, []string{f.web1.ID}, nil},
		{"vm with no point", CopyOptions{VMs: []string{"nobody"}}, nil, nil},
		{"unknown point", CopyOptions{Points: []string{f.web1.ID, "ffffffffffff"}}, nil, ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := TestRepository(t)
			res, err := Copy(ctx, f.src, dst, tc.opts)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			var got []string
			if res != nil {
				for _, p := range res.Points {
					got = append(got, p.Source)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("copied %v, want %v", got, tc.want)
			}
			if pts, _ := dst.List(ctx); len(pts) != len(tc.want) {
				t.Fatalf("target holds %d points, want %d", len(pts), len(tc.want))
			}
		})
	}
}

// The target already holds the same data (its own backup of the same disk):
// the copy sends no data blob.
func TestCopyDedupAgainstTarget(t *testing.T) {
	ctx := context.Background()
	src, dst := TestRepository(t), TestRepository(t, WithPassword("another one"))
	img := testDisk(21, 4<<20)
	p := backup(t, src, "app", testTime, img)
	backup(t, dst, "app-local", testTime, img)
	before := packFiles(t, dst)
	res, err := Copy(ctx, src, dst, CopyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.PointsCopied != 1 || res.BlobsSent != 0 || res.BlobsReused == 0 {
		t.Fatalf("result %+v: every data blob is in the target already", res)
	}
	verifyPoint(t, dst, targetPoint(t, src, dst, p.ID).ID, img)
	// Only the metadata (maps, manifest) went into new packs.
	var added int64
	for _, id := range packFiles(t, dst) {
		if !slices.Contains(before, id) {
			pid, _ := parsePackID(id)
			n, err := dst.store.Stat(ctx, packName(pid))
			if err != nil {
				t.Fatal(err)
			}
			added += n
		}
	}
	if added > 64<<10 {
		t.Fatalf("copy of already-present data wrote %d bytes of packs", added)
	}
}

// A copy that fails (here, as if killed) after writing the packs of its
// second point and before committing it resumes: the next copy commits the
// point without sending its blobs again, and the first point is skipped.
func TestCopyResumesAfterCrash(t *testing.T) {
	ctx := context.Background()
	f := newCopyFixture(t)
	dir := t.TempDir()
	dst := TestRepository(t, WithDir(dir))
	withFailpoints(t, "copy.commit=eio@3")
	res, err := Copy(ctx, f.src, dst, CopyOptions{})
	if err == nil {
		t.Fatal("copy succeeded through the failpoint")
	}
	if res.PointsCopied != 2 {
		t.Fatalf("copied %d points before the failure, want 2", res.PointsCopied)
	}
	sentBefore := res.BlobsSent
	withFailpoints(t, "")
	// The process "dies": the target is closed and opened again (its
	// recovery indexes what was written).
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	dst = reopen(t, dir)
	if pts, _ := dst.List(ctx); len(pts) != 2 {
		t.Fatalf("%d points in the target after the failed copy, want 2", len(pts))
	}
	res2, err := Copy(ctx, f.src, dst, CopyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res2.PointsCopied != 1 || res2.PointsSkipped != 2 {
		t.Fatalf("resumed copy %+v", res2)
	}
	if res2.BlobsSent != 0 {
		t.Fatalf("resumed copy sent %d blobs again (first run sent %d)", res2.BlobsSent, sentBefore)
	}
	verifyPoint(t, dst, targetPoint(t, f.src, dst, f.db1.ID).ID, f.im)
	requireClean(t, dst)
}

func TestCopyCancelled(t *testing.T) {
	f := newCopyFixture(t)
	dst := TestRepository(t)
	ctx, cancel := context.WithCancel(context.Background())
	_, err := Copy(ctx, f.src, dst, CopyOptions{Progress: func(p CopyProgress) {
		if p.PointsDone == 1 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if pts, _ := dst.List(context.Background()); len(pts) != 1 {
		t.Fatalf("%d points committed, want 1", len(pts))
	}
	requireClean(t, dst)
}

func TestCopySameRepositoryRefused(t *testing.T) {
	r := TestRepository(t)
	if _, err := Copy(context.Background(), r, r, CopyOptions{}); err == nil {
		t.Fatal("copy of a repository into itself succeeded")
	}
}

// Local to S3 (versitygw on loopback), then idempotent, then S3 to local.
func TestCopyLocalToS3(t *testing.T) {
	ctx := context.Background()
	f := newCopyFixture(t)
	srv := s3store.StartTestServer(t)
	loc := srv.Location("vmvault-copy", "offsite")
	if err := Init(ctx, loc, []byte("offsite pass"), InitOptions{Chunker: TestChunker, KDF: TestKDF, PackSize: 256 << 10, CreateBucket: true}); err != nil {
		t.Fatal(err)
	}
	dst, err := Open(ctx, loc, []byte("offsite pass"), OpenOptions{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	res, err := Copy(ctx, f.src, dst, CopyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.PointsCopied != 3 || res.BlobsVerified != res.BlobsSent {
		t.Fatalf("result %+v", res)
	}
	verifyPoint(t, dst, targetPoint(t, f.src, dst, f.web2.ID).ID, f.imgW2)
	res2, err := Copy(ctx, f.src, dst, CopyOptions{})
	if err != nil || res2.BlobsSent != 0 || res2.PointsSkipped != 3 {
		t.Fatalf("second copy %+v, %v", res2, err)
	}
	if rep := mustCheck(t, dst, true); len(rep.Problems) != 0 {
		t.Fatalf("check: %+v", rep.Problems)
	}
	back := TestRepository(t)
	res3, err := Copy(ctx, dst, back, CopyOptions{VMs: []string{"db"}})
	if err != nil || res3.PointsCopied != 1 {
		t.Fatalf("S3 to local %+v, %v", res3, err)
	}
	verifyPoint(t, back, targetPoint(t, dst, back, targetPoint(t, f.src, dst, f.db1.ID).ID).ID, f.im)
}

// BenchmarkCopyPresent copies a point whose data blobs all exist in the
// target already (a second VM with the same disk) and reports the time per
// 1,000 data blobs, for 64 KiB and 1 MiB blobs.
func BenchmarkCopyPresent(b *testing.B) {
	for _, chunk := range []int{64 << 10, 1 << 20} {
		for _, copyMap := range []bool{true, false} {
			b.Run(fmt.Sprintf("chunk=%dKiB/copymap=%v", chunk>>10, copyMap), func(b *testing.B) { benchCopyPresent(b, chunk, copyMap) })
		}
	}
}

// benchCopyPresent: without the copy map (a rebuilt target catalog) every
// blob is read from the source, decoded and hashed under the target's key.
func benchCopyPresent(b *testing.B, chunk int, copyMap bool) {
	ctx := context.Background()
	src, dst := TestRepository(b), TestRepository(b)
	img := testDisk(31, 1024*chunk)
	put := func(r *Repository, name string) Point {
		s, err := r.NewSession(ctx)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Abort()
		root, _ := putImage(b, s, img, chunk)
		p, err := s.Commit(ctx, NewPoint{VM: VMIdentity{Name: name}, Time: testTime,
			Disks: []NewDisk{{Key: 2000, Capacity: int64(len(img)), Map: root}}})
		if err != nil {
			b.Fatal(err)
		}
		return p
	}
	put(src, "first")
	if _, err := Copy(ctx, src, dst, CopyOptions{}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var blobs int64
	var elapsed time.Duration
	for i := range b.N {
		b.StopTimer()
		p := put(src, fmt.Sprintf("clone-%d", i))
		if !copyMap {
			if err := dst.db.Update(func(tx *bolt.Tx) error {
				if tx.Bucket(bucketCopyMap) == nil {
					return nil
				}
				return tx.DeleteBucket(bucketCopyMap)
			}); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		start := time.Now()
		res, err := Copy(ctx, src, dst, CopyOptions{Points: []string{p.ID}})
		elapsed += time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		if res.BlobsSent != 0 {
			b.Fatalf("sent %d blobs", res.BlobsSent)
		}
		blobs += res.BlobsReused
	}
	b.ReportMetric(float64(elapsed.Microseconds())/1000/float64(blobs)*1000, "ms/1000blobs")
	b.ReportMetric(float64(blobs)/float64(b.N), "blobs/op")
}

// The copy map: a point whose blobs an earlier copy sent is copied without
// reading its data from the source; without the map (a rebuilt catalog)
// the blobs are read but still not sent; a damaged entry is ignored.
func TestCopyMap(t *testing.T) {
	ctx := context.Background()
	src := TestRepository(t)
	dir := t.TempDir()
	dst := TestRepository(t, WithDir(dir))
	img := testDisk(71, 3<<20)
	backup(t, src, "a", testTime, img)
	first, err := Copy(ctx, src, dst, CopyOptions{})
	if err != nil || first.BlobsRead == 0 || first.BlobsSent == 0 {
		t.Fatalf("first copy %+v, %v", first, err)
	}
	p2 := backup(t, src, "b", testTime, img)
	res, err := Copy(ctx, src, dst, CopyOptions{Points: []string{p2.ID}})
	if err != nil || res.PointsCopied != 1 || res.BlobsRead != 0 || res.BlobsSent != 0 || res.BlobsReused == 0 {
		t.Fatalf("copy of known blobs %+v, %v: want nothing read or sent", res, err)
	}
	verifyPoint(t, dst, targetPoint(t, src, dst, p2.ID).ID, img)

	// Entries swapped (each pointing at another existing blob of the
	// target) are not used: both blobs are read again, and the copy holds
	// the right data.
	if err := dst.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketCopyMap)
		c := b.Cursor()
		k1, v1 := c.First()
		k2, v2 := c.Next()
		k1, v1, k2, v2 = slices.Clone(k1), slices.Clone(v1), slices.Clone(k2), slices.Clone(v2)
		if err := b.Put(k1, v2); err != nil {
			return err
		}
		return b.Put(k2, v1)
	}); err != nil {
		t.Fatal(err)
	}
	p3 := backup(t, src, "c", testTime, img)
	res, err = Copy(ctx, src, dst, CopyOptions{Points: []string{p3.ID}})
	if err != nil || res.BlobsRead != 2 || res.BlobsSent != 0 {
		t.Fatalf("with two entries swapped: %+v, %v: want 2 blobs read, none sent", res, err)
	}
	verifyPoint(t, dst, targetPoint(t, src, dst, p3.ID).ID, img)

	// Without the map (a rebuilt catalog) blobs are read, not sent.
	dst.Close()
	if err := os.Remove(filepath.Join(dir, "index.db")); err != nil {
		t.Fatal(err)
	}
	dst = reopen(t, dir)
	requireClean(t, dst)
	p4 := backup(t, src, "d", testTime, img)
	res, err = Copy(ctx, src, dst, CopyOptions{Points: []string{p4.ID}})
	if err != nil || res.BlobsRead == 0 || res.BlobsSent != 0 {
		t.Fatalf("without the map %+v, %v", res, err)
	}
	if res, err = Copy(ctx, src, dst, CopyOptions{}); err != nil || res.PointsSkipped != 4 || res.BlobsRead != 0 {
		t.Fatalf("final copy %+v, %v", res, err)
	}
}

// flipStore corrupts every byte range read from it once on is set.
type flipStore struct {
	storage.Storage
	on atomic.Bool
}

func (f *flipStore) Open(ctx context.Context, name string) (storage.Object, error) {
	o, err := f.Storage.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	return flipObject{o, f}, nil
}

func (f *flipStore) GetRange(ctx context.Context, name string, off, length int64) ([]byte, error) {
	b, err := f.Storage.GetRange(ctx, name, off, length)
	if f.on.Load() && len(b) > 0 {
		b[len(b)/2] ^= 1
	}
	return b, err
}

type flipObject struct {
	storage.Object
	f *flipStore
}

func (o flipObject) ReadAt(p []byte, off int64) (int, error) {
	n, err := o.Object.ReadAt(p, off)
	if o.f.on.Load() && n > 0 {
		p[n/2] ^= 1
	}
	return n, err
}

// What the copy wrote is read back before the point is committed: a target
// whose storage returns other bytes than were written gets no point.
func TestCopyVerifiesWhatItWrote(t *testing.T) {
	ctx := context.Background()
	f := newCopyFixture(t)
	dir := t.TempDir()
	TestRepository(t, WithDir(dir)).Close()
	fs := &flipStore{Storage: storage.NewLocal(dir, true)}
	dst, err := openWith(ctx, fs, dir, []byte(TestPassword), OpenOptions{NoFsync: true, Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	fs.on.Store(true)
	res, err := Copy(ctx, f.src, dst, CopyOptions{})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "verify") {
		t.Fatalf("copy onto storage that corrupts reads: %v, want a verify error", err)
	}
	if res.PointsCopied != 0 {
		t.Fatalf("%d points committed although their blobs did not read back", res.PointsCopied)
	}
	fs.on.Store(false)
	if pts, _ := dst.List(ctx); len(pts) != 0 {
		t.Fatalf("target lists %d points", len(pts))
	}
}
