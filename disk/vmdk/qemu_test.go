package vmdk

import (
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type rawCase struct {
	name string
	path string
	img  []byte
}

func rawCases(t *testing.T, dir string) []rawCase {
	t.Helper()
	rnd := filepath.Join(dir, "random.raw")
	// Not a multiple of the 64 KiB grain: the last grain is short.
	img := makeRandomImage(t, rnd, 6<<20+3*512, 42)
	ext := makeExt4Image(t, dir, "64M")
	return []rawCase{
		{"random", rnd, img},
		{"ext4", filepath.Join(dir, "ext4.raw"), ext},
	}
}

// TestOpenQemuImages converts raw images (random data with holes, a real
// ext4 file system) with qemu-img into every VMDK subformat we read and
// checks Open reproduces them byte for byte and Allocated covers the data.
func TestOpenQemuImages(t *testing.T) {
	dir := t.TempDir()
	formats := []struct{ sub, wantFormat string }{
		{"monolithicSparse", "monolithicSparse"},
		{"streamOptimized", "streamOptimized"},
		{"monolithicFlat", "monolithicFlat"},
		{"twoGbMaxExtentSparse", "twoGbMaxExtentSparse"},
		{"twoGbMaxExtentFlat", "twoGbMaxExtentFlat"},
	}
	for _, rc := range rawCases(t, dir) {
		for _, f := range formats {
			t.Run(rc.name+"/"+f.sub, func(t *testing.T) {
				out := filepath.Join(dir, rc.name+"-"+f.sub+".vmdk")
				qemuConvert(t, rc.path, out, f.sub)
				d, err := Open(out)
				if err != nil {
					t.Fatal(err)
				}
				defer d.Close()
				if d.Size() != int64(len(rc.img)) {
					t.Fatalf("Size %d, want %d", d.Size(), len(rc.img))
				}
				if d.Format() != f.wantFormat {
					t.Errorf("Format %q, want %q", d.Format(), f.wantFormat)
				}
				sameBytes(t, "ReadAt", readDisk(t, d, d.Size()), rc.img)
				ext, err := d.AllocatedExtents()
				if err != nil {
					t.Fatal(err)
				}
				coversNonZero(t, "Allocated", rc.img, ext)
				if strings.Contains(f.sub, "Sparse") || f.sub == "streamOptimized" {
					// Sparse formats must not claim the holes.
					if a := allocatedBytes(ext); a >= d.Size()/2 {
						t.Errorf("Allocated %d of %d bytes: holes not reported", a, d.Size())
					}
				}
				// Random unaligned small reads exercise the grain cache
				// and reads that straddle grains and extents.
				r := rand.New(rand.NewPCG(3, 4))
				for range 300 {
					off := r.Int64N(d.Size())
					n := 1 + r.Int64N(200_000)
					buf := make([]byte, n)
					got, err := d.ReadAt(buf, off)
					wantN := min(n, d.Size()-off)
					if int64(got) != wantN || (wantN < n) != errors.Is(err, io.EOF) || (err != nil && !errors.Is(err, io.EOF)) {
						t.Fatalf("ReadAt(%d bytes at %d) = %d, %v; want %d", n, off, got, err, wantN)
					}
					sameBytes(t, "small read", buf[:got], rc.img[off:off+wantN])
				}
				if n, err := d.ReadAt(make([]byte, 10), d.Size()); n != 0 || err != io.EOF {
					t.Errorf("ReadAt at end = %d, %v; want 0, EOF", n, err)
				}
			})
		}
	}
}

// TestStreamReaderQemu decodes qemu-img's streamOptimized output
// sequentially (GD/GTs at the front without markers, no EOS marker).
func TestStreamReaderQemu(t *testing.T) {
	dir := t.TempDir()
	for _, rc := range rawCases(t, dir) {
		t.Run(rc.name, func(t *testing.T) {
			out := filepath.Join(dir, rc.name+".vmdk")
			qemuConvert(t, rc.path, out, "streamOptimized")
			got := streamDecode(t, out)
			sameBytes(t, "StreamReader", got, rc.img)
		})
	}
}

func streamDecode(t testing.TB, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	must(t, err)
	defer f.Close()
	s, err := NewStreamReader(struct{ io.Reader }{f}) // hide Seek: strictly sequential
	if err != nil {
		t.Fatal(err)
	}
	img := make([]byte, s.Capacity())
	last := int64(-1)
	for {
		off, data, err := s.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if off <= last {
			t.Fatalf("grain at %d after %d", off, last)
		}
		last = off
		copy(img[off:], data)
	}
	return img
}

// TestStreamWriterRoundTrip encodes images with StreamWriter using uneven,
// unaligned writes and gaps, then checks qemu-img check, qemu-img convert back
// to raw, Open and StreamReader all give the original bytes.
func TestStreamWriterRoundTrip(t *testing.T) {
	needTool(t, "qemu-img", "qemu-utils")
	dir := t.TempDir()
	cases := rawCases(t, dir)
	// A disk with data only past the first grain table (32 MiB) checks
	// an omitted grain table.
	big := make([]byte, 40<<20)
	copy(big[35<<20:], []byte("data after an empty grain table"))
	cases = append(cases, rawCase{name: "gap", img: big})
	for _, rc := range cases {
		t.Run(rc.name, func(t *testing.T) {
			out := filepath.Join(dir, rc.name+"-ours.vmdk")
			f, err := os.Create(out)
			must(t, err)
			w, err := NewStreamWriter(f, int64(len(rc.img)), StreamWriterOptions{CID: 0x1234})
			must(t, err)
			r := rand.New(rand.NewPCG(5, 6))
			for off := int64(0); off < int64(len(rc.img)); {
				n := min(1+r.Int64N(300_000), int64(len(rc.img))-off)
				chunk := rc.img[off : off+n]
				if isZero(chunk) && r.IntN(2) == 0 {
					off += n // a hole the caller skips entirely
					continue
				}
				must(t, w.WriteGrainsAt(chunk, off))
				off += n
			}
			must(t, w.Close())
			must(t, f.Close())

			if err := w.WriteGrainsAt([]byte{1}, int64(len(rc.img))-1); !errors.Is(err, ErrClosed) {
				t.Errorf("write after Close: %v", err)
			}
			run(t, "qemu-img", "check", "-f", "vmdk", out)
			back := filepath.Join(dir, rc.name+"-back.raw")
			run(t, "qemu-img", "convert", "-f", "vmdk", "-O", "raw", out, back)
			got, err := os.ReadFile(back)
			must(t, err)
			sameBytes(t, "qemu-img convert of our stream", got, rc.img)

			d, err := Open(out)
			must(t, err)
			defer d.Close()
			if d.Format() != "streamOptimized" {
				t.Errorf("Format %q", d.Format())
			}
			sameBytes(t, "Open of our stream", readDisk(t, d, d.Size()), rc.img)
			ext, err := d.AllocatedExtents()
			must(t, err)
			coversNonZero(t, "Allocated", rc.img, ext)
			sameBytes(t, "StreamReader of our stream", streamDecode(t, out), rc.img)
		})
	}
}

func TestStreamWriterErrors(t *testing.T) {
	if _, err := NewStreamWriter(io.Discard, 1000, StreamWriterOptions{}); err == nil {
		t.Error("capacity not a multiple of 512 accepted")
	}
	w, err := NewStreamWriter(io.Discard, 1<<20, StreamWriterOptions{})
	must(t, err)
	must(t, w.WriteGrainsAt([]byte{1, 2, 3}, 1000))
	if err := w.WriteGrainsAt([]byte{1}, 1002); !errors.Is(err, ErrOrder) {
		t.Errorf("overlapping write: %v, want ErrOrder", err)
	}
	if err := w.WriteGrainsAt([]byte{1, 2}, 1<<20-1); err == nil {
		t.Error("write past capacity accepted")
	}
	must(t, w.Close())
	if err := w.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
}
