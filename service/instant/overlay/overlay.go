package overlay

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"

	"github.com/vmvault/vmvault/internal/extent"
)

// ErrNoSpace: a write would take the store past its limit. It matches
// syscall.ENOSPC, which go-nfs answers as NFS3ERR_NOSPC.
var ErrNoSpace = fmt.Errorf("overlay limit reached: %w", syscall.ENOSPC)

// ErrBeyondEnd: a write past the end of the disk (EFBIG for NFS).
var ErrBeyondEnd = fmt.Errorf("write past the end of the disk: %w", syscall.EFBIG)

// ErrClosed: the store was closed.
var ErrClosed = errors.New("overlay closed")

// ErrCorrupt: the map snapshot fails its checksum or does not fit the disk.
var ErrCorrupt = errors.New("overlay map corrupt")

const (
	mapMagic     = "VMVOVLM1"
	recSize      = 24 // offset, length, crc32c, magic
	recMagic     = 0x4f564c4a
	compactAfter = 4096 // journal records before a new snapshot
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Options tune a Store.
type Options struct {
	// Limit caps the bytes written (the sum of the written ranges); 0 is
	// no limit.
	Limit int64
	// NoSync skips fsync (tests of other packages only).
	NoSync bool
}

// Store is the copy-on-write overlay of one disk. It is safe for
// concurrent use.
type Store struct {
	dir, name string
	size      int64
	opts      Options

	data, journal *os.File

	mu      sync.RWMutex
	ext     []extent.Extent // sorted, disjoint, not touching
	used    int64
	pending []extent.Extent // written, not yet in the journal
	seq     uint64          // writes so far
	closed  bool

	syncMu  sync.Mutex
	durable uint64 // writes made durable
	jrecs   int    // records in the journal file
}

// Paths returns the files of store name in dir.
func Paths(dir, name string) []string {
	b := filepath.Join(dir, name)
	return []string{b + ".data", b + ".map", b + ".journal"}
}

// Remove deletes the files of store name in dir.
func Remove(dir, name string) error {
	var errs []error
	for _, p := range Paths(dir, name) {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
		_ = os.Remove(p + ".tmp")
	}
	return errors.Join(errs...)
}

// Open opens (or creates) store name in dir for a disk of size bytes,
// replaying what an earlier process made durable.
func Open(dir, name string, size int64, opts Options) (*Store, error) {
	if size < 0 || opts.Limit < 0 {
		return nil, fmt.Errorf("overlay %s: negative size or limit", name)
	}
	if name == "" || filepath.Base(name) != name {
		return nil, fmt.Errorf("overlay %q: not a plain name", name)
	}
	s := &Store{dir: dir, name: name, size: size, opts: opts}
	p := Paths(dir, name)
	var err error
	if s.data, err = os.OpenFile(p[0], os.O_RDWR|os.O_CREATE, 0o600); err != nil {
		return nil, fmt.Errorf("open overlay: %w", err)
	}
	fail := func(err error) (*Store, error) {
		s.data.Close()
		if s.journal != nil {
			s.journal.Close()
		}
		return nil, err
	}
	fi, err := s.data.Stat()
	if err != nil {
		return fail(err)
	}
	if fi.Size() != size {
		if fi.Size() > size {
			return fail(fmt.Errorf("overlay %s: data file is %d bytes, the disk %d", name, fi.Size(), size))
		}
		if err := s.data.Truncate(size); err != nil {
			return fail(fmt.Errorf("size overlay: %w", err))
		}
	}
	var ext []extent.Extent
	if b, err := os.ReadFile(p[1]); err == nil {
		if ext, err = decodeMap(b); err != nil {
			return fail(fmt.Errorf("overlay %s: %w", name, err))
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return fail(err)
	}
	if s.journal, err = os.OpenFile(p[2], os.O_RDWR|os.O_CREATE, 0o600); err != nil {
		return fail(fmt.Errorf("open overlay journal: %w", err))
	}
	jb, err := io.ReadAll(s.journal)
	if err != nil {
		return fail(err)
	}
	good := 0
	for ; good+recSize <= len(jb); good += recSize {
		e, ok := decodeRecord(jb[good : good+recSize])
		if !ok {
			break
		}
		ext = append(ext, e)
		s.jrecs++
	}
	if good != len(jb) { // a torn or garbage tail: never acknowledged
		if err := s.journal.Truncate(int64(good)); err != nil {
			return fail(err)
		}
	}
	if _, err := s.journal.Seek(int64(good), io.SeekStart); err != nil {
		return fail(err)
	}
	for _, e := range ext {
		if e.Offset < 0 || e.Length <= 0 || e.Offset+e.Length > size || e.Offset+e.Length < 0 {
			return fail(fmt.Errorf("overlay %s: extent %d+%d outside the disk of %d bytes: %w", name, e.Offset, e.Length, size, ErrCorrupt))
		}
	}
	s.ext = extent.Normalize(ext, size)
	for _, e := range s.ext {
		s.used += e.Length
	}
	return s, nil
}

// Size is the disk's size.
func (s *Store) Size() int64 { return s.size }

// Used is the number of bytes written (covered by the map).
func (s *Store) Used() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.used
}

// Limit is the cap (0: none).
func (s *Store) Limit() int64 { return s.opts.Limit }

// Extents returns a copy of the written ranges.
func (s *Store) Extents() []extent.Extent {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return append([]extent.Extent(nil), s.ext...)
}

// overlap returns the index range [i, j) of extents that overlap or touch
// [off, end).
func (s *Store) overlap(off, end int64) (int, int) {
	i := sort.Search(len(s.ext), func(i int) bool { return s.ext[i].Offset+s.ext[i].Length >= off })
	j := i
	for j < len(s.ext) && s.ext[j].Offset <= end {
		j++
	}
	return i, j
}

// covered is how many bytes of [off, end) the map covers.
func (s *Store) covered(off, end int64) int64 {
	i, j := s.overlap(off, end)
	var n int64
	for _, e := range s.ext[i:j] {
		n += max(0, min(end, e.Offset+e.Length)-max(off, e.Offset))
	}
	return n
}

// WriteAt writes p at off into the overlay. It is not durable until Sync.
// A write that would exceed the limit or the disk fails and changes
// nothing.
func (s *Store) WriteAt(p []byte, off int64) (int, error) {
	_, n, err := s.write(p, off)
	return n, err
}

// WriteAtSync is WriteAt then Sync: durable when it returns nil (group
// commit: concurrent writers share fsyncs).
func (s *Store) WriteAtSync(p []byte, off int64) (int, error) {
	seq, n, err := s.write(p, off)
	if err != nil {
		return n, err
	}
	return n, s.syncTo(seq)
}

func (s *Store) write(p []byte, off int64) (uint64, int, error) {
	if len(p) == 0 {
		return 0, 0, nil
	}
	end := off + int64(len(p))
	if off < 0 || end > s.size || end < off {
		return 0, 0, ErrBeyondEnd
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, 0, ErrClosed
	}
	grow := int64(len(p)) - s.covered(off, end)
	if s.opts.Limit > 0 && s.used+grow > s.opts.Limit {
		return 0, 0, ErrNoSpace
	}
	// The data goes in under the lock so that a reader never sees the map
	// claim bytes that are not there yet.
	n, err := s.data.WriteAt(p, off)
	if err != nil {
		// Bytes may have reached the file, but the map does not claim
		// them: reads still see what they saw before.
		return 0, 0, fmt.Errorf("write overlay: %w", err)
	}
	e := extent.Extent{Offset: off, Length: int64(n)}
	i, j := s.overlap(off, end)
	merged := e
	if i < j {
		merged.Offset = min(off, s.ext[i].Offset)
		last := s.ext[j-1]
		merged.Length = max(end, last.Offset+last.Length) - merged.Offset
	}
	s.ext = append(s.ext[:i], append([]extent.Extent{merged}, s.ext[j:]...)...)
	s.used += grow
	s.pending = append(s.pending, e)
	s.seq++
	return s.seq, n, nil
}

// ReadAt reads [off, off+len(p)) of the disk: written ranges from the
// overlay, the rest from base. Past the end it returns io.EOF.
func (s *Store) ReadAt(p []byte, off int64, base io.ReaderAt) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("read at negative offset %d", off)
	}
	if off >= s.size {
		return 0, io.EOF
	}
	want := len(p)
	if rem := s.size - off; int64(len(p)) > rem {
		p = p[:rem]
	}
	end := off + int64(len(p))
	// The map's part under the lock, the reads outside it: a slow
	// repository read must not hold up writers (and the readers queued
	// behind them). A write racing this read of the same range may or may
	// not be seen, as on any disk.
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return 0, ErrClosed
	}
	i, j := s.overlap(off, end)
	ext := append([]extent.Extent(nil), s.ext[i:j]...)
	s.mu.RUnlock()
	pos := off
	fill := func(to int64, r io.ReaderAt) error {
		if to <= pos {
			return nil
		}
		b := p[pos-off : to-off]
		n, err := r.ReadAt(b, pos)
		if n == len(b) {
			err = nil
		}
		if err != nil {
			return err
		}
		pos = to
		return nil
	}
	for _, e := range ext {
		es, ee := max(e.Offset, off), min(e.Offset+e.Length, end)
		if es >= ee {
			continue
		}
		if err := fill(es, base); err != nil {
			return int(pos - off), err
		}
		if err := fill(ee, s.data); err != nil {
			return int(pos - off), fmt.Errorf("read overlay: %w", err)
		}
	}
	if err := fill(end, base); err != nil {
		return int(pos - off), err
	}
	if len(p) < want {
		return len(p), io.EOF
	}
	return len(p), nil
}

