package vmdk

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/zlib"
)

// sparseExtent reads a hosted sparse extent (monolithicSparse,
// twoGbMaxExtentSparse pieces, streamOptimized) at random offsets through its
// grain directory and grain tables.
type sparseExtent struct {
	f       file
	name    string
	fsize   int64
	h       header
	footer  bool  // streamOptimized with the GD (and a footer) at the end
	sectors int64 // extent size as used (descriptor's, <= header capacity)
	gb      int64 // grain bytes
	gd      []uint32

	mu      sync.Mutex
	gts     map[uint32][]uint32 // GD index -> GT, bounded FIFO
	gtFIFO  []uint32
	grains  map[int64][]byte // grain index -> decompressed grain, bounded FIFO
	grFIFO  []int64
	maxGr   int
	bufPool sync.Pool // *[]byte compressed-grain buffers
	zrPool  sync.Pool // zlib readers
}

const (
	gtCacheEntries   = 64      // 64 GTs cover 2 GiB with default geometry
	grainCacheBytes  = 4 << 20 // decompressed grains kept for small reads
	markerHeaderSize = 12      // lba u64 + size u32
)

// openSparseExtent parses the header (and, for streamOptimized with the GD at
// the end, the footer), loads the grain directory and checks the layout (see
// checkLayout). wantSectors is the extent size from the descriptor, or 0 to
// use the header's capacity; fsize is the file's size.
func openSparseExtent(f file, fsize int64, name string, wantSectors int64) (*sparseExtent, error) {
	s := &sparseExtent{f: f, name: name, fsize: fsize}
	hb := make([]byte, SectorSize)
	if _, err := f.ReadAt(hb, 0); err != nil {
		return nil, fmt.Errorf("%s: read sparse header: %w", name, eofCorrupt(err))
	}
	var err error
	if s.h, err = parseHeader(hb); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if s.h.GDOffset == gdAtEnd {
		if err := s.readFooter(); err != nil {
			return nil, err
		}
		s.footer = true
	}
	s.sectors = int64(s.h.Capacity)
	if wantSectors > 0 {
		if wantSectors > s.sectors {
			return nil, fmt.Errorf("%s: descriptor extent size %d sectors exceeds sparse header capacity %d: %w", name, wantSectors, s.sectors, ErrCorrupt)
		}
		s.sectors = wantSectors
	}
	s.gb = s.h.grainBytes()
	s.maxGr = max(2, int(grainCacheBytes/s.gb))
	s.gts = map[uint32][]uint32{}
	s.grains = map[int64][]byte{}
	if err := s.loadGD(); err != nil {
		return nil, err
	}
	if err := s.checkLayout(); err != nil {
		return nil, err
	}
	return s, nil
}

// readFooter replaces the header by the footer a streamOptimized writer
// leaves before the end-of-stream marker: footer marker, footer, EOS marker.
func (s *sparseExtent) readFooter() error {
	if s.fsize < 3*SectorSize {
		return fmt.Errorf("%s: gdOffset at end but file too short for a footer: %w", s.name, ErrCorrupt)
	}
	b := make([]byte, 3*SectorSize)
	if _, err := s.f.ReadAt(b, s.fsize-int64(len(b))); err != nil {
		return fmt.Errorf("%s: read footer: %w", s.name, eofCorrupt(err))
	}
	le := binary.LittleEndian
	if le.Uint32(b[8:]) != 0 || le.Uint32(b[12:]) != markerFooter {
		return fmt.Errorf("%s: footer marker missing at end of file (size %d type %d): %w", s.name, le.Uint32(b[8:]), le.Uint32(b[12:]), ErrCorrupt)
	}
	eos := b[2*SectorSize:]
	if le.Uint32(eos[8:]) != 0 || le.Uint32(eos[12:]) != markerEOS {
		return fmt.Errorf("%s: end-of-stream marker missing: %w", s.name, ErrCorrupt)
	}
	fh, err := parseHeader(b[SectorSize : 2*SectorSize])
	if err != nil {
		return fmt.Errorf("%s: footer: %w", s.name, err)
	}
	if fh.GDOffset == gdAtEnd {
		return fmt.Errorf("%s: footer gdOffset also at end: %w", s.name, ErrCorrupt)
	}
	if fh.Capacity != s.h.Capacity || fh.GrainSize != s.h.GrainSize || fh.NumGTEsPerGT != s.h.NumGTEsPerGT || fh.Flags != s.h.Flags {
		return fmt.Errorf("%s: footer geometry differs from header: %w", s.name, ErrCorrupt)
	}
	s.h = fh
	return nil
}

