package repository

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// testDisk builds a disk image: random, compressible and zero regions.
func testDisk(seed uint64, size int) []byte {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, size)
	for off := 0; off < size; {
		n := min(size-off, 64<<10+rng.IntN(512<<10))
		switch rng.IntN(3) {
		case 0: // random
			for i := off; i < off+n; i += 8 {
				v := rng.Uint64()
				for j := 0; j < 8 && i+j < off+n; j++ {
					b[i+j] = byte(v >> (8 * j))
				}
			}
		case 1: // compressible text-like
			for i := off; i < off+n; i++ {
				b[i] = "vmvault backs up virtual machines "[i%34]
			}
		case 2: // zeros
		}
		off += n
	}
	return b
}

// putImage chunks img with fixed-size chunks (zero chunks become holes) and
// stores it through s.
func putImage(t testing.TB, s *Session, img []byte, chunk int) (ID, int64) {
	t.Helper()
	ctx := context.Background()
	var ext []Extent
	var stored int64
	for off := 0; off < len(img); off += chunk {
		c := img[off:min(off+chunk, len(img))]
		if isZero(c) {
			ext = append(ext, Extent{Offset: int64(off), Length: int64(len(c)), Zero: true})
			continue
		}
		id, _, n, err := s.PutChunk(ctx, c)
		if err != nil {
			t.Fatalf("PutChunk at %d: %v", off, err)
		}
		stored += int64(n)
		ext = append(ext, Extent{Offset: int64(off), Length: int64(len(c)), ID: id})
	}
	root, err := s.PutDisk(ctx, int64(len(img)), ext)
	if err != nil {
		t.Fatalf("PutDisk: %v", err)
	}
	return root, stored
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

var testTime = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// backup stores images as one restore point.
func backup(t testing.TB, r *Repository, name string, at time.Time, imgs ...[]byte) Point {
	t.Helper()
	ctx := context.Background()
	s, err := r.NewSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Abort()
	np := NewPoint{VM: VMIdentity{Name: name}, Time: at, Consistency: "crash", Config: []byte(`{"vm":"` + name + `"}`)}
	for i, img := range imgs {
		root, stored := putImage(t, s, img, 256<<10)
		np.Disks = append(np.Disks, NewDisk{Key: int32(2000 + i), Label: "disk", Capacity: int64(len(img)), Map: root,
			Stats: DiskStats{LogicalBytes: int64(len(img)), StoredBytes: stored}})
	}
	p, err := s.Commit(ctx, np)
	if err != nil {
		t.Fatalf("Commit: %v", err)
	}
	return p
}

// verifyPoint reads every disk back through ReadAt and Stream.
func verifyPoint(t testing.TB, r *Repository, id string, imgs ...[]byte) {
	t.Helper()
	ctx := context.Background()
	for i, img := range imgs {
		d, err := r.OpenDisk(ctx, id, i)
		if err != nil {
			t.Fatalf("OpenDisk %s/%d: %v", id, i, err)
		}
		if d.Size() != int64(len(img)) {
			t.Fatalf("size %d, want %d", d.Size(), len(img))
		}
		got := make([]byte, len(img))
		// Odd-sized reads cross extent and segment boundaries.
		for off := 0; off < len(img); {
			n := min(len(img)-off, 100_003)
			if _, err := d.ReadAt(got[off:off+n], int64(off)); err != nil {
				t.Fatalf("ReadAt %d: %v", off, err)
			}
			off += n
		}
		if !bytes.Equal(got, img) {
			t.Fatalf("point %s disk %d: ReadAt data differs", id, i)
		}
		out := filepath.Join(t.TempDir(), "disk.raw")
		f, err := os.Create(out)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(int64(len(img))); err != nil {
			t.Fatal(err)
		}
		var last int64
		if err := d.Stream(ctx, f, func(done int64) { last = done }); err != nil {
			t.Fatalf("Stream: %v", err)
		}
		f.Close()
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, img) {
			t.Fatalf("point %s disk %d: Stream data differs", id, i)
		}
		if last != int64(len(img)) {
			t.Errorf("Stream progress ended at %d, want %d", last, len(img))
		}
		var seq bytes.Buffer
		n, err := d.WriteTo(&seq)
		if err != nil || n != int64(len(img)) || !bytes.Equal(seq.Bytes(), img) {
			t.Fatalf("point %s disk %d: WriteTo wrote %d bytes (%v), data equal=%v", id, i, n, err, bytes.Equal(seq.Bytes(), img))
		}
		d.Close()
	}
}

func mustCheck(t testing.TB, r *Repository, readData bool) *CheckReport {
	t.Helper()
	rep, err := r.Check(context.Background(), CheckOptions{ReadData: readData}, nil)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	return rep
}

func requireClean(t testing.TB, r *Repository) {
	t.Helper()
	rep := mustCheck(t, r, true)
	if !rep.Clean() {
		for _, p := range rep.Problems {
			t.Errorf("problem: %s", p)
		}
		t.Fatalf("check --read-data is not clean")
	}
}
