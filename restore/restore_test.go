package restore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/vmconfig"
	"github.com/vmvault/vmvault/vsphere"
)

// point commits a restore point with one disk: data chunks and holes as
// given (nil = hole of that length), and cfg as its configuration blob.
func point(t *testing.T, r *repository.Repository, cfg []byte, parts ...[]byte) (string, []byte) {
	t.Helper()
	ctx := context.Background()
	s, err := r.NewSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ext []repository.Extent
	var img []byte
	var off int64
	for _, p := range parts {
		if p[0] == 0 && bytes.Count(p, []byte{0}) == len(p) {
			ext = append(ext, repository.Extent{Offset: off, Length: int64(len(p)), Zero: true})
		} else {
			id, _, _, err := s.PutChunk(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			ext = append(ext, repository.Extent{Offset: off, Length: int64(len(p)), ID: id})
		}
		img = append(img, p...)
		off += int64(len(p))
	}
	root, err := s.PutDisk(ctx, off, ext)
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Commit(ctx, repository.NewPoint{VM: repository.VMIdentity{Name: "unit"}, Time: time.Now(), Config: cfg,
		Disks: []repository.NewDisk{{Key: 2000, Label: "Hard disk 1", Capacity: off, Map: root}}})
	if err != nil {
		t.Fatal(err)
	}
	return p.ID, img
}

func random(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32() | 1)
	}
	return b
}

// TestDownloadAndDigest: a raw download is the disk's bytes, sparse where
// the disk has holes; its digest, DiskDigest's and sha256 of the bytes agree.
func TestDownloadAndDigest(t *testing.T) {
	r := repository.TestRepository(t)
	ctx := context.Background()
	pt, img := point(t, r, nil, random(1, 300<<10), make([]byte, 2<<20), random(2, 100<<10), make([]byte, 1<<20))
	e := New(r, nil, Options{})
	out := filepath.Join(t.TempDir(), "d.raw")
	res, err := e.DownloadDisk(ctx, DownloadRequest{RestorePoint: pt[:10], Disk: 0, Output: out})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil || !bytes.Equal(b, img) {
		t.Fatalf("download differs (%v)", err)
	}
	sum := sha256.Sum256(img)
	want := hex.EncodeToString(sum[:])
	d, err := DiskDigest(ctx, r, pt, 0)
	if err != nil || d != want || res.Disks[0].SHA256 != want {
		t.Fatalf("digests: result %s, DiskDigest %s (%v), want %s", res.Disks[0].SHA256, d, err, want)
	}
	if res.Disks[0].BytesWritten != 400<<10 {
		t.Errorf("wrote %d data bytes, want %d (holes skipped)", res.Disks[0].BytesWritten, 400<<10)
	}
	// A point without a VM configuration cannot be restored as a VM.
	vc := &vsphere.Client{}
	if _, err := New(r, vc, Options{}).RestoreVM(ctx, VMRequest{RestorePoint: pt}); !errors.Is(err, ErrPointUnusable) {
		t.Errorf("RestoreVM of an image point: %v", err)
	}
}

// TestLoadPointChecks: configuration disks must match the point's disks.
func TestLoadPointChecks(t *testing.T) {
	r := repository.TestRepository(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		cfg  vmconfig.VMConfig
		want error
	}{
		{"ok", vmconfig.VMConfig{Version: 1, Name: "v", Disks: []vmconfig.DiskConfig{{Key: 2000, Index: 0, CapacityBytes: 1}}}, nil},
		{"wrong key", vmconfig.VMConfig{Version: 1, Name: "v", Disks: []vmconfig.DiskConfig{{Key: 2001, Index: 0}}}, ErrPointUnusable},
		{"index out of range", vmconfig.VMConfig{Version: 1, Name: "v", Disks: []vmconfig.DiskConfig{{Key: 2000, Index: 3}}}, ErrPointUnusable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := vmconfig.Encode(tc.cfg)
			pt, _ := point(t, r, b, random(3, 4096))
			_, _, err := New(r, nil, Options{}).loadPoint(ctx, pt, true)
			if !errors.Is(err, tc.want) && !(tc.want == nil && err == nil) {
				t.Fatalf("loadPoint: %v, want %v", err, tc.want)
			}
		})
	}
}

