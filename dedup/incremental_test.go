package dedup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"math/rand"
	"testing"
)

// blobStore is the test's model of a repository: blob number -> bytes.
type blobStore struct{ blobs [][]byte }

func (s *blobStore) put(b []byte) int {
	s.blobs = append(s.blobs, append([]byte(nil), b...))
	return len(s.blobs) - 1
}

// fullMap splits data with c and stores every chunk as a whole blob.
func fullMap(t testing.TB, c *impl, s *blobStore, data []byte) []MapExtent {
	t.Helper()
	var m []MapExtent
	err := c.Split(context.Background(), bytes.NewReader(data), int64(len(data)), nil, func(ch Chunk) error {
		defer ReleaseBuffer(ch.Data)
		e := MapExtent{Offset: ch.Offset, Length: int64(ch.Length), Zero: ch.Zero}
		if !ch.Zero {
			e.Blob, e.BlobLen = s.put(ch.Data), int64(ch.Length)
		}
		m = appendMap(m, e)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func appendMap(m []MapExtent, e MapExtent) []MapExtent {
	if n := len(m); n > 0 && e.Zero && m[n-1].Zero {
		m[n-1].Length += e.Length
		return m
	}
	return append(m, e)
}

// render rebuilds a disk from a map.
func render(s *blobStore, m []MapExtent, size int64) []byte {
	out := make([]byte, size)
	for _, e := range m {
		if !e.Zero {
			copy(out[e.Offset:e.Offset+e.Length], s.blobs[e.Blob][e.Skip:e.Skip+e.Length])
		}
	}
	return out
}

// runIncremental applies Incremental and returns the new map, checking coverage and that the
// source was read only inside the changed extents, each byte once.
func runIncremental(t testing.TB, c *impl, s *blobStore, parentData []byte, parent []MapExtent, cur []byte, changed []Extent, o IncrementalOptions) ([]MapExtent, IncrementalStats) {
	t.Helper()
	src := &recorder{data: cur}
	par := &recorder{data: parentData}
	var m []MapExtent
	var next int64
	grp, grpLen, grpUsed, grpWin := -1, int64(0), int64(0), int64(-1)
	w := o.withDefaults(c).Window
	endGroup := func() {
		if grp >= 0 && grpUsed != grpLen {
			t.Fatalf("group blob %d of %d bytes: its pieces use %d", grp, grpLen, grpUsed)
		}
	}
	st, err := Incremental(context.Background(), c, src, par, int64(len(cur)), parent, changed, o, func(ch Chunk) error {
		defer ReleaseBuffer(ch.Data)
		if ch.Group {
			if ch.Offset != next || ch.Length != 0 || len(ch.Data) == 0 || ch.InGroup || ch.Zero || ch.Parent != -1 {
				t.Fatalf("group chunk %+v (%d bytes) at expected offset %d", ch, len(ch.Data), next)
			}
			endGroup()
			grp, grpLen, grpUsed = s.put(ch.Data), int64(len(ch.Data)), 0
			return nil
		}
		if ch.Offset != next || ch.Length <= 0 {
			t.Fatalf("chunk at %d+%d, expected offset %d", ch.Offset, ch.Length, next)
		}
		next += int64(ch.Length)
		e := MapExtent{Offset: ch.Offset, Length: int64(ch.Length), Zero: ch.Zero}
		switch {
		case ch.InGroup:
			// Pieces use their group's bytes back to back, in disk order, within one window.
			if grp < 0 || ch.Data != nil || ch.Zero || ch.Parent != -1 || ch.Skip != grpUsed || ch.Skip+int64(ch.Length) > grpLen {
				t.Fatalf("grouped chunk at %d+%d skip %d: group %d has %d bytes, %d used", ch.Offset, ch.Length, ch.Skip, grp, grpLen, grpUsed)
			}
			if grpUsed == 0 {
				grpWin = ch.Offset / w
			}
			if ch.Offset/w != grpWin || (ch.Offset+int64(ch.Length)-1)/w != grpWin {
				t.Fatalf("grouped chunk at %d+%d outside its group's window %d", ch.Offset, ch.Length, grpWin)
			}
			grpUsed += int64(ch.Length)
			e.Blob, e.BlobLen, e.Skip = grp, grpLen, ch.Skip
		case ch.Zero:
		case ch.Parent >= 0:
			p := parent[ch.Parent]
			if p.Zero || ch.Offset < p.Offset || ch.Offset+int64(ch.Length) > p.Offset+p.Length {
				t.Fatalf("chunk at %d+%d references parent extent %+v", ch.Offset, ch.Length, p)
			}
			e.Blob, e.BlobLen, e.Skip = p.Blob, p.BlobLen, p.Skip+ch.Offset-p.Offset
			if n := len(m); n > 0 && !m[n-1].Zero && m[n-1].Blob == e.Blob && m[n-1].Skip+m[n-1].Length == e.Skip {
				m[n-1].Length += e.Length
				return nil
			}
		default:
			if len(ch.Data) != ch.Length {
				t.Fatalf("chunk at %d: %d bytes of data, length %d", ch.Offset, len(ch.Data), ch.Length)
			}
			e.Blob, e.BlobLen = s.put(ch.Data), int64(ch.Length)
		}
		m = appendMap(m, e)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	endGroup()
	if next != int64(len(cur)) {
		t.Fatalf("chunks cover %d of %d bytes", next, len(cur))
	}
	norm, _ := normalizeExtents(changed, int64(len(cur)), "changed")
	if !within(src.reads, norm) || !disjoint(src.reads) || src.total() != sumExtents(norm) || st.SourceBytes != src.total() {
		t.Fatalf("source reads %v (%d bytes, stats %d) are not the changed extents %v (%d bytes) read once",
			src.reads, src.total(), st.SourceBytes, norm, sumExtents(norm))
	}
	if st.ParentBytes != par.total() || (st.CompactWindows == 0 && par.total() != 0) {
		t.Fatalf("parent read %d bytes (stats %d) with %d compacted windows", par.total(), st.ParentBytes, st.CompactWindows)
	}
	return m, st
}

// coalesced reports whether one blob of m holds, back to back, the bytes of two extents that are
// not adjacent on the disk: the coalesced pieces of a window, with parent bytes between them (a
// parent blob sliced around a change skips the changed bytes in the blob too).
func coalesced(m []MapExtent) bool {
	type end struct{ disk, blob int64 }
	last := map[int]end{}
	for _, e := range m {
		if e.Zero {
			continue
		}
		if l, ok := last[e.Blob]; ok && l.disk < e.Offset && l.blob == e.Skip {
			return true
		}
		last[e.Blob] = end{e.Offset + e.Length, e.Skip + e.Length}
	}
	return false
}

// windowCounts returns the largest number of extents touching one window.
func maxPerWindow(m []MapExtent, w int64) int {
	count := map[int64]int{}
	for _, e := range m {
		for win := e.Offset / w; win <= (e.Offset+e.Length-1)/w; win++ {
			count[win]++
		}
	}
	mx := 0
	for _, n := range count {
		mx = max(mx, n)
	}
	return mx
}

// scatter makes n changes of up to maxLen bytes (aligned to align) at random places, with
// random data or zeros, some at the very end of the disk.
func scatter(rng *rand.Rand, data []byte, n, maxLen, align int) []Extent {
	var ch []Extent
	for i := range n {
		l := align * (1 + rng.Intn(max(1, maxLen/align)))
		l = min(l, len(data))
		off := rng.Intn(len(data)-l+1) / align * align
		if i == 0 && rng.Intn(3) == 0 {
			off = len(data) - l // the disk's end
		}
		if rng.Intn(6) == 0 {
			clear(data[off : off+l])
		} else {
			rng.Read(data[off : off+l])
		}
		ch = append(ch, Extent{int64(off), int64(l)})
	}
	return ch
}

// TestIncrementalChain runs long chains of slice incrementals over random images and change sets
// (4 KiB scatter, large runs, zero writes, writes at the end): every version renders byte-identical,
// the source is read only where it changed, and no window ever holds more than MaxExtents extents.
func TestIncrementalChain(t *testing.T) {
	for _, alg := range []string{AlgorithmCDC, AlgorithmFixed} {
		for seed := int64(1); seed <= int64(scale(3)); seed++ {
			rng := rand.New(rand.NewSource(seed))
			c := newChunker(t, smallParams(alg), 64<<10)
			o := IncrementalOptions{MaxExtents: 4 + rng.Intn(12)}
			size := 512<<10 + rng.Intn(1<<20)
			data := image(rng, size)
			s := &blobStore{}
			m := fullMap(t, c, s, data)
			compacted, groups, sliced := 0, 0, false
			for step := range 14 {
				cur := append([]byte(nil), data...)
				var changed []Extent
				switch step % 4 {
				case 0:
					changed = scatter(rng, cur, 1+rng.Intn(60), 4096, 4096)
				case 1:
					changed = scatter(rng, cur, 1+rng.Intn(8), 128<<10, 512)
				case 2:
					changed = scatter(rng, cur, 1+rng.Intn(20), 20000, 1)
				case 3: // nothing changed
				}
				var st IncrementalStats
				m, st = runIncremental(t, c, s, data, m, cur, changed, o)
				compacted += st.CompactWindows
				groups += st.Groups
				sliced = sliced || coalesced(m)
				if got := render(s, m, int64(size)); !bytes.Equal(got, cur) {
					t.Fatalf("%s seed %d step %d: rendered disk differs", alg, seed, step)
				}
				w := int64(c.p.AvgSize)
				if n := maxPerWindow(m, w); n > o.MaxExtents {
					t.Fatalf("%s seed %d step %d: a window holds %d extents, limit %d", alg, seed, step, n, o.MaxExtents)
				}
				data = cur
			}
			if compacted == 0 {
				t.Errorf("%s seed %d: 14 incrementals never compacted a window", alg, seed)
			}
			if groups == 0 || !sliced {
				t.Errorf("%s seed %d: 14 incrementals made %d group blobs; a map holding two distant slices of one blob: %v", alg, seed, groups, sliced)
			}
		}
	}
}

// TestIncrementalMinUse: a blob of which the new map keeps little is compacted away.
func TestIncrementalMinUse(t *testing.T) {
	c := newChunker(t, Params{Algorithm: AlgorithmFixed, AvgSize: 64 << 10}, 0)
	rng := rand.New(rand.NewSource(5))
	data := make([]byte, 1<<20)
	rng.Read(data)
	s := &blobStore{}
	m := fullMap(t, c, s, data)
	cur := append([]byte(nil), data...)
	// Rewrite 60 KiB of the 64 KiB chunk at 128 KiB: the old blob keeps 4 KiB (6%).
	rng.Read(cur[128<<10 : 188<<10])
	m2, st := runIncremental(t, c, s, data, m, cur, []Extent{{128 << 10, 60 << 10}}, IncrementalOptions{MaxExtents: 100})
	if st.CompactWindows != 1 || st.ParentBytes != 4<<10 {
		t.Fatalf("compacted %d windows, read %d parent bytes; want 1 window and the 4 KiB kept", st.CompactWindows, st.ParentBytes)
	}
	for _, e := range m2 {
		if !e.Zero && e.Blob == m[2].Blob {
			t.Fatalf("the weakly used blob is still referenced: %+v", e)
		}
	}
	// At 50% use the blob is kept as a slice and nothing is read from the parent.
	cur2 := append([]byte(nil), data...)
	rng.Read(cur2[128<<10 : 160<<10])
	_, st = runIncremental(t, c, s, data, m, cur2, []Extent{{128 << 10, 32 << 10}}, IncrementalOptions{MaxExtents: 100})
	if st.CompactWindows != 0 || st.ParentBytes != 0 || st.SlicedExtents == 0 {
		t.Fatalf("50%% use: %+v", st)
	}
}

func TestChooseIncremental(t *testing.T) {
	c := newChunker(t, smallParams(AlgorithmCDC), 0)
	rng := rand.New(rand.NewSource(9))
	data := image(rng, 4<<20)
	s := &blobStore{}
	m := fullMap(t, c, s, data)
	// The whole disk rewritten: Rechunk costs the same and keeps a CDC map.
	est, err := ChooseIncremental(c, int64(len(data)), m, []Extent{{0, int64(len(data))}}, IncrementalOptions{})
	if err != nil || est.Method != MethodRechunk || est.RechunkBytes != int64(len(data)) {
		t.Fatalf("whole disk: %+v %v", est, err)
	}
	// One clustered change of 1 MiB: Rechunk re-processes the chunks around it too; with a
	// factor of 1.25 that is accepted.
	est, err = ChooseIncremental(c, int64(len(data)), m, []Extent{{1 << 20, 1 << 20}}, IncrementalOptions{RechunkFactor: 1.25})
	if err != nil || est.Method != MethodRechunk || est.RechunkBytes <= 1<<20 {
		t.Fatalf("clustered change: %+v %v", est, err)
	}
	if est, _ := ChooseIncremental(c, int64(len(data)), m, []Extent{{1 << 20, 1 << 20}}, IncrementalOptions{}); est.Method != MethodSlices {
		t.Fatalf("clustered change, default factor: %+v", est)
	}
	// 4 KiB writes every 64 KiB: Rechunk would re-store every touched 16 KiB chunk.
	var sc []Extent
	for off := int64(0); off < int64(len(data)); off += 64 << 10 {
		sc = append(sc, Extent{off + 8192, 4096})
	}
	est, err = ChooseIncremental(c, int64(len(data)), m, sc, IncrementalOptions{})
	if err != nil || est.Method != MethodSlices || est.RechunkBytes <= est.SliceBytes {
		t.Fatalf("scattered change: %+v %v", est, err)
	}
	// A map with slices cannot be Rechunk's parent.
	cur := append([]byte(nil), data...)
	m2, _ := runIncremental(t, c, s, data, m, cur, sc, IncrementalOptions{})
	est, err = ChooseIncremental(c, int64(len(data)), m2, []Extent{{1 << 20, 1 << 20}}, IncrementalOptions{})
	if err != nil || est.Method != MethodSlices || est.RechunkBytes != -1 {
		t.Fatalf("slice parent: %+v %v", est, err)
	}
}

func TestIncrementalErrors(t *testing.T) {
	c := newChunker(t, smallParams(AlgorithmCDC), 0)
	m := []MapExtent{{Offset: 0, Length: 100, Blob: 0, BlobLen: 100}}
	noop := func(Chunk) error { return nil }
	ctx := context.Background()
	src := bytes.NewReader(make([]byte, 100))
	for _, tc := range []struct {
		name string
		size int64
		m    []MapExtent
		ch   []Extent
		want error
	}{
		{"size changed", 200, m, nil, ErrSizeChanged},
		{"gap", 100, []MapExtent{{Offset: 10, Length: 90, BlobLen: 90}}, nil, ErrParentMismatch},
		{"slice past its blob", 100, []MapExtent{{Offset: 0, Length: 100, Skip: 1, BlobLen: 100}}, nil, ErrParentMismatch},
		{"change outside", 100, m, []Extent{{90, 20}}, ErrBadExtent},
	} {
		if _, err := Incremental(ctx, c, src, src, tc.size, tc.m, tc.ch, IncrementalOptions{}, noop); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	boom := errors.New("boom")
	if _, err := Incremental(ctx, c, src, src, 100, m, []Extent{{0, 10}}, IncrementalOptions{}, func(Chunk) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("emit error: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Incremental(cctx, c, src, src, 100, m, []Extent{{0, 10}}, IncrementalOptions{}, noop); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

// TestIncrementalRunsFollowContent: the same new bytes written at different
// 4 KiB-aligned offsets of two disks (or behind a different first block) make
// the same blobs, because a long changed run is cut from its own content; a
// short run stays window pieces. With RunCDC disabled (window pieces, the
// code before issue 15) almost nothing is shared.
func TestIncrementalRunsFollowContent(t *testing.T) {
	for _, alg := range []string{AlgorithmCDC, AlgorithmFixed} {
		t.Run(alg, func(t *testing.T) {
			c := newChunker(t, smallParams(alg), 64<<10)
			rng := rand.New(rand.NewSource(11))
			size := 2 << 20
			base := make([]byte, size)
			rng.Read(base)
			s := &blobStore{}
			par := fullMap(t, c, s, base)
			upd := make([]byte, 300<<10)
			rng.Read(upd)
			shared := func(o IncrementalOptions, lead int) (int64, IncrementalStats) {
				// Disk 1 gets upd at 64 KiB + 4 KiB; disk 2 at 1 MiB + 12 KiB,
				// after lead blocks of other new bytes (in the same run).
				newBlobs := func(off int, prefix []byte) (map[[32]byte]int, IncrementalStats) {
					cur := append([]byte(nil), base...)
					copy(cur[off:], prefix)
					copy(cur[off+len(prefix):], upd)
					n := len(s.blobs)
					_, st := runIncremental(t, c, s, base, par, cur, []Extent{{int64(off), int64(len(prefix) + len(upd))}}, o)
					out := map[[32]byte]int{}
					for _, b := range s.blobs[n:] {
						out[sha256.Sum256(b)] = len(b)
					}
					return out, st
				}
				a, _ := newBlobs(64<<10+4096, nil)
				prefix := make([]byte, lead*4096)
				rng.Read(prefix)
				b, st := newBlobs(1<<20+12288, prefix)
				var common int64
				for h, n := range b {
					if _, ok := a[h]; ok {
						common += int64(n)
					}
				}
				return common, st
			}
			for _, lead := range []int{0, 1, 5} {
				common, st := shared(IncrementalOptions{}, lead)
				if st.Runs != 1 || st.RunBytes != int64(len(upd)+lead*4096) {
					t.Fatalf("lead %d: %d runs of %d bytes cut by CDC, want 1 of %d", lead, st.Runs, st.RunBytes, len(upd)+lead*4096)
				}
				// Fixed-size chunks only re-align when the lead is a multiple
				// of their size; CDC re-synchronises after a chunk or two.
				want := int64(len(upd)) * 8 / 10
				if alg == AlgorithmFixed && lead != 0 {
					want = 0
				}
				if common < want {
					t.Errorf("lead %d blocks: %d of %d new bytes shared between the two disks, want at least %d", lead, common, len(upd), want)
				}
			}
			if common, st := shared(IncrementalOptions{RunCDC: 1 << 40}, 0); st.Runs != 0 || common > int64(len(upd))/4 {
				t.Errorf("window pieces: %d runs, %d bytes shared (want almost none: pieces depend on offsets)", st.Runs, common)
			}
		})
	}
}