func (s *sparseExtent) loadGD() error {
	n := s.h.numGTs()
	if s.h.GDOffset == 0 || s.h.GDOffset > uint64(s.fsize)/SectorSize || int64(s.h.GDOffset)*SectorSize+int64(n)*4 > s.fsize {
		return fmt.Errorf("%s: gdOffset %d (sector) with %d entries lies outside the %d-byte file: %w", s.name, s.h.GDOffset, n, s.fsize, ErrCorrupt)
	}
	raw := make([]byte, n*4)
	if _, err := s.f.ReadAt(raw, int64(s.h.GDOffset)*SectorSize); err != nil {
		return fmt.Errorf("%s: read grain directory: %w", s.name, eofCorrupt(err))
	}
	s.gd = make([]uint32, n)
	for i := range s.gd {
		s.gd[i] = binary.LittleEndian.Uint32(raw[i*4:])
	}
	return nil
}

// readGT reads grain table i from the file (not cached).
func (s *sparseExtent) readGT(i int) ([]uint32, error) {
	off := int64(s.gd[i]) * SectorSize
	n := int64(s.h.NumGTEsPerGT)
	if off+n*4 > s.fsize {
		return nil, fmt.Errorf("%s: grain table %d at sector %d lies outside the file: %w", s.name, i, s.gd[i], ErrCorrupt)
	}
	raw := make([]byte, n*4)
	if _, err := s.f.ReadAt(raw, off); err != nil {
		return nil, fmt.Errorf("%s: read grain table %d: %w", s.name, i, eofCorrupt(err))
	}
	gt := make([]uint32, n)
	for j := range gt {
		gt[j] = binary.LittleEndian.Uint32(raw[j*4:])
	}
	return gt, nil
}

// gte returns the grain table entry for grain g (0 when unallocated).
func (s *sparseExtent) gte(g int64) (uint32, error) {
	per := int64(s.h.NumGTEsPerGT)
	i := g / per
	if i >= int64(len(s.gd)) || s.gd[i] == 0 {
		return 0, nil
	}
	s.mu.Lock()
	gt, ok := s.gts[uint32(i)]
	s.mu.Unlock()
	if !ok {
		var err error
		if gt, err = s.readGT(int(i)); err != nil {
			return 0, err
		}
		s.mu.Lock()
		if len(s.gtFIFO) >= gtCacheEntries {
			delete(s.gts, s.gtFIFO[0])
			s.gtFIFO = s.gtFIFO[1:]
		}
		if _, dup := s.gts[uint32(i)]; !dup {
			s.gts[uint32(i)] = gt
			s.gtFIFO = append(s.gtFIFO, uint32(i))
		}
		s.mu.Unlock()
	}
	return gt[g%per], nil
}

// isZeroGTE reports whether a GT entry means "reads as zeros".
func (s *sparseExtent) isZeroGTE(e uint32) bool {
	return e == 0 || (e == 1 && s.h.Flags&flagZeroGrain != 0)
}

func (s *sparseExtent) size() int64 { return s.sectors * SectorSize }

