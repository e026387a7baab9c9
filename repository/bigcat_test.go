package repository

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/bits"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestBigCatalog measures a synthetic catalog of N chunks of 1 MiB (a
// repository of N MiB): index.db size, dedup lookups per second (hits and
// misses) and reclaim's duration and peak Go heap. It is not part of
// `make test`; docs/PERFORMANCE.md ("A catalog of 100 million chunks")
// has the commands and figures:
//
//	VMVAULT_BIGCAT=10000000 VMVAULT_BIGCAT_DIR=/var/tmp/bigcat \
//	VMVAULT_BIGCAT_PHASE=build,lookup,plan,reclaim \
//	  go test -run TestBigCatalog -count=1 -timeout 0 -v ./repository/
//
// The catalog is written directly (bbolt, in key order: the ids are spread
// uniformly over the key space and generated already sorted), with pack
// entries but no pack files, so that 100 million chunks need gigabytes,
// not 100 TB. Restore points are real: one per 2^20 chunks (1 TiB disks),
// written through Session.PutDisk and Commit, so their maps, segments and
// records are real blobs in real packs and reclaim's mark reads them as
// usual. Chunk i sits in pack q/32 at slot q%32, q a fixed permutation of
// i (a pack holds chunks from all over the key space, as in a real
// repository). Packs q/32 ≡ 0 (mod 10) are unreferenced (reclaim drops
// them), packs ≡ 1 a quarter referenced (planned for repack; their files are
// absent, so the repack keeps them); the rest are live.
//
// Phases (VMVAULT_BIGCAT_PHASE, comma separated): build makes the
// repository in VMVAULT_BIGCAT_DIR (which must not exist);
// VMVAULT_BIGCAT_RANDOM=1 inserts the chunks in random order in
// transactions of 4096 instead, as backups do (slow: for the page fill
// of a real catalog); lookup times random lookups; plan runs PlanReclaim,
// reclaim runs Reclaim (both on the repository in place: run reclaim on
// a copy to keep the original). Each reports its peak Go heap
// (HeapInuse sampled every 20 ms); run under /usr/bin/time -v for the
// process's peak RSS.
func TestBigCatalog(t *testing.T) {
	n, _ := strconv.ParseUint(os.Getenv("VMVAULT_BIGCAT"), 10, 64)
	dir := os.Getenv("VMVAULT_BIGCAT_DIR")
	if n == 0 || dir == "" {
		t.Skip("measurement, not a test: set VMVAULT_BIGCAT=<chunks> and VMVAULT_BIGCAT_DIR (see docs/PERFORMANCE.md)")
	}
	phases := strings.Split(os.Getenv("VMVAULT_BIGCAT_PHASE"), ",")
	ctx := context.Background()
	for _, ph := range phases {
		switch ph {
		case "build":
			bigcatBuild(t, dir, n, os.Getenv("VMVAULT_BIGCAT_RANDOM") == "1")
		case "lookup":
			r := bigcatOpen(t, dir)
			bigcatLookups(t, r, n)
			r.Close()
		case "plan":
			r := bigcatOpen(t, dir)
			var pl ReclaimPlan
			d, heap := peakHeap(func() {
				var err error
				if pl, err = r.PlanReclaim(ctx, nil); err != nil {
					t.Fatal(err)
				}
			})
			bigcatReport(t, "plan", n, "%.1f s, peak heap %d MiB, live %d dead %d dropped %d repacked %d",
				d.Seconds(), heap>>20, pl.LiveBlobs, pl.DeadBlobs+pl.DeadBlobsKept, pl.PacksDropped, pl.PacksRepacked)
			r.Close()
		case "reclaim":
			r := bigcatOpen(t, dir)
			var rep *ReclaimReport
			d, heap := peakHeap(func() {
				var err error
				if rep, err = r.Reclaim(ctx, nil); err != nil {
					t.Fatal(err)
				}
			})
			bigcatReport(t, "reclaim", n, "%.1f s, peak heap %d MiB, live %d dead removed %d packs deleted %d",
				d.Seconds(), heap>>20, rep.LiveBlobs, rep.DeadBlobs, rep.PacksDeleted)
			r.Close()
		default:
			t.Fatalf("VMVAULT_BIGCAT_PHASE: unknown phase %q", ph)
		}
	}
}

