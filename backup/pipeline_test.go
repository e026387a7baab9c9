package backup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmvault/vmvault/dedup"
	"github.com/vmvault/vmvault/internal/extent"
	"github.com/vmvault/vmvault/repository"
)

// Small chunks so that test disks of a few MiB hold hundreds of chunks.
var testChunker = repository.ChunkerConfig{Algorithm: "cdc", Polynomial: repository.TestChunker.Polynomial,
	MinSize: 8 << 10, AvgSize: 16 << 10, MaxSize: 64 << 10}

func newChunker(t testing.TB, cc repository.ChunkerConfig) dedup.Chunker {
	t.Helper()
	c, err := dedup.New(dedup.Params{Algorithm: cc.Algorithm, Polynomial: cc.Polynomial, MinSize: cc.MinSize, AvgSize: cc.AvgSize, MaxSize: cc.MaxSize})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// disk is an in-memory disk image with a list of allocated extents.
type disk struct {
	data  []byte
	alloc []dedup.Extent
}

func (d *disk) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(d.data)) {
		return 0, io.EOF
	}
	n := copy(p, d.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// makeDisk builds a sparse-looking disk: random data in some extents, zeros
// (unallocated) elsewhere, plus an allocated all-zero extent.
func makeDisk(rng *rand.Rand, size int) *disk {
	d := &disk{data: make([]byte, size)}
	for off := 0; off < size; {
		off += rng.IntN(size/8 + 1) // a hole
		n := min(rng.IntN(size/4+1)+1, size-off)
		if n <= 0 {
			break
		}
		fillRandom(rng, d.data[off:off+n])
		d.alloc = append(d.alloc, dedup.Extent{Offset: int64(off), Length: int64(n)})
		off += n
	}
	// An allocated extent of zeros, as a guest that zeroed blocks leaves.
	if size > 1<<20 {
		d.alloc = appendSorted(d.alloc, dedup.Extent{Offset: int64(size - 1<<19), Length: 1 << 19})
		clear(d.data[size-1<<19:])
	}
	return d
}

func appendSorted(exts []dedup.Extent, e dedup.Extent) []dedup.Extent {
	var out []dedup.Extent
	for _, x := range exts {
		if x.Offset+x.Length <= e.Offset {
			out = append(out, x)
		} else if x.Offset < e.Offset {
			out = append(out, dedup.Extent{Offset: x.Offset, Length: e.Offset - x.Offset})
		}
	}
	return append(out, e)
}

func fillRandom(rng *rand.Rand, b []byte) {
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
}

func allocatedBytes(exts []dedup.Extent) int64 {
	var n int64
	for _, e := range exts {
		n += e.Length
	}
	return n
}

// backupAndCommit runs WriteDisk into a new session and commits a point.
func backupAndCommit(t testing.TB, r *repository.Repository, c dedup.Chunker, in DiskInput, parent string) (repository.Point, *DiskResult) {
	t.Helper()
	ctx := context.Background()
	s, err := r.NewSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Abort()
	res, err := WriteDisk(ctx, s, c, in, Options{Workers: 3, InFlight: 4})
	if err != nil {
		t.Fatalf("WriteDisk: %v", err)
	}
	root, err := s.PutDisk(ctx, in.Size, res.Extents)
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Commit(ctx, repository.NewPoint{VM: repository.VMIdentity{Name: "vm"}, Time: time.Now(), Parent: parent,
		Disks: []repository.NewDisk{{Capacity: in.Size, Map: root}}})
	if err != nil {
		t.Fatal(err)
	}
	return p, res
}

// readBack returns the whole disk of a restore point through ReadAt.
func readBack(t testing.TB, r *repository.Repository, id string) []byte {
	t.Helper()
	dr, err := r.OpenDisk(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer dr.Close()
	buf := make([]byte, dr.Size())
	if _, err := dr.ReadAt(buf, 0); err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("read back %s: %v", id, err)
	}
	return buf
}

func TestWriteDiskRoundTrip(t *testing.T) {
	for _, algo := range []string{"cdc", "fixed"} {
		for _, size := range []int{0, 1, 100_000, 3<<20 + 17, 8 << 20} {
			t.Run(fmt.Sprintf("%s/%d", algo, size), func(t *testing.T) {
				cc := testChunker
				cc.Algorithm = algo
				r := repository.TestRepository(t, repository.WithChunker(cc), repository.WithPackSize(1<<20))
				rng := rand.New(rand.NewPCG(uint64(size), 1))
				d := makeDisk(rng, size)
				p, res := backupAndCommit(t, r, newChunker(t, cc), DiskInput{Source: d, Size: int64(size), Allocated: d.alloc}, "")
				if got := readBack(t, r, p.ID); !bytes.Equal(got, d.data) {
					t.Fatal("restored disk differs")
				}
				if want := allocatedBytes(d.alloc); res.BytesRead != want {
					t.Errorf("read %d bytes, allocated extents hold %d", res.BytesRead, want)
				}
				if size > 1<<20 && res.ZeroBytes < 1<<19 {
					t.Errorf("only %d zero bytes recognised; the disk has an allocated 512 KiB zero run", res.ZeroBytes)
				}
				// The same disk again stores nothing new.
				_, again := backupAndCommit(t, r, newChunker(t, cc), DiskInput{Source: d, Size: int64(size), Allocated: d.alloc}, "")
				if again.NewBytes != 0 {
					t.Errorf("second backup of the same disk found %d new bytes", again.NewBytes)
				}
			})
		}
	}
}

func TestWriteDiskIncremental(t *testing.T) {
	r := repository.TestRepository(t, repository.WithChunker(testChunker), repository.WithPackSize(1<<20))
	c := newChunker(t, testChunker)
	rng := rand.New(rand.NewPCG(42, 2))
	const size = 6 << 20
	d := makeDisk(rng, size)
	prev, _ := backupAndCommit(t, r, c, DiskInput{Source: d, Size: size, Allocated: d.alloc}, "")
	for round := range 4 {
		next := &disk{data: bytes.Clone(d.data)}
		var changed []dedup.Extent
		for range 1 + rng.IntN(6) {
			off := rng.IntN(size - 1)
			n := min(1+rng.IntN(200_000), size-off)
			fillRandom(rng, next.data[off:off+n])
			changed = append(changed, dedup.Extent{Offset: int64(off), Length: int64(n)})
		}
		changed = merge(changed)
		_, exts, err := r.DiskExtents(context.Background(), prev.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		pr, err := r.OpenDisk(context.Background(), prev.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		p, res := backupAndCommit(t, r, c, DiskInput{Source: next, Size: size,
			Parent: &ParentDisk{Reader: pr, Extents: exts, Changed: changed}}, prev.ID)
		pr.Close()
		if got := readBack(t, r, p.ID); !bytes.Equal(got, next.data) {
			t.Fatalf("round %d: incremental restore point differs from the disk", round)
		}
		if want := allocatedBytes(changed); res.BytesRead != want {
			t.Errorf("round %d: read %d bytes from the source, %d changed", round, res.BytesRead, want)
		}
		if res.ReusedBytes == 0 {
			t.Errorf("round %d: nothing reused from the parent", round)
		}
		// The parent is untouched.
		if got := readBack(t, r, prev.ID); !bytes.Equal(got, d.data) {
			t.Fatalf("round %d: parent changed", round)
		}
		d, prev = next, p
	}
}

func merge(exts []dedup.Extent) []dedup.Extent { return extent.Normalize(exts, extent.NoLimit) }

// failingStore fails the n-th PutChunk.
type failingStore struct {
	inner ChunkStore
	n     atomic.Int64
	after int64
}

var errInjected = errors.New("injected store failure")

func (f *failingStore) PutChunk(ctx context.Context, data []byte) (repository.ID, bool, int, error) {
	if f.n.Add(1) > f.after {
		return repository.ID{}, false, 0, errInjected
	}
	return f.inner.PutChunk(ctx, data)
}

// slowReader blocks each read until ctx is cancelled, then serves it: the
// pipeline itself must notice the cancellation (the reads succeed).
type slowReader struct {
	disk
	ctx     context.Context
	started chan struct{} // closed by the first read
	once    sync.Once
}

func (s *slowReader) ReadAt(p []byte, off int64) (int, error) {
	s.once.Do(func() { close(s.started) })
	<-s.ctx.Done()
	return s.disk.ReadAt(p, off)
}

// TestWriteDiskFailures: a store error or a cancellation stops the pipeline
// with that error, and no goroutine outlives WriteDisk.
func TestWriteDiskFailures(t *testing.T) {
	r := repository.TestRepository(t, repository.WithChunker(testChunker))
	c := newChunker(t, testChunker)
	rng := rand.New(rand.NewPCG(7, 7))
	d := &disk{data: make([]byte, 16<<20)}
	fillRandom(rng, d.data)
	before := runtime.NumGoroutine()

	s, err := r.NewSession(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Abort()
	_, err = WriteDisk(context.Background(), &failingStore{inner: s, after: 20}, c, DiskInput{Source: d, Size: int64(len(d.data))}, Options{Workers: 2})
	if !errors.Is(err, errInjected) {
		t.Fatalf("store failure: got %v, want the injected error", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	slow := &slowReader{disk: *d, ctx: ctx, started: make(chan struct{})}
	go func() { <-slow.started; cancel() }() // cancelled while a read is in flight
	_, err = WriteDisk(ctx, s, c, DiskInput{Source: slow, Size: int64(len(d.data))}, Options{Workers: 2})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled backup: got %v, want context.Canceled", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after failures, %d before: the pipeline leaks", n, before)
	}
}

// TestProgress: progress is reported, monotonic, and ends at the disk size.
func TestProgress(t *testing.T) {
	r := repository.TestRepository(t, repository.WithChunker(testChunker))
	rng := rand.New(rand.NewPCG(9, 9))
	d := &disk{data: make([]byte, 4<<20)}
	fillRandom(rng, d.data)
	s, _ := r.NewSession(context.Background())
	defer s.Abort()
	var reports []Progress
	_, err := WriteDisk(context.Background(), s, newChunker(t, testChunker), DiskInput{Source: d, Size: int64(len(d.data))},
		Options{Progress: func(p Progress) { reports = append(reports, p) }, ProgressEvery: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	if len(reports) < 2 {
		t.Fatalf("%d progress reports for a 4 MiB disk", len(reports))
	}
	for i := 1; i < len(reports); i++ {
		if reports[i].Done < reports[i-1].Done || reports[i].BytesRead < reports[i-1].BytesRead {
			t.Fatalf("progress went backwards: %+v then %+v", reports[i-1], reports[i])
		}
	}
	last := reports[len(reports)-1]
	if last.Done != int64(len(d.data)) || last.BytesRead != int64(len(d.data)) || last.ETA() != 0 {
		t.Errorf("final progress %+v, want done = read = %d", last, len(d.data))
	}
}

// TestConcurrentBackupsAndReclaim runs two backup streams into one
// repository while a third goroutine deletes old points and reclaims, under
// -race. Afterwards every surviving point restores byte-identical and the
// repository checks clean.
func TestConcurrentBackupsAndReclaim(t *testing.T) {
	r := repository.TestRepository(t, repository.WithChunker(testChunker), repository.WithPackSize(256<<10))
	c := newChunker(t, testChunker)
	ctx := context.Background()
	const size = 2 << 20
	shared := make([]byte, size) // both VMs share half their content
	fillRandom(rand.New(rand.NewPCG(1, 1)), shared)

	type kept struct {
		id   string
		data []byte
	}
	var mu sync.Mutex
	var all []kept
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for vm := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(vm)+10, 3))
			for range 6 {
				d := &disk{data: bytes.Clone(shared)}
				fillRandom(rng, d.data[size/2:])
				p, _ := backupAndCommit(t, r, c, DiskInput{Source: d, Size: size}, "")
				mu.Lock()
				all = append(all, kept{p.ID, d.data})
				mu.Unlock()
			}
		}()
	}
	stop := make(chan struct{})
	var reclaimer sync.WaitGroup
	reclaimer.Add(1)
	go func() {
		defer reclaimer.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			mu.Lock()
			var victim string
			if len(all) > 3 {
				victim = all[0].id
				all = all[1:]
			}
			mu.Unlock()
			if victim != "" {
				if err := r.Delete(ctx, victim); err != nil {
					errs <- fmt.Errorf("delete: %w", err)
					return
				}
			}
			if _, err := r.Reclaim(ctx, nil); err != nil {
				errs <- fmt.Errorf("reclaim: %w", err)
				return
			}
		}
	}()
	wg.Wait()
	close(stop)
	reclaimer.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if _, err := r.Reclaim(ctx, nil); err != nil {
		t.Fatal(err)
	}
	for _, k := range all {
		if got := readBack(t, r, k.id); !bytes.Equal(got, k.data) {
			t.Fatalf("point %s differs after concurrent reclaim", k.id)
		}
	}
	rep, err := r.Check(ctx, repository.CheckOptions{ReadData: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Clean() {
		t.Fatalf("check after concurrent backups and reclaim: %v", rep.Problems)
	}
}

func BenchmarkWriteDisk(b *testing.B) {
	cc := repository.TestChunker
	r := repository.TestRepository(b, repository.WithChunker(cc))
	c := newChunker(b, cc)
	d := &disk{data: make([]byte, 64<<20)}
	fillRandom(rand.New(rand.NewPCG(5, 5)), d.data)
	b.SetBytes(int64(len(d.data)))
	for b.Loop() {
		// A fresh key each round would be unfair to dedup; new data instead.
		d.data[0]++
		s, _ := r.NewSession(context.Background())
		if _, err := WriteDisk(context.Background(), s, c, DiskInput{Source: d, Size: int64(len(d.data))}, Options{}); err != nil {
			b.Fatal(err)
		}
		s.Abort()
	}
}