// Sync makes every write so far durable: the data, then the journal
// records that claim it.
func (s *Store) Sync() error {
	s.mu.RLock()
	seq := s.seq
	s.mu.RUnlock()
	return s.syncTo(seq)
}

func (s *Store) syncTo(seq uint64) error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	if s.durable >= seq {
		return nil
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	recs, target := s.pending, s.seq
	s.pending = nil
	s.mu.Unlock()
	if err := s.fsync(s.data); err != nil {
		s.requeue(recs)
		return fmt.Errorf("sync overlay data: %w", err)
	}
	buf := make([]byte, 0, len(recs)*recSize)
	for _, e := range recs {
		buf = appendRecord(buf, e)
	}
	if _, err := s.journal.Write(buf); err != nil {
		s.requeue(recs)
		s.rewindJournal()
		return fmt.Errorf("write overlay journal: %w", err)
	}
	if err := s.fsync(s.journal); err != nil {
		s.requeue(recs)
		s.rewindJournal()
		return fmt.Errorf("sync overlay journal: %w", err)
	}
	s.jrecs += len(recs)
	s.durable = target
	if s.jrecs >= compactAfter {
		// A failed compaction loses nothing: the journal still holds it all.
		_ = s.compactLocked()
	}
	return nil
}

// rewindJournal cuts a failed append off the journal: a torn record in
// the middle would hide every record after it from Open. The records are
// pending again and go out with the next Sync.
func (s *Store) rewindJournal() {
	good := int64(s.jrecs) * recSize
	_ = s.journal.Truncate(good)
	_, _ = s.journal.Seek(good, io.SeekStart)
}

