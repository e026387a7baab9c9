package dedup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"slices"
	"testing"
	"time"
)

func TestSplitMatchesRestic(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	random := make([]byte, 3<<20)
	rng.Read(random)
	mixed := image(rng, 3<<20)
	ff := make([]byte, 600<<10)
	for i := range ff {
		ff[i] = 0xff
	}
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"one byte", []byte{7}},
		{"below window", random[:63]},
		{"below min", random[:4<<10-1]},
		{"exactly min", random[:4<<10]},
		{"min plus one", random[:4<<10+1]},
		{"random", random},
		{"zeros", make([]byte, 1<<20+123)},
		{"repeated 0xff", ff},
		{"mixed", mixed},
	}
	for _, alg := range []string{AlgorithmCDC, AlgorithmFixed} {
		for _, bs := range []int{0, 4 << 10, 100003} {
			c := newChunker(t, smallParams(alg), bs)
			for _, tt := range tests {
				t.Run(alg+"/"+tt.name, func(t *testing.T) {
					r := &recorder{data: tt.data}
					g := split(t, c, r, int64(len(tt.data)), nil, tt.data)
					diffSpans(t, "split", g.spans, oracle(t, c.p, tt.data))
					if r.total() != int64(len(tt.data)) {
						t.Fatalf("read %d bytes of a %d-byte disk", r.total(), len(tt.data))
					}
				})
			}
		}
	}
}

// TestSplitSparse: Split with an allocation map equals Split of every byte, and reads nothing
// outside the allocated extents.
func TestSplitSparse(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	for _, alg := range []string{AlgorithmCDC, AlgorithmFixed} {
		for iter := range scale(12) + 1 {
			c := newChunker(t, smallParams(alg), []int{0, 8 << 10, 65536 + 17}[iter%3])
			size := 1 + rng.Intn(scale(6<<20))
			data := image(rng, size)
			alloc := dataExtents(rng, data)
			want := oracle(t, c.p, data)
			full := &recorder{data: data}
			diffSpans(t, "split without map", split(t, c, full, int64(size), nil, data).spans, want)
			sparse := &recorder{data: data}
			diffSpans(t, "split with map", split(t, c, sparse, int64(size), alloc, data).spans, want)
			if !within(sparse.reads, alloc) {
				t.Fatalf("seed %d: sparse split read outside the allocated extents", seed)
			}
			if got, want := sparse.total(), sumExtents(alloc); got != want {
				t.Fatalf("seed %d: sparse split read %d bytes, %d allocated", seed, got, want)
			}
		}
	}
}

