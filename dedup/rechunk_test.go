package dedup

import (
	"context"
	"errors"
	"math/rand"
	"slices"
	"testing"
	"time"
)

// parentList turns a chunk list into a ParentChunk list, coalescing runs of zero chunks when asked.
func parentList(spans []span, coalesce func() bool) []ParentChunk {
	var out []ParentChunk
	for _, s := range spans {
		if n := len(out); n > 0 && s.Zero && out[n-1].Zero && coalesce() {
			out[n-1].Length += s.Len
			continue
		}
		out = append(out, ParentChunk{s.Off, s.Len, s.Zero})
	}
	return out
}

// write is one guest write as CBT would report it.
type write struct {
	Extent
	fill byte // 0: random bytes; 1: zeros; 2: the old bytes (CBT reports it, content unchanged)
}

func randomWrites(rng *rand.Rand, old []byte, parent []ParentChunk) []write {
	size := int64(len(old))
	n := 1 + rng.Intn(6)
	var ws []write
	for range n {
		var w write
		l := 1 + rng.Int63n(64<<10)
		switch rng.Intn(9) {
		case 0: // at the start
			w.Extent = Extent{0, l}
		case 1: // at the end
			w.Extent = Extent{size - l, l}
		case 2: // one byte
			w.Extent = Extent{rng.Int63n(size), 1}
		case 3: // many megabytes
			l = 1 + rng.Int63n(3<<20)
			w.Extent = Extent{rng.Int63n(size), l}
		case 4, 5: // adjacent to or overlapping the previous write
			if len(ws) > 0 {
				p := ws[len(ws)-1]
				if rng.Intn(2) == 0 {
					w.Extent = Extent{p.Offset + p.Length, l}
				} else {
					w.Extent = Extent{p.Offset + rng.Int63n(p.Length), l}
				}
			} else {
				w.Extent = Extent{rng.Int63n(size), l}
			}
		case 6: // inside a zero run
			var zs []ParentChunk
			for _, p := range parent {
				if p.Zero {
					zs = append(zs, p)
				}
			}
			if len(zs) > 0 {
				z := zs[rng.Intn(len(zs))]
				o := z.Offset + rng.Int63n(z.Length)
				w.Extent = Extent{o, min(l, z.Offset+z.Length-o)}
			} else {
				w.Extent = Extent{rng.Int63n(size), l}
			}
		case 7: // zeros over data
			w.Extent = Extent{rng.Int63n(size), l}
			w.fill = 1
		default:
			w.Extent = Extent{rng.Int63n(size), l}
		}
		w.Offset = max(0, min(w.Offset, size-1))
		w.Length = max(1, min(w.Length, size-w.Offset))
		if w.fill == 0 && rng.Intn(8) == 0 {
			w.fill = 2
		}
		ws = append(ws, w)
	}
	return ws
}

func apply(rng *rand.Rand, old []byte, ws []write) []byte {
	b := slices.Clone(old)
	for _, w := range ws {
		dst := b[w.Offset : w.Offset+w.Length]
		switch w.fill {
		case 0:
			rng.Read(dst)
		case 1:
			clear(dst)
		case 2:
			copy(dst, old[w.Offset:])
		}
	}
	return b
}

