package vmdk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// buildSparse makes a small hosted sparse extent (monolithicSparse layout):
// header, embedded descriptor, GD, GTs, then grains. grains maps grain index
// to content (padded to the grain).
func buildSparse(capSectors, grainSectors uint64, gtes uint32, grains map[int][]byte) []byte {
	h := header{Version: 1, Flags: flagNLDetect, Capacity: capSectors, GrainSize: grainSectors,
		NumGTEsPerGT: gtes, CompressAlgorithm: compressNone}
	desc := []byte("# Disk DescriptorFile\nversion=1\nCID=fffffffe\nparentCID=ffffffff\ncreateType=\"monolithicSparse\"\nRW " +
		itoa(int64(capSectors)) + " SPARSE \"x.vmdk\"\n")
	descSectors := uint64(len(desc)+SectorSize-1) / SectorSize
	h.DescriptorOffset, h.DescriptorSize = 1, descSectors
	nGT := h.numGTs()
	h.GDOffset = 1 + descSectors
	gdSectors := (nGT*4 + SectorSize - 1) / SectorSize
	gtSectors := (uint64(gtes)*4 + SectorSize - 1) / SectorSize
	firstGT := h.GDOffset + gdSectors
	h.OverHead = firstGT + nGT*gtSectors
	gb := int(grainSectors * SectorSize)
	out := make([]byte, int(h.OverHead)*SectorSize)
	copy(out, h.encode())
	copy(out[SectorSize:], desc)
	for i := uint64(0); i < nGT; i++ {
		binary.LittleEndian.PutUint32(out[int(h.GDOffset)*SectorSize+int(i)*4:], uint32(firstGT+i*gtSectors))
	}
	for g := 0; g < int(capSectors/grainSectors); g++ {
		data, ok := grains[g]
		if !ok {
			continue
		}
		sec := len(out) / SectorSize
		gt := int(firstGT) + g/int(gtes)*int(gtSectors)
		binary.LittleEndian.PutUint32(out[gt*SectorSize+(g%int(gtes))*4:], uint32(sec))
		grain := make([]byte, gb)
		copy(grain, data)
		out = append(out, grain...)
	}
	return out
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func writeTemp(t testing.TB, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	must(t, os.WriteFile(p, b, 0o644))
	return p
}

func TestBuildSparseReadable(t *testing.T) {
	dir := t.TempDir()
	b := buildSparse(64, 8, 4, map[int][]byte{1: []byte("hello"), 6: []byte("world")})
	d, err := Open(writeTemp(t, dir, "s.vmdk", b))
	must(t, err)
	defer d.Close()
	want := make([]byte, 64*SectorSize)
	copy(want[8*SectorSize:], "hello")
	copy(want[48*SectorSize:], "world")
	sameBytes(t, "tiny sparse", readDisk(t, d, d.Size()), want)
	ext, err := d.AllocatedExtents()
	must(t, err)
	if len(ext) != 2 || ext[0] != (Extent{4096, 4096}) || ext[1] != (Extent{48 * 512, 4096}) {
		t.Fatalf("Allocated %+v", ext)
	}
	if d.Format() != "monolithicSparse" {
		t.Errorf("Format %q", d.Format())
	}
}

// TestHostileSparseHeaders corrupts one header field at a time: each must
// give an error naming the field (and wrapping ErrCorrupt/ErrUnsupported),
// never a panic or a huge allocation.
func TestHostileSparseHeaders(t *testing.T) {
	dir := t.TempDir()
	good := buildSparse(64, 8, 4, map[int][]byte{0: []byte("x")})
	le := binary.LittleEndian
	cases := []struct {
		name  string
		patch func(b []byte)
		want  string
	}{
		{"version", func(b []byte) { le.PutUint32(b[4:], 9) }, "version"},
		{"capacity", func(b []byte) { le.PutUint64(b[12:], 1<<62) }, "capacity"},
		{"grain zero", func(b []byte) { le.PutUint64(b[20:], 0) }, "grainSize"},
		{"grain not pow2", func(b []byte) { le.PutUint64(b[20:], 24) }, "grainSize"},
		{"grain huge", func(b []byte) { le.PutUint64(b[20:], 1<<40) }, "grainSize"},
		{"gtes zero", func(b []byte) { le.PutUint32(b[44:], 0) }, "numGTEsPerGT"},
		{"gtes huge", func(b []byte) { le.PutUint32(b[44:], 1<<30) }, "numGTEsPerGT"},
		{"descriptor size", func(b []byte) { le.PutUint64(b[36:], 1<<40) }, "descriptorSize"},
		{"descriptor outside", func(b []byte) { le.PutUint64(b[28:], 1<<20) }, "embedded descriptor"},
		{"gd outside", func(b []byte) { le.PutUint64(b[56:], 1<<30) }, "gdOffset"},
		{"gd entries", func(b []byte) { le.PutUint64(b[12:], 1<<37); le.PutUint64(b[20:], 1); le.PutUint32(b[44:], 1) }, "grain directory"},
		{"newline", func(b []byte) { b[75] = '\n' }, "text-mode"},
		{"compress algo", func(b []byte) { le.PutUint32(b[8:], flagCompress|flagMarkers); le.PutUint16(b[77:], 7) }, "compressAlgorithm"},
		{"compressed no markers", func(b []byte) { le.PutUint32(b[8:], flagCompress); le.PutUint16(b[77:], 1) }, "markers"},
		{"gd at end no footer", func(b []byte) { le.PutUint64(b[56:], ^uint64(0)) }, "footer"},
		{"truncated", nil, "outside"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := bytes.Clone(good)
			if c.patch != nil {
				c.patch(b)
			} else {
				b = b[:SectorSize+100]
			}
			d, err := Open(writeTemp(t, dir, "h.vmdk", b))
			if err == nil {
				_, err = d.ReadAt(make([]byte, d.Size()), 0)
				d.Close()
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one naming %q", err, c.want)
			}
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) {
				t.Errorf("error %v wraps neither ErrCorrupt nor ErrUnsupported", err)
			}
		})
	}
}

