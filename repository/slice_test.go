package repository

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
)

// patchImage applies random writes to a copy of img and returns it with the
// changed ranges (sorted, disjoint).
func patchImage(rng *rand.Rand, img []byte, n, maxLen int) ([]byte, [][2]int) {
	out := append([]byte(nil), img...)
	var ch [][2]int
	for range n {
		l := 1 + rng.IntN(maxLen)
		off := rng.IntN(len(img) - l)
		for i := off; i < off+l; i++ {
			out[i] = byte(rng.Uint32())
		}
		ch = append(ch, [2]int{off, off + l})
	}
	// sort and merge
	for i := 1; i < len(ch); i++ {
		for j := i; j > 0 && ch[j][0] < ch[j-1][0]; j-- {
			ch[j], ch[j-1] = ch[j-1], ch[j]
		}
	}
	var m [][2]int
	for _, c := range ch {
		if k := len(m); k > 0 && c[0] <= m[k-1][1] {
			m[k-1][1] = max(m[k-1][1], c[1])
			continue
		}
		m = append(m, c)
	}
	return out, m
}

// sliceMap builds the map of img from the parent map: changed ranges become
// new chunks (holes when zero), the rest slices of the parent's extents.
func sliceMap(t testing.TB, s *Session, parent []Extent, img []byte, changed [][2]int) []Extent {
	t.Helper()
	return sliceMapWindow(t, s, parent, img, changed, 128<<10)
}

// sliceMapWindow is sliceMap coalescing the changed ranges of each window
// of the given size.
func sliceMapWindow(t testing.TB, s *Session, parent []Extent, img []byte, changed [][2]int, window int) []Extent {
	t.Helper()
	ctx := context.Background()
	var out []Extent
	add := func(e Extent) {
		if n := len(out); n > 0 && e.Zero && out[n-1].Zero {
			out[n-1].Length += e.Length
			return
		}
		out = append(out, e)
	}
	// parent bytes in [a, b): slices of the parent extents.
	keep := func(a, b int64) {
		for _, p := range parent {
			lo, hi := max(a, p.Offset), min(b, p.Offset+p.Length)
			if lo >= hi {
				continue
			}
			e := Extent{Offset: lo, Length: hi - lo, Zero: p.Zero}
			if !p.Zero {
				e.ID, e.Skip = p.ID, p.Skip+(lo-p.Offset)
			}
			add(e)
		}
	}
	// Coalesce, as the backup engine does, the changed ranges of one window
	// that hold data into one blob: each becomes a slice of it.
	type place struct {
		id   ID
		skip int64
	}
	grouped := map[int]place{}
	for i := 0; i < len(changed); {
		win := changed[i][0] / window
		var idx []int
		var blob []byte
		j := i
		for ; j < len(changed) && changed[j][0]/window == win; j++ {
			c := changed[j]
			if (c[1]-1)/window == win && !isZero(img[c[0]:c[1]]) {
				idx = append(idx, j)
				blob = append(blob, img[c[0]:c[1]]...)
			}
		}
		i = max(j, i+1)
		if len(idx) < 2 {
			continue
		}
		id, _, _, err := s.PutChunk(ctx, blob)
		if err != nil {
			t.Fatal(err)
		}
		var skip int64
		for _, k := range idx {
			grouped[k] = place{id, skip}
			skip += int64(changed[k][1] - changed[k][0])
		}
	}
	var at int64
	for i, c := range changed {
		keep(at, int64(c[0]))
		b := img[c[0]:c[1]]
		if g, ok := grouped[i]; ok {
			add(Extent{Offset: int64(c[0]), Length: int64(len(b)), ID: g.id, Skip: g.skip})
		} else if isZero(b) {
			add(Extent{Offset: int64(c[0]), Length: int64(len(b)), Zero: true})
		} else {
			id, _, _, err := s.PutChunk(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			add(Extent{Offset: int64(c[0]), Length: int64(len(b)), ID: id})
		}
		at = int64(c[1])
	}
	keep(at, int64(len(img)))
	return out
}

// TestSliceChain commits a chain of slice-built points, checks every one
// restores byte-identical through ReadAt, Stream and WriteTo, that check
// --read-data is clean, and that reclaim after deleting middle points keeps
// the others restorable.
func TestSliceChain(t *testing.T) {
	for _, enc := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "encrypted"}[enc], func(t *testing.T) {
			if !enc {
				// Tiny jobs: blobs sliced across job boundaries are handed
				// from one job to the next.
				jm, rm := streamJobMax, streamRegionMax
				streamJobMax, streamRegionMax = 3, 2
				defer func() { streamJobMax, streamRegionMax = jm, rm }()
			}
			var opts []TestOption
			if !enc {
				opts = append(opts, WithNoEncryption())
			}
			opts = append(opts, WithPackSize(256<<10))
			r := TestRepository(t, opts...)
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(7, 9))
			img := testDisk(3, 3<<20+12345)
			pts := []Point{backup(t, r, "vm", testTime, img)}
			imgs := [][]byte{img}
			coalesced := 0
			for i := 1; i <= 8; i++ {
				_, parent, err := r.DiskExtents(ctx, pts[i-1].ID, 0)
				if err != nil {
					t.Fatal(err)
				}
				next, changed := patchImage(rng, imgs[i-1], 5+rng.IntN(20), 1+rng.IntN(40<<10))
				if i%3 == 0 { // a zero write becomes a hole
					clear(next[100<<10 : 120<<10])
					changed = mergeRange(changed, [2]int{100 << 10, 120 << 10})
				}
				s, err := r.NewSession(ctx)
				if err != nil {
					t.Fatal(err)
				}
				ext := sliceMap(t, s, parent, next, changed)
				root, err := s.PutDisk(ctx, int64(len(next)), ext)
				if err != nil {
					t.Fatal(err)
				}
				p, err := s.Commit(ctx, NewPoint{VM: VMIdentity{Name: "vm"}, Time: testTime.Add(time.Duration(i) * time.Minute), Parent: pts[i-1].ID,
					Disks: []NewDisk{{Key: 2000, Capacity: int64(len(next)), Map: root}}})
				if err != nil {
					t.Fatal(err)
				}
				pts, imgs = append(pts, p), append(imgs, next)
				_, got, err := r.DiskExtents(ctx, p.ID, 0)
				if err != nil {
					t.Fatal(err)
				}
				slices := 0
				for _, e := range got {
					if e.Slice {
						slices++
					}
				}
				if slices == 0 {
					t.Fatalf("point %d has no slices", i)
				}
				if coalescedExtents(got) {
					coalesced++
				}
			}
			if coalesced == 0 {
				t.Fatal("no point holds two slices of one blob, back to back in it, at distant disk ranges")
			}
			for i, p := range pts {
				verifyPoint(t, r, p.ID, imgs[i])
			}
			requireClean(t, r)
			for _, i := range []int{2, 3, 5} {
				if err := r.Delete(ctx, pts[i].ID); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := r.Reclaim(ctx, nil); err != nil {
				t.Fatal(err)
			}
			for i, p := range pts {
				if i == 2 || i == 3 || i == 5 {
					continue
				}
				verifyPoint(t, r, p.ID, imgs[i])
			}
			requireClean(t, r)
		})
	}
}

