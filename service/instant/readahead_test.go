package instant

import (
	"bytes"
	"sync"
	"testing"
	"time"
)

type countingReader struct {
	mu    sync.Mutex
	data  []byte
	bytes int64
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	c.mu.Lock()
	c.bytes += int64(len(p))
	c.mu.Unlock()
	return bytes.NewReader(c.data).ReadAt(p, off)
}

func (c *countingReader) read() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

func TestReadahead(t *testing.T) {
	base := &countingReader{data: make([]byte, 64<<20)}
	ra := &readahead{base: base, size: 64 << 20, window: 8 << 20}
	// Random reads prefetch nothing.
	ra.saw(5<<20, 4096)
	ra.saw(1<<20, 4096)
	time.Sleep(50 * time.Millisecond)
	if n := base.read(); n != 0 {
		t.Fatalf("random reads prefetched %d bytes", n)
	}
	// A sequential stream is read ahead by the window, no further.
	for off := int64(0); off < 4<<20; off += 1 << 20 {
		ra.saw(off, 1<<20)
	}
	deadline := time.Now().Add(5 * time.Second)
	for base.read() < 8<<20 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	if n := base.read(); n < 8<<20 || n > 12<<20 {
		t.Fatalf("prefetched %d bytes for a stream at 4 MiB with an 8 MiB window", n)
	}
	// The end of the disk bounds it.
	ra.saw(63<<20, 1<<20)
	ra.saw(64<<20, 0)
}
