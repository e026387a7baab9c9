package vmdk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Fuzz seeds: small hand-built and StreamWriter images are kept under
// testdata/fuzz (regenerate with VMDK_WRITE_SEEDS=1 go test -run
// TestWriteFuzzSeeds); real qemu-img output (1 MiB disks) is added at run
// time, which is why these targets need qemu-img.

func tinyStream(t testing.TB, capacity int64, writes map[int64][]byte) []byte {
	t.Helper()
	var b bytes.Buffer
	w, err := newStreamWriter(&b, capacity, StreamWriterOptions{CID: 7}, 2, 1)
	must(t, err)
	offs := make([]int64, 0, len(writes))
	for o := range writes {
		offs = append(offs, o)
	}
	for i := range offs { // tiny n: insertion sort keeps it dependency free
		for j := i; j > 0 && offs[j] < offs[j-1]; j-- {
			offs[j], offs[j-1] = offs[j-1], offs[j]
		}
	}
	for _, o := range offs {
		must(t, w.WriteGrainsAt(writes[o], o))
	}
	must(t, w.Close())
	return b.Bytes()
}

func sparseSeeds(t testing.TB) [][]byte {
	return [][]byte{
		buildSparse(64, 8, 4, map[int][]byte{1: []byte("hello"), 6: []byte("world")}),
		buildSparse(32, 1, 8, map[int][]byte{0: {1}, 31: {2}}),
		tinyStream(t, 256<<10, map[int64][]byte{0: []byte("first"), 200 << 10: bytes.Repeat([]byte("z"), 5000)}),
	}
}

// hostileSeeds are small forgeries of the maps Open refuses (see layout.go):
// GD entries sharing a table, table entries sharing a grain, a table on the
// GD, a grain inside a table.
func hostileSeeds() [][]byte {
	le := binary.LittleEndian
	good := buildSparse(64, 8, 4, map[int][]byte{0: []byte("a"), 1: []byte("b")})
	h, _ := parseHeader(good)
	gd := int(h.GDOffset) * SectorSize
	gt0 := le.Uint32(good[gd:])
	patch := func(f func(b []byte)) []byte {
		b := bytes.Clone(good)
		f(b)
		return b
	}
	return [][]byte{
		patch(func(b []byte) { // every GD entry names GT 0
			for i := 0; i < int(h.numGTs()); i++ {
				le.PutUint32(b[gd+4*i:], gt0)
			}
		}),
		patch(func(b []byte) { // every entry of GT 0 names grain 0's sector
			g := le.Uint32(b[int(gt0)*SectorSize:])
			for j := 0; j < 4; j++ {
				le.PutUint32(b[int(gt0)*SectorSize+4*j:], g)
			}
		}),
		patch(func(b []byte) { le.PutUint32(b[gd:], uint32(h.GDOffset)) }),                   // GT 0 on the GD
		patch(func(b []byte) { le.PutUint32(b[int(gt0)*SectorSize:], le.Uint32(b[gd+4:])) }), // grain 0 inside GT 1
	}
}

// qemuSeeds converts a 1 MiB raw disk with a little data to each sparse
// subformat.
func qemuSeeds(t testing.TB) [][]byte {
	t.Helper()
	dir := t.TempDir()
	img := make([]byte, 1<<20)
	copy(img[100:], "qemu seed")
	copy(img[700<<10:], bytes.Repeat([]byte("abcdefgh"), 100))
	raw := filepath.Join(dir, "seed.raw")
	must(t, os.WriteFile(raw, img, 0o644))
	var out [][]byte
	for _, sub := range []string{"monolithicSparse", "streamOptimized"} {
		p := filepath.Join(dir, sub+".vmdk")
		qemuConvert(t, raw, p, sub)
		b, err := os.ReadFile(p)
		must(t, err)
		out = append(out, b)
	}
	return out
}

func FuzzOpenSparse(f *testing.F) {
	for _, s := range append(append(sparseSeeds(f), hostileSeeds()...), qemuSeeds(f)...) {
		f.Add(s)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzInput {
			return // mutating bigger inputs only slows the fuzzer down
		}
		defer watchdog()()
		p := filepath.Join(dir, fmt.Sprintf("f%d.vmdk", os.Getpid()))
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		d, err := Open(p)
		if err != nil {
			return
		}
		defer d.Close()
		if d.Size() < 0 {
			t.Fatalf("negative size %d", d.Size())
		}
		ext, err := d.AllocatedExtents()
		if err != nil {
			return
		}
		// Read the allocated bytes, bounded so a huge declared capacity
		// stays a fast execution (Open bounds the map work by the file).
		budget := int64(1 << 20)
		buf := make([]byte, 64<<10)
		for _, e := range ext {
			if e.Offset < 0 || e.Length <= 0 || e.Offset+e.Length > d.Size() {
				t.Fatalf("extent %+v outside disk of %d", e, d.Size())
			}
			for off := e.Offset; off < e.Offset+e.Length && budget > 0; {
				n := min(int64(len(buf)), e.Offset+e.Length-off)
				got, err := d.ReadAt(buf[:n], off)
				if got > int(n) {
					t.Fatalf("ReadAt returned %d > %d", got, n)
				}
				if err != nil {
					if errors.Is(err, io.EOF) {
						t.Fatalf("EOF inside the disk at %d", off)
					}
					return
				}
				off += n
				budget -= n
			}
		}
	})
}

