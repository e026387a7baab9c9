package instant

import (
	"io"
	"sync"
)

// readahead warms the repository reader's blob cache ahead of a
// sequential reader (a VM booting, a Storage vMotion, qemu-img convert):
// while go-nfs encodes one READ's reply, the blobs of the next ones are
// fetched, decrypted and verified on another core. It reads through the
// same DiskReader, so what it fetches is verified and cached exactly as a
// client's own read would be; it never changes what a read returns.
type readahead struct {
	base   io.ReaderAt
	size   int64
	window int64

	mu      sync.Mutex
	next    int64 // where a sequential stream continues
	ahead   int64 // prefetched up to here
	running bool
}

const (
	readaheadWindow = 8 << 20
	readaheadChunk  = 1 << 20
)

var readaheadBufs = sync.Pool{New: func() any { b := make([]byte, readaheadChunk); return &b }}

// saw notes a client read of [off, off+n) and starts prefetching when it
// continues the previous one.
func (r *readahead) saw(off int64, n int) {
	end := off + int64(n)
	r.mu.Lock()
	seq := off == r.next && n > 0
	r.next = end
	if !seq {
		r.ahead = end
		r.mu.Unlock()
		return
	}
	if r.ahead < end {
		r.ahead = end
	}
	if r.running || r.ahead >= min(end+r.window, r.size) {
		r.mu.Unlock()
		return
	}
	r.running = true
	r.mu.Unlock()
	go r.run()
}

func (r *readahead) run() {
	bp := readaheadBufs.Get().(*[]byte)
	defer readaheadBufs.Put(bp)
	for {
		r.mu.Lock()
		from, limit := r.ahead, min(r.next+r.window, r.size)
		if from >= limit {
			r.running = false
			r.mu.Unlock()
			return
		}
		n := min(int64(len(*bp)), limit-from)
		r.ahead = from + n
		r.mu.Unlock()
		if _, err := r.base.ReadAt((*bp)[:n], from); err != nil && err != io.EOF {
			// The client's own read will meet and report it.
			r.mu.Lock()
			r.running = false
			r.mu.Unlock()
			return
		}
	}
}
