package vsphere

import (
	"bytes"
	"io"
	"os"
	"testing"

	"github.com/vmvault/vmvault/internal/extent"
)

func newTestExportSource(t *testing.T, size int64, keep []Extent) *ExportSource {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "x")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	s := &ExportSource{f: f, size: size}
	if keep != nil {
		s.keep = extent.Normalize(keep, size)
		if s.keep == nil {
			s.keep = []Extent{}
		}
	}
	return s
}

// TestExportSourceKeepsOnlyPlannedExtents: grains are staged only where
// they meet the kept extents; reads inside them see the grain bytes (zeros
// where no grain came), reads outside them fail instead of reading zeros.
func TestExportSourceKeepsOnlyPlannedExtents(t *testing.T) {
	const size = 1 << 16
	grain := bytes.Repeat([]byte{0xAB}, 8192)
	tests := []struct {
		name    string
		keep    []Extent
		readOff int64
		readLen int
		wantErr bool
		want    byte // every byte read
	}{
		{"inside a kept extent", []Extent{{4096, 4096}}, 4096, 4096, false, 0xAB},
		{"across two touching extents", []Extent{{0, 4096}, {4096, 4096}}, 0, 8192, false, 0xAB},
		{"kept extent without a grain reads zeros", []Extent{{32768, 4096}}, 32768, 4096, false, 0},
		{"outside every kept extent", []Extent{{4096, 4096}}, 0, 4096, true, 0},
		{"straddling a kept edge", []Extent{{4096, 4096}}, 6144, 4096, true, 0},
		{"nothing kept", []Extent{}, 0, 1, true, 0},
		{"everything kept (nil)", nil, 0, 8192, false, 0xAB},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestExportSource(t, size, tc.keep)
			if err := s.stage(0, grain); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, tc.readLen)
			_, err := s.ReadAt(buf, tc.readOff)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ReadAt: %v, want error %v", err, tc.wantErr)
			}
			if err == nil && !bytes.Equal(buf, bytes.Repeat([]byte{tc.want}, tc.readLen)) {
				t.Errorf("read %x…, want all %#x", buf[:8], tc.want)
			}
			if tc.keep != nil && len(tc.keep) > 0 && tc.keep[0].Offset >= 8192 {
				return
			}
			// Bytes of the grain outside keep were dropped, never staged.
			if tc.keep != nil {
				raw := make([]byte, 8192)
				if _, err := s.f.ReadAt(raw, 0); err != nil {
					t.Fatal(err)
				}
				for i, b := range raw {
					in := false
					for _, k := range tc.keep {
						in = in || int64(i) >= k.Offset && int64(i) < k.End()
					}
					if in != (b == 0xAB) {
						t.Fatalf("staged byte %d = %#x (kept %v)", i, b, in)
					}
				}
			}
		})
	}
}

func TestExportSourceBounds(t *testing.T) {
	s := newTestExportSource(t, 4096, nil)
	if err := s.stage(4000, make([]byte, 200)); err == nil {
		t.Error("a grain past the end of the disk was staged")
	}
	if err := s.stage(-1, make([]byte, 1)); err == nil {
		t.Error("a grain at a negative offset was staged")
	}
	if _, err := s.ReadAt(make([]byte, 1), -1); err == nil {
		t.Error("negative read offset accepted")
	}
	if n, err := s.ReadAt(make([]byte, 10), 4090); n != 6 || err != io.EOF {
		t.Errorf("read at the end: %d, %v; want 6, EOF", n, err)
	}
	if _, err := s.ReadAt(make([]byte, 1), 4096); err != io.EOF {
		t.Errorf("read past the end: %v", err)
	}
}
