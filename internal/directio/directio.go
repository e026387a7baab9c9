// Package directio owns unbuffered (O_DIRECT) writing of a restore's output
// file: extents arrive in ascending order at any byte offset, and the
// writer turns them into block-aligned writes from aligned buffers, issued
// by two goroutines while the caller fills the next buffer. The few bytes of
// a region that do not fill a whole block go through the file's ordinary
// (buffered) descriptor.
//
// Why: a restore writes each byte once and never reads it back, so the page
// cache only costs. Measured on this appliance's VM (docs/PERFORMANCE.md
// §1b): writing 1 GiB through the page cache took 0.16-0.17 s of kernel CPU
// when free pages were at hand and 1.9-2.1 s when the kernel first had to
// reclaim them (every run after the page cache filled up); with O_DIRECT
// 0.05-0.06 s at 2.5-3 GB/s, every time. A large restore through the page
// cache also evicts what the appliance's other work needs (catalogs, packs
// of running backups).
package directio

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// Align is the offset, length and memory alignment of every direct write:
// the largest logical block size of the devices Linux serves (512 or 4096).
const Align = 4096

// bufSize is one staging buffer; bufs of them are in flight. 4 MiB writes
// reached the device's 2.5-3 GB/s here (1 MiB and 16 MiB did no better).
const (
	bufSize = 4 << 20
	bufs    = 4
	writers = 2
)

// directFS are the file systems written with O_DIRECT: local ones on a
// block device, where it was measured. Elsewhere the page cache stays: on
// NFS or SMB every direct write is a synchronous round trip, FUSE and
// tmpfs have no device to bypass to, and btrfs computes data checksums
// that direct I/O makes it handle differently.
var directFS = map[int64]bool{
	0xEF53:     true, // ext2/3/4
	0x58465342: true, // xfs
}

// ErrUnsupported: the file is not on a file system of directFS, or it
// refused O_DIRECT; callers write through the file itself.
var ErrUnsupported = errors.New("direct I/O not supported")

// Writer writes a fresh (zero-filled or sparse) file with O_DIRECT. It is
// an io.WriterAt for writes in ascending, non-overlapping order, such as a
// restore's sequential stream; bytes between writes are left as they were
// (holes stay holes, apart from the zero padding of a partial block at a
// region's edge when a neighbouring block is written). Not safe for
// concurrent use.
type Writer struct {
	f      *os.File // buffered descriptor: partial blocks, and everything after a fallback
	direct *os.File
	cur    []byte // staging buffer being filled; cur[0] is at file offset at
	at     int64
	end    int64 // end of the last write: a write below it is refused

	free chan []byte
	work chan chunk
	wg   sync.WaitGroup

	mu       sync.Mutex
	err      error // first write error
	fallback bool  // the device refused a direct write: buffered from then on
	// what went each way (Counts)
	directBytes, bufferedBytes int64

	// writeDirect is the direct write (tests replace it).
	writeDirect func(b []byte, off int64) (int, error)
}

type chunk struct {
	b   []byte
	off int64
}

// Open opens f's file a second time with O_DIRECT. It returns
// ErrUnsupported for a file system not in directFS, or one that refuses
// O_DIRECT: then write through f. Close the Writer before
// truncating, syncing or closing f.
func Open(f *os.File) (*Writer, error) {
	var fs syscall.Statfs_t
	if err := syscall.Fstatfs(int(f.Fd()), &fs); err != nil {
		return nil, fmt.Errorf("statfs %s: %w", f.Name(), err)
	}
	if !directFS[int64(fs.Type)] {
		return nil, fmt.Errorf("%s: file system type %#x: %w", f.Name(), fs.Type, ErrUnsupported)
	}
	d, err := os.OpenFile(f.Name(), os.O_WRONLY|syscall.O_DIRECT, 0)
	if err != nil {
		if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.EOPNOTSUPP) {
			return nil, fmt.Errorf("%s: %w", f.Name(), ErrUnsupported)
		}
		return nil, fmt.Errorf("open %s for direct I/O: %w", f.Name(), err)
	}
	// The name must still be the file we were given.
	a, errA := f.Stat()
	b, errB := d.Stat()
	if errA != nil || errB != nil || !os.SameFile(a, b) {
		d.Close()
		return nil, fmt.Errorf("open %s for direct I/O: the name no longer refers to the file being written", f.Name())
	}
	w := &Writer{f: f, direct: d, free: make(chan []byte, bufs), work: make(chan chunk, bufs)}
	w.writeDirect = d.WriteAt
	for range bufs {
		w.free <- alignedBuf(bufSize)
	}
	for range writers {
		w.wg.Add(1)
		go w.writer()
	}
	return w, nil
}

