package repository

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmvault/vmvault/repository/storage"
)

// recordingStore records every read of a pack file: which object, which
// handle (one per Open), at what offset, in the order they happen.
type recordingStore struct {
	storage.Storage
	on      atomic.Bool
	mu      sync.Mutex
	handles int
	reads   []packRead
}

type packRead struct {
	name   string
	handle int
	off    int64
}

func (s *recordingStore) Open(ctx context.Context, name string) (storage.Object, error) {
	o, err := s.Storage.Open(ctx, name)
	if err != nil || !strings.HasPrefix(name, "packs/") {
		return o, err
	}
	s.mu.Lock()
	s.handles++
	h := s.handles
	s.mu.Unlock()
	return &recordingObject{Object: o, s: s, name: name, handle: h}, nil
}

type recordingObject struct {
	storage.Object
	s      *recordingStore
	name   string
	handle int
}

func (o *recordingObject) ReadAt(p []byte, off int64) (int, error) {
	if o.s.on.Load() {
		o.s.mu.Lock()
		o.s.reads = append(o.s.reads, packRead{o.name, o.handle, off})
		o.s.mu.Unlock()
	}
	return o.Object.ReadAt(p, off)
}

// openRecording makes a repository of many small packs (each commit
// flushes one) and reopens it through a recordingStore.
func openRecording(t *testing.T) (*Repository, *recordingStore, []Point) {
	t.Helper()
	dir := t.TempDir()
	r := TestRepository(t, WithDir(dir))
	var pts []Point
	for i := range 12 {
		pts = append(pts, backup(t, r, "vm", testTime.Add(time.Duration(i)*time.Hour), testDisk(uint64(100+i), 600<<10)))
	}
	r2, rec := reopenRecording(t, r, dir)
	return r2, rec, pts
}

// reopenRecording closes r and opens its directory again through a
// recordingStore; the reopened repository is closed when the test ends.
func reopenRecording(t *testing.T, r *Repository, dir string) (*Repository, *recordingStore) {
	t.Helper()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	rec := &recordingStore{Storage: storage.NewLocal(dir, true)}
	r2, err := openWith(context.Background(), rec, dir, []byte(TestPassword), OpenOptions{NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r2.Close() })
	return r2, rec
}

// packsInReadOrder returns the packs in the order of their first read and
// fails when a pack is read again after another one, or backwards.
func packsInReadOrder(t *testing.T, reads []packRead) []string {
	t.Helper()
	var order []string
	last := map[string]int64{}
	for _, rd := range reads {
		if n := len(order); n == 0 || order[n-1] != rd.name {
			if slices.Contains(order, rd.name) {
				t.Errorf("pack %s read again after other packs (reads %v)", rd.name, reads)
			}
			order = append(order, rd.name)
		} else if rd.off < last[rd.name] {
			t.Errorf("pack %s read backwards: offset %d after %d", rd.name, rd.off, last[rd.name])
		}
		last[rd.name] = rd.off
	}
	return order
}

// TestReclaimRepackReadsPacksInOrder: reclaim's repack reads the packs it
// copies from in pack id (file name) order, each front to back, once.
func TestReclaimRepackReadsPacksInOrder(t *testing.T) {
	r, rec, pts := openRecording(t)
	ctx := context.Background()
	for _, p := range pts[:4] {
		if err := r.Delete(ctx, p.ID); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := r.Reclaim(ctx, func(p Progress) { rec.on.Store(p.Phase == "repack") })
	if err != nil {
		t.Fatal(err)
	}
	if rep.PacksRepacked < 8 {
		t.Fatalf("only %d packs repacked (the test needs small packs merged): %+v", rep.PacksRepacked, rep)
	}
	order := packsInReadOrder(t, rec.reads)
	if len(order) < 8 {
		t.Fatalf("repack read %d packs, want the %d repacked", len(order), rep.PacksRepacked)
	}
	if !slices.IsSorted(order) {
		t.Errorf("repack read packs out of id order: %v", order)
	}
	requireClean(t, r)
	for i := 4; i < len(pts); i++ {
		verifyPoint(t, r, pts[i].ID, testDisk(uint64(100+i), 600<<10))
	}
}

// TestCheckReadsPacksInOrder: check's data pass reads each pack once,
// front to back; CheckPacks (the resumable check) reads them in pack id
// order.
func TestCheckReadsPacksInOrder(t *testing.T) {
	r, rec, _ := openRecording(t)
	ctx := context.Background()
	rec.on.Store(true)
	rep, err := r.Check(ctx, CheckOptions{ReadData: true}, nil)
	if err != nil || !rep.Clean() {
		t.Fatalf("check: %v %+v", err, rep)
	}
	rec.on.Store(false)
	// Header reads start at offset 0 (the magic), the point walk's reads
	// of metadata blobs through the file cache at theirs; data reads at
	// the first blob. Keep the handles of data reads.
	first := map[int]int64{}
	for _, rd := range rec.reads {
		if _, ok := first[rd.handle]; !ok {
			first[rd.handle] = rd.off
		}
	}
	var data []packRead
	for _, rd := range rec.reads {
		if first[rd.handle] == packStart {
			data = append(data, rd)
		}
	}
	// Readers run in parallel: check each handle's reads on their own,
	// and the order handles were started in.
	byHandle := map[int][]packRead{}
	var starts []string
	for _, rd := range data {
		if byHandle[rd.handle] == nil {
			starts = append(starts, rd.name)
		}
		byHandle[rd.handle] = append(byHandle[rd.handle], rd)
	}
	for _, rds := range byHandle {
		packsInReadOrder(t, rds)
	}
	if len(starts) < 8 {
		t.Fatalf("check read the data of %d packs", len(starts))
	}
	// Each pack's data is read once. The pool takes packs in id order,
	// but when a reader starts its pack depends on the scheduler, so the
	// order across packs is asserted on CheckPacks (serial) below.
	if sorted := slices.Sorted(slices.Values(starts)); len(slices.Compact(sorted)) != len(starts) {
		t.Errorf("check read some packs' data more than once: %v", starts)
	}

	rec.mu.Lock()
	rec.reads = nil
	rec.mu.Unlock()
	rec.on.Store(true)
	if err := r.CheckPacks(ctx, "", func(PackCheck) error { return nil }); err != nil {
		t.Fatal(err)
	}
	rec.on.Store(false)
	var dataOnly []packRead
	first = map[int]int64{}
	for _, rd := range rec.reads {
		if _, ok := first[rd.handle]; !ok {
			first[rd.handle] = rd.off
		}
		if first[rd.handle] == packStart {
			dataOnly = append(dataOnly, rd)
		}
	}
	if order := packsInReadOrder(t, dataOnly); len(order) < 8 || !slices.IsSorted(order) {
		t.Errorf("CheckPacks read packs %v, want id order", order)
	}
}