const (
	bigcatPerPack  = 32
	bigcatPerPoint = 1 << 20
	bigcatPrime    = 1_000_000_007 // the slot permutation: q = i*prime mod n
	bigcatChunk    = 1 << 20
)

// bigcatID is chunk i's id: the first 8 bytes spread i uniformly over the
// key space (so ids come sorted by i), the rest pseudo-random.
func bigcatID(i, n uint64) ID {
	var id ID
	hi, lo := bits.Mul64(i, ^uint64(0))
	q, _ := bits.Div64(hi, lo, n)
	binary.BigEndian.PutUint64(id[:8], q)
	for k := 1; k < 4; k++ {
		binary.LittleEndian.PutUint64(id[8*k:], splitmix(i*4+uint64(k)))
	}
	return id
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func bigcatPack(j uint64) packID {
	var p packID
	binary.BigEndian.PutUint64(p[:8], j)
	binary.LittleEndian.PutUint64(p[8:], splitmix(j))
	return p
}

// bigcatSlot is chunk i's place: pack and slot.
func bigcatSlot(i, n uint64) (pack, slot uint64) {
	hi, lo := bits.Mul64(i, bigcatPrime)
	q := bits.Rem64(hi, lo, n)
	return q / bigcatPerPack, q % bigcatPerPack
}

// bigcatLive says whether a restore point references chunk i.
func bigcatLive(i, n uint64) bool {
	p, s := bigcatSlot(i, n)
	switch p % 10 {
	case 0:
		return false
	case 1:
		return s%4 == 0
	}
	return true
}

func bigcatOpen(t *testing.T, dir string) *Repository {
	t.Helper()
	start := time.Now()
	r, err := Open(context.Background(), dir, []byte(TestPassword), OpenOptions{NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("open: %.1f s", time.Since(start).Seconds())
	return r
}

func bigcatBuild(t *testing.T, dir string, n uint64, random bool) {
	t.Helper()
	if n%bigcatPerPack != 0 {
		t.Fatalf("VMVAULT_BIGCAT must be a multiple of %d", bigcatPerPack)
	}
	if n%bigcatPrime == 0 {
		t.Fatalf("VMVAULT_BIGCAT must not be a multiple of %d", bigcatPrime)
	}
	ctx := context.Background()
	if _, err := os.Stat(dir); err == nil {
		t.Fatalf("%s exists", dir)
	}
	if err := Init(ctx, dir, []byte(TestPassword), InitOptions{Chunker: TestChunker, KDF: TestKDF}); err != nil {
		t.Fatal(err)
	}
	r := bigcatOpen(t, dir)
	start := time.Now()
	packSize := uint64(packStart + bigcatPerPack*bigcatChunk)
	err := r.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketPacks)
		b.FillPercent = 0.9
		for j := range n / bigcatPerPack {
			pid := bigcatPack(j)
			if err := b.Put(pid[:], encodePackInfo(packInfo{State: blobStateLive, Count: bigcatPerPack, Size: packSize})); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	loc := func(i uint64) blobLoc {
		p, s := bigcatSlot(i, n)
		return blobLoc{Type: BlobData, State: blobStateLive, RawLen: bigcatChunk, StoredLen: bigcatChunk, Offset: packStart + s*bigcatChunk, Pack: bigcatPack(p)}
	}
	if random {
		perm := mrand.Perm(int(n))
		for lo := 0; lo < len(perm); lo += 4096 {
			err := r.db.Update(func(tx *bolt.Tx) error {
				b := tx.Bucket(bucketBlobs)
				for _, i := range perm[lo:min(lo+4096, len(perm))] {
					id := bigcatID(uint64(i), n)
					if err := b.Put(id[:], encodeBlobLoc(loc(uint64(i)))); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	} else {
		const batch = 1 << 20
		for lo := uint64(0); lo < n; lo += batch {
			err := r.db.Update(func(tx *bolt.Tx) error {
				b := tx.Bucket(bucketBlobs)
				// Appending in key order; 0.7 is the page fill random
				// inserts settle at (measured: VMVAULT_BIGCAT_RANDOM).
				b.FillPercent = 0.7
				for i := lo; i < min(lo+batch, n); i++ {
					id := bigcatID(i, n)
					if err := b.Put(id[:], encodeBlobLoc(loc(i))); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	catalogTime := time.Since(start)
	// Restore points: one per 2^20 chunks, the live ones in id order.
	start = time.Now()
	points := 0
	for lo := uint64(0); lo < n; lo += bigcatPerPoint {
		s, err := r.NewSession(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ext []Extent
		var off int64
		for i := lo; i < min(lo+bigcatPerPoint, n); i++ {
			if bigcatLive(i, n) {
				ext = append(ext, Extent{Offset: off, Length: bigcatChunk, ID: bigcatID(i, n)})
				off += bigcatChunk
			}
		}
		root, err := s.PutDisk(ctx, off, ext)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Commit(ctx, NewPoint{VM: VMIdentity{Name: fmt.Sprintf("vm%04d", points)}, Time: testTime, Consistency: "crash",
			Disks: []NewDisk{{Key: 2000, Label: "disk", Capacity: off, Map: root}}}); err != nil {
			t.Fatal(err)
		}
		points++
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "index.db"))
	if err != nil {
		t.Fatal(err)
	}
	bigcatReport(t, "build", n, "catalog written in %.1f s, %d points in %.1f s; index.db %d MiB = %.1f MiB per million chunks (random inserts: %v)",
		catalogTime.Seconds(), points, time.Since(start).Seconds(), fi.Size()>>20, float64(fi.Size())/float64(1<<20)/(float64(n)/1e6), random)
}

// bigcatLookups times catalog lookups of random ids, the dedup question a
// backup asks of every chunk: hits (stored chunks) and misses (new ones),
// from one goroutine and from GOMAXPROCS.
func bigcatLookups(t *testing.T, r *Repository, n uint64) {
	t.Helper()
	for _, par := range []int{1, runtime.GOMAXPROCS(0)} {
		for _, hit := range []bool{true, false} {
			var count atomic.Int64
			var wg sync.WaitGroup
			start := time.Now()
			for g := range par {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := mrand.New(mrand.NewPCG(uint64(g), 7))
					for time.Since(start) < 5*time.Second {
						for range 1000 {
							var id ID
							if hit {
								id = bigcatID(rng.Uint64N(n), n)
							} else {
								for k := 0; k < 4; k++ {
									binary.LittleEndian.PutUint64(id[8*k:], rng.Uint64())
								}
							}
							_, ok, err := r.lookup(id)
							if err != nil || ok != hit {
								t.Errorf("lookup %x: ok %v err %v, want %v", id[:8], ok, err, hit)
								return
							}
						}
						count.Add(1000)
					}
				}()
			}
			wg.Wait()
			bigcatReport(t, "lookup", n, "%d goroutine(s), hits %v: %.0f lookups/s", par, hit, float64(count.Load())/time.Since(start).Seconds())
		}
	}
}

// peakHeap runs fn and returns its duration and the peak HeapInuse seen.
func peakHeap(fn func()) (time.Duration, uint64) {
	runtime.GC()
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	start := time.Now()
	fn()
	d := time.Since(start)
	close(done)
	wg.Wait()
	return d, peak.Load()
}

func bigcatReport(t *testing.T, phase string, n uint64, format string, args ...any) {
	t.Helper()
	var load string
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		load = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	msg := fmt.Sprintf("bigcat n=%d %s: ", n, phase) + fmt.Sprintf(format, args...) + " [load " + load + "]"
	t.Log(msg)
	fmt.Println(msg)
}
