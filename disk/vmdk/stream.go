package vmdk

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// StreamReader decodes a streamOptimized VMDK strictly sequentially, as an
// NFC export delivers it (no seeking, no footer lookup). It is not safe for
// concurrent use.
type StreamReader struct {
	r    io.Reader
	h    header
	desc *Descriptor
	pos  int64 // bytes consumed from r
	gb   int64
	cap  int64
	buf  []byte // marker sector + compressed data
	out  []byte // decompressed grain, returned by Next
	zr   io.ReadCloser
	done bool
}

// maxStreamSkipSectors bounds how far the reader will discard metadata
// (overhead, GT/GD/footer bodies) in one step: 8 GiB.
const maxStreamSkipSectors = 1 << 24

// NewStreamReader reads the header and embedded descriptor of a
// streamOptimized VMDK and positions r at the first grain.
func NewStreamReader(r io.Reader) (*StreamReader, error) {
	s := &StreamReader{r: r}
	hb := make([]byte, SectorSize)
	if err := s.readFull(hb); err != nil {
		return nil, fmt.Errorf("stream vmdk: header: %w", err)
	}
	h, err := parseHeader(hb)
	if err != nil {
		return nil, fmt.Errorf("stream vmdk: %w", err)
	}
	if !h.compressed() || !h.markers() {
		return nil, fmt.Errorf("stream vmdk: flags %#x lack compressed grains with markers (not streamOptimized): %w", h.Flags, ErrUnsupported)
	}
	s.h, s.gb, s.cap = h, h.grainBytes(), int64(h.Capacity)*SectorSize
	if h.DescriptorSize > 0 {
		if h.DescriptorOffset < 1 || h.DescriptorOffset > maxStreamSkipSectors {
			return nil, fmt.Errorf("stream vmdk: descriptorOffset %d: %w", h.DescriptorOffset, ErrCorrupt)
		}
		if err := s.skipTo(int64(h.DescriptorOffset) * SectorSize); err != nil {
			return nil, fmt.Errorf("stream vmdk: skip to descriptor: %w", err)
		}
		b := make([]byte, h.DescriptorSize*SectorSize)
		if err := s.readFull(b); err != nil {
			return nil, fmt.Errorf("stream vmdk: descriptor: %w", err)
		}
		if s.desc, err = ParseDescriptor(b); err != nil {
			return nil, fmt.Errorf("stream vmdk: %w", err)
		}
		if s.desc.HasParent() {
			return nil, fmt.Errorf("stream vmdk: delta disk (parent %q): %w", s.desc.ParentFileNameHint, ErrUnsupported)
		}
	}
	// Grains start after the overhead: QEMU keeps its GD and GTs there
	// without markers, VMware pads the descriptor to it.
	start := max(int64(h.OverHead), int64(h.DescriptorOffset+h.DescriptorSize), 1)
	if h.OverHead > maxStreamSkipSectors {
		return nil, fmt.Errorf("stream vmdk: overHead %d sectors exceeds %d: %w", h.OverHead, maxStreamSkipSectors, ErrCorrupt)
	}
	if err := s.skipTo(start * SectorSize); err != nil {
		return nil, fmt.Errorf("stream vmdk: skip overhead: %w", err)
	}
	s.buf = make([]byte, SectorSize, SectorSize+maxCompressed(s.gb))
	s.out = make([]byte, s.gb)
	return s, nil
}

// Capacity is the virtual disk's size in bytes.
func (s *StreamReader) Capacity() int64 { return s.cap }

// GrainSize is the grain size in bytes.
func (s *StreamReader) GrainSize() int64 { return s.gb }

// Descriptor is the embedded descriptor, or nil when the file has none.
func (s *StreamReader) Descriptor() *Descriptor { return s.desc }

