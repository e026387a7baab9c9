package repository

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/vmvault/vmvault/repository/storage"
)

// mwInit creates a multi-writer repository (format 2.0) in a temp dir.
func mwInit(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo")
	if err := Init(context.Background(), dir, []byte(TestPassword), InitOptions{Chunker: TestChunker, KDF: TestKDF, PackSize: 1 << 20, MultiWriter: true}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// mwOpen opens one writer with a catalog cache of its own.
func mwOpen(t testing.TB, dir, appliance string) *Repository {
	t.Helper()
	r, err := Open(context.Background(), dir, []byte(TestPassword), OpenOptions{NoFsync: true, Appliance: appliance, CacheDir: filepath.Join(t.TempDir(), "cache-"+appliance)})
	if err != nil {
		t.Fatalf("open writer %s: %v", appliance, err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// mwBackup is backup for goroutines: errors are returned, not fatal.
func mwBackup(ctx context.Context, r *Repository, name string, at time.Time, img []byte, between func()) (Point, error) {
	s, err := r.NewSession(ctx)
	if err != nil {
		return Point{}, err
	}
	defer s.Abort()
	var ext []Extent
	const chunk = 256 << 10
	for off := 0; off < len(img); off += chunk {
		c := img[off:min(off+chunk, len(img))]
		if isZero(c) {
			ext = append(ext, Extent{Offset: int64(off), Length: int64(len(c)), Zero: true})
			continue
		}
		id, _, _, err := s.PutChunk(ctx, c)
		if err != nil {
			return Point{}, fmt.Errorf("put chunk at %d: %w", off, err)
		}
		ext = append(ext, Extent{Offset: int64(off), Length: int64(len(c)), ID: id})
	}
	root, err := s.PutDisk(ctx, int64(len(img)), ext)
	if err != nil {
		return Point{}, err
	}
	if between != nil {
		between()
	}
	return s.Commit(ctx, NewPoint{VM: VMIdentity{Name: name}, Time: at, Consistency: "crash",
		Disks: []NewDisk{{Key: 2000, Label: "disk", Capacity: int64(len(img)), Map: root}}})
}

// packBytes is what the repository's packs take.
func packBytes(t testing.TB, dir string) int64 {
	t.Helper()
	var n int64
	if err := storage.NewLocal(dir, true).List(context.Background(), "packs/", func(_ string, size int64) error { n += size; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// clone returns base with a small region of its own (a cloned VM that
// diverged a little).
func clone(base []byte, i int) []byte {
	c := bytes.Clone(base)
	copy(c[len(c)/2:], testDisk(uint64(1000+i), 64<<10))
	return c
}

func TestMultiWriterClonesDedup(t *testing.T) {
	ctx := context.Background()
	base := testDisk(7, 8<<20)
	clones := [][]byte{clone(base, 1), clone(base, 2), clone(base, 3)}

	// The ideal, in a repository of its own: one writer backs up the
	// three clones one after another (clones 2 and 3 add only what they
	// changed).
	solo := mwInit(t)
	rs := mwOpen(t, solo, "solo")
	for i, c := range clones {
		if _, err := mwBackup(ctx, rs, "clone", testTime.Add(time.Duration(i)*time.Minute), c, nil); err != nil {
			t.Fatal(err)
		}
	}
	rs.Close()
	one := packBytes(t, solo)

	dir := mwInit(t)
	ws := []*Repository{mwOpen(t, dir, "app-1"), mwOpen(t, dir, "app-2"), mwOpen(t, dir, "app-3")}
	pts := make([]Point, 3)
	// All three sessions are open at once; clones 2 and 3 run
	// concurrently with each other once clone 1's packs are published.
	var wg sync.WaitGroup
	errs := make([]error, 3)
	started := make(chan struct{})
	clone1Done := make(chan struct{})
	sessions := make([]*Session, 3)
	for i := 1; i < 3; i++ {
		s, err := ws[i].NewSession(ctx) // a session in flight while clone 1 runs
		if err != nil {
			t.Fatal(err)
		}
		sessions[i] = s
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		close(started)
		pts[0], errs[0] = mwBackup(ctx, ws[0], "clone-1", testTime, clones[0], nil)
		close(clone1Done)
	}()
	<-started
	for i := 1; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer sessions[i].Abort()
			<-clone1Done
			pts[i], errs[i] = mwBackup(ctx, ws[i], fmt.Sprintf("clone-%d", i+1), testTime.Add(time.Duration(i)*time.Minute), clones[i], nil)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("writer %d: %v", i+1, err)
		}
	}
	total := packBytes(t, dir)
	t.Logf("three clones by one writer: %d bytes of packs; by three writers at once: %d (%.3fx)", one, total, float64(total)/float64(one))
	if float64(total) > 1.05*float64(one) {
		t.Errorf("three clones by three writers store %d bytes, more than 1.05 x one writer's %d", total, one)
	}
	// Every writer sees every point, with its writer, and restores it.
	for wi, w := range ws {
		list, err := w.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 3 {
			t.Fatalf("writer %d lists %d points, want 3", wi+1, len(list))
		}
		for i, p := range pts {
			got, err := w.Point(ctx, p.ID)
			if err != nil {
				t.Fatalf("writer %d: point %d: %v", wi+1, i+1, err)
			}
			if want := fmt.Sprintf("app-%d", i+1); got.Writer.Appliance != want || got.Writer.ID != ws[i].WriterID() {
				t.Errorf("writer %d: point %d written by %+v, want %s/%s", wi+1, i+1, got.Writer, want, ws[i].WriterID())
			}
			verifyPoint(t, w, p.ID, clones[i])
		}
	}
	requireClean(t, ws[2])
}

// TestMultiWriterLockstep: three writers store the same new data at the
// same moment. They race (each stores blobs the others have not published
// yet), which is harmless: every point restores and check is clean. The
// ratio is logged, not asserted.
func TestMultiWriterLockstep(t *testing.T) {
	ctx := context.Background()
	img := testDisk(11, 8<<20)
	solo := mwInit(t)
	rs := mwOpen(t, solo, "solo")
	if _, err := mwBackup(ctx, rs, "vm", testTime, img, nil); err != nil {
		t.Fatal(err)
	}
	rs.Close()
	one := packBytes(t, solo)

	dir := mwInit(t)
	ws := []*Repository{mwOpen(t, dir, "a"), mwOpen(t, dir, "b"), mwOpen(t, dir, "c")}
	pts := make([]Point, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pts[i], errs[i] = mwBackup(ctx, ws[i], "vm", testTime.Add(time.Duration(i)*time.Second), img, nil)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	t.Logf("lockstep: one copy %d bytes, three writers at once %d (%.2fx)", one, packBytes(t, dir), float64(packBytes(t, dir))/float64(one))
	for _, p := range pts {
		verifyPoint(t, ws[0], p.ID, img)
	}
	// Reclaim keeps one copy of what was stored twice.
	if _, err := ws[0].Reclaim(ctx, nil); err != nil {
		t.Fatal(err)
	}
	t.Logf("after reclaim: %d bytes (%.2fx)", packBytes(t, dir), float64(packBytes(t, dir))/float64(one))
	for _, w := range ws {
		for _, p := range pts {
			verifyPoint(t, w, p.ID, img)
		}
	}
	requireClean(t, ws[1])
}

// TestMultiWriterReclaimWhileWriting: writer A deletes its point and
// reclaims while writer B's session references that point's blobs (it
// deduplicated against them). The reclaim condemns the packs, waits at the
// barrier for B's session, B's commit finds the condemned set and stores
// the blobs again: B's point restores, check is clean.
func TestMultiWriterReclaimWhileWriting(t *testing.T) {
	ctx := context.Background()
	img := testDisk(21, 4<<20)
	dir := mwInit(t)
	a, b := mwOpen(t, dir, "a"), mwOpen(t, dir, "b")
	p1, err := mwBackup(ctx, a, "vm", testTime, img, nil)
	if err != nil {
		t.Fatal(err)
	}
	before := packBytes(t, dir)
	atBarrier := make(chan struct{})
	var once sync.Once
	reclaimDone := make(chan error, 1)
	var rep *ReclaimReport
	p2, err := mwBackup(ctx, b, "vm", testTime.Add(time.Hour), img, func() {
		// B's session holds every blob of p1 (deduplicated: nothing new
		// stored). A deletes p1 and reclaims now.
		if n := packBytes(t, dir); n > before+before/10 {
			t.Errorf("B stored %d new bytes for data already in the repository", n-before)
		}
		if err := a.Delete(ctx, p1.ID); err != nil {
			t.Error(err)
		}
		go func() {
			var err error
			rep, err = a.Reclaim(ctx, func(p Progress) {
				if p.Phase == "wait for other writers' backups" {
					once.Do(func() { close(atBarrier) })
				}
			})
			once.Do(func() { close(atBarrier) })
			reclaimDone <- err
		}()
		<-atBarrier
	})
	if err != nil {
		t.Fatalf("B's commit: %v", err)
	}
	if err := <-reclaimDone; err != nil {
		t.Fatalf("reclaim: %v", err)
	}
	if rep.PacksDeleted == 0 {
		t.Errorf("reclaim deleted nothing (%+v): p1's packs should go once B re-stored its blobs", rep)
	}
	for _, w := range []*Repository{a, b} {
		if _, err := w.Point(ctx, p1.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("deleted point: %v, want ErrNotFound", err)
		}
		verifyPoint(t, w, p2.ID, img)
	}
	requireClean(t, a)
	requireClean(t, b)
	// A later backup on A deduplicates against B's re-stored blobs.
	n := packBytes(t, dir)
	if _, err := mwBackup(ctx, a, "vm", testTime.Add(2*time.Hour), img, nil); err != nil {
		t.Fatal(err)
	}
	if d := packBytes(t, dir) - n; d > n/10 {
		t.Errorf("A stored %d bytes again after the reclaim", d)
	}
	if _, err := os.Stat(filepath.Join(dir, "reclaim", "condemned")); !os.IsNotExist(err) {
		t.Errorf("condemned set left behind: %v", err)
	}
}

// TestMultiWriterBarrierSkipsDeadLease: a lease whose process is gone (or
// expired beyond the skew margin) does not hold the reclaim barrier, and
// is removed.
func TestMultiWriterBarrierSkipsDeadLease(t *testing.T) {
	ctx := context.Background()
	dir := mwInit(t)
	a := mwOpen(t, dir, "a")
	if _, err := mwBackup(ctx, a, "vm", testTime, testDisk(3, 2<<20), nil); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	cases := map[string]writerLease{
		"dead-pid": {Writer: "dead", Host: host, PID: 1 << 30, Expires: time.Now().Add(time.Hour), Sessions: []leaseSession{{ID: "s1"}}},
		"expired":  {Writer: "old", Host: "elsewhere", PID: 5, Expires: time.Now().Add(-SkewMargin - time.Minute), Sessions: []leaseSession{{ID: "s2"}}},
	}
	for name, l := range cases {
		b, _ := json.Marshal(l)
		if err := os.WriteFile(filepath.Join(dir, "writers", name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx2, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := a.Reclaim(ctx2, nil); err != nil {
		t.Fatalf("reclaim held by a dead lease: %v", err)
	}
	for name := range cases {
		if _, err := os.Stat(filepath.Join(dir, "writers", name)); !os.IsNotExist(err) {
			t.Errorf("lease %s not removed: %v", name, err)
		}
	}
	// A live lease with a session does hold it.
	live := writerLease{Writer: "live", Host: "elsewhere", PID: 5, Expires: time.Now().Add(time.Hour), Sessions: []leaseSession{{ID: "s3"}}}
	b, _ := json.Marshal(live)
	os.WriteFile(filepath.Join(dir, "writers", "live"), b, 0o600)
	// Something to condemn, so that the barrier runs.
	p, err := mwBackup(ctx, a, "vm2", testTime, testDisk(4, 2<<20), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Delete(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	ctx3, cancel3 := context.WithCancel(ctx)
	_, err = a.Reclaim(ctx3, func(p Progress) {
		if p.Phase == "wait for other writers' backups" {
			cancel3()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("reclaim with a live session elsewhere: %v, want it to wait (cancelled)", err)
	}
	cancel3()
}

// TestMultiWriterReclaimLock: one reclaim at a time across writers.
func TestMultiWriterReclaimLock(t *testing.T) {
	ctx := context.Background()
	dir := mwInit(t)
	a := mwOpen(t, dir, "a")
	b, _ := json.Marshal(reclaimLockObj{Writer: "other", Host: "elsewhere", PID: 9, Expires: time.Now().Add(time.Hour)})
	os.MkdirAll(filepath.Join(dir, "locks"), 0o700)
	os.WriteFile(filepath.Join(dir, "locks", "reclaim"), b, 0o600)
	if _, err := a.Reclaim(ctx, nil); !errors.Is(err, ErrReclaimRunning) {
		t.Fatalf("reclaim while another holds the lock: %v, want ErrReclaimRunning", err)
	}
	b, _ = json.Marshal(reclaimLockObj{Writer: "other", Host: "elsewhere", PID: 9, Expires: time.Now().Add(-time.Hour)})
	os.WriteFile(filepath.Join(dir, "locks", "reclaim"), b, 0o600)
	if _, err := a.Reclaim(ctx, nil); err != nil {
		t.Fatalf("reclaim after an expired lock: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "locks", "reclaim")); !os.IsNotExist(err) {
		t.Errorf("reclaim lock left behind: %v", err)
	}
}

// TestMultiWriterVersions: a 2.0 repository says so; 1.4 repositories
// stay single-writer (and keep their lock).
func TestMultiWriterVersions(t *testing.T) {
	ctx := context.Background()
	dir := mwInit(t)
	a := mwOpen(t, dir, "a")
	if c := a.Config(); c.Version != MultiWriterVersion || !c.MultiWriter || !a.MultiWriter() {
		t.Fatalf("config %+v, want 2.0 multi-writer", c)
	}
	single := filepath.Join(t.TempDir(), "single")
	if err := Init(ctx, single, []byte(TestPassword), InitOptions{Chunker: TestChunker, KDF: TestKDF}); err != nil {
		t.Fatal(err)
	}
	r1, err := Open(ctx, single, []byte(TestPassword), OpenOptions{NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r1.Close()
	if c := r1.Config(); c.Version != (FormatVersion{FormatMajor, FormatMinor}) || c.MultiWriter || r1.MultiWriter() {
		t.Fatalf("single-writer config %+v", c)
	}
	if _, err := Open(ctx, single, []byte(TestPassword), OpenOptions{NoFsync: true}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second writer of a 1.4 repository: %v, want ErrLocked", err)
	}
	// A 2.0 config without "writers" (or a 1.x one with it) is refused.
	for _, tc := range []struct {
		version map[string]int
		writers any
	}{{map[string]int{"major": 2, "minor": 0}, nil}, {map[string]int{"major": 1, "minor": 4}, "multi"}} {
		b, _ := os.ReadFile(filepath.Join(dir, "config"))
		var m map[string]any
		json.Unmarshal(b, &m)
		m["version"] = tc.version
		if tc.writers == nil {
			delete(m, "writers")
		} else {
			m["writers"] = tc.writers
		}
		b, _ = json.Marshal(m)
		if _, err := decodeConfig(b); err == nil {
			t.Errorf("config %v writers %v accepted", tc.version, tc.writers)
		}
	}
}

// TestMultiWriterLocksAcrossWriters: a point locked or time-locked by one
// appliance cannot be deleted by another, even when that one's catalog
// learnt of the point before the lock.
func TestMultiWriterLocksAcrossWriters(t *testing.T) {
	ctx := context.Background()
	dir := mwInit(t)
	a, b := mwOpen(t, dir, "a"), mwOpen(t, dir, "b")
	p1, err := mwBackup(ctx, a, "vm1", testTime, testDisk(41, 1<<20), nil)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := mwBackup(ctx, a, "vm2", testTime, testDisk(42, 1<<20), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.List(ctx); err != nil { // b knows both, unlocked
		t.Fatal(err)
	}
	if err := a.Lock(ctx, p1.ID); err != nil {
		t.Fatal(err)
	}
	if err := a.LockUntil(ctx, p2.ID, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	var le *PointLockedError
	for _, id := range []string{p1.ID, p2.ID} {
		if err := b.Delete(ctx, id); !errors.As(err, &le) {
			t.Errorf("delete by another writer of a point it locked: %v, want PointLockedError", err)
		}
	}
}