// TestSplitHugeSparse: a 64 GiB disk with three small allocated extents is chunked without reading
// or walking the holes.
func TestSplitHugeSparse(t *testing.T) {
	const size = 64 << 30
	c := newChunker(t, Params{Algorithm: AlgorithmCDC, Polynomial: testPol, MinSize: DefaultMinSize, AvgSize: DefaultAvgSize, MaxSize: DefaultMaxSize}, 0)
	rng := rand.New(rand.NewSource(3))
	alloc := []Extent{{0, 1 << 20}, {5<<30 + 12345, 3 << 20}, {size - 1000, 1000}}
	src := &sparseSource{rng: rng, alloc: alloc}
	var chunks, zero int
	start := time.Now()
	err := c.Split(context.Background(), src, size, alloc, func(ch Chunk) error {
		chunks++
		if ch.Zero {
			zero++
		}
		ReleaseBuffer(ch.Data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if chunks < size/DefaultMinSize-100 || zero < chunks-20 {
		t.Fatalf("%d chunks, %d zero", chunks, zero)
	}
	t.Logf("64 GiB sparse disk: %d chunks in %v", chunks, time.Since(start))
}

// sparseSource returns random bytes inside its extents and fails elsewhere.
type sparseSource struct {
	rng   *rand.Rand
	alloc []Extent
}

func (s *sparseSource) ReadAt(p []byte, off int64) (int, error) {
	if !within([]Extent{{off, int64(len(p))}}, s.alloc) {
		return 0, errors.New("read outside allocated extents")
	}
	s.rng.Read(p)
	return len(p), nil
}

func TestSplitErrors(t *testing.T) {
	c := newChunker(t, smallParams(AlgorithmCDC), 0)
	data := make([]byte, 1<<20)
	rand.New(rand.NewSource(2)).Read(data)
	ctx := context.Background()
	nop := func(ch Chunk) error { ReleaseBuffer(ch.Data); return nil }
	boom := errors.New("boom")
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	tests := []struct {
		name  string
		ctx   context.Context
		src   io.ReaderAt
		size  int64
		alloc []Extent
		emit  func(Chunk) error
		want  error
	}{
		{"negative size", ctx, &recorder{data: data}, -1, nil, nop, ErrBadExtent},
		{"extent beyond disk", ctx, &recorder{data: data}, 1 << 20, []Extent{{1<<20 - 10, 11}}, nop, ErrBadExtent},
		{"negative extent", ctx, &recorder{data: data}, 1 << 20, []Extent{{-1, 10}}, nop, ErrBadExtent},
		{"short source", ctx, &recorder{data: data[:1000]}, 1 << 20, nil, nop, io.ErrUnexpectedEOF},
		{"emit fails", ctx, &recorder{data: data}, 1 << 20, nil, func(ch Chunk) error { ReleaseBuffer(ch.Data); return boom }, boom},
		{"canceled", canceled, &recorder{data: data}, 1 << 20, nil, nop, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := c.Split(tt.ctx, tt.src, tt.size, tt.alloc, tt.emit)
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
}

func TestParamsValidate(t *testing.T) {
	def, err := DefaultParams()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(def); err != nil {
		t.Fatalf("defaults rejected: %v", err)
	}
	mod := func(f func(*Params)) Params { p := smallParams(AlgorithmCDC); f(&p); return p }
	tests := []struct {
		name string
		p    Params
		ok   bool
	}{
		{"small cdc", smallParams(AlgorithmCDC), true},
		{"empty algorithm is cdc", mod(func(p *Params) { p.Algorithm = "" }), true},
		{"fixed", Params{Algorithm: AlgorithmFixed, AvgSize: 1 << 20}, true},
		{"fixed too small", Params{Algorithm: AlgorithmFixed, AvgSize: 10}, false},
		{"fixed too large", Params{Algorithm: AlgorithmFixed, AvgSize: 1 << 30}, false},
		{"unknown algorithm", mod(func(p *Params) { p.Algorithm = "rabin" }), false},
		{"zero polynomial", mod(func(p *Params) { p.Polynomial = 0 }), false},
		{"reducible polynomial", mod(func(p *Params) { p.Polynomial = 1<<53 | 1<<1 }), false},
		{"polynomial too large", mod(func(p *Params) { p.Polynomial = 1 << 60 }), false},
		{"min below window", mod(func(p *Params) { p.MinSize = 63 }), false},
		{"avg not power of two", mod(func(p *Params) { p.AvgSize = 3 << 12 }), false},
		{"min above avg", mod(func(p *Params) { p.MinSize = 32 << 10 }), false},
		{"max below avg", mod(func(p *Params) { p.MaxSize = 8 << 10 }), false},
		{"max too large", mod(func(p *Params) { p.MaxSize = 1 << 30 }), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.p.Validate()
			if (err == nil) != tt.ok {
				t.Fatalf("Validate(%+v) = %v, want ok=%v", tt.p, err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidParams) {
				t.Fatalf("error %v is not ErrInvalidParams", err)
			}
			c, err := New(tt.p)
			if (err == nil) != tt.ok {
				t.Fatalf("New: %v", err)
			}
			if err == nil && c.Params().Algorithm == "" {
				t.Fatal("Params() has no algorithm name")
			}
		})
	}
}

func TestBufferClasses(t *testing.T) {
	for _, n := range []int{1, 4095, 4096, 4097, 5120, 5121, 1 << 20, 1<<20 + 1, 3 << 20, 8 << 20, 64 << 20} {
		_, _, size := classOf(n)
		if size < n || size > n+n/4+4096 {
			t.Fatalf("class of %d has size %d", n, size)
		}
		b := getBuffer(n)
		if len(b) != n || cap(b) != size {
			t.Fatalf("getBuffer(%d): len %d cap %d, class %d", n, len(b), cap(b), size)
		}
		ReleaseBuffer(b)
	}
	ReleaseBuffer(nil)
	ReleaseBuffer(make([]byte, 5000)) // foreign capacity: ignored
	if b := getBuffer(5000); cap(b) != 5120 {
		t.Fatalf("pool returned a foreign buffer of cap %d", cap(b))
	}
}

func TestIsZero(t *testing.T) {
	b := make([]byte, 200<<10)
	if !isZero(b) || !isZero(nil) {
		t.Fatal("zeros not recognised")
	}
	for _, i := range []int{0, 7, 8, 65535, 65536, len(b) - 1} {
		b[i] = 1
		if isZero(b) {
			t.Fatalf("byte %d set, still zero", i)
		}
		b[i] = 0
	}
}

// TestSplitDefaultsRandomPolynomial: default sizes and a fresh polynomial on a large mixed image
// (the four-lane scan runs here) cut exactly where restic/chunker cuts.
func TestSplitDefaultsRandomPolynomial(t *testing.T) {
	p, err := DefaultParams()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("polynomial %#x", p.Polynomial)
	c := newChunker(t, p, 0)
	rng := rand.New(rand.NewSource(13))
	data := make([]byte, scale(48<<20))
	rng.Read(data)
	copy(data[3<<20:], image(rng, 6<<20))
	want := oracle(t, p, data)
	g := split(t, c, &recorder{data: data}, int64(len(data)), nil, data)
	diffSpans(t, "split", g.spans, want)
	if len(want) < 5 {
		t.Fatalf("only %d chunks", len(want))
	}
}

// TestConcurrentCalls: one Chunker serves several Split and Rechunk calls at once (run with -race).
func TestConcurrentCalls(t *testing.T) {
	c := newChunker(t, smallParams(AlgorithmCDC), 32<<10)
	rng := rand.New(rand.NewSource(17))
	old := image(rng, scale(3<<20))
	want := oracle(t, c.p, old)
	parent := parentList(want, func() bool { return true })
	cur := append([]byte(nil), old...)
	rng.Read(cur[1000:5000])
	wantCur := oracle(t, c.p, cur)
	errs := make(chan error, 4)
	for i := range 4 {
		go func() {
			defer func() {
				if r := recover(); r != nil {
					errs <- fmt.Errorf("panic: %v", r)
				}
			}()
			var g []span
			emit := func(ch Chunk) error {
				g = append(g, span{ch.Offset, int64(ch.Length), ch.Zero})
				ReleaseBuffer(ch.Data)
				return nil
			}
			var err error
			w := want
			if i%2 == 0 {
				err = c.Split(context.Background(), &recorder{data: old}, int64(len(old)), nil, emit)
			} else {
				w = wantCur
				err = c.Rechunk(context.Background(), &recorder{data: cur}, &recorder{data: old}, int64(len(cur)), parent, []Extent{{1000, 4000}}, emit)
			}
			if err == nil && !slices.Equal(g, w) {
				err = fmt.Errorf("call %d: chunks differ", i)
			}
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestCutKernel: the bare cut search finds the chunks Split cuts.
func TestCutKernel(t *testing.T) {
	for _, alg := range []string{AlgorithmCDC, AlgorithmFixed} {
		t.Run(alg, func(t *testing.T) {
			p, err := DefaultParams()
			if err != nil {
				t.Fatal(err)
			}
			p.Algorithm, p.MinSize, p.AvgSize, p.MaxSize = alg, 64<<10, 128<<10, 512<<10
			c, err := New(p)
			if err != nil {
				t.Fatal(err)
			}
			data := make([]byte, 5<<20+12345)
			rand.New(rand.NewSource(7)).Read(data)
			var want int
			if err := c.Split(context.Background(), bytes.NewReader(data), int64(len(data)), nil, func(ch Chunk) error {
				want++
				ReleaseBuffer(ch.Data)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			got, err := CutKernel(c, data)
			if err != nil {
				t.Fatal(err)
			}
			if got != want || want < 5 {
				t.Fatalf("CutKernel: %d chunks, Split: %d", got, want)
			}
		})
	}
}