func FuzzStreamReader(f *testing.F) {
	for _, s := range append(sparseSeeds(f), qemuSeeds(f)...) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzInput {
			return
		}
		defer watchdog()()
		s, err := NewStreamReader(bytes.NewReader(data))
		if err != nil {
			return
		}
		// Each grain costs at least one input sector, so this bounds the
		// output as the input does.
		for i := 0; i < len(data)/SectorSize+1; i++ {
			off, g, err := s.Next()
			if err != nil {
				return
			}
			if off < 0 || off >= s.Capacity() || int64(len(g)) > s.GrainSize() || off+int64(len(g)) > s.Capacity() {
				t.Fatalf("grain at %d of %d bytes outside capacity %d", off, len(g), s.Capacity())
			}
		}
	})
}

func FuzzParseDescriptor(f *testing.F) {
	f.Add([]byte("# Disk DescriptorFile\nversion=1\nCID=fffffffe\nparentCID=ffffffff\ncreateType=\"monolithicFlat\"\nRW 8192 FLAT \"x-flat.vmdk\" 0\nddb.adapterType = \"ide\"\n"))
	f.Add([]byte("version=1\ncreateType=\"twoGbMaxExtentSparse\"\nRW 4 SPARSE \"a b.vmdk\"\nRDONLY 8 ZERO\nNOACCESS 2 VMFS \"c.vmdk\"\n"))
	f.Add([]byte("createType=\"vmfs\"\nparentFileNameHint=\"p.vmdk\"\nRW 1 VMFSSPARSE \"d.vmdk\"\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := ParseDescriptor(data)
		if err != nil {
			return
		}
		if len(d.Extents) == 0 || len(d.Extents) > maxExtents {
			t.Fatalf("%d extents accepted", len(d.Extents))
		}
		if c := d.Capacity(); c <= 0 || c > maxCapacitySectors*SectorSize {
			t.Fatalf("capacity %d accepted", c)
		}
		for _, e := range d.Extents {
			if e.Sectors <= 0 || e.Offset < 0 || (e.Type == "ZERO") != (e.Filename == "") && e.Type == "ZERO" {
				t.Fatalf("bad extent accepted: %+v", e)
			}
		}
		// What we write we read back the same.
		if !strings.ContainsAny(d.CreateType, "\"\r\n\x00") && strings.TrimSpace(d.CreateType) == d.CreateType {
			again, err := ParseDescriptor(d.encode())
			if err == nil && again.CreateType != d.CreateType {
				t.Fatalf("createType %q re-read as %q", d.CreateType, again.CreateType)
			}
		}
	})
}

// TestFuzzSeedsCurrent checks the committed seeds under testdata/fuzz are
// what the generators produce today (so a format change refreshes them);
// VMDK_WRITE_SEEDS=1 rewrites them.
func TestFuzzSeedsCurrent(t *testing.T) {
	files := map[string]string{}
	for _, target := range []string{"FuzzOpenSparse", "FuzzStreamReader"} {
		for i, s := range sparseSeeds(t) {
			files[filepath.Join("testdata", "fuzz", target, fmt.Sprintf("seed-%d", i))] = fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s)
		}
	}
	for i, s := range hostileSeeds() {
		files[filepath.Join("testdata", "fuzz", "FuzzOpenSparse", fmt.Sprintf("hostile-%d", i))] = fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s)
	}
	files[filepath.Join("testdata", "fuzz", "FuzzParseDescriptor", "seed-0")] = fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n",
		"createType=\"custom\"\nRW 4 FLAT \"f.bin\" 2\nRW 4 ZERO\nRW 16 SPARSE \"s.vmdk\"\n")
	for p, body := range files {
		if os.Getenv("VMDK_WRITE_SEEDS") == "1" {
			must(t, os.MkdirAll(filepath.Dir(p), 0o755))
			must(t, os.WriteFile(p, []byte(body), 0o644))
			continue
		}
		got, err := os.ReadFile(p)
		if err != nil || string(got) != body {
			t.Errorf("%s is stale or missing (%v): run VMDK_WRITE_SEEDS=1 go test -run TestFuzzSeedsCurrent ./vmdk", p, err)
		}
	}
}

// maxFuzzInput bounds what the sparse targets try: the qemu seeds are
// 128 KiB, and the map checks are what a larger file would exercise more of.
const maxFuzzInput = 1 << 20

// watchdog turns a hang into a crash the fuzzer records as a failing input.
func watchdog() func() {
	tm := time.AfterFunc(10*time.Second, func() { panic("fuzz input took over 10s") })
	return func() { tm.Stop() }
}