func (s *Store) requeue(recs []extent.Extent) {
	s.mu.Lock()
	s.pending = append(recs, s.pending...)
	s.mu.Unlock()
}

func (s *Store) fsync(f *os.File) error {
	if s.opts.NoSync {
		return nil
	}
	return f.Sync()
}

// compactLocked writes the map as a new snapshot and empties the journal.
// syncMu is held. It does nothing while writes are pending: then the map
// claims bytes not yet synced, and only the journal may claim them.
func (s *Store) compactLocked() error {
	s.mu.RLock()
	if len(s.pending) > 0 {
		s.mu.RUnlock()
		return nil
	}
	ext := append([]extent.Extent(nil), s.ext...)
	s.mu.RUnlock()
	p := Paths(s.dir, s.name)
	tmp := p[1] + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(encodeMap(ext))
	if err == nil {
		err = s.fsync(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p[1])
	}
	if err == nil && !s.opts.NoSync {
		err = syncDir(s.dir)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	// The snapshot holds every record: the journal may go (a crash before
	// the truncation replays records the snapshot already has).
	if err := s.journal.Truncate(0); err != nil {
		return err
	}
	if _, err := s.journal.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if err := s.fsync(s.journal); err != nil {
		return err
	}
	s.jrecs = 0
	return nil
}

// Close makes everything durable, writes a snapshot and closes the files.
func (s *Store) Close() error {
	s.mu.RLock()
	closed := s.closed
	s.mu.RUnlock()
	if closed {
		return nil
	}
	err := s.Sync()
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	if err == nil {
		err = s.compactLocked()
	}
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return errors.Join(err, s.data.Close(), s.journal.Close())
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func appendRecord(b []byte, e extent.Extent) []byte {
	var r [recSize]byte
	binary.BigEndian.PutUint64(r[0:], uint64(e.Offset))
	binary.BigEndian.PutUint64(r[8:], uint64(e.Length))
	binary.BigEndian.PutUint32(r[16:], crc32.Checksum(r[:16], castagnoli))
	binary.BigEndian.PutUint32(r[20:], recMagic)
	return append(b, r[:]...)
}

func decodeRecord(r []byte) (extent.Extent, bool) {
	if binary.BigEndian.Uint32(r[20:]) != recMagic || binary.BigEndian.Uint32(r[16:]) != crc32.Checksum(r[:16], castagnoli) {
		return extent.Extent{}, false
	}
	return extent.Extent{Offset: int64(binary.BigEndian.Uint64(r[0:])), Length: int64(binary.BigEndian.Uint64(r[8:]))}, true
}

func encodeMap(ext []extent.Extent) []byte {
	b := make([]byte, 0, 16+16*len(ext)+4)
	b = append(b, mapMagic...)
	b = binary.BigEndian.AppendUint64(b, uint64(len(ext)))
	for _, e := range ext {
		b = binary.BigEndian.AppendUint64(b, uint64(e.Offset))
		b = binary.BigEndian.AppendUint64(b, uint64(e.Length))
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeMap(b []byte) ([]extent.Extent, error) {
	if len(b) < 20 || string(b[:8]) != mapMagic {
		return nil, fmt.Errorf("map snapshot: bad header: %w", ErrCorrupt)
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, fmt.Errorf("map snapshot: checksum mismatch: %w", ErrCorrupt)
	}
	n := binary.BigEndian.Uint64(body[8:16])
	if uint64(len(body)-16) != n*16 {
		return nil, fmt.Errorf("map snapshot: %d extents do not fit %d bytes: %w", n, len(body), ErrCorrupt)
	}
	ext := make([]extent.Extent, 0, n)
	for i := uint64(0); i < n; i++ {
		o := 16 + 16*i
		ext = append(ext, extent.Extent{Offset: int64(binary.BigEndian.Uint64(body[o:])), Length: int64(binary.BigEndian.Uint64(body[o+8:]))})
	}
	return ext, nil
}
