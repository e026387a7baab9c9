package repository

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// orderedSink records Stream's writes and fails the test on writes that
// overlap in time or go backwards on the disk.
type orderedSink struct {
	mu       sync.Mutex
	buf      []byte
	inFlight atomic.Int32
	writes   int
	end      int64 // end of the last write
	errs     []string
	failAt   int // > 0: the failAt-th write fails
	onWrite  func()
}

var errSinkFull = errors.New("sink full")

func (s *orderedSink) WriteAt(p []byte, off int64) (int, error) {
	if s.inFlight.Add(1) != 1 {
		s.mu.Lock()
		s.errs = append(s.errs, fmt.Sprintf("write at %d overlaps another write", off))
		s.mu.Unlock()
	}
	// Give an overlapping write the time to show itself.
	time.Sleep(50 * time.Microsecond)
	defer s.inFlight.Add(-1)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes++
	if s.failAt > 0 && s.writes == s.failAt {
		return 0, errSinkFull
	}
	if off < s.end {
		s.errs = append(s.errs, fmt.Sprintf("write at %d after a write that ended at %d", off, s.end))
	}
	s.end = off + int64(len(p))
	copy(s.buf[off:], p)
	if s.onWrite != nil {
		s.onWrite()
	}
	return len(p), nil
}

// countWriter is a Writer that counts writes and can fail one.
type countWriter struct {
	buf    bytes.Buffer
	writes int
	failAt int
}

func (c *countWriter) Write(p []byte) (int, error) {
	c.writes++
	if c.failAt > 0 && c.writes == c.failAt {
		return 0, errSinkFull
	}
	return c.buf.Write(p)
}

// slicedPoint commits a base image and an incremental of it built from
// slices and small pieces (many extents of a few KiB, as scattered guest
// writes leave), and returns the incremental's id and image.
func slicedPoint(t testing.TB, r *Repository) (string, []byte, int) {
	t.Helper()
	ctx := context.Background()
	img := testDisk(11, 6<<20+777)
	base := backup(t, r, "vm", testTime, img)
	_, parent, err := r.DiskExtents(ctx, base.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	next, changed := patchImage(rand.New(rand.NewPCG(5, 6)), img, 300, 8<<10)
	s, err := r.NewSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Abort()
	ext := sliceMap(t, s, parent, next, changed)
	root, err := s.PutDisk(ctx, int64(len(next)), ext)
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Commit(ctx, NewPoint{VM: VMIdentity{Name: "vm"}, Time: testTime.Add(time.Minute), Parent: base.ID,
		Disks: []NewDisk{{Key: 2000, Capacity: int64(len(next)), Map: root}}})
	if err != nil {
		t.Fatal(err)
	}
	data := 0
	for _, e := range ext {
		if !e.Zero {
			data++
		}
	}
	return p.ID, next, data
}

// TestStreamWritesInDiskOrder: Stream's writes never overlap in time, go
// forward on the disk, gather small adjacent extents into fewer writes,
// and restore the image byte for byte. (Before the single writer, three
// workers wrote their jobs concurrently and out of order.)
func TestStreamWritesInDiskOrder(t *testing.T) {
	for _, enc := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "encrypted"}[enc], func(t *testing.T) {
			opts := []TestOption{WithPackSize(512 << 10)}
			if !enc {
				opts = append(opts, WithNoEncryption())
			}
			r := TestRepository(t, opts...)
			id, img, extents := slicedPoint(t, r)
			d, err := r.OpenDisk(context.Background(), id, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			sink := &orderedSink{buf: make([]byte, len(img))}
			var last int64
			prev := int64(-1)
			if err := d.Stream(context.Background(), sink, func(done int64) {
				if done < prev {
					t.Errorf("progress went back from %d to %d", prev, done)
				}
				prev, last = done, done
			}); err != nil {
				t.Fatalf("Stream: %v", err)
			}
			for _, e := range sink.errs {
				t.Error(e)
			}
			if !bytes.Equal(sink.buf, img) {
				t.Fatal("restored bytes differ")
			}
			if last != int64(len(img)) {
				t.Errorf("progress ended at %d, want %d", last, len(img))
			}
			if sink.writes*4 > extents {
				t.Errorf("%d writes for %d data extents: small adjacent extents were not gathered", sink.writes, extents)
			}
			// StreamTo: the same pipeline, holes as zeros, to a plain Writer.
			cw := &countWriter{}
			var lastTo int64
			n, err := d.StreamTo(context.Background(), cw, func(done int64) { lastTo = done })
			if err != nil || n != int64(len(img)) || !bytes.Equal(cw.buf.Bytes(), img) {
				t.Fatalf("StreamTo: %d bytes, %v; equal %v", n, err, bytes.Equal(cw.buf.Bytes(), img))
			}
			if lastTo != int64(len(img)) {
				t.Errorf("StreamTo progress ended at %d, want %d", lastTo, len(img))
			}
			if cw.writes*4 > extents {
				t.Errorf("StreamTo: %d writes for %d data extents", cw.writes, extents)
			}
		})
	}
}

