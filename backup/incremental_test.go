package backup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/vmvault/vmvault/dedup"
	"github.com/vmvault/vmvault/internal/extent"
	"github.com/vmvault/vmvault/repository"
)

// changeSet writes into d.data and returns the changed extents as CBT would
// report them (rounded out to grain).
func changeSet(rng *rand.Rand, data []byte, kind int) []dedup.Extent {
	size := len(data)
	var ch []dedup.Extent
	write := func(off, n int, zero bool) {
		n = min(n, size-off)
		if n <= 0 {
			return
		}
		if zero {
			clear(data[off : off+n])
		} else {
			fillRandom(rng, data[off:off+n])
		}
		ch = append(ch, dedup.Extent{Offset: int64(off), Length: int64(n)})
	}
	switch kind {
	case 0: // 1% as scattered 4 KiB writes
		for range max(1, size/100/4096) {
			write(rng.IntN(size/4096)*4096, 4096, false)
		}
		// Two writes with a gap in one 16 KiB window (the test chunker's
		// average size): the slice method coalesces them into one blob.
		for range 2 {
			w := rng.IntN(size/16384) * 16384
			write(w, 4096, false)
			write(w+8192, 4096, false)
		}
	case 1: // scattered 64 KiB blocks
		for range 1 + rng.IntN(6) {
			write(rng.IntN(size/65536)*65536, 65536, rng.IntN(5) == 0)
		}
	case 2: // large sequential runs
		for range 1 + rng.IntN(2) {
			write(rng.IntN(size), 256<<10+rng.IntN(512<<10), false)
		}
	case 3: // writes at the disk's end
		write(size-4096*(1+rng.IntN(8)), 32<<10, false)
		write(rng.IntN(size-1), 1+rng.IntN(3000), false) // unaligned
	case 4: // nothing
	}
	return ch
}

