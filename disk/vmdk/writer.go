package vmdk

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"

	"github.com/klauspost/compress/zlib"
)

// StreamWriterOptions tunes the streamOptimized encoder. The zero value is
// ready to use.
type StreamWriterOptions struct {
	// Level is the zlib level (1 fastest … 9 smallest); 0 means 1, because
	// the encoder usually feeds a network upload and speed matters more.
	Level int
	// AdapterType goes into ddb.adapterType; default "lsilogic".
	AdapterType string
	// HWVersion goes into ddb.virtualHWVersion; default 4 (what VMware's
	// own exports use, accepted by every ESXi).
	HWVersion int
	// ExtentName is the file name in the embedded descriptor's extent line;
	// default "disk.vmdk".
	ExtentName string
	// CID is the content id; 0 picks a random one.
	CID uint32
}

// StreamWriter encodes a streamOptimized VMDK to an io.Writer in one pass:
// header, descriptor, compressed grains with markers, each grain table after
// its last grain, then the grain directory, footer and end-of-stream marker.
// Memory is one grain, one grain table and the grain directory (4 bytes per
// 32 MiB of capacity).
type StreamWriter struct {
	w        io.Writer
	pos      int64 // bytes written to w
	h        header
	capacity int64
	gb       int64
	per      int64 // GTEs per GT

	next   int64  // lowest offset the next write may start at
	cur    int64  // grain index held in grain, -1 none
	grain  []byte // pending grain
	dirty  bool   // grain holds non-zero bytes
	gtIdx  int64  // GT index held in gt, -1 none
	gt     []uint32
	gtUsed bool
	gd     []uint32

	zw     *zlib.Writer
	zbuf   bytes.Buffer
	rec    []byte
	closed bool
	err    error // sticky: the output is unusable after a write error
}

const (
	writerGrainSectors = 128
	writerGTEs         = 512
	writerDescSectors  = 20
	// Grains start at sector 128 like VMware's exports, so they are 64 KiB
	// aligned in the file.
	writerOverhead = 128
)

// NewStreamWriter writes the header and embedded descriptor for a disk of
// capacity bytes (a multiple of 512) and returns the encoder.
func NewStreamWriter(w io.Writer, capacity int64, opts StreamWriterOptions) (*StreamWriter, error) {
	return newStreamWriter(w, capacity, opts, writerOverhead, writerDescSectors)
}

// newStreamWriter lets tests shrink the overhead and descriptor area to make
// small fuzz seeds.
func newStreamWriter(w io.Writer, capacity int64, opts StreamWriterOptions, overhead, descSectors int64) (*StreamWriter, error) {
	if capacity <= 0 || capacity%SectorSize != 0 || capacity/SectorSize > maxCapacitySectors {
		return nil, fmt.Errorf("stream writer: capacity %d: must be a positive multiple of %d up to %d sectors", capacity, SectorSize, int64(maxCapacitySectors))
	}
	level := opts.Level
	if level == 0 {
		level = zlib.BestSpeed
	}
	zw, err := zlib.NewWriterLevel(io.Discard, level)
	if err != nil {
		return nil, fmt.Errorf("stream writer: %w", err)
	}
	s := &StreamWriter{
		w: w, capacity: capacity, gb: writerGrainSectors * SectorSize, per: writerGTEs,
		cur: -1, gtIdx: -1, zw: zw,
		h: header{
			Version: 3, Flags: flagNLDetect | flagCompress | flagMarkers,
			Capacity: uint64(capacity / SectorSize), GrainSize: writerGrainSectors,
			DescriptorOffset: 1, DescriptorSize: uint64(descSectors),
			NumGTEsPerGT: writerGTEs, GDOffset: gdAtEnd, OverHead: uint64(overhead),
			CompressAlgorithm: compressZlib,
		},
	}
	s.grain = make([]byte, s.gb)
	s.gt = make([]uint32, s.per)
	s.gd = make([]uint32, s.h.numGTs())

	cid := opts.CID
	if cid == 0 {
		cid = rand.Uint32() | 1
	}
	adapter := opts.AdapterType
	if adapter == "" {
		adapter = "lsilogic"
	}
	hw := opts.HWVersion
	if hw == 0 {
		hw = 4
	}
	name := opts.ExtentName
	if name == "" {
		name = "disk.vmdk"
	}
	cyl := min(capacity/(255*63*SectorSize), 65535)
	desc := &Descriptor{
		Version: 1, CID: cid, ParentCID: NoParentCID, CreateType: "streamOptimized",
		Extents: []DescriptorExtent{{Access: "RW", Sectors: capacity / SectorSize, Type: "SPARSE", Filename: name}},
		DDB: map[string]string{
			"ddb.adapterType":        adapter,
			"ddb.geometry.cylinders": fmt.Sprint(cyl),
			"ddb.geometry.heads":     "255",
			"ddb.geometry.sectors":   "63",
			"ddb.virtualHWVersion":   fmt.Sprint(hw),
		},
	}
	text := desc.encode()
	if int64(len(text)) > descSectors*SectorSize || overhead < 1+descSectors {
		return nil, fmt.Errorf("stream writer: descriptor of %d bytes does not fit %d sectors", len(text), descSectors)
	}
	head := make([]byte, overhead*SectorSize)
	copy(head, s.h.encode())
	copy(head[SectorSize:], text)
	if err := s.write(head); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *StreamWriter) write(b []byte) error {
	if s.err != nil {
		return s.err
	}
	n, err := s.w.Write(b)
	s.pos += int64(n)
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	if err != nil {
		s.err = fmt.Errorf("stream writer: write at %d: %w", s.pos, err)
	}
	return s.err
}