// readAt fills p from extent offset off; p lies within the extent.
func (s *sparseExtent) readAt(p []byte, off int64) error {
	for len(p) > 0 {
		g := off / s.gb
		in := off - g*s.gb
		n := min(int64(len(p)), s.gb-in)
		e, err := s.gte(g)
		if err != nil {
			return err
		}
		switch {
		case s.isZeroGTE(e):
			clear(p[:n])
		case !s.h.compressed():
			goff := int64(e) * SectorSize
			if goff+in+n > s.fsize {
				return fmt.Errorf("%s: grain %d at sector %d lies outside the file: %w", s.name, g, e, ErrCorrupt)
			}
			if _, err := s.f.ReadAt(p[:n], goff+in); err != nil {
				return fmt.Errorf("%s: read grain %d: %w", s.name, g, eofCorrupt(err))
			}
		case n == s.gb:
			// A whole-grain read (sequential backup) inflates straight
			// into p: no cache churn, no allocation.
			if err := s.inflateGrain(p[:n], g, e); err != nil {
				return err
			}
		default:
			data, err := s.compressedGrain(g, e)
			if err != nil {
				return err
			}
			copy(p[:n], data[in:in+n])
		}
		p, off = p[n:], off+n
	}
	return nil
}

// compressedGrain returns grain g (full grain length, zero padded), through
// the cache so that small reads do not inflate a grain again each time.
func (s *sparseExtent) compressedGrain(g int64, sector uint32) ([]byte, error) {
	s.mu.Lock()
	if d, ok := s.grains[g]; ok {
		s.mu.Unlock()
		return d, nil
	}
	s.mu.Unlock()
	out := make([]byte, s.gb)
	if err := s.inflateGrain(out, g, sector); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if _, dup := s.grains[g]; !dup {
		if len(s.grFIFO) >= s.maxGr {
			delete(s.grains, s.grFIFO[0])
			s.grFIFO = s.grFIFO[1:]
		}
		s.grains[g] = out
		s.grFIFO = append(s.grFIFO, g)
	}
	s.mu.Unlock()
	return out, nil
}

// inflateGrain reads grain g's marker and compressed bytes and inflates them
// into out (len = grain size).
func (s *sparseExtent) inflateGrain(out []byte, g int64, sector uint32) error {
	off := int64(sector) * SectorSize
	if off+markerHeaderSize > s.fsize {
		return fmt.Errorf("%s: grain %d marker at sector %d lies outside the file: %w", s.name, g, sector, ErrCorrupt)
	}
	bp, _ := s.bufPool.Get().(*[]byte)
	if bp == nil {
		b := make([]byte, markerHeaderSize+maxCompressed(s.gb))
		bp = &b
	}
	defer s.bufPool.Put(bp)
	// One read usually gets marker and data: compressed grains are rarely
	// larger than the grain.
	first := (*bp)[:min(markerHeaderSize+s.gb, s.fsize-off)]
	if _, err := s.f.ReadAt(first, off); err != nil {
		return fmt.Errorf("%s: read grain %d: %w", s.name, g, eofCorrupt(err))
	}
	lba := binary.LittleEndian.Uint64(first[0:])
	csize := int64(binary.LittleEndian.Uint32(first[8:]))
	if want := uint64(g) * s.h.GrainSize; lba != want {
		return fmt.Errorf("%s: grain %d marker lba %d, want %d: %w", s.name, g, lba, want, ErrCorrupt)
	}
	if csize == 0 || csize > maxCompressed(s.gb) || off+markerHeaderSize+csize > s.fsize {
		return fmt.Errorf("%s: grain %d compressed size %d (file %d bytes): %w", s.name, g, csize, s.fsize, ErrCorrupt)
	}
	if rec := (*bp)[:markerHeaderSize+csize]; int64(len(first)) < int64(len(rec)) {
		if _, err := s.f.ReadAt(rec[len(first):], off+int64(len(first))); err != nil {
			return fmt.Errorf("%s: read grain %d: %w", s.name, g, eofCorrupt(err))
		}
	}
	if err := s.inflate(out, (*bp)[markerHeaderSize:markerHeaderSize+csize], g == s.lastGrain()); err != nil {
		return fmt.Errorf("%s: grain %d: %w", s.name, g, err)
	}
	return nil
}