// coalescedExtents reports whether one blob of m holds, back to back, the
// bytes of two slices at disk ranges that are not adjacent (the changed
// pieces of a window stored as one blob; a blob sliced around a change skips
// the changed bytes in the blob too).
func coalescedExtents(m []Extent) bool {
	type end struct{ disk, blob int64 }
	last := map[ID]end{}
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

func mergeRange(ch [][2]int, c [2]int) [][2]int {
	var out [][2]int
	for _, x := range ch {
		if x[1] < c[0] || x[0] > c[1] {
			out = append(out, x)
			continue
		}
		c = [2]int{min(c[0], x[0]), max(c[1], x[1])}
	}
	out = append(out, c)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j][0] < out[j-1][0]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func TestPutDiskSlices(t *testing.T) {
	r := TestRepository(t)
	ctx := context.Background()
	s, _ := r.NewSession(ctx)
	defer s.Abort()
	id, _, _, _ := s.PutChunk(ctx, []byte("hello world"))
	seg := encodeSegment(0, []Extent{{Offset: 0, Length: 1, Zero: true}})
	sid := r.codec.id(seg)
	if _, _, err := s.put(BlobSegment, sid, seg); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		ext  []Extent
		ok   bool
	}{
		{"whole", []Extent{{Offset: 0, Length: 11, ID: id}}, true},
		{"prefix", []Extent{{Offset: 0, Length: 5, ID: id}}, true},
		{"middle", []Extent{{Offset: 0, Length: 5, ID: id, Skip: 3}}, true},
		{"same blob twice", []Extent{{Offset: 0, Length: 5, ID: id, Skip: 6}, {Offset: 5, Length: 5, ID: id}}, true},
		{"past the end", []Extent{{Offset: 0, Length: 5, ID: id, Skip: 7}}, false},
		{"negative skip", []Extent{{Offset: 0, Length: 5, ID: id, Skip: -1}}, false},
		{"not a data blob", []Extent{{Offset: 0, Length: 5, ID: sid}}, false},
	} {
		var size int64
		for _, e := range tc.ext {
			size += e.Length
		}
		root, err := s.PutDisk(ctx, size, tc.ext)
		if (err == nil) != tc.ok {
			t.Errorf("%s: PutDisk error %v, want ok=%v", tc.name, err, tc.ok)
			continue
		}
		if err != nil {
			continue
		}
		dr, err := r.loadRoot(ctx, root)
		if err != nil {
			t.Fatal(err)
		}
		sg, err := r.loadSegment(ctx, dr.Segs[0])
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range sg.Extents {
			want := tc.ext[i].Skip != 0 || tc.ext[i].Length != 11
			if e.Slice != want || e.Skip != tc.ext[i].Skip {
				t.Errorf("%s: extent %d decoded as slice=%v skip=%d", tc.name, i, e.Slice, e.Skip)
			}
		}
		// A map without slices keeps the v1.0 encoding (and ids).
		b, _ := r.LoadBlob(ctx, dr.Segs[0].ID)
		v11 := [8]byte(b[:8]) == magicSegment11
		if v11 != (tc.name != "whole") {
			t.Errorf("%s: v1.1 segment = %v", tc.name, v11)
		}
	}
}