// TestIncrementalChainRepository runs a full backup then 14 incrementals per
// chain into a real repository, with 4 KiB scatter, 64 KiB blocks, large
// runs, zero writes, writes at the end, a resize (full-read fallback) and
// both methods: every point restores byte-identical, the source is read
// exactly at the changes, check --read-data is clean, and after deleting
// middle points and reclaiming every remaining point still restores.
func TestIncrementalChainRepository(t *testing.T) {
	for _, method := range []dedup.Method{"", dedup.MethodSlices} {
		t.Run(fmt.Sprintf("method=%q", method), func(t *testing.T) {
			ctx := context.Background()
			r := repository.TestRepository(t, repository.WithChunker(testChunker), repository.WithPackSize(512<<10))
			c := newChunker(t, testChunker)
			rng := rand.New(rand.NewPCG(42, uint64(len(method))))
			d := makeDisk(rng, 3<<20+4096*7)
			p, _ := backupAndCommit(t, r, c, DiskInput{Source: d, Size: int64(len(d.data)), Allocated: d.alloc}, "")
			pts := []repository.Point{p}
			imgs := [][]byte{append([]byte(nil), d.data...)}
			methods := map[dedup.Method]int{}
			coalescedPoints := 0
			for step := 1; step <= 14; step++ {
				data := append([]byte(nil), imgs[len(imgs)-1]...)
				parent := pts[len(pts)-1]
				if step == 9 { // resized: the engine falls back to a full read
					data = append(data, make([]byte, 1<<20)...)
					fillRandom(rng, data[len(data)-4096:])
					nd := &disk{data: data}
					_, exts, err := r.DiskExtents(ctx, parent.ID, 0)
					if err != nil {
						t.Fatal(err)
					}
					s, _ := r.NewSession(ctx)
					_, err = WriteDisk(ctx, s, c, DiskInput{Source: nd, Size: int64(len(data)), Parent: &ParentDisk{Reader: bytes.NewReader(imgs[len(imgs)-1]), Extents: exts}}, Options{})
					s.Abort()
					if !errors.Is(err, dedup.ErrSizeChanged) {
						t.Fatalf("incremental over a resized disk: %v, want ErrSizeChanged", err)
					}
					p, _ := backupAndCommit(t, r, c, DiskInput{Source: nd, Size: int64(len(data))}, parent.ID)
					pts, imgs = append(pts, p), append(imgs, data)
					continue
				}
				changed := changeSet(rng, data, (step+1)%5)
				nd := &disk{data: data}
				pr, err := r.OpenDisk(ctx, parent.ID, 0)
				if err != nil {
					t.Fatal(err)
				}
				_, exts, err := r.DiskExtents(ctx, parent.ID, 0)
				if err != nil {
					t.Fatal(err)
				}
				m := method
				if method == "" && (step == 1 || step == 10) {
					m = dedup.MethodRechunk // the parent is a full backup's CDC map
				}
				if method == "" && step == 12 {
					// CBT reports everything (a reset): every byte is read and
					// stored again as window pieces over a slice parent.
					changed = []dedup.Extent{{Offset: 0, Length: int64(len(data))}}
				}
				in := DiskInput{Source: nd, Size: int64(len(data)), Parent: &ParentDisk{Reader: pr, Extents: exts, Changed: changed, Method: m}}
				p, res := backupAndCommit(t, r, c, in, parent.ID)
				if res.Slices.Groups > 0 {
					// The changed pieces of a window are one blob, sliced where
					// each piece lies: the map must show it.
					_, got, err := r.DiskExtents(ctx, p.ID, 0)
					if err != nil {
						t.Fatal(err)
					}
					if !coalescedMap(got) {
						t.Fatalf("step %d: %d group blobs, but no map extents share one back to back", step, res.Slices.Groups)
					}
					coalescedPoints++
					// The same change again stores nothing new: group blobs
					// are content addressed like any chunk.
					s, err := r.NewSession(ctx)
					if err != nil {
						t.Fatal(err)
					}
					again, err := WriteDisk(ctx, s, c, in, Options{Workers: 2})
					s.Abort()
					if err != nil {
						t.Fatal(err)
					}
					if again.NewBytes != 0 || len(again.Extents) != len(res.Extents) {
						t.Fatalf("step %d: the same change again added %d bytes, %d extents (first: %d)", step, again.NewBytes, len(again.Extents), len(res.Extents))
					}
				}
				pr.Close()
				methods[res.Method]++
				var want int64
				norm := mergeExtents(changed)
				for _, e := range norm {
					want += e.Length
				}
				if res.BytesRead != want {
					t.Fatalf("step %d (%s): read %d source bytes, changed %d", step, res.Method, res.BytesRead, want)
				}
				if res.Method == dedup.MethodSlices && res.ParentBytesRead != res.Slices.ParentBytes {
					t.Fatalf("step %d: parent reads %d, planner says %d", step, res.ParentBytesRead, res.Slices.ParentBytes)
				}
				if res.Method == dedup.MethodSlices && res.Slices.CompactWindows == 0 && res.ParentBytesRead != 0 {
					t.Fatalf("step %d: the slice method read %d parent bytes without compacting", step, res.ParentBytesRead)
				}
				pts, imgs = append(pts, p), append(imgs, data)
			}
			if coalescedPoints == 0 {
				t.Errorf("no incremental coalesced the changed pieces of a window into one blob")
			}
			if method == "" && (methods[dedup.MethodSlices] == 0 || methods[dedup.MethodRechunk] == 0) {
				t.Errorf("the cost rule never chose one of the methods: %v", methods)
			}
			for i, p := range pts {
				if got := readBack(t, r, p.ID); !bytes.Equal(got, imgs[i]) {
					t.Fatalf("point %d restores different bytes", i)
				}
				streamCheck(t, r, p.ID, imgs[i])
			}
			requireCheckClean(t, r)
			for _, i := range []int{1, 4, 5, 10} {
				if err := r.Delete(ctx, pts[i].ID); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := r.Reclaim(ctx, nil); err != nil {
				t.Fatal(err)
			}
			for i, p := range pts {
				if i == 1 || i == 4 || i == 5 || i == 10 {
					continue
				}
				if got := readBack(t, r, p.ID); !bytes.Equal(got, imgs[i]) {
					t.Fatalf("after reclaim, point %d restores different bytes", i)
				}
			}
			requireCheckClean(t, r)
		})
	}
}

// coalescedMap reports whether one blob of m holds, back to back, the bytes
// of two extents that are not adjacent on the disk (a coalesced window; a
// parent blob sliced around a change skips the changed bytes in the blob too).
func coalescedMap(m []repository.Extent) bool {
	type end struct{ disk, blob int64 }
	last := map[repository.ID]end{}
	for _, e := range m {
		if e.Zero {
			continue
		}
		if l, ok := last[e.ID]; ok && l.disk < e.Offset && l.blob == e.Skip && e.Slice {
			return true
		}
		last[e.ID] = end{e.Offset + e.Length, e.Skip + e.Length}
	}
	return false
}

func mergeExtents(exts []dedup.Extent) []dedup.Extent { return extent.Normalize(exts, extent.NoLimit) }

// streamCheck restores through the streaming path (the job planner).
func streamCheck(t testing.TB, r *repository.Repository, id string, want []byte) {
	t.Helper()
	dr, err := r.OpenDisk(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer dr.Close()
	var buf bytes.Buffer
	if _, err := dr.StreamTo(context.Background(), &buf, nil); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("point %s: streamed restore differs", id)
	}
}

func requireCheckClean(t testing.TB, r *repository.Repository) {
	t.Helper()
	rep, err := r.Check(context.Background(), repository.CheckOptions{ReadData: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Clean() {
		for _, p := range rep.Problems {
			t.Errorf("problem: %s", p)
		}
		t.Fatal("check --read-data is not clean")
	}
}