// inflate decompresses src into dst (len(dst) = grain size) and zero-pads a
// short result if the grain is the disk's last (which may be short).
func (s *sparseExtent) inflate(dst, src []byte, last bool) error {
	zr, _ := s.zrPool.Get().(io.ReadCloser)
	return inflateInto(dst, src, zr, func(r io.ReadCloser) { s.zrPool.Put(r) }, last)
}

// maxCompressed bounds a grain marker's size field: deflate expands
// incompressible data only slightly; QEMU allows up to twice the grain.
func maxCompressed(grainBytes int64) int64 { return 2*grainBytes + SectorSize }

type bytesReader struct {
	b []byte
	i int
}

func (r *bytesReader) Read(p []byte) (int, error) {
	if r.i >= len(r.b) {
		return 0, io.EOF
	}
	n := copy(p, r.b[r.i:])
	r.i += n
	return n, nil
}
func (r *bytesReader) ReadByte() (byte, error) {
	if r.i >= len(r.b) {
		return 0, io.EOF
	}
	r.i++
	return r.b[r.i-1], nil
}

// inflateInto is shared by the random-access and streaming readers. It
// reads at most len(dst)+1 bytes of output so a zlib bomb cannot make it
// allocate or spin beyond one grain. Only the disk's last grain (last) may
// decompress short: a short grain elsewhere is corrupt, and accepting it
// would let a file of one-sector records each "worth" a whole zeroed grain
// describe far more disk than deflate can (see checkLayout).
func inflateInto(dst, src []byte, zr io.ReadCloser, put func(io.ReadCloser), last bool) error {
	br := &bytesReader{b: src}
	var err error
	if zr == nil {
		zr, err = zlib.NewReader(br)
		if err != nil {
			return fmt.Errorf("inflate: %v: %w", err, ErrCorrupt)
		}
	} else if err = zr.(zlib.Resetter).Reset(br, nil); err != nil {
		return fmt.Errorf("inflate: %v: %w", err, ErrCorrupt)
	}
	defer put(zr)
	n := 0
	for n < len(dst) && err == nil {
		var m int
		m, err = zr.Read(dst[n:])
		n += m
	}
	switch {
	case n == len(dst) && (err == nil || err == io.EOF):
		if err == nil {
			var one [1]byte
			if m, rerr := zr.Read(one[:]); m > 0 {
				return fmt.Errorf("inflate: grain decompresses to more than %d bytes: %w", len(dst), ErrCorrupt)
			} else if rerr != nil && rerr != io.EOF {
				return fmt.Errorf("inflate: %v: %w", rerr, ErrCorrupt)
			}
		}
	case err == io.EOF && last:
		// A clean, checksummed end before a full grain: the last grain of
		// a disk whose capacity is not a multiple of the grain size.
		clear(dst[n:])
	case err == io.EOF:
		return fmt.Errorf("inflate: grain decompresses to %d bytes, not %d (only the disk's last grain may be short): %w", n, len(dst), ErrCorrupt)
	default:
		return fmt.Errorf("inflate: %v: %w", err, ErrCorrupt)
	}
	return nil
}

// allocated calls fn for each grain that holds data, in increasing order.
func (s *sparseExtent) allocated(fn func(off, n int64)) error {
	per := int64(s.h.NumGTEsPerGT)
	size := s.size()
	for i := range s.gd {
		if s.gd[i] == 0 {
			continue
		}
		gt, err := s.readGT(i)
		if err != nil {
			return err
		}
		for j, e := range gt {
			if s.isZeroGTE(e) {
				continue
			}
			off := (int64(i)*per + int64(j)) * s.gb
			if off >= size {
				return nil
			}
			fn(off, min(s.gb, size-off))
		}
	}
	return nil
}

func (s *sparseExtent) close() error { return s.f.Close() }

// eofCorrupt turns a short read of a structure the header promised into a
// corruption error (the file is truncated).
func eofCorrupt(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("file truncated: %w", ErrCorrupt)
	}
	return err
}
