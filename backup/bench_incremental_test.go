package backup

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/vmvault/vmvault/dedup"
	"github.com/vmvault/vmvault/internal/testutil"
	"github.com/vmvault/vmvault/repository"
)

// BenchmarkIncrementalChange measures, on a disk holding a real ext4 (made by
// mkfs.ext4 -d; VMVAULT_BENCH_GIB GiB, default 1), a full backup against an
// incremental after 1% of the disk changed, for several kinds of change, each
// applied to the full backup's disk (so both methods could run), plus the
// restore speed of a point at the end of a chain of 10 incrementals of
// scattered 4 KiB writes against the full point's. Everything runs through
// WriteDisk + PutDisk + Commit into an encrypted repository with the default
// 1 MiB CDC chunker (no fsync, like the lab benchmark), repeated
// VMVAULT_BENCH_REPS times (default 3) in fresh repositories.
//
//	VMVAULT_BENCH_GIB=4 go test -run '^$' -bench IncrementalChange -benchtime 1x ./backup
//
// VMVAULT_BENCH_METHOD=rechunk|slices forces a method for the incrementals;
// VMVAULT_BENCH_MAXEXT=N sets the slice method's per-window extent limit.
func BenchmarkIncrementalChange(b *testing.B) {
	size := testutil.BenchSize()
	dir := b.TempDir()
	img := testutil.MakeExt4(b, dir, size, size*3/8)
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	alloc := fileExtents(b, f)
	reps := 3
	if n, err := strconv.Atoi(os.Getenv("VMVAULT_BENCH_REPS")); err == nil && n > 0 {
		reps = n
	}
	force := dedup.Method(os.Getenv("VMVAULT_BENCH_METHOD"))
	var iopts dedup.IncrementalOptions
	if n, err := strconv.Atoi(os.Getenv("VMVAULT_BENCH_MAXEXT")); err == nil && n > 0 {
		iopts.MaxExtents = n // the fragmentation limit N (default 16)
	}
	ctx := context.Background()
	cc := repository.TestChunker
	c, err := dedup.New(dedup.Params{Algorithm: cc.Algorithm, Polynomial: cc.Polynomial, MinSize: cc.MinSize, AvgSize: cc.AvgSize, MaxSize: cc.MaxSize})
	if err != nil {
		b.Fatal(err)
	}
	var allocBytes int64
	for _, a := range alloc {
		allocBytes += a.Length
	}
	type change struct {
		name  string
		write func(rng *rand.Rand) []dedup.Extent
	}
	// writeBlocks writes n bytes as random blocks of bs bytes at offsets
	// pick returns, and returns the changed extents (CBT at block grain).
	writeBlocks := func(rng *rand.Rand, n, bs int64, pick func() int64) []dedup.Extent {
		var ch []dedup.Extent
		buf := make([]byte, bs)
		for done := int64(0); done < n; done += bs {
			off := pick()
			for k := range buf {
				buf[k] = byte(rng.Uint32())
			}
			if _, err := f.WriteAt(buf, off); err != nil {
				b.Fatal(err)
			}
			ch = append(ch, dedup.Extent{Offset: off, Length: bs})
		}
		return ch
	}
	// inData picks a block uniformly over the allocated bytes (what a guest
	// rewriting its files does), aligned to bs inside its extent.
	cum := make([]int64, len(alloc)) // allocated bytes before alloc[i]
	for i := 1; i < len(alloc); i++ {
		cum[i] = cum[i-1] + alloc[i-1].Length
	}
	inData := func(rng *rand.Rand, bs int64) func() int64 {
		return func() int64 {
			for {
				at := rng.Int64N(allocBytes)
				i := sort.Search(len(cum), func(i int) bool { return cum[i] > at }) - 1
				if a := alloc[i]; a.Length >= bs {
					return a.Offset + min(at-cum[i], a.Length-bs)/bs*bs
				}
			}
		}
	}
	anywhere := func(rng *rand.Rand, bs int64) func() int64 {
		return func() int64 { return rng.Int64N(size/bs) * bs }
	}
	changes := []change{
		{"4 KiB in data", func(rng *rand.Rand) []dedup.Extent {
			return writeBlocks(rng, allocBytes/100, 4<<10, inData(rng, 4<<10))
		}},
		{"4 KiB anywhere", func(rng *rand.Rand) []dedup.Extent { return writeBlocks(rng, size/100, 4<<10, anywhere(rng, 4<<10)) }},
		{"64 KiB blocks", func(rng *rand.Rand) []dedup.Extent { return writeBlocks(rng, size/100, 64<<10, anywhere(rng, 64<<10)) }},
		{"1 MiB runs", func(rng *rand.Rand) []dedup.Extent { return writeBlocks(rng, size/100, 1<<20, anywhere(rng, 1<<20)) }},
		{"new files", func(rng *rand.Rand) []dedup.Extent {
			// 2 MiB files: contiguous 2 MiB runs in the data area's free space
			// is what ext4 does; here: in the data areas, 2 MiB aligned.
			return writeBlocks(rng, size/100, 2<<20, inData(rng, 2<<20))
		}},
	}
	type result struct {
		full, restoreFull, restoreChain time.Duration
		restoreFullCPU, restoreChainCPU time.Duration
		inc, incCPU                     map[string]time.Duration
		chainInc                        []time.Duration
	}
	var results []result
	var phases struct{ open, putDisk, commit time.Duration }
	for rep := 0; rep < reps*b.N; rep++ {
		res := result{inc: map[string]time.Duration{}, incCPU: map[string]time.Duration{}}
		r := repository.TestRepository(b, repository.WithDir(filepath.Join(dir, fmt.Sprintf("repo%d", rep))))
		commit := func(in DiskInput, parent string) (repository.Point, *DiskResult, time.Duration) {
			start := time.Now()
			s, err := r.NewSession(ctx)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Abort()
			out, err := WriteDisk(ctx, s, c, in, Options{})
			if err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			root, err := s.PutDisk(ctx, in.Size, out.Extents)
			if err != nil {
				b.Fatal(err)
			}
			phases.putDisk = time.Since(t1)
			t2 := time.Now()
			defer func() { phases.commit = time.Since(t2) }()
			p, err := s.Commit(ctx, repository.NewPoint{VM: repository.VMIdentity{Name: "bench"}, Time: time.Now(), Parent: parent,
				Disks: []repository.NewDisk{{Capacity: in.Size, Map: root}}})
			if err != nil {
				b.Fatal(err)
			}
			return p, out, time.Since(start)
		}
		var lastIncCPU time.Duration
		incremental := func(parent repository.Point, changed []dedup.Extent) (repository.Point, *DiskResult, time.Duration) {
			start, cpu0 := time.Now(), processCPU()
			defer func() { lastIncCPU = processCPU() - cpu0 }()
			pr, err := RepoStore(r).OpenParent(ctx, parent.ID, 0)
			if err != nil {
				b.Fatal(err)
			}
			phases.open = time.Since(start)
			defer pr.Close()
			var p repository.Point
			var out *DiskResult
			pprof.Do(ctx, pprof.Labels("phase", "inc"), func(context.Context) {
				p, out, _ = commit(DiskInput{Source: f, Size: size, Parent: &ParentDisk{Reader: pr, Extents: pr.Extents(),
					Changed: mergeExtents(changed), Method: force, Options: iopts}}, parent.ID)
			})
			return p, out, time.Since(start)
		}
		full, fres, d := commit(DiskInput{Source: f, Size: size, Allocated: alloc}, "")
		res.full = d
		b.Logf("rep %d: full backup %.2fs, read %.0f MiB, new %.0f MiB", rep, d.Seconds(), mb(fres.BytesRead), mb(fres.NewBytes))
		rng := rand.New(rand.NewPCG(7, uint64(rep)))
		for _, chg := range changes {
			if os.Getenv("VMVAULT_BENCH_CHAIN_ONLY") != "" {
				break
			}
			if only := os.Getenv("VMVAULT_BENCH_ONLY"); only != "" && only != chg.name {
				continue
			}
			// Each change starts from the full backup's disk: restoreFrom
			// undoes it from the full point afterwards.
			changed := chg.write(rng)
			_, out, d := incremental(full, changed)
			res.inc[chg.name], res.incCPU[chg.name] = d, lastIncCPU
			b.Logf("rep %d: %s: open parent %.2fs, pipeline %.2fs, put disk %.2fs, commit %.2fs", rep, chg.name,
				phases.open.Seconds(), out.Duration.Seconds(), phases.putDisk.Seconds(), phases.commit.Seconds())
			b.Logf("rep %d: incremental 1%% %-15s %6.2fs  CPU %5.2fs  read %6.1f MiB  parent read %6.1f MiB  new %6.1f MiB  method %-7s (rechunk est %.0f MiB, slices est %.0f MiB, %d windows compacted): %.1fx faster than the full",
				rep, chg.name+":", d.Seconds(), lastIncCPU.Seconds(), mb(out.BytesRead), mb(out.ParentBytesRead), mb(out.NewBytes), out.Method,
				mb(out.Estimate.RechunkBytes), mb(out.Estimate.SliceBytes), out.Slices.CompactWindows, res.full.Seconds()/d.Seconds())
			restoreFrom(b, r, full, changed, f)
		}
		if os.Getenv("VMVAULT_BENCH_ONLY") != "" {
			results = append(results, res)
			continue
		}
		// A chain of 10 incrementals of scattered 4 KiB writes in the data.
		p := full
		var chainWrites []dedup.Extent
		for i := 0; i < 10; i++ {
			changed := changes[0].write(rng)
			chainWrites = append(chainWrites, changed...)
			var d time.Duration
			var out *DiskResult
			p, out, d = incremental(p, changed)
			res.chainInc = append(res.chainInc, d.Round(time.Millisecond))
			b.Logf("rep %d: chain %d: %.2fs CPU %.2fs read %.1f MiB parent read %.1f MiB new %.1f MiB, %d windows compacted (%d over the extent limit), %d slices, open parent %.2fs, pipeline %.2fs, put disk %.2fs, commit %.2fs",
				rep, i+1, d.Seconds(), lastIncCPU.Seconds(), mb(out.BytesRead), mb(out.ParentBytesRead), mb(out.NewBytes), out.Slices.CompactWindows, out.Estimate.WindowsByCount, out.Slices.SlicedExtents,
				phases.open.Seconds(), out.Duration.Seconds(), phases.putDisk.Seconds(), phases.commit.Seconds())
		}
		// Alternate, best of three each: the machine is shared.
		res.restoreFull, res.restoreChain = time.Hour, time.Hour
		res.restoreFullCPU, res.restoreChainCPU = time.Hour, time.Hour
		for range 3 {
			w, c := restoreTime(b, r, full.ID, dir, "restore-full")
			res.restoreFull, res.restoreFullCPU = min(res.restoreFull, w), min(res.restoreFullCPU, c)
			w, c = restoreTime(b, r, p.ID, dir, "restore-chain")
			res.restoreChain, res.restoreChainCPU = min(res.restoreChain, w), min(res.restoreChainCPU, c)
		}
		b.Logf("rep %d: 10 incrementals of 4 KiB in data: %v; restore of the full %.2fs (CPU %.2fs), of the 10th incremental %.2fs (CPU %.2fs): %.0f%% of the full's speed, %.0f%% of its CPU",
			rep, res.chainInc, res.restoreFull.Seconds(), res.restoreFullCPU.Seconds(), res.restoreChain.Seconds(), res.restoreChainCPU.Seconds(),
			100*res.restoreFull.Seconds()/res.restoreChain.Seconds(), 100*res.restoreChainCPU.Seconds()/res.restoreFullCPU.Seconds())
		restoreFrom(b, r, full, chainWrites, f)
		results = append(results, res)
	}
	for _, chg := range changes {
		if len(results) == 0 || results[0].inc[chg.name] == 0 {
			continue
		}
		var xs []float64
		for _, res := range results {
			xs = append(xs, res.full.Seconds()/res.inc[chg.name].Seconds())
		}
		sort.Float64s(xs)
		b.Logf("1%% %-15s incremental is %.1fx–%.1fx faster than the full (%d runs)", chg.name+":", xs[0], xs[len(xs)-1], len(xs))
	}
	var rs []float64
	for _, res := range results {
		if res.restoreChain == 0 {
			continue
		}
		rs = append(rs, 100*res.restoreFull.Seconds()/res.restoreChain.Seconds())
	}
	sort.Float64s(rs)
	if len(rs) == 0 {
		return
	}
	b.Logf("restore after 10 scattered incrementals: %.0f%%–%.0f%% of the full point's speed", rs[0], rs[len(rs)-1])
}

