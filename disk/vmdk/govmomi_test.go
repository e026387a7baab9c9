package vmdk

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	govmdk "github.com/vmware/govmomi/vmdk"
)

// TestGovmomiStatOfOurStream checks govmomi's import-side parser (used by
// govc import.vmdk / ImportVApp) accepts what StreamWriter produces.
func TestGovmomiStatOfOurStream(t *testing.T) {
	dir := t.TempDir()
	img := makeRandomImage(t, filepath.Join(dir, "r.raw"), 3<<20, 1)
	out := filepath.Join(dir, "ours.vmdk")
	f, err := os.Create(out)
	must(t, err)
	w, err := NewStreamWriter(f, int64(len(img)), StreamWriterOptions{})
	must(t, err)
	must(t, w.WriteGrainsAt(img, 0))
	must(t, w.Close())
	must(t, f.Close())
	info, err := govmdk.Stat(out)
	if err != nil {
		t.Fatalf("govmomi vmdk.Stat: %v", err)
	}
	if info.Capacity != int64(len(img)) || info.Descriptor.Type != "streamOptimized" ||
		len(info.Descriptor.Extent) != 1 || info.Descriptor.Extent[0].Size != int64(len(img))/SectorSize {
		t.Fatalf("govmomi sees capacity %d, descriptor %+v", info.Capacity, info.Descriptor)
	}
}

// TestGovmomiWriterOutput decodes govmomi's streamOptimized writer
// (v0.54.0). That writer does not pad grains to sector boundaries and writes
// 64-bit grain table entries, so neither QEMU (qemu-img convert fails with
// EINVAL) nor a spec-conforming reader can decode past its first grain. We
// require the first grain to come out right and the rest to be refused with
// ErrCorrupt, not a panic or wrong data.
func TestGovmomiWriterOutput(t *testing.T) {
	dir := t.TempDir()
	img := makeRandomImage(t, filepath.Join(dir, "r.raw"), 4<<20, 9)
	out := filepath.Join(dir, "govmomi.vmdk")
	w, err := govmdk.NewStreamOptimizedWriter(out, int64(len(img)))
	must(t, err)
	must(t, w.Write(bytes.NewReader(img)))
	must(t, w.Close())

	f, err := os.Open(out)
	must(t, err)
	defer f.Close()
	s, err := NewStreamReader(f)
	must(t, err)
	off, data, err := s.Next()
	must(t, err)
	if off != 0 {
		t.Fatalf("first grain at %d", off)
	}
	sameBytes(t, "first govmomi grain", data, img[:len(data)])
	for {
		_, _, err = s.Next()
		if err != nil {
			break
		}
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("after the first unpadded grain: %v, want ErrCorrupt", err)
	}
	t.Logf("as expected: %v", err)

	d, err := Open(out)
	if err == nil {
		defer d.Close()
		_, err = d.ReadAt(make([]byte, d.Size()), 0)
	}
	if err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("random access to govmomi output succeeded; its grain tables are 64-bit")
	}
}
