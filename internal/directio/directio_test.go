package directio

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

type extent struct {
	off int64
	n   int
}

// writeAll writes the extents of want (in order) through a Writer on a
// fresh file of want's size and returns the file's bytes and the counts.
func writeAll(t testing.TB, want []byte, ext []extent, hook func(w *Writer)) ([]byte, int64, int64) {
	t.Helper()
	w, path := openWriter(t, int64(len(want)))
	if hook != nil {
		hook(w)
	}
	for _, e := range ext {
		if _, err := w.WriteAt(want[e.off:e.off+int64(e.n)], e.off); err != nil {
			t.Fatalf("WriteAt(%d, %d): %v", e.off, e.n, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	direct, buffered := w.Counts()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return got, direct, buffered
}

// openWriter creates a file of size bytes in a test directory and opens a
// Writer on it; both are closed when the test ends.
func openWriter(t testing.TB, size int64) (*Writer, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "out")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	w, err := Open(f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w, path
}

// image returns size bytes with data in ext and zeros elsewhere.
func image(size int64, ext []extent) []byte {
	b := make([]byte, size)
	r := rand.New(rand.NewPCG(1, 2))
	for _, e := range ext {
		for i := e.off; i < e.off+int64(e.n); i++ {
			b[i] = byte(r.Uint32() | 1)
		}
	}
	return b
}

func TestWriterPatterns(t *testing.T) {
	const M = 1 << 20
	for _, tc := range []struct {
		name string
		size int64
		ext  []extent
		// minDirect: at least this many bytes must have gone direct.
		minDirect int64
	}{
		{"aligned whole buffers", 16 * M, []extent{{0, 8 * M}, {8 * M, 8 * M}}, 16 * M},
		{"one large write", 20 * M, []extent{{0, 20*M - 4096}}, 20*M - 4096},
		{"unaligned start and end", 12 * M, []extent{{1234, 10*M + 777}}, 10*M - 4096},
		{"contiguous small writes", 4 * M, func() []extent {
			var e []extent
			for off := int64(100); off+3000 < 4*M; off += 3000 {
				e = append(e, extent{off, 3000})
			}
			return e
		}(), 4*M - 3*4096},
		{"gap inside one block", 1 * M, []extent{{0, 5000}, {6000, 100000}}, 90000},
		{"tail and head share a block", 1 * M, []extent{{4096, 4096 + 10}, {4096*2 + 20, 70000}}, 60000},
		{"tiny writes only", 64 << 10, []extent{{1, 1}, {10, 5}, {4095, 2}, {8191, 1}}, 0},
		{"holes between regions", 64 * M, []extent{{0, M}, {10 * M, 3*M + 1}, {40*M + 512, 2 * M}, {64*M - 4096, 4096}}, 6 * M},
		{"last block partial", 3*M + 100, []extent{{0, 3*M + 100}}, 3 * M},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := image(tc.size, tc.ext)
			got, direct, buffered := writeAll(t, want, tc.ext, nil)
			if !bytes.Equal(got, want) {
				t.Fatal("file content differs")
			}
			var total int64
			for _, e := range tc.ext {
				total += int64(e.n)
			}
			if direct+buffered != total {
				t.Fatalf("direct %d + buffered %d != %d written", direct, buffered, total)
			}
			if direct < tc.minDirect {
				t.Fatalf("only %d bytes went direct, want at least %d", direct, tc.minDirect)
			}
		})
	}
}

// TestWriterRandom: random ascending extents, byte-identical output.
func TestWriterRandom(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 7))
		var ext []extent
		off := int64(r.IntN(5000))
		for range 40 {
			n := 1 + r.IntN(600<<10)
			if r.IntN(4) == 0 {
				n = 1 + r.IntN(9000)
			}
			ext = append(ext, extent{off, n})
			off += int64(n)
			if r.IntN(2) == 0 {
				off += int64(r.IntN(20000)) // a hole, often inside a block
			}
		}
		want := image(off+int64(r.IntN(5000)), ext)
		got, _, _ := writeAll(t, want, ext, nil)
		if !bytes.Equal(got, want) {
			t.Fatalf("seed %d: file content differs", seed)
		}
	}
}