func alignedBuf(n int) []byte {
	b := make([]byte, n+Align)
	skip := int(-uintptr(unsafe.Pointer(&b[0])) & (Align - 1))
	return b[skip : skip+n : skip+n][:0]
}

// writer issues direct writes; writes to distinct blocks may complete in
// any order.
func (w *Writer) writer() {
	defer w.wg.Done()
	for c := range w.work {
		if w.failed() == nil {
			w.put(c.b, c.off)
		}
		w.free <- c.b[:0]
	}
}

func (w *Writer) put(b []byte, off int64) {
	w.mu.Lock()
	fallback := w.fallback
	w.mu.Unlock()
	if !fallback {
		_, err := w.writeDirect(b, off)
		if err == nil {
			w.count(&w.directBytes, len(b))
			return
		}
		if !errors.Is(err, syscall.EINVAL) {
			w.fail(fmt.Errorf("write at %d: %w", off, err))
			return
		}
		// Opened, but the device or file system refuses the write
		// itself: nothing was written, so write it the ordinary way.
		w.mu.Lock()
		w.fallback = true
		w.mu.Unlock()
	}
	if _, err := w.f.WriteAt(b, off); err != nil {
		w.fail(fmt.Errorf("write at %d: %w", off, err))
		return
	}
	w.count(&w.bufferedBytes, len(b))
}

func (w *Writer) count(n *int64, k int) {
	w.mu.Lock()
	*n += int64(k)
	w.mu.Unlock()
}

func (w *Writer) fail(err error) {
	w.mu.Lock()
	if w.err == nil {
		w.err = err
	}
	w.mu.Unlock()
}

func (w *Writer) failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// WriteAt writes p at off, which must not be below the end of the previous
// write. An error of an earlier, asynchronous write is returned by a later
// WriteAt or by Close.
func (w *Writer) WriteAt(p []byte, off int64) (int, error) {
	if err := w.failed(); err != nil {
		return 0, err
	}
	if off < w.end {
		return 0, fmt.Errorf("directio: write at %d below the previous write's end %d", off, w.end)
	}
	n := len(p)
	if len(w.cur) > 0 && off != w.at+int64(len(w.cur)) {
		if err := w.flushRegion(); err != nil {
			return 0, err
		}
	}
	for len(p) > 0 {
		if w.cur == nil {
			if r := off % Align; r != 0 {
				// A region's first partial block.
				k := min(len(p), int(Align-r))
				if err := w.buffered(p[:k], off); err != nil {
					return 0, err
				}
				p, off = p[k:], off+int64(k)
				continue
			}
			w.cur, w.at = <-w.free, off
		}
		k := copy(w.cur[len(w.cur):cap(w.cur)], p)
		w.cur = w.cur[:len(w.cur)+k]
		p, off = p[k:], off+int64(k)
		if len(w.cur) == cap(w.cur) {
			w.submit(len(w.cur))
		}
	}
	w.end = off
	return n, nil
}

func (w *Writer) buffered(b []byte, off int64) error {
	if _, err := w.f.WriteAt(b, off); err != nil {
		return fmt.Errorf("write at %d: %w", off, err)
	}
	w.count(&w.bufferedBytes, len(b))
	return nil
}

// submit hands the first n (aligned) bytes of cur to the writer goroutine.
func (w *Writer) submit(n int) {
	w.work <- chunk{b: w.cur[:n], off: w.at}
	w.cur = nil
}

// flushRegion ends the current region: its whole blocks go direct, the
// partial last block through the buffered descriptor (its other bytes are
// not ours to write: the next region may start inside that block).
func (w *Writer) flushRegion() error {
	if w.cur == nil {
		return nil
	}
	whole := len(w.cur) &^ (Align - 1)
	tail, tailAt := w.cur[whole:], w.at+int64(whole)
	if whole == 0 {
		err := w.buffered(tail, tailAt)
		w.free <- w.cur[:0]
		w.cur = nil
		return err
	}
	// The tail is written before the buffer is handed over (the writer
	// goroutine reuses it); the blocks differ, so the order does not matter.
	if len(tail) > 0 {
		if err := w.buffered(tail, tailAt); err != nil {
			return err
		}
	}
	w.submit(whole)
	return nil
}

// Close writes what is staged, waits for every write and closes the direct
// descriptor (not the file given to Open). It returns the first error.
func (w *Writer) Close() error {
	if w.work == nil {
		return w.failed()
	}
	err := w.flushRegion()
	close(w.work)
	w.wg.Wait()
	w.work = nil
	if cerr := w.direct.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close direct descriptor: %w", cerr)
	}
	if ferr := w.failed(); ferr != nil {
		err = ferr
	}
	return err
}

// Counts returns the bytes written direct and through the page cache.
func (w *Writer) Counts() (direct, buffered int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.directBytes, w.bufferedBytes
}

var _ io.WriterAt = (*Writer)(nil)