// TestStreamStopsOnCancelAndWriteError: a cancelled context or a failing
// write ends Stream with that error, every goroutine returned.
func TestStreamStopsOnCancelAndWriteError(t *testing.T) {
	r := TestRepository(t, WithPackSize(512<<10))
	img := testDisk(21, 24<<20)
	for i := 0; i < len(img); i += 4096 { // no holes: many jobs, many writes
		img[i] |= 1
	}
	p := backup(t, r, "vm", testTime, img)
	streamJobMax = 4
	defer func() { streamJobMax = 256 }()
	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		d, err := r.OpenDisk(ctx, p.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		sink := &orderedSink{buf: make([]byte, len(img)), onWrite: cancel}
		if err := d.Stream(ctx, sink, nil); !errors.Is(err, context.Canceled) {
			t.Fatalf("Stream after cancel: %v, want context.Canceled", err)
		}
		if sink.writes > 2*(defaultWorkers()+2)+1 {
			t.Errorf("%d writes after the cancel", sink.writes)
		}
	})
	t.Run("write error", func(t *testing.T) {
		d, err := r.OpenDisk(context.Background(), p.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		sink := &orderedSink{buf: make([]byte, len(img)), failAt: 3}
		if err := d.Stream(context.Background(), sink, nil); !errors.Is(err, errSinkFull) {
			t.Fatalf("Stream: %v, want the write error", err)
		}
		cw := &countWriter{failAt: 3}
		if _, err := d.StreamTo(context.Background(), cw, nil); !errors.Is(err, errSinkFull) {
			t.Fatalf("StreamTo: %v, want the write error", err)
		}
	})
}

// BenchmarkDiskReaderStream restores to a file: "full" is a 64 MiB disk of
// 256 KiB chunks (random, text-like and zero runs), "sliced" an
// incremental of thousands of small slices and pieces.
func BenchmarkDiskReaderStream(b *testing.B) {
	ctx := context.Background()
	for _, tc := range []string{"full", "sliced"} {
		b.Run(tc, func(b *testing.B) {
			r := TestRepository(b)
			var id string
			var img []byte
			if tc == "full" {
				img = testDisk(31, 64<<20)
				id = backup(b, r, "vm", testTime, img).ID
			} else {
				id, img, _ = slicedPoint(b, r)
			}
			out := filepath.Join(b.TempDir(), "out")
			b.SetBytes(int64(len(img)))
			b.ReportAllocs()
			start := cpuTime()
			for b.Loop() {
				f, err := os.Create(out)
				if err != nil {
					b.Fatal(err)
				}
				d, err := r.OpenDisk(ctx, id, 0)
				if err != nil {
					b.Fatal(err)
				}
				if err := d.Stream(ctx, f, nil); err != nil {
					b.Fatal(err)
				}
				f.Close()
				d.Close()
			}
			reportCPU(b, int64(len(img)), start)
		})
	}
}