func mb(n int64) float64 { return float64(n) / (1 << 20) }

// restoreFrom puts the bytes of point p back into f at the changed extents
// (undoing a change, so every scenario starts from the full backup's disk).
func restoreFrom(b *testing.B, r *repository.Repository, p repository.Point, changed []dedup.Extent, f *os.File) {
	b.Helper()
	dr, err := r.OpenDisk(context.Background(), p.ID, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer dr.Close()
	for _, e := range mergeExtents(changed) {
		buf := make([]byte, e.Length)
		if _, err := dr.ReadAt(buf, e.Offset); err != nil && err != io.EOF {
			b.Fatal(err)
		}
		if _, err := f.WriteAt(buf, e.Offset); err != nil {
			b.Fatal(err)
		}
	}
}

// processCPU is this process's user+system CPU time: on a shared machine
// the CPU an operation costs is steadier than its wall time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// restoreTime streams a point's disk into a fresh sparse file and returns
// the wall and CPU time it took. The restore runs under the pprof label
// phase=label, so that a -cpuprofile of the benchmark separates the full
// point's restore from the chain point's (pprof -tagfocus phase=restore-chain).
func restoreTime(b *testing.B, r *repository.Repository, id, dir, label string) (d, cpu time.Duration) {
	b.Helper()
	pprof.Do(context.Background(), pprof.Labels("phase", label), func(ctx context.Context) {
		d, cpu = restoreOnce(ctx, b, r, id, dir)
	})
	return d, cpu
}

func restoreOnce(ctx context.Context, b *testing.B, r *repository.Repository, id, dir string) (time.Duration, time.Duration) {
	b.Helper()
	out := filepath.Join(dir, "restore.raw")
	start, cpu0 := time.Now(), processCPU()
	dr, err := r.OpenDisk(ctx, id, 0)
	if err != nil {
		b.Fatal(err)
	}
	w, err := os.Create(out)
	if err != nil {
		b.Fatal(err)
	}
	if err := w.Truncate(dr.Size()); err != nil {
		b.Fatal(err)
	}
	if err := dr.Stream(ctx, w, nil); err != nil {
		b.Fatal(err)
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	dr.Close()
	d, cpu := time.Since(start), processCPU()-cpu0
	os.Remove(out)
	return d, cpu
}

// fileExtents lists the data areas of a sparse file (SEEK_DATA/SEEK_HOLE).
func fileExtents(b *testing.B, f *os.File) []dedup.Extent {
	b.Helper()
	st, err := f.Stat()
	if err != nil {
		b.Fatal(err)
	}
	var out []dedup.Extent
	for off := int64(0); off < st.Size(); {
		data, err := f.Seek(off, 3) // SEEK_DATA
		if err != nil {
			break // ENXIO: no data after off
		}
		hole, err := f.Seek(data, 4) // SEEK_HOLE
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, dedup.Extent{Offset: data, Length: hole - data})
		off = hole
	}
	return out
}