func TestWriterRefusesDescendingWrite(t *testing.T) {
	w, _ := openWriter(t, 0)
	if _, err := w.WriteAt(make([]byte, 100), 1000); err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteAt(make([]byte, 10), 1050); err == nil {
		t.Fatal("an overlapping write was accepted")
	}
}

// TestWriterFallsBack: a device that refuses direct writes (EINVAL) gets
// every byte through the page cache, and the output is still right.
func TestWriterFallsBack(t *testing.T) {
	ext := []extent{{0, 9 << 20}, {10 << 20, 5 << 20}}
	want := image(16<<20, ext)
	got, direct, buffered := writeAll(t, want, ext, func(w *Writer) {
		w.writeDirect = func([]byte, int64) (int, error) { return 0, syscall.EINVAL }
	})
	if !bytes.Equal(got, want) || direct != 0 || buffered != 14<<20 {
		t.Fatalf("same %v, direct %d, buffered %d", bytes.Equal(got, want), direct, buffered)
	}
}

// TestWriterReportsWriteError: an I/O error of an asynchronous write is
// returned, not lost.
func TestWriterReportsWriteError(t *testing.T) {
	w, _ := openWriter(t, 0)
	w.writeDirect = func([]byte, int64) (int, error) { return 0, syscall.ENOSPC }
	buf := make([]byte, 1<<20)
	var werr error
	for i := range 64 {
		if _, werr = w.WriteAt(buf, int64(i)<<20); werr != nil {
			break
		}
	}
	cerr := w.Close()
	if werr == nil && cerr == nil {
		t.Fatal("ENOSPC was lost")
	}
	for _, e := range []error{werr, cerr} {
		if e != nil && !errors.Is(e, syscall.ENOSPC) {
			t.Fatalf("error %v does not wrap ENOSPC", e)
		}
	}
}

// TestWriterKeepsHoles: regions far apart leave the file sparse.
func TestWriterKeepsHoles(t *testing.T) {
	ext := []extent{{0, 1 << 20}, {512 << 20, 1<<20 + 3}}
	w, path := openWriter(t, 1<<30)
	data := make([]byte, 2<<20)
	for i := range data {
		data[i] = 1
	}
	for _, e := range ext {
		if _, err := w.WriteAt(data[:e.n], e.off); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	if alloc := st.Blocks * 512; alloc > 3<<20 {
		t.Fatalf("file allocates %d bytes: holes were written", alloc)
	}
}

func BenchmarkWriter(b *testing.B) {
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(i)
	}
	const total = 256 << 20
	for _, mode := range []string{"direct", "buffered"} {
		b.Run(mode, func(b *testing.B) {
			b.SetBytes(total)
			for b.Loop() {
				path := filepath.Join(b.TempDir(), "out")
				f, _ := os.Create(path)
				f.Truncate(total)
				var wa interface {
					WriteAt([]byte, int64) (int, error)
				} = f
				var w *Writer
				if mode == "direct" {
					w, _ = Open(f)
					wa = w
				}
				for off := int64(0); off < total; off += int64(len(data)) {
					wa.WriteAt(data, off)
				}
				if w != nil {
					w.Close()
				}
				f.Close()
				os.Remove(path)
			}
		})
	}
}

// TestOpenOnlyWhereMeasured: tmpfs (and any file system not in directFS)
// gets ErrUnsupported, so the restore goes through the page cache.
func TestOpenOnlyWhereMeasured(t *testing.T) {
	var fs syscall.Statfs_t
	if err := syscall.Statfs("/dev/shm", &fs); err != nil || fs.Type != 0x01021994 {
		t.Fatalf("/dev/shm is not tmpfs here (%v, type %#x): this test needs a tmpfs", err, fs.Type)
	}
	f, err := os.CreateTemp("/dev/shm", "directio-*")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if _, err := Open(f); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("Open on tmpfs: %v, want ErrUnsupported", err)
	}
}
