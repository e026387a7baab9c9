package repository

import (
	"context"
	"encoding/binary"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
)

// TestMemoryBounded writes 256 MiB of unique 1 MiB chunks from 4 workers and
// checks that the heap stays small: packs stream to files, nothing
// accumulates per chunk except 32-byte ids.
func TestMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 256 MiB")
	}
	// Garbage left by earlier tests of the binary is not this test's heap.
	runtime.GC()
	r := TestRepository(t)
	ctx := context.Background()
	s, _ := r.NewSession(ctx)
	defer s.Abort()
	base := benchData(true)
	var g errgroup.Group
	var peak uint64
	sample := func() {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		if ms.HeapInuse > peak {
			peak = ms.HeapInuse
		}
	}
	n, workers := 256, 4
	if raceEnabled {
		n = 32 // the race detector makes every byte expensive; the bound is the same
	}
	for w := range workers {
		g.Go(func() error {
			data := append([]byte(nil), base...)
			for i := w; i < n; i += workers {
				binary.LittleEndian.PutUint64(data, uint64(i))
				if _, _, _, err := s.PutChunk(ctx, data); err != nil {
					return err
				}
			}
			return nil
		})
	}
	done := make(chan error)
	go func() { done <- g.Wait() }()
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			sample()
			t.Logf("peak heap in use: %.1f MiB", float64(peak)/(1<<20))
			if peak > 96<<20 {
				t.Fatalf("peak heap %d MiB for 4 writers", peak>>20)
			}
			return
		case <-time.After(5 * time.Millisecond):
			sample()
		}
	}
}