// Next returns the next grain's disk offset and decompressed bytes (a full
// grain, or less for the disk's last grain), skipping grain tables, the grain
// directory and the footer. Bytes in no grain are zeros. data is valid until
// the next call. At the end-of-stream marker (or a clean end of input at a
// marker boundary, which QEMU's writer produces) it returns io.EOF.
func (s *StreamReader) Next() (offset int64, data []byte, err error) {
	if s.done {
		return 0, nil, io.EOF
	}
	for {
		m := s.buf[:SectorSize]
		n, err := io.ReadFull(s.r, m)
		s.pos += int64(n)
		if n == 0 && errors.Is(err, io.EOF) {
			s.done = true
			return 0, nil, io.EOF
		}
		if err != nil {
			return 0, nil, fmt.Errorf("stream vmdk: marker at byte %d: %w", s.pos-int64(n), eofCorrupt(err))
		}
		le := binary.LittleEndian
		val := le.Uint64(m[0:])
		size := int64(le.Uint32(m[8:]))
		at := s.pos - SectorSize
		if size == 0 {
			typ := le.Uint32(m[12:])
			switch typ {
			case markerEOS:
				s.done = true
				return 0, nil, io.EOF
			case markerGT, markerGD, markerFooter:
				if val > maxStreamSkipSectors {
					return 0, nil, fmt.Errorf("stream vmdk: metadata marker at byte %d: numSectors %d: %w", at, val, ErrCorrupt)
				}
				if err := s.skipTo(s.pos + int64(val)*SectorSize); err != nil {
					return 0, nil, fmt.Errorf("stream vmdk: metadata at byte %d: %w", at, err)
				}
				continue
			default:
				return 0, nil, fmt.Errorf("stream vmdk: marker at byte %d: unknown type %d: %w", at, typ, ErrCorrupt)
			}
		}
		// Grain marker: lba, size, then size bytes of zlib data padded to
		// a sector boundary.
		if size > maxCompressed(s.gb) {
			return 0, nil, fmt.Errorf("stream vmdk: grain at byte %d: compressed size %d exceeds %d: %w", at, size, maxCompressed(s.gb), ErrCorrupt)
		}
		if val%s.h.GrainSize != 0 || val >= s.h.Capacity {
			return 0, nil, fmt.Errorf("stream vmdk: grain at byte %d: lba %d not a grain start inside capacity %d: %w", at, val, s.h.Capacity, ErrCorrupt)
		}
		total := (markerHeaderSize + size + SectorSize - 1) / SectorSize * SectorSize
		b := s.buf[:total]
		need := markerHeaderSize + size // the padding may be missing at the very end
		n, err = io.ReadFull(s.r, b[SectorSize:])
		s.pos += int64(n)
		if err != nil {
			if SectorSize+int64(n) < need || !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
				return 0, nil, fmt.Errorf("stream vmdk: grain at byte %d: %w", at, eofCorrupt(err))
			}
			s.done = true
		}
		offset = int64(val) * SectorSize
		// Inflate a full grain even at the end: writers may compress the
		// zero-padded last grain of a disk that is not grain aligned.
		if err := inflateInto(s.out, b[markerHeaderSize:need], s.zr, func(r io.ReadCloser) { s.zr = r }, offset+s.gb >= s.cap); err != nil {
			return 0, nil, fmt.Errorf("stream vmdk: grain at byte %d (disk offset %d): %w", at, offset, err)
		}
		return offset, s.out[:min(s.gb, s.cap-offset)], nil
	}
}

func (s *StreamReader) readFull(b []byte) error {
	n, err := io.ReadFull(s.r, b)
	s.pos += int64(n)
	return eofCorrupt(err)
}

// skipTo discards input up to absolute position pos.
func (s *StreamReader) skipTo(pos int64) error {
	if pos < s.pos {
		return fmt.Errorf("position %d is behind the stream (%d): %w", pos, s.pos, ErrCorrupt)
	}
	n, err := io.CopyN(io.Discard, s.r, pos-s.pos)
	s.pos += n
	return eofCorrupt(err)
}