// WriteGrainsAt writes disk bytes p at disk offset off. Offsets must not go
// backwards (off >= end of the previous write); bytes never written read as
// zeros, and grains that are entirely zero are not stored. Writes need not be
// grain aligned: a partial grain is held until a later write or Close moves
// past it.
func (s *StreamWriter) WriteGrainsAt(p []byte, off int64) error {
	if s.closed {
		return ErrClosed
	}
	if s.err != nil {
		return s.err
	}
	if off < s.next {
		return fmt.Errorf("stream writer: write at %d after data up to %d: %w", off, s.next, ErrOrder)
	}
	if off > s.capacity || int64(len(p)) > s.capacity-off {
		return fmt.Errorf("stream writer: write of %d bytes at %d exceeds capacity %d", len(p), off, s.capacity)
	}
	for len(p) > 0 {
		g := off / s.gb
		if g != s.cur {
			if err := s.flushGrain(); err != nil {
				return err
			}
			s.cur = g
		}
		in := off - g*s.gb
		n := copy(s.grain[in:], p)
		if !s.dirty && !isZero(p[:n]) {
			s.dirty = true
		}
		p, off = p[n:], off+int64(n)
	}
	s.next = off
	return nil
}

// zeroPage lets isZero compare with bytes.Equal, which is vectorised.
var zeroPage [4096]byte

func isZero(b []byte) bool {
	for len(b) > 0 {
		n := min(len(b), len(zeroPage))
		if !bytes.Equal(b[:n], zeroPage[:n]) {
			return false
		}
		b = b[n:]
	}
	return true
}

// flushGrain compresses and emits the pending grain if it holds data.
func (s *StreamWriter) flushGrain() error {
	if s.cur < 0 {
		return nil
	}
	g := s.cur
	defer func() {
		clear(s.grain)
		s.dirty, s.cur = false, -1
	}()
	if !s.dirty {
		return nil
	}
	if gi := g / s.per; gi != s.gtIdx {
		if err := s.flushGT(); err != nil {
			return err
		}
		s.gtIdx = gi
	}
	data := s.grain[:min(s.gb, s.capacity-g*s.gb)]
	s.zbuf.Reset()
	s.zw.Reset(&s.zbuf)
	if _, err := s.zw.Write(data); err != nil {
		return fmt.Errorf("stream writer: compress grain %d: %w", g, err)
	}
	if err := s.zw.Close(); err != nil {
		return fmt.Errorf("stream writer: compress grain %d: %w", g, err)
	}
	z := s.zbuf.Bytes()
	total := (markerHeaderSize + len(z) + SectorSize - 1) / SectorSize * SectorSize
	if cap(s.rec) < total {
		s.rec = make([]byte, total)
	}
	rec := s.rec[:total]
	binary.LittleEndian.PutUint64(rec[0:], uint64(g*s.gb/SectorSize))
	binary.LittleEndian.PutUint32(rec[8:], uint32(len(z)))
	copy(rec[markerHeaderSize:], z)
	clear(rec[markerHeaderSize+len(z):])
	s.gt[g%s.per] = uint32(s.pos / SectorSize)
	s.gtUsed = true
	if s.pos/SectorSize > 0xFFFFFFFF {
		return fmt.Errorf("stream writer: output exceeds 2 TiB of sectors addressable by a grain table")
	}
	return s.write(rec)
}

// metadata writes a marker of the given type followed by body (padded).
func (s *StreamWriter) metadata(typ uint32, body []byte) (sector int64, err error) {
	sectors := (int64(len(body)) + SectorSize - 1) / SectorSize
	b := make([]byte, SectorSize+sectors*SectorSize)
	binary.LittleEndian.PutUint64(b[0:], uint64(sectors))
	binary.LittleEndian.PutUint32(b[12:], typ)
	copy(b[SectorSize:], body)
	sector = s.pos/SectorSize + 1
	return sector, s.write(b)
}

// flushGT emits the current grain table; tables without any grain are not
// written and keep a zero GD entry, which readers (QEMU, VMware) treat as
// unallocated.
func (s *StreamWriter) flushGT() error {
	if s.gtIdx < 0 || !s.gtUsed {
		return nil
	}
	body := make([]byte, 4*len(s.gt))
	for i, e := range s.gt {
		binary.LittleEndian.PutUint32(body[4*i:], e)
	}
	sec, err := s.metadata(markerGT, body)
	if err != nil {
		return err
	}
	s.gd[s.gtIdx] = uint32(sec)
	clear(s.gt)
	s.gtUsed = false
	return nil
}

// Close flushes the pending grain and grain table, then writes the grain
// directory, the footer and the end-of-stream marker. It does not close the
// underlying writer.
func (s *StreamWriter) Close() error {
	if s.closed {
		return ErrClosed
	}
	s.closed = true
	if err := s.flushGrain(); err != nil {
		return err
	}
	if err := s.flushGT(); err != nil {
		return err
	}
	body := make([]byte, 4*len(s.gd))
	for i, e := range s.gd {
		binary.LittleEndian.PutUint32(body[4*i:], e)
	}
	gdSec, err := s.metadata(markerGD, body)
	if err != nil {
		return err
	}
	footer := s.h
	footer.GDOffset = uint64(gdSec)
	if _, err := s.metadata(markerFooter, footer.encode()); err != nil {
		return err
	}
	return s.write(make([]byte, SectorSize)) // EOS marker
}
