package repository

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Format version constants (FORMAT.md "Changes per version"). A reader
// refuses a repository whose major version is newer than FormatMajor.
const (
	FormatMajor = 1
	FormatMinor = 4
)

// Limits that decoders enforce so hostile input cannot make us allocate much.
const (
	MaxBlobSize        = 64 << 20 // plaintext bytes of any blob
	maxPackHeaderBlobs = 1 << 20
	segmentSpan        = 256 << 20 // disk bytes per map segment (by extent start offset)
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// magic derives an 8-byte magic from the SHA-256 of a description (the PBS
// trick). DO NOT MODIFY the strings: they are part of the on-disk format.
func magic(s string) [8]byte {
	h := sha256.Sum256([]byte(s))
	var m [8]byte
	copy(m[:], h[:8])
	return m
}

var (
	magicPack        = magic("vmvault pack v1")
	magicPackHeader  = magic("vmvault pack header v1")
	magicPackTrailer = magic("vmvault pack trailer v1")
	magicSegment     = magic("vmvault disk map segment v1")
	magicSegment11   = magic("vmvault disk map segment v1.1") // segments holding slices
	magicRoot        = magic("vmvault disk map root v1")
	magicManifest    = magic("vmvault manifest v1")
	magicRecord      = magic("vmvault point record v1")
	magicKey         = magic("vmvault key v1")
)

// BlobType says what a blob holds.
type BlobType uint8

// Blob types (FORMAT.md "Blob types").
const (
	BlobData     BlobType = 1 // a chunk of disk data
	BlobSegment  BlobType = 2 // a disk map segment
	BlobRoot     BlobType = 3 // a disk map root
	BlobManifest BlobType = 4 // a restore point manifest
	BlobVMConfig BlobType = 5 // opaque VM configuration
)

func (t BlobType) valid() bool { return t >= BlobData && t <= BlobVMConfig }

func (t BlobType) String() string {
	switch t {
	case BlobData:
		return "data"
	case BlobSegment:
		return "segment"
	case BlobRoot:
		return "root"
	case BlobManifest:
		return "manifest"
	case BlobVMConfig:
		return "vmconfig"
	}
	return fmt.Sprintf("type%d", uint8(t))
}

// Blob flags.
const (
	flagZstd uint8 = 1 << 0 // payload is a zstd frame
)

// packEntry is one blob in a pack header.
type packEntry struct {
	Type      BlobType
	Flags     uint8
	RawLen    uint32 // plaintext length
	StoredLen uint32 // bytes in the pack
	Offset    uint64 // from the start of the pack file
	ID        ID
}

const (
	packEntrySize      = 52
	packHeaderFixed    = 16 // magic(8) version(2) reserved(2) count(4)
	packTrailerSize    = 16 // header length(4) crc32c(4) magic(8)
	packStart          = 8  // magicPack at offset 0
	packHeaderVersion  = 1
	gcmNonceSize       = 12
	gcmTagSize         = 16
	blobSealOverhead   = gcmNonceSize + gcmTagSize
	recordPayloadSize  = 40
	recordPayloadVer   = 1
	recordFlagLocked   = 1 << 0
	segmentEntrySize   = 41
	segment11EntrySize = 49 // v1.1: the v1.0 entry followed by skip u64
	segmentHeaderSize  = 24
	rootEntrySize      = 48
	rootHeaderSize     = 32
	extentKindData     = 0
	extentKindZero     = 1
	extentKindSlice    = 2 // v1.1 segments only: bytes [skip, skip+length) of a data blob
	catalogSchema      = 1
	blobValueSize      = 36
	packValueSize      = 16
	blobStateLive      = 0
	blobStateCondemned = 1
	blobStateCorrupt   = 2 // found corrupt by check: dedup writes a fresh copy
)

// encodePackHeader returns the plaintext header (before sealing).
func encodePackHeader(entries []packEntry) []byte {
	b := make([]byte, packHeaderFixed+packEntrySize*len(entries))
	copy(b, magicPackHeader[:])
	binary.LittleEndian.PutUint16(b[8:], packHeaderVersion)
	binary.LittleEndian.PutUint32(b[12:], uint32(len(entries)))
	p := b[packHeaderFixed:]
	for _, e := range entries {
		p[0] = byte(e.Type)
		p[1] = e.Flags
		binary.LittleEndian.PutUint32(p[4:], e.RawLen)
		binary.LittleEndian.PutUint32(p[8:], e.StoredLen)
		binary.LittleEndian.PutUint64(p[12:], e.Offset)
		copy(p[20:52], e.ID[:])
		p = p[packEntrySize:]
	}
	return b
}

// decodePackHeader parses and validates a plaintext header. headerStart is
// the offset of the (encoded) header in the pack: every blob must lie in
// [packStart, headerStart), in increasing order, without overlap.
func decodePackHeader(b []byte, headerStart uint64, encrypted bool) ([]packEntry, error) {
	const what = "pack header"
	if len(b) < packHeaderFixed {
		return nil, formatErr(what, "%d bytes is too short", len(b))
	}
	if [8]byte(b[:8]) != magicPackHeader {
		return nil, formatErr(what, "bad magic")
	}
	if v := binary.LittleEndian.Uint16(b[8:]); v != packHeaderVersion {
		return nil, formatErr(what, "unsupported version %d", v)
	}
	if b[10] != 0 || b[11] != 0 {
		return nil, formatErr(what, "reserved bytes are not zero")
	}
	n := binary.LittleEndian.Uint32(b[12:])
	if n > maxPackHeaderBlobs || uint64(len(b)) != packHeaderFixed+uint64(n)*packEntrySize {
		return nil, formatErr(what, "%d entries do not match %d bytes", n, len(b))
	}
	entries := make([]packEntry, n)
	next := uint64(packStart)
	p := b[packHeaderFixed:]
	for i := range entries {
		e := packEntry{
			Type:      BlobType(p[0]),
			Flags:     p[1],
			RawLen:    binary.LittleEndian.Uint32(p[4:]),
			StoredLen: binary.LittleEndian.Uint32(p[8:]),
			Offset:    binary.LittleEndian.Uint64(p[12:]),
		}
		copy(e.ID[:], p[20:52])
		if !e.Type.valid() {
			return nil, formatErr(what, "entry %d: unknown blob type %d", i, p[0])
		}
		if e.Flags&^flagZstd != 0 || p[2] != 0 || p[3] != 0 {
			return nil, formatErr(what, "entry %d: unknown flags", i)
		}
		if e.RawLen > MaxBlobSize {
			return nil, formatErr(what, "entry %d: raw length %d too large", i, e.RawLen)
		}
		if err := checkStoredLen(e, encrypted); err != nil {
			return nil, formatErr(what, "entry %d: %v", i, err)
		}
		if e.Offset != next {
			return nil, formatErr(what, "entry %d: offset %d, want %d", i, e.Offset, next)
		}
		next = e.Offset + uint64(e.StoredLen)
		if next > headerStart {
			return nil, formatErr(what, "entry %d: extends past the header", i)
		}
		entries[i] = e
		p = p[packEntrySize:]
	}
	if next != headerStart {
		return nil, formatErr(what, "blobs end at %d but header starts at %d", next, headerStart)
	}
	return entries, nil
}

func checkStoredLen(e packEntry, encrypted bool) error {
	overhead := uint32(0)
	if encrypted {
		overhead = blobSealOverhead
	}
	if e.StoredLen < overhead {
		return fmt.Errorf("stored length %d below overhead", e.StoredLen)
	}
	payload := e.StoredLen - overhead
	if e.Flags&flagZstd == 0 && payload != e.RawLen {
		return fmt.Errorf("raw blob: stored payload %d != raw length %d", payload, e.RawLen)
	}
	if payload > MaxBlobSize+1024 {
		return fmt.Errorf("stored length %d too large", e.StoredLen)
	}
	return nil
}

// encodeTrailer returns the 16-byte pack trailer for an encoded header.
func encodeTrailer(encodedHeader []byte) []byte {
	t := make([]byte, packTrailerSize)
	binary.LittleEndian.PutUint32(t[0:], uint32(len(encodedHeader)))
	binary.LittleEndian.PutUint32(t[4:], crc32.Checksum(encodedHeader, crcTable))
	copy(t[8:], magicPackTrailer[:])
	return t
}

// decodeTrailer returns the encoded header length and its CRC-32C.
func decodeTrailer(t []byte, fileSize int64) (hlen uint32, crc uint32, err error) {
	if len(t) != packTrailerSize {
		return 0, 0, formatErr("pack trailer", "want %d bytes", packTrailerSize)
	}
	if [8]byte(t[8:16]) != magicPackTrailer {
		return 0, 0, formatErr("pack trailer", "bad magic")
	}
	hlen = binary.LittleEndian.Uint32(t[0:])
	if int64(hlen)+packTrailerSize+packStart > fileSize {
		return 0, 0, formatErr("pack trailer", "header length %d exceeds file size %d", hlen, fileSize)
	}
	return hlen, binary.LittleEndian.Uint32(t[4:]), nil
}

// Disk map segments -------------------------------------------------------

// segment is a decoded disk map segment: consecutive extents starting at Start.
type segment struct {
	Start   int64
	Extents []Extent // absolute offsets
}

// encodeSegment writes a v1.0 segment when no extent is a slice (so maps
// without slices keep their v1.0 bytes and ids), a v1.1 segment otherwise.
func encodeSegment(start int64, ext []Extent) []byte {
	v11 := false
	for _, e := range ext {
		if e.Slice {
			v11 = true
			break
		}
	}
	esz, m := segmentEntrySize, magicSegment
	if v11 {
		esz, m = segment11EntrySize, magicSegment11
	}
	b := make([]byte, segmentHeaderSize+esz*len(ext))
	copy(b, m[:])
	binary.LittleEndian.PutUint32(b[8:], uint32(len(ext)))
	binary.LittleEndian.PutUint64(b[16:], uint64(start))
	p := b[segmentHeaderSize:]
	for _, e := range ext {
		binary.LittleEndian.PutUint64(p, uint64(e.Length))
		switch {
		case e.Zero:
			p[8] = extentKindZero
		case e.Slice:
			p[8] = extentKindSlice
			copy(p[9:41], e.ID[:])
			binary.LittleEndian.PutUint64(p[41:], uint64(e.Skip))
		default:
			p[8] = extentKindData
			copy(p[9:41], e.ID[:])
		}
		p = p[esz:]
	}
	return b
}

func decodeSegment(b []byte) (segment, error) {
	const what = "disk map segment"
	var s segment
	if len(b) < segmentHeaderSize {
		return s, formatErr(what, "%d bytes is too short", len(b))
	}
	var esz uint64
	switch [8]byte(b[:8]) {
	case magicSegment:
		esz = segmentEntrySize
	case magicSegment11:
		esz = segment11EntrySize
	default:
		return s, formatErr(what, "bad magic")
	}
	v11 := esz == segment11EntrySize
	n := binary.LittleEndian.Uint32(b[8:])
	if binary.LittleEndian.Uint32(b[12:]) != 0 {
		return s, formatErr(what, "reserved field is not zero")
	}
	if uint64(len(b)) != segmentHeaderSize+uint64(n)*esz {
		return s, formatErr(what, "%d entries do not match %d bytes", n, len(b))
	}
	if n == 0 {
		return s, formatErr(what, "no extents")
	}
	start := binary.LittleEndian.Uint64(b[16:])
	if start > 1<<62 {
		return s, formatErr(what, "start offset %d too large", start)
	}
	s.Start = int64(start)
	s.Extents = make([]Extent, n)
	off := s.Start
	p := b[segmentHeaderSize:]
	slices := 0
	for i := range s.Extents {
		l := binary.LittleEndian.Uint64(p)
		if l == 0 || l > 1<<62 || uint64(off)+l > 1<<62 {
			return s, formatErr(what, "extent %d: bad length %d", i, l)
		}
		var skip uint64
		if v11 {
			skip = binary.LittleEndian.Uint64(p[41:])
		}
		e := Extent{Offset: off, Length: int64(l)}
		switch p[8] {
		case extentKindZero:
			e.Zero = true
			if ID(p[9:41]) != (ID{}) {
				return s, formatErr(what, "extent %d: hole with a blob id", i)
			}
		case extentKindData, extentKindSlice:
			copy(e.ID[:], p[9:41])
			if e.ID.IsZero() {
				return s, formatErr(what, "extent %d: data extent without a blob id", i)
			}
			if l > MaxBlobSize {
				return s, formatErr(what, "extent %d: data extent of %d bytes exceeds the blob limit", i, l)
			}
			if p[8] == extentKindSlice {
				if !v11 {
					return s, formatErr(what, "extent %d: slice in a v1.0 segment", i)
				}
				if skip > MaxBlobSize-l {
					return s, formatErr(what, "extent %d: slice [%d,+%d) exceeds the blob limit", i, skip, l)
				}
				e.Slice, e.Skip = true, int64(skip)
				slices++
			}
		default:
			return s, formatErr(what, "extent %d: unknown kind %d", i, p[8])
		}
		if !e.Slice && skip != 0 {
			return s, formatErr(what, "extent %d: skip %d on a kind %d extent", i, skip, p[8])
		}
		s.Extents[i] = e
		off += int64(l)
		p = p[esz:]
	}
	if v11 && slices == 0 {
		// One encoding per map: a segment without slices is written as v1.0.
		return s, formatErr(what, "v1.1 segment without a slice")
	}
	return s, nil
}

// segRef is one root entry: the segment covering [Start, Start+Length).
type segRef struct {
	Start, Length int64
	ID            ID
}

// diskRoot is a decoded disk map root.
type diskRoot struct {
	Size int64
	Span int64
	Segs []segRef
}

func encodeRoot(r diskRoot) []byte {
	b := make([]byte, rootHeaderSize+rootEntrySize*len(r.Segs))
	copy(b, magicRoot[:])
	binary.LittleEndian.PutUint32(b[8:], uint32(len(r.Segs)))
	binary.LittleEndian.PutUint64(b[16:], uint64(r.Size))
	binary.LittleEndian.PutUint64(b[24:], uint64(r.Span))
	p := b[rootHeaderSize:]
	for _, s := range r.Segs {
		binary.LittleEndian.PutUint64(p, uint64(s.Start))
		binary.LittleEndian.PutUint64(p[8:], uint64(s.Length))
		copy(p[16:48], s.ID[:])
		p = p[rootEntrySize:]
	}
	return b
}

func decodeRoot(b []byte) (diskRoot, error) {
	const what = "disk map root"
	var r diskRoot
	if len(b) < rootHeaderSize {
		return r, formatErr(what, "%d bytes is too short", len(b))
	}
	if [8]byte(b[:8]) != magicRoot {
		return r, formatErr(what, "bad magic")
	}
	n := binary.LittleEndian.Uint32(b[8:])
	if binary.LittleEndian.Uint32(b[12:]) != 0 {
		return r, formatErr(what, "reserved field is not zero")
	}
	if uint64(len(b)) != rootHeaderSize+uint64(n)*rootEntrySize {
		return r, formatErr(what, "%d entries do not match %d bytes", n, len(b))
	}
	size := binary.LittleEndian.Uint64(b[16:])
	span := binary.LittleEndian.Uint64(b[24:])
	if size > 1<<62 || span == 0 || span > 1<<62 {
		return r, formatErr(what, "bad size %d or span %d", size, span)
	}
	r.Size, r.Span = int64(size), int64(span)
	r.Segs = make([]segRef, n)
	var next int64
	p := b[rootHeaderSize:]
	for i := range r.Segs {
		s := segRef{Start: int64(binary.LittleEndian.Uint64(p)), Length: int64(binary.LittleEndian.Uint64(p[8:]))}
		copy(s.ID[:], p[16:48])
		if s.Start != next || s.Length <= 0 || s.Length > r.Size-s.Start {
			return r, formatErr(what, "segment %d: [%d,+%d) is not contiguous within %d", i, s.Start, s.Length, r.Size)
		}
		if s.ID.IsZero() {
			return r, formatErr(what, "segment %d: zero id", i)
		}
		next = s.Start + s.Length
		r.Segs[i] = s
		p = p[rootEntrySize:]
	}
	if next != r.Size {
		return r, formatErr(what, "segments cover %d bytes of %d", next, r.Size)
	}
	return r, nil
}

// Commit records -----------------------------------------------------------

type record struct {
	Manifest ID
	Locked   bool
}

func encodeRecordPayload(rec record) []byte {
	p := make([]byte, recordPayloadSize)
	p[0] = recordPayloadVer
	if rec.Locked {
		p[1] = recordFlagLocked
	}
	copy(p[8:], rec.Manifest[:])
	return p
}

func decodeRecordPayload(p []byte) (record, error) {
	const what = "commit record"
	var rec record
	if len(p) != recordPayloadSize {
		return rec, formatErr(what, "payload of %d bytes, want %d", len(p), recordPayloadSize)
	}
	if p[0] != recordPayloadVer {
		return rec, formatErr(what, "unsupported version %d", p[0])
	}
	if p[1]&^recordFlagLocked != 0 {
		return rec, formatErr(what, "unknown flags %#x", p[1])
	}
	for _, c := range p[2:8] {
		if c != 0 {
			return rec, formatErr(what, "reserved bytes are not zero")
		}
	}
	rec.Locked = p[1]&recordFlagLocked != 0
	copy(rec.Manifest[:], p[8:])
	if rec.Manifest.IsZero() {
		return rec, formatErr(what, "zero manifest id")
	}
	return rec, nil
}