// checkRechunk runs Rechunk and checks it against the oracle and the read rules.
func checkRechunk(t *testing.T, c *impl, old, cur []byte, parent []ParentChunk, changed []Extent) (got, *recorder, *recorder) {
	t.Helper()
	src, par := &recorder{data: cur}, &recorder{data: old}
	var st Stats
	ctx := WithStats(context.Background(), &st)
	g := collect(t, cur, func(emit func(Chunk) error) error {
		return c.Rechunk(ctx, src, par, int64(len(cur)), parent, changed, emit)
	})
	diffSpans(t, "rechunk", g.spans, oracle(t, c.p, cur))
	norm, err := normalizeExtents(changed, int64(len(cur)), "changed")
	if err != nil {
		t.Fatal(err)
	}
	// The source: exactly the changed bytes, each once.
	if !within(src.reads, norm) {
		t.Fatalf("source read outside the changed extents: %v, changed %v", src.reads, norm)
	}
	if got, want := src.total(), sumExtents(norm); got != want {
		t.Fatalf("read %d bytes from the source, %d changed", got, want)
	}
	if !disjoint(src.reads) || !disjoint(par.reads) {
		t.Fatal("a byte was read twice")
	}
	if st.SourceBytesRead != src.total() || st.ParentBytesRead != par.total() {
		t.Fatalf("stats %+v, recorded %d/%d", st, src.total(), par.total())
	}
	// The parent: never a changed byte, only inside chunks that had to be re-chunked.
	var redone []Extent
	for i, s := range g.spans {
		if g.parent[i] < 0 {
			redone = append(redone, Extent{s.Off, s.Len})
		} else {
			p := parent[g.parent[i]]
			if p.Offset != s.Off || p.Length != s.Len || p.Zero != s.Zero {
				t.Fatalf("chunk %+v claims parent %d %+v", s, g.parent[i], p)
			}
			for _, x := range norm {
				if x.Offset < s.Off+s.Len && s.Off < x.Offset+x.Length {
					t.Fatalf("reused chunk %+v overlaps change %+v", s, x)
				}
			}
		}
	}
	for _, r := range par.reads {
		for _, x := range norm {
			if r.Offset < x.Offset+x.Length && x.Offset < r.Offset+r.Length {
				t.Fatalf("parent read %+v overlaps change %+v", r, x)
			}
		}
	}
	if !withinUnion(par.reads, redone) {
		t.Fatalf("parent read outside re-chunked chunks")
	}
	return g, src, par
}

// withinUnion reports whether every read lies inside the union of the (sorted, touching) extents.
func withinUnion(reads, exts []Extent) bool {
	m, _ := normalizeExtents(exts, 1<<62, "")
	return within(reads, m)
}

func disjoint(reads []Extent) bool {
	r := slices.Clone(reads)
	slices.SortFunc(r, func(a, b Extent) int { return int(a.Offset - b.Offset) })
	for i := 1; i < len(r); i++ {
		if r[i].Offset < r[i-1].Offset+r[i-1].Length {
			return false
		}
	}
	return true
}

// TestRechunkProperty: random images and random writes; Rechunk equals a full re-chunking of the new
// image, reads from the source exactly the changed bytes, and from the parent only around changes.
func TestRechunkProperty(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	for _, alg := range []string{AlgorithmCDC, AlgorithmFixed} {
		var changedBytes, parentBytes, diskBytes int64
		for iter := range scale(40) {
			c := newChunker(t, smallParams(alg), []int{0, 16 << 10, 70001}[iter%3])
			size := 1 + rng.Intn(scale(8<<20))
			if iter%10 == 0 {
				size = 1 + rng.Intn(100<<10)
			}
			old := image(rng, size)
			parent := parentList(oracle(t, c.p, old), func() bool { return rng.Intn(2) == 0 })
			ws := randomWrites(rng, old, parent)
			cur := apply(rng, old, ws)
			changed := make([]Extent, len(ws))
			for i, w := range ws {
				changed[i] = w.Extent
			}
			rng.Shuffle(len(changed), func(i, j int) { changed[i], changed[j] = changed[j], changed[i] })
			_, src, par := checkRechunk(t, c, old, cur, parent, changed)
			changedBytes += src.total()
			parentBytes += par.total()
			diskBytes += int64(size)
		}
		t.Logf("%s: disks %d bytes, changed %d, parent bytes read %d", alg, diskBytes, changedBytes, parentBytes)
	}
}

// TestRechunkUnchanged: no change reads nothing and reuses every parent chunk.
func TestRechunkUnchanged(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	for _, alg := range []string{AlgorithmCDC, AlgorithmFixed} {
		c := newChunker(t, smallParams(alg), 0)
		old := image(rng, 3<<20)
		parent := parentList(oracle(t, c.p, old), func() bool { return true })
		g, src, par := checkRechunk(t, c, old, old, parent, nil)
		if src.total() != 0 || par.total() != 0 {
			t.Fatalf("%s: read %d source and %d parent bytes without a change", alg, src.total(), par.total())
		}
		for i, s := range g.spans {
			if g.parent[i] < 0 && !s.Zero {
				t.Fatalf("%s: data chunk %+v not reused", alg, s)
			}
		}
	}
}