func TestCheckControllers(t *testing.T) {
	ctl := []vsphere.ControllerSpec{{Type: "pvscsi"}, {Type: "sata"}}
	for _, tc := range []struct {
		name  string
		disks []vsphere.DiskSpec
		ok    bool
	}{
		{"distinct", []vsphere.DiskSpec{{Controller: 0, Unit: 0}, {Controller: 0, Unit: 1}, {Controller: 1, Unit: 0}}, true},
		{"same unit", []vsphere.DiskSpec{{Controller: 0, Unit: 1}, {Controller: 0, Unit: 1}}, false},
		{"scsi unit 7", []vsphere.DiskSpec{{Controller: 0, Unit: 7}}, false},
		{"sata unit 7", []vsphere.DiskSpec{{Controller: 1, Unit: 7}}, true},
		{"negative", []vsphere.DiskSpec{{Controller: 1, Unit: -1}}, false},
	} {
		err := checkControllers(vsphere.VMSpec{Controllers: ctl, Disks: tc.disks})
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

func TestParseRehearsal(t *testing.T) {
	src, pt, created, ok := parseRehearsal(RehearsalMarker + " source=web point=abc created=2026-11-29T18:00:00Z\nRestore rehearsal")
	if !ok || src != "web" || pt != "abc" || !created.Equal(time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)) {
		t.Errorf("parsed %q %q %v %v", src, pt, created, ok)
	}
	for _, s := range []string{"", "my notes", RehearsalMarker + " source=web", RehearsalMarker + " created=yesterday", RehearsalMarker + "x created=2026-11-29T18:00:00Z"} {
		if _, _, _, ok := parseRehearsal(s); ok {
			t.Errorf("%q parsed as a rehearsal", s)
		}
	}
}

// FuzzParseRehearsal: VM notes are free text from vCenter; parsing never
// panics and what parses has a time.
func FuzzParseRehearsal(f *testing.F) {
	f.Add(RehearsalMarker + " source=web point=abc created=2026-11-29T18:00:00Z\nnotes")
	f.Add(RehearsalMarker + " created=")
	f.Add("anything")
	f.Fuzz(func(t *testing.T, s string) {
		if _, _, c, ok := parseRehearsal(s); ok && c.IsZero() {
			t.Fatal("parsed without a time")
		}
	})
}

// TestSparseWriter: whatever the write sizes, the file holds the stream and
// only non-zero 64 KiB blocks are written.
func TestSparseWriter(t *testing.T) {
	blk := len(zeroBlock)
	data := make([]byte, 10*blk+123)
	copy(data[blk:], random(4, blk))       // block 1
	copy(data[2*blk:], random(5, blk/2))   // half of block 2
	copy(data[5*blk+7:], random(6, 3*blk)) // blocks 5..8, unaligned
	copy(data[10*blk:], random(7, 123))    // the tail
	for _, step := range []int{1 << 20, blk, 4096, 1000, 7} {
		f, err := os.Create(filepath.Join(t.TempDir(), "s"))
		if err != nil {
			t.Fatal(err)
		}
		w := &sparseWriter{f: f}
		for off := 0; off < len(data); off += step {
			if _, err := w.Write(data[off:min(off+step, len(data))]); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.Truncate(int64(len(data))); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(f.Name())
		f.Close()
		if !bytes.Equal(got, data) {
			t.Fatalf("step %d: file differs", step)
		}
		if step >= blk && w.data != int64(6*blk+123) {
			t.Errorf("step %d: wrote %d bytes, want %d", step, w.data, 6*blk+123)
		}
		if w.data >= int64(len(data)) {
			t.Errorf("step %d: wrote everything (%d)", step, w.data)
		}
	}
}