// TestHostileGrainTables points a GT entry, then a GD entry, outside the
// file: Open refuses both naming the grain or table (it checks the whole map
// before any read). A map that becomes unreadable after Open (the file is
// truncated) makes AllocatedExtents fail and Allocated fall back to the
// whole disk.
func TestHostileGrainTables(t *testing.T) {
	dir := t.TempDir()
	b := buildSparse(64, 8, 4, map[int][]byte{0: []byte("x")})
	// GT of GD entry 0 is right after the GD; corrupt its first entry.
	h, _ := parseHeader(b)
	gt := binary.LittleEndian.Uint32(b[h.GDOffset*SectorSize:])
	bad := bytes.Clone(b)
	binary.LittleEndian.PutUint32(bad[int(gt)*SectorSize:], 0xFFFFFF00)
	if _, err := Open(writeTemp(t, dir, "g.vmdk", bad)); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "grain 0") {
		t.Fatalf("GTE outside the file: %v", err)
	}
	binary.LittleEndian.PutUint32(bad[h.GDOffset*SectorSize:], 0xFFFFFFF0)
	if _, err := Open(writeTemp(t, dir, "g2.vmdk", bad)); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "grain table 0") {
		t.Fatalf("GD entry outside the file: %v", err)
	}
	p := writeTemp(t, dir, "g3.vmdk", b)
	d, err := Open(p)
	must(t, err)
	defer d.Close()
	must(t, os.Truncate(p, int64(gt)*SectorSize))
	if _, err := d.AllocatedExtents(); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "grain table 0") {
		t.Fatalf("AllocatedExtents of a truncated file: %v", err)
	}
	if ext := d.Allocated(); len(ext) != 1 || ext[0] != (Extent{0, d.Size()}) {
		t.Fatalf("Allocated on a bad map = %+v, want the whole disk", ext)
	}
}

// TestHostileStream feeds corrupt streamOptimized streams.
func TestHostileStream(t *testing.T) {
	var good bytes.Buffer
	w, err := NewStreamWriter(&good, 1<<20, StreamWriterOptions{CID: 1})
	must(t, err)
	must(t, w.WriteGrainsAt(bytes.Repeat([]byte("abc"), 30000), 4096))
	must(t, w.Close())
	grain := writerOverhead * SectorSize
	le := binary.LittleEndian
	cases := []struct {
		name  string
		patch func(b []byte) []byte
		want  string
	}{
		{"lba beyond capacity", func(b []byte) []byte { le.PutUint64(b[grain:], 1<<30); return b }, "lba"},
		{"lba unaligned", func(b []byte) []byte { le.PutUint64(b[grain:], 3); return b }, "lba"},
		{"compressed size huge", func(b []byte) []byte { le.PutUint32(b[grain+8:], 1<<31); return b }, "compressed size"},
		{"bad zlib", func(b []byte) []byte { b[grain+12] ^= 0xff; b[grain+13] ^= 0xff; return b }, "inflate"},
		{"truncated grain", func(b []byte) []byte { return b[:grain+100] }, "truncated"},
		{"unknown marker", func(b []byte) []byte {
			// The stream ends footer marker, footer, EOS: retype the first.
			le.PutUint32(b[len(b)-3*SectorSize+12:], 77)
			return b
		}, "unknown type"},
		{"not stream", func(b []byte) []byte { le.PutUint32(b[8:], flagNLDetect); return b }, "not streamOptimized"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := c.patch(bytes.Clone(good.Bytes()))
			s, err := NewStreamReader(bytes.NewReader(b))
			for err == nil {
				_, _, err = s.Next()
			}
			if err == io.EOF || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one naming %q", err, c.want)
			}
		})
	}
	// A grain inflating past the grain size (zlib bomb) is refused.
	var bomb bytes.Buffer
	w2, err := NewStreamWriter(&bomb, 1<<20, StreamWriterOptions{CID: 1})
	must(t, err)
	must(t, w2.WriteGrainsAt(bytes.Repeat([]byte{1}, 1<<20), 0))
	must(t, w2.Close())
	b := bomb.Bytes()
	// Lower the header's grain size: every 64 KiB grain is now too big.
	le.PutUint64(b[20:], 64)
	s, err := NewStreamReader(bytes.NewReader(b))
	must(t, err)
	if _, _, err := s.Next(); err == nil || !strings.Contains(err.Error(), "more than") && !strings.Contains(err.Error(), "lba") {
		t.Fatalf("oversized grain: %v", err)
	}
}