// TestRechunkDefaults: the default sizes on a 64 MiB image; parent reads stay near the changes.
func TestRechunkDefaults(t *testing.T) {
	rng := rand.New(rand.NewSource(6))
	p := Params{Algorithm: AlgorithmCDC, Polynomial: testPol, MinSize: DefaultMinSize, AvgSize: DefaultAvgSize, MaxSize: DefaultMaxSize}
	c := newChunker(t, p, 0)
	old := make([]byte, 64<<20)
	rng.Read(old[:40<<20]) // data, then a 24 MiB zero tail
	parent := parentList(oracle(t, c.p, old), func() bool { return true })
	ws := []write{
		{Extent: Extent{0, 4096}},
		{Extent: Extent{10 << 20, 1}},
		{Extent: Extent{20<<20 + 5, 3 << 20}},
		{Extent: Extent{50 << 20, 1 << 20}}, // inside the zero tail
		{Extent: Extent{64<<20 - 100, 100}},
	}
	cur := apply(rng, old, ws)
	changed := make([]Extent, len(ws))
	for i, w := range ws {
		changed[i] = w.Extent
	}
	_, src, par := checkRechunk(t, c, old, cur, parent, changed)
	// Each change re-reads at most a few parent chunks around it.
	if limit := int64(len(ws)) * 3 * DefaultMaxSize; par.total() > limit {
		t.Fatalf("read %d parent bytes for %d changed bytes", par.total(), src.total())
	}
	t.Logf("changed %d bytes, parent bytes read %d", src.total(), par.total())
}

func TestRechunkErrors(t *testing.T) {
	c := newChunker(t, smallParams(AlgorithmCDC), 0)
	old := image(rand.New(rand.NewSource(7)), 1<<20)
	spans := oracle(t, c.p, old)
	good := parentList(spans, func() bool { return false })
	size := int64(len(old))
	var gap, short, tooSmall []ParentChunk
	gap = append(gap, good...)
	gap[1].Offset++
	short = good[:len(good)-1]
	tooSmall = append(tooSmall, good...)
	tooSmall[0].Length, tooSmall[1].Offset, tooSmall[1].Length = 100, 100, tooSmall[1].Length+tooSmall[0].Length-100
	nop := func(ch Chunk) error { ReleaseBuffer(ch.Data); return nil }
	tests := []struct {
		name    string
		size    int64
		parent  []ParentChunk
		changed []Extent
		want    error
	}{
		{"size changed", size + 1, good, nil, ErrSizeChanged},
		{"parent shorter", size, short, nil, ErrSizeChanged},
		{"gap", size, gap, nil, ErrParentMismatch},
		{"chunk below min", size, tooSmall, nil, ErrParentMismatch},
		{"change beyond disk", size, good, []Extent{{size - 1, 2}}, ErrBadExtent},
		{"negative change", size, good, []Extent{{-5, 2}}, ErrBadExtent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := c.Rechunk(context.Background(), &recorder{data: old}, &recorder{data: old}, tt.size, tt.parent, tt.changed, nop)
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
	t.Run("fixed misaligned", func(t *testing.T) {
		f := newChunker(t, smallParams(AlgorithmFixed), 0)
		bad := []ParentChunk{{0, 1000, false}, {1000, size - 1000, false}}
		err := f.Rechunk(context.Background(), &recorder{data: old}, &recorder{data: old}, size, bad, nil, nop)
		if !errors.Is(err, ErrParentMismatch) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("parent read fails", func(t *testing.T) {
		err := c.Rechunk(context.Background(), &recorder{data: old}, &recorder{data: old[:1000]}, size, good, []Extent{{size / 2, 10}}, nop)
		if err == nil {
			t.Fatal("no error from a short parent")
		}
	})
}
