package repository

import (
	"runtime"
	"sync"
)

// encBufs recycles the two buffers a put needs (compressed payload, sealed
// blob). It replaced a sync.Pool of 1 MiB buffers: CDC chunks average
// 1 MiB but reach 8 MiB, so about half the puts outgrew their pooled
// buffer and allocated two fresh ones (zeroed, page-faulted, collected),
// and the collector empties a sync.Pool every other cycle, which under the
// appliance's heap limit comes every ~100 MiB of allocation. The stage
// table (docs/PERFORMANCE.md §13) measured that as 0.4 CPU-s per GB of
// allocation + GC on a dense random disk. A free list survives GC; it
// holds at most encBufMax buffers, each sized to the blobs seen.
var encBufs = &bufList{max: 4 * runtime.GOMAXPROCS(0)}

type bufList struct {
	mu   sync.Mutex
	bufs [][]byte
	max  int
}

// encBound is the capacity an encode of n plaintext bytes may use: zstd's
// raw-block framing on incompressible data, or a nonce and tag.
func encBound(n int) int { return n + n>>7 + 256 }

// get returns an empty buffer of capacity >= n: the smallest held one that
// fits, else a new one rounded up to 1 MiB (so blobs of neighbouring sizes
// reuse it).
func (l *bufList) get(n int) []byte {
	l.mu.Lock()
	best := -1
	for i, b := range l.bufs {
		if cap(b) >= n && (best < 0 || cap(b) < cap(l.bufs[best])) {
			best = i
		}
	}
	if best >= 0 {
		b := l.bufs[best]
		last := len(l.bufs) - 1
		l.bufs[best] = l.bufs[last]
		l.bufs[last] = nil
		l.bufs = l.bufs[:last]
		l.mu.Unlock()
		return b[:0]
	}
	l.mu.Unlock()
	const step = 1 << 20
	return make([]byte, 0, (n+step-1)/step*step)
}

// put keeps b for reuse; when the list is full it replaces the smallest
// held buffer if b is larger, so the list converges on the sizes needed.
func (l *bufList) put(b []byte) {
	if cap(b) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.bufs) < l.max {
		l.bufs = append(l.bufs, b[:0])
		return
	}
	small := 0
	for i, x := range l.bufs {
		if cap(x) < cap(l.bufs[small]) {
			small = i
		}
	}
	if cap(l.bufs[small]) < cap(b) {
		l.bufs[small] = b[:0]
	}
}