// TestCheckFindsBadSlice commits a map whose slice overruns its blob
// (bypassing PutDisk's validation) and expects check to report it.
func TestCheckFindsBadSlice(t *testing.T) {
	r := TestRepository(t)
	ctx := context.Background()
	s, _ := r.NewSession(ctx)
	defer s.Abort()
	id, _, _, _ := s.PutChunk(ctx, []byte("hello world"))
	seg := encodeSegment(0, []Extent{{Offset: 0, Length: 8, ID: id, Skip: 6, Slice: true}})
	sid := r.codec.id(seg)
	if _, _, err := s.put(BlobSegment, sid, seg); err != nil {
		t.Fatal(err)
	}
	rb := encodeRoot(diskRoot{Size: 8, Span: segmentSpan, Segs: []segRef{{0, 8, sid}}})
	root := r.codec.id(rb)
	if _, _, err := s.put(BlobRoot, root, rb); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	s.roots[root] = true
	r.mu.Unlock()
	p, err := s.Commit(ctx, NewPoint{VM: VMIdentity{Name: "bad"}, Time: testTime, Disks: []NewDisk{{Capacity: 8, Map: root}}})
	if err != nil {
		t.Fatal(err)
	}
	rep := mustCheck(t, r, false)
	if rep.Clean() || !strings.Contains(rep.Problems[0].Message, "slices [6,+8)") {
		t.Fatalf("check missed the overrunning slice: %+v", rep.Problems)
	}
	d, err := r.OpenDisk(ctx, p.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.ReadAt(make([]byte, 8), 0); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("ReadAt of a bad slice: %v, want ErrCorrupt", err)
	}
	var buf bytes.Buffer
	if _, err := d.WriteTo(&buf); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("WriteTo of a bad slice: %v, want ErrCorrupt", err)
	}
}

// TestCloseWhileReading closes the repository while a check --read-data
// and disk readers run: each either completes or fails with ErrClosed, and
// -race sees no access to the freed decoders.
func TestCloseWhileReading(t *testing.T) {
	for round := range 4 {
		r := TestRepository(t, WithPackSize(128<<10))
		ctx := context.Background()
		p := backup(t, r, "vm", testTime, testDisk(uint64(round), 2<<20))
		d, err := r.OpenDisk(ctx, p.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		start := make(chan struct{})
		wg.Go(func() {
			<-start
			_, err := r.Check(ctx, CheckOptions{ReadData: true}, nil)
			errs <- err
		})
		wg.Go(func() {
			<-start
			_, err := d.WriteTo(&bytes.Buffer{})
			errs <- err
		})
		wg.Go(func() {
			<-start
			for off := int64(0); off < d.Size(); off += 64 << 10 {
				if _, err := d.ReadAt(make([]byte, 4096), off); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		})
		close(start)
		time.Sleep(time.Duration(round) * time.Millisecond)
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil && !errors.Is(err, ErrClosed) {
				t.Fatalf("round %d: a reader failed with %v, want nil or ErrClosed", round, err)
			}
		}
		if _, err := d.ReadAt(make([]byte, 1), 0); !errors.Is(err, ErrClosed) {
			t.Fatalf("ReadAt after Close: %v, want ErrClosed", err)
		}
		if _, err := r.Check(ctx, CheckOptions{}, nil); !errors.Is(err, ErrClosed) {
			t.Fatalf("Check after Close: %v, want ErrClosed", err)
		}
	}
}
