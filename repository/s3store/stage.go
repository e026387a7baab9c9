package s3store

import (
	"fmt"
	"io"
	"os"
	"sync"
)

// stageBlock is the unit of in-memory staging: packs are written in
// 256 KiB bufio flushes, so 1 MiB blocks waste little and never need a
// copy to grow.
const stageBlock = 1 << 20

// blockFree keeps freed blocks for reuse. Not a sync.Pool: that one is
// emptied at every GC, and a fresh 1 MiB block costs its page faults and
// zeroing again (more CPU than writing to a file in the page cache). It
// holds at most what the budgets allow, so it never grows past them.
var blockFree = make(chan *[]byte, 256)

func getBlock() *[]byte {
	select {
	case b := <-blockFree:
		return b
	default:
		b := make([]byte, 0, stageBlock)
		return &b
	}
}

func putBlock(b *[]byte) {
	*b = (*b)[:0]
	select {
	case blockFree <- b:
	default:
	}
}

// budget bounds the bytes staged in memory by all of a Store's uploads in
// flight; past it, an upload spills to a local file (os.CreateTemp in
// StageDir), so memory stays bounded whatever the number of packs open
// and queued.
type budget struct {
	mu   sync.Mutex
	left int64
}

func (b *budget) take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.left < n {
		return false
	}
	b.left -= n
	return true
}

func (b *budget) give(n int64) {
	b.mu.Lock()
	b.left += n
	b.mu.Unlock()
}

// memStage is a staged object in memory blocks.
type memStage struct {
	blocks []*[]byte
	n      int64
}

func (m *memStage) write(p []byte) {
	for len(p) > 0 {
		if len(m.blocks) == 0 || len(*m.blocks[len(m.blocks)-1]) == stageBlock {
			m.blocks = append(m.blocks, getBlock())
		}
		last := m.blocks[len(m.blocks)-1]
		k := min(len(p), stageBlock-len(*last))
		*last = append(*last, p[:k]...)
		p = p[k:]
		m.n += int64(k)
	}
}

// ReadAt makes the blocks an io.ReaderAt: minio-go uploads the parts of
// a multipart upload from it in parallel, and seeks back for a retry.
func (m *memStage) ReadAt(p []byte, off int64) (int, error) {
	if off >= m.n {
		return 0, io.EOF
	}
	n := 0
	for n < len(p) && off < m.n {
		b := *m.blocks[off/stageBlock]
		c := copy(p[n:], b[off%stageBlock:])
		n += c
		off += int64(c)
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (m *memStage) free() {
	for _, b := range m.blocks {
		putBlock(b)
	}
	m.blocks = nil
}

// spill moves the staged bytes into a local file.
func (m *memStage) spill(f *os.File) error {
	for _, b := range m.blocks {
		if _, err := f.Write(*b); err != nil {
			return fmt.Errorf("spill staged upload to %s: %w", f.Name(), err)
		}
	}
	return nil
}
