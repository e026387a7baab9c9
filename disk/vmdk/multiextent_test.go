package vmdk

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// TestTwoGbMultiExtent crosses the 2 GiB extent boundary of qemu-img's
// twoGbMaxExtentSparse/Flat (a 2.2 GiB sparse disk, so several extent files)
// and checks reads that straddle extents and Allocated over all extents.
func TestTwoGbMultiExtent(t *testing.T) {
	dir := t.TempDir()
	raw := filepath.Join(dir, "big.raw")
	const size = 2200 << 20
	f, err := os.Create(raw)
	must(t, err)
	must(t, f.Truncate(size))
	r := rand.New(rand.NewPCG(8, 8))
	data := make([]byte, 300_000)
	for i := range data {
		data[i] = byte(r.Uint32()) | 1
	}
	writes := []int64{0, 2<<30 - 150_000, size - int64(len(data))}
	for _, off := range writes {
		_, err := f.WriteAt(data, off)
		must(t, err)
	}
	must(t, f.Close())
	rf, err := os.Open(raw)
	must(t, err)
	defer rf.Close()

	for _, sub := range []string{"twoGbMaxExtentSparse", "twoGbMaxExtentFlat"} {
		t.Run(sub, func(t *testing.T) {
			p := filepath.Join(dir, sub+".vmdk")
			qemuConvert(t, raw, p, sub)
			d, err := Open(p)
			must(t, err)
			defer d.Close()
			if d.Size() != size || len(d.Descriptor().Extents) < 2 {
				t.Fatalf("Size %d, %d extents", d.Size(), len(d.Descriptor().Extents))
			}
			for _, off := range []int64{0, 2<<30 - 1<<20, size - 1<<20, 1 << 30} {
				got := make([]byte, 2<<20)
				want := make([]byte, 2<<20)
				n, _ := d.ReadAt(got, off)
				m, _ := rf.ReadAt(want, off)
				if n != m || !bytes.Equal(got[:n], want[:m]) {
					t.Fatalf("read at %d: %d vs %d bytes, equal=%v", off, n, m, bytes.Equal(got[:n], want[:m]))
				}
			}
			ext, err := d.AllocatedExtents()
			must(t, err)
			for _, w := range writes {
				in := false
				for _, e := range ext {
					in = in || (e.Offset <= w && w+int64(len(data)) <= e.Offset+e.Length)
				}
				if !in {
					t.Errorf("write at %d not covered by %+v", w, ext)
				}
			}
			if a := allocatedBytes(ext); a > 16<<20 {
				t.Errorf("Allocated %d bytes for 900 KB of data: holes not reported", a)
			}
		})
	}
}

// TestESXiVMFSDescriptor opens a descriptor as ESXi writes it for a thin
// disk (createType vmfs, one VMFS extent, CBT path) over a sparse -flat file:
// Allocated must skip the holes (what a backup of a datastore copy relies on).
func TestESXiVMFSDescriptor(t *testing.T) {
	dir := t.TempDir()
	desc := `# Disk DescriptorFile
version=1
encoding="UTF-8"
CID=5d5d8a4b
parentCID=ffffffff
createType="vmfs"

# Extent description
RW 65536 VMFS "vm1-flat.vmdk"

# The Disk Data Base
#DDB

ddb.adapterType = "lsilogic"
ddb.deletable = "true"
ddb.geometry.cylinders = "4"
ddb.geometry.heads = "255"
ddb.geometry.sectors = "63"
ddb.longContentID = "a1b2c3d4e5f60718293a4b5c5d5d8a4b"
ddb.thinProvisioned = "1"
ddb.uuid = "60 00 C2 9a 1b 2c 3d 4e-5f 60 71 82 93 a4 b5 c6"
ddb.virtualHWVersion = "19"
changeTrackPath="vm1-ctk.vmdk"
`
	writeTemp(t, dir, "vm1.vmdk", []byte(desc))
	f, err := os.Create(filepath.Join(dir, "vm1-flat.vmdk"))
	must(t, err)
	must(t, f.Truncate(32<<20))
	_, err = f.WriteAt([]byte("boot sector"), 0)
	must(t, err)
	_, err = f.WriteAt(bytes.Repeat([]byte{7}, 8192), 20<<20)
	must(t, err)
	must(t, f.Close())
	d, err := Open(filepath.Join(dir, "vm1.vmdk"))
	must(t, err)
	defer d.Close()
	if d.Format() != "vmfs" || d.Size() != 32<<20 || d.Descriptor().DDB["changeTrackPath"] != "vm1-ctk.vmdk" {
		t.Fatalf("Format %q Size %d DDB %v", d.Format(), d.Size(), d.Descriptor().DDB)
	}
	ext, err := d.AllocatedExtents()
	must(t, err)
	if a := allocatedBytes(ext); a == 0 || a > 1<<20 {
		t.Fatalf("Allocated %+v: want the two written blocks only", ext)
	}
	img := make([]byte, 32<<20)
	copy(img, "boot sector")
	copy(img[20<<20:], bytes.Repeat([]byte{7}, 8192))
	coversNonZero(t, "vmfs thin", img, ext)
	sameBytes(t, "vmfs thin", readDisk(t, d, d.Size()), img)
}
