package vmdk

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestFlatExtentBounds: a FLAT/VMFS extent is checked against its file at
// Open. Before, a short file read as zeros (a truncated copy backed up as a
// silently zeroed disk; a 128 TiB extent on a 64 MiB file ran for minutes)
// and a descriptor naming itself as its extent was read as disk data.
func TestFlatExtentBounds(t *testing.T) {
	dir := t.TempDir()
	writeTemp(t, dir, "f.bin", bytes.Repeat([]byte{7}, 64<<10))
	big := filepath.Join(dir, "big.bin")
	must(t, os.WriteFile(big, nil, 0o644))
	must(t, os.Truncate(big, 64<<20))
	writeTemp(t, dir, "s.vmdk", buildSparse(64, 8, 4, map[int][]byte{0: []byte("x")}))
	base := "# Disk DescriptorFile\nversion=1\nCID=1\nparentCID=ffffffff\ncreateType=\"monolithicFlat\"\n"
	writeTemp(t, dir, "other.vmdk", []byte(base+"RW 128 FLAT \"f.bin\" 0\n"+strings.Repeat("# padding\n", 200)))
	cases := []struct{ name, extent, want string }{
		{"past end", `RW 256 FLAT "f.bin" 0`, "declares 131072 bytes at offset 0 (up to byte 131072) but the file holds 65536"},
		{"offset past end", `RW 8 FLAT "f.bin" 200`, "but the file holds 65536"},
		{"vmfs past end", `RW 129 VMFS "f.bin"`, "but the file holds 65536"},
		{"128 TiB on 64 MiB", `RW 274877906944 FLAT "big.bin" 0`, "but the file holds 67108864"},
		{"itself", `RW 1 FLAT "d.vmdk" 0`, "is the descriptor file itself"},
		{"another descriptor", `RW 1 FLAT "other.vmdk" 0`, "is a VMDK descriptor"},
		{"sparse extent as flat", `RW 1 FLAT "s.vmdk" 0`, "is a sparse VMDK extent"},
		{"overlapping flat extents", "RW 64 FLAT \"f.bin\" 0\nRW 64 FLAT \"f.bin\" 32", "extent 1 \"f.bin\": bytes 16384-49152 of the file are also extent 0's"},
		{"one sparse file twice", "RW 64 SPARSE \"s.vmdk\"\nRW 64 SPARSE \"s.vmdk\"", "are also extent 0's"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			p := writeTemp(t, dir, "d.vmdk", []byte(base+c.extent+"\n"+strings.Repeat("# pad the descriptor past a sector\n", 20)))
			d, err := Open(p)
			if err == nil {
				_, rerr := d.ReadAt(make([]byte, min(d.Size(), 1<<20)), 0)
				d.Close()
				t.Fatalf("Open accepted it (first MiB read: %v)", rerr)
			}
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Open: %v, want ErrCorrupt naming %q", err, c.want)
			}
			if !strings.Contains(err.Error(), "extent ") {
				t.Errorf("error %v does not name the extent", err)
			}
			if el := time.Since(start); el > time.Second {
				t.Errorf("took %v", el)
			}
		})
	}

	// A hard link to the descriptor is the same file.
	p := writeTemp(t, dir, "h.vmdk", []byte(base+`RW 1 FLAT "hl.vmdk" 0`+"\n"+strings.Repeat("# pad\n", 100)))
	must(t, os.Link(p, filepath.Join(dir, "hl.vmdk")))
	if _, err := Open(p); err == nil || !strings.Contains(err.Error(), "descriptor file itself") {
		t.Errorf("extent hard-linked to its descriptor: %v", err)
	}

	// An extent that fits opens and reads; if the file shrinks afterwards
	// the read fails instead of returning zeros.
	tr := writeTemp(t, dir, "t.bin", bytes.Repeat([]byte{9}, 64<<10))
	d, err := Open(writeTemp(t, dir, "ok.vmdk", []byte(base+`RW 128 FLAT "t.bin" 0`+"\n")))
	must(t, err)
	defer d.Close()
	must(t, os.Truncate(tr, 32<<10))
	if _, err := d.ReadAt(make([]byte, 64<<10), 0); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("read of an extent truncated after Open: %v", err)
	}

	// A zero-length .vmdk is not a VMDK.
	empty := writeTemp(t, dir, "empty.vmdk", nil)
	if _, err := Open(empty); !errors.Is(err, ErrNotVMDK) || !strings.Contains(err.Error(), "empty") {
		t.Errorf("empty file: %v", err)
	}
}

// countingFile counts what a sparse extent reads from its file.
type countingFile struct {
	file
	bytes, calls *atomic.Int64
}

func (c countingFile) ReadAt(p []byte, off int64) (int, error) {
	c.bytes.Add(int64(len(p)))
	c.calls.Add(1)
	return c.file.ReadAt(p, off)
}