func TestDescriptorExtents(t *testing.T) {
	dir := t.TempDir()
	flat := make([]byte, 16*SectorSize)
	for i := range flat {
		flat[i] = byte(i / SectorSize)
	}
	writeTemp(t, dir, "a-flat.bin", flat)
	sp := buildSparse(16, 8, 4, map[int][]byte{1: []byte("sparse")})
	writeTemp(t, dir, "b-s001.vmdk", sp)
	must(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	c := make([]byte, 2*SectorSize)
	copy(c, "in a subdirectory")
	writeTemp(t, filepath.Join(dir, "sub"), "c.bin", c)
	desc := `# Disk DescriptorFile
version=1
CID=12345678
parentCID=ffffffff
createType="custom"

# Extent description
RW 4 FLAT "a-flat.bin" 10
RW 8 ZERO
RDONLY 16 SPARSE "b-s001.vmdk"
RW 2 VMFS "sub/c.bin"
RW 4 FLAT "a-flat.bin" 4

ddb.adapterType = "lsilogic"
`
	d, err := Open(writeTemp(t, dir, "d.vmdk", []byte(desc)))
	must(t, err)
	defer d.Close()
	want := make([]byte, 0, 34*SectorSize)
	want = append(want, flat[10*SectorSize:14*SectorSize]...)
	want = append(want, make([]byte, 8*SectorSize)...)
	s := make([]byte, 16*SectorSize)
	copy(s[8*SectorSize:], "sparse")
	want = append(want, s...)
	want = append(want, c...)
	want = append(want, flat[4*SectorSize:8*SectorSize]...)
	if d.Size() != int64(len(want)) || d.Format() != "custom" || d.Descriptor().DDB["ddb.adapterType"] != "lsilogic" {
		t.Fatalf("Size %d Format %q desc %+v", d.Size(), d.Format(), d.Descriptor())
	}
	sameBytes(t, "mixed extents", readDisk(t, d, d.Size()), want)
	ext, err := d.AllocatedExtents()
	must(t, err)
	coversNonZero(t, "mixed extents", want, ext)
}

func TestDescriptorRefusals(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	writeTemp(t, outside, "secret", make([]byte, 4096))
	must(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "link")))
	writeTemp(t, dir, "ok.bin", make([]byte, 4096))
	base := "# Disk DescriptorFile\nversion=1\nCID=1\nparentCID=ffffffff\ncreateType=\"monolithicFlat\"\n"
	cases := []struct{ name, text, want string }{
		{"dotdot", base + `RW 8 FLAT "../x" 0`, "escapes"},
		{"absolute", base + `RW 8 FLAT "/etc/passwd" 0`, "escapes"},
		{"symlink out", base + `RW 8 FLAT "link" 0`, "link"},
		{"delta", strings.Replace(base, "createType", "parentFileNameHint=\"base.vmdk\"\ncreateType", 1) + `RW 8 FLAT "ok.bin" 0`, "delta"},
		{"sesparse", base + `RW 8 SESPARSE "ok.bin"`, "SESPARSE"},
		{"no extents", base, "no extents"},
		{"bad size", base + `RW -8 FLAT "ok.bin"`, "size"},
		{"bad offset", base + `RW 8 FLAT "ok.bin" x`, "offset"},
		{"unterminated", base + `RW 8 FLAT "ok.bin`, "unterminated"},
		{"garbage", base + "hello world\n" + `RW 8 FLAT "ok.bin"`, "neither"},
		{"too many extents", base + strings.Repeat("RW 1 ZERO\n", maxExtents+1), "extents"},
		{"noaccess", base + `NOACCESS 8 FLAT "ok.bin"`, "NOACCESS"},
		{"missing file", base + `RW 8 FLAT "nope.bin"`, "nope.bin"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := Open(writeTemp(t, dir, "d.vmdk", []byte(c.text)))
			if err == nil {
				d.Close()
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Open: %v, want an error naming %q", err, c.want)
			}
		})
	}
	if _, err := ParseDescriptor(make([]byte, maxDescriptorBytes+1)); err == nil {
		t.Error("descriptor over 1 MiB accepted")
	}
}