// hostileImage is a 1 MiB hosted sparse extent with its GD at sector 1,
// laid out by hand so each case can break one rule.
type hostileImage struct {
	b []byte
	h header
}

const hostileSize = 1 << 20

func newHostile(capSectors, grainSectors uint64, gtes uint32, compressed bool, overHead uint64) *hostileImage {
	h := header{Version: 1, Flags: flagNLDetect, Capacity: capSectors, GrainSize: grainSectors,
		NumGTEsPerGT: gtes, GDOffset: 1, OverHead: overHead}
	if compressed {
		h.Version, h.Flags, h.CompressAlgorithm = 3, flagNLDetect|flagCompress|flagMarkers, compressZlib
	}
	b := make([]byte, hostileSize)
	copy(b, h.encode())
	return &hostileImage{b, h}
}

func (x *hostileImage) gd(i int, sector uint32) {
	binary.LittleEndian.PutUint32(x.b[SectorSize+4*i:], sector)
}

func (x *hostileImage) gte(gtSector uint32, j int, sector uint32) {
	binary.LittleEndian.PutUint32(x.b[int(gtSector)*SectorSize+4*j:], sector)
}

// grainRecord writes a streamOptimized grain marker and zlib data at sector.
func (x *hostileImage) grainRecord(sector uint32, lba uint64, z []byte) {
	off := int(sector) * SectorSize
	binary.LittleEndian.PutUint64(x.b[off:], lba)
	binary.LittleEndian.PutUint32(x.b[off+8:], uint32(len(z)))
	copy(x.b[off+markerHeaderSize:], z)
}

func zlibBytes(t *testing.T, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	w := zlib.NewWriter(&b)
	_, err := w.Write(data)
	must(t, err)
	must(t, w.Close())
	return b.Bytes()
}

// TestHostileSparseWork: crafted 1 MiB sparse extents must be accepted or
// refused within a second, reading a bounded amount. Before, allocated()
// re-read a grain table per GD entry (4 GiB read for 1 MiB, 17.9 s) and
// tables naming one grain were read as a 512 GiB disk.
func TestHostileSparseWork(t *testing.T) {
	dir := t.TempDir()
	fullGT := func(x *hostileImage, gtSector uint32, n int, f func(j int) uint32) {
		for j := 0; j < n; j++ {
			x.gte(gtSector, j, f(j))
		}
	}
	cases := []struct {
		name  string
		build func() *hostileImage
		want  string // "" = accepted
	}{
		{"GD entries all one GT", func() *hostileImage {
			// 200,000 GD entries (800 KiB) naming the GT at sector 1700,
			// whose 4096 entries name 4096 distinct sectors.
			x := newHostile(200_000*4096, 1, 4096, false, 0)
			for i := 0; i < 200_000; i++ {
				x.gd(i, 1700)
			}
			fullGT(x, 1700, 4096, func(j int) uint32 { return uint32(1740 + j%300) })
			return x
		}, "grain tables"},
		{"GTs overlapping each other", func() *hostileImage {
			// 512-entry tables (4 sectors) one sector apart.
			x := newHostile(400*512*128, 128, 512, false, 0)
			for i := 0; i < 400; i++ {
				x.gd(i, uint32(16+i))
			}
			return x
		}, "overlaps grain table"},
		{"GT overlapping the GD", func() *hostileImage {
			x := newHostile(4*512*128, 128, 512, false, 0)
			x.gd(0, 1)
			return x
		}, "overlaps the grain directory"},
		{"GT on the descriptor", func() *hostileImage {
			x := newHostile(4*512*128, 128, 512, false, 0)
			x.h.DescriptorOffset, x.h.DescriptorSize = 2, 1
			copy(x.b, x.h.encode())
			x.gd(0, 2)
			return x
		}, "overlaps the embedded descriptor"},
		{"all GTEs one grain", func() *hostileImage {
			x := newHostile(8*4096*128, 128, 4096, false, 0)
			for i := 0; i < 8; i++ {
				x.gd(i, uint32(2+32*i))
				fullGT(x, uint32(2+32*i), 4096, func(int) uint32 { return 1024 })
			}
			return x
		}, "both at sector 1024"},
		{"GTEs alternating two grains", func() *hostileImage {
			x := newHostile(8*4096*128, 128, 4096, false, 0)
			for i := 0; i < 8; i++ {
				x.gd(i, uint32(2+32*i))
				fullGT(x, uint32(2+32*i), 4096, func(j int) uint32 { return uint32(1024 + 128*(j%2)) })
			}
			return x
		}, "do not fit in the 1048576-byte file"},
		{"compressed GTEs alternating", func() *hostileImage {
			x := newHostile(4096*4096, 4096, 4096, true, 0)
			x.gd(0, 2)
			fullGT(x, 2, 4096, func(j int) uint32 { return uint32(100 + j%2) })
			return x
		}, "do not fit"},
		{"grain inside a GT", func() *hostileImage {
			x := newHostile(2*512*128, 128, 512, false, 0)
			x.gd(0, 2)
			x.gd(1, 6)
			x.gte(2, 0, 6)
			return x
		}, "inside grain table 1"},
		{"grain in the overhead", func() *hostileImage {
			x := newHostile(512*128, 128, 512, false, 128)
			x.gd(0, 2)
			x.gte(2, 0, 64)
			return x
		}, "metadata area"},
		{"GTE 1 without zero-grain flag", func() *hostileImage {
			x := newHostile(512*128, 128, 512, false, 0)
			x.gd(0, 2)
			x.gte(2, 0, 1)
			return x
		}, "inside the grain directory"},
		{"grain past the end", func() *hostileImage {
			x := newHostile(512*128, 128, 512, false, 0)
			x.gd(0, 2)
			x.gte(2, 0, 2047)
			return x
		}, "outside the 1048576-byte file"},
		{"huge capacity, tables everywhere", func() *hostileImage {
			// 128 TiB: 16384 GD entries of 16 KiB tables, 256 MiB of
			// tables in a 1 MiB file.
			x := newHostile(maxCapacitySectors, 4096, 4096, false, 0)
			for i := 0; i < 16384; i++ {
				x.gd(i, uint32(200+i))
			}
			return x
		}, "more than the 1048576-byte file holds"},
		{"huge capacity, empty", func() *hostileImage {
			return newHostile(maxCapacitySectors, 4096, 4096, false, 0)
		}, ""},
		{"many small compressed grains", func() *hostileImage {
			// 1536 one-sector records of a 64 KiB grain each: 96 MiB of
			// disk, the legitimate ratio of a constant-filled disk.
			x := newHostile(1536*128, 128, 512, true, 16)
			z := zlibBytes(t, bytes.Repeat([]byte{0xAB}, 64<<10))
			for i := 0; i < 3; i++ {
				x.gd(i, uint32(2+4*i))
			}
			for g := 0; g < 1536; g++ {
				x.gte(uint32(2+4*(g/512)), g%512, uint32(16+g))
				x.grainRecord(uint32(16+g), uint64(g)*128, z)
			}
			return x
		}, ""},
		{"short compressed grain not last", func() *hostileImage {
			x := newHostile(4*128, 128, 512, true, 16)
			x.gd(0, 2)
			z := zlibBytes(t, []byte("short"))
			for g := 0; g < 4; g++ {
				x.gte(2, g, uint32(16+g))
				x.grainRecord(uint32(16+g), uint64(g)*128, z)
			}
			return x
		}, "only the disk's last grain may be short"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := writeTemp(t, dir, "h.vmdk", c.build().b)
			var n, calls atomic.Int64
			wrap := func(f *os.File) file { return countingFile{f, &n, &calls} }
			start := time.Now()
			d, err := openWith(p, wrap)
			var ext []Extent
			if err == nil {
				ext, err = d.AllocatedExtents()
			}
			elapsed, opened := time.Since(start), n.Load()
			// Map work: the header, GD and each table at most twice (the
			// check at Open, then AllocatedExtents).
			if opened > 3*hostileSize {
				t.Errorf("Open+AllocatedExtents read %d bytes (%d calls) of a %d-byte file", opened, calls.Load(), hostileSize)
			}
			if elapsed > time.Second {
				t.Errorf("Open+AllocatedExtents took %v", elapsed)
			}
			if err == nil && d != nil {
				// Read the allocated data (up to 8 MiB of it): each grain
				// read costs at most one grain record plus a grain.
				alloc := allocatedBytes(ext)
				if compressed := d.parts[0].r.(*sparseExtent).h.compressed(); !compressed && alloc > hostileSize || alloc > hostileSize/SectorSize*64<<10 {
					t.Errorf("%d allocated bytes from a %d-byte file", alloc, hostileSize)
				}
				buf := make([]byte, 64<<10)
				budget := int64(8 << 20)
				for _, e := range ext {
					for off := e.Offset; off < e.Offset+e.Length && budget > 0 && err == nil; off += int64(len(buf)) {
						_, err = d.ReadAt(buf[:min(int64(len(buf)), e.Offset+e.Length-off)], off)
						budget -= int64(len(buf))
					}
				}
				if read := n.Load() - opened; read > 2*(8<<20)+hostileSize {
					t.Errorf("reading %d bytes of data read %d bytes of the file", 8<<20-budget, read)
				}
				d.Close()
			}
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && err == nil:
				t.Fatalf("accepted (%d allocated bytes), want an error naming %q", allocatedBytes(ext), c.want)
			case c.want != "" && (!errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("error %v, want ErrCorrupt naming %q", err, c.want)
			}
			t.Logf("%v, read %d bytes in %d calls: %v", elapsed, n.Load(), calls.Load(), err)
		})
	}
}
