package vmdk

import (
	"encoding/binary"
	"fmt"
	"math/bits"
)

const (
	// SectorSize is the VMDK addressing unit: every offset and size in the
	// sparse header, grain tables and markers counts 512-byte sectors.
	SectorSize = 512

	sparseMagic   = 0x564D444B // "KDMV" on disk
	cowdMagic     = 0x44574F43 // "COWD": ESX vmfsSparse, not read here
	gdAtEnd       = ^uint64(0)
	flagNLDetect  = 1 << 0
	flagRGD       = 1 << 1
	flagZeroGrain = 1 << 2
	flagCompress  = 1 << 16
	flagMarkers   = 1 << 17
	compressNone  = 0
	compressZlib  = 1

	markerEOS    = 0
	markerGT     = 1
	markerGD     = 2
	markerFooter = 3

	// Bounds on header fields. VMware's own limit is 62 TiB; 128 TiB leaves
	// room without letting capacity*512 approach int64 overflow.
	maxCapacitySectors = 1 << 38
	// VMware always writes 128-sector (64 KiB) grains; 2 MiB caps what a
	// hostile header can make us allocate per grain.
	maxGrainSectors = 4096
	// The spec fixes 512 entries per grain table; tolerate up to 4096.
	maxGTEsPerGT = 4096
	// An embedded or standalone descriptor is text; 1 MiB is generous.
	maxDescriptorBytes = 1 << 20
	// GD entries held in memory (64 MiB worst case, and the GD must also fit
	// inside the file, which bounds it further).
	maxGDEntries = 1 << 24
)

// header is the 512-byte SparseExtentHeader of a hosted sparse extent
// (also the footer of a streamOptimized file).
type header struct {
	Version           uint32
	Flags             uint32
	Capacity          uint64 // sectors
	GrainSize         uint64 // sectors
	DescriptorOffset  uint64 // sectors
	DescriptorSize    uint64 // sectors
	NumGTEsPerGT      uint32
	RGDOffset         uint64
	GDOffset          uint64
	OverHead          uint64
	UncleanShutdown   bool
	CompressAlgorithm uint16
}

func (h *header) compressed() bool { return h.Flags&flagCompress != 0 }
func (h *header) markers() bool    { return h.Flags&flagMarkers != 0 }

// grainBytes and gtCoverage are valid only after parseHeader succeeded.
func (h *header) grainBytes() int64 { return int64(h.GrainSize) * SectorSize }

// numGTs is the number of grain directory entries needed to cover capacity.
func (h *header) numGTs() uint64 {
	per := h.GrainSize * uint64(h.NumGTEsPerGT)
	return (h.Capacity + per - 1) / per
}

// parseHeader decodes and bounds-checks a sparse extent header. It does not
// check offsets against the file size; callers that know it do.
func parseHeader(b []byte) (header, error) {
	var h header
	if len(b) < SectorSize {
		return h, fmt.Errorf("sparse header: %d bytes, need %d: %w", len(b), SectorSize, ErrCorrupt)
	}
	le := binary.LittleEndian
	magic := le.Uint32(b[0:])
	if magic == cowdMagic {
		return h, fmt.Errorf("sparse header: vmfsSparse (COWD) extent: %w", ErrUnsupported)
	}
	if magic != sparseMagic {
		return h, fmt.Errorf("sparse header: magic %#x: %w", magic, ErrNotVMDK)
	}
	h.Version = le.Uint32(b[4:])
	h.Flags = le.Uint32(b[8:])
	h.Capacity = le.Uint64(b[12:])
	h.GrainSize = le.Uint64(b[20:])
	h.DescriptorOffset = le.Uint64(b[28:])
	h.DescriptorSize = le.Uint64(b[36:])
	h.NumGTEsPerGT = le.Uint32(b[44:])
	h.RGDOffset = le.Uint64(b[48:])
	h.GDOffset = le.Uint64(b[56:])
	h.OverHead = le.Uint64(b[64:])
	h.UncleanShutdown = b[72] != 0
	h.CompressAlgorithm = le.Uint16(b[77:])

	if h.Version < 1 || h.Version > 3 {
		return h, fmt.Errorf("sparse header: version %d (want 1..3): %w", h.Version, ErrUnsupported)
	}
	if h.Flags&flagNLDetect != 0 && (b[73] != '\n' || b[74] != ' ' || b[75] != '\r' || b[76] != '\n') {
		return h, fmt.Errorf("sparse header: newline detector bytes %q: file was altered by a text-mode transfer: %w", b[73:77], ErrCorrupt)
	}
	if h.Capacity > maxCapacitySectors {
		return h, fmt.Errorf("sparse header: capacity %d sectors exceeds %d: %w", h.Capacity, uint64(maxCapacitySectors), ErrCorrupt)
	}
	if h.GrainSize == 0 || h.GrainSize > maxGrainSectors || bits.OnesCount64(h.GrainSize) != 1 {
		return h, fmt.Errorf("sparse header: grainSize %d sectors (want a power of two <= %d): %w", h.GrainSize, maxGrainSectors, ErrCorrupt)
	}
	if h.NumGTEsPerGT == 0 || h.NumGTEsPerGT > maxGTEsPerGT {
		return h, fmt.Errorf("sparse header: numGTEsPerGT %d (want 1..%d): %w", h.NumGTEsPerGT, maxGTEsPerGT, ErrCorrupt)
	}
	if h.DescriptorSize*SectorSize > maxDescriptorBytes {
		return h, fmt.Errorf("sparse header: descriptorSize %d sectors exceeds %d bytes: %w", h.DescriptorSize, maxDescriptorBytes, ErrCorrupt)
	}
	if h.DescriptorSize != 0 && (h.DescriptorOffset == 0 || h.DescriptorOffset > maxCapacitySectors) {
		return h, fmt.Errorf("sparse header: descriptorOffset %d: %w", h.DescriptorOffset, ErrCorrupt)
	}
	if h.compressed() {
		if h.CompressAlgorithm != compressZlib {
			return h, fmt.Errorf("sparse header: compressAlgorithm %d (want 1 = deflate): %w", h.CompressAlgorithm, ErrUnsupported)
		}
		if !h.markers() {
			// QEMU and VMware only produce compressed grains with markers.
			return h, fmt.Errorf("sparse header: compressed grains without markers: %w", ErrUnsupported)
		}
	}
	if n := h.numGTs(); n > maxGDEntries {
		return h, fmt.Errorf("sparse header: grain directory of %d entries exceeds %d: %w", n, maxGDEntries, ErrCorrupt)
	}
	return h, nil
}

// encode writes h as a 512-byte on-disk header.
func (h *header) encode() []byte {
	b := make([]byte, SectorSize)
	le := binary.LittleEndian
	le.PutUint32(b[0:], sparseMagic)
	le.PutUint32(b[4:], h.Version)
	le.PutUint32(b[8:], h.Flags)
	le.PutUint64(b[12:], h.Capacity)
	le.PutUint64(b[20:], h.GrainSize)
	le.PutUint64(b[28:], h.DescriptorOffset)
	le.PutUint64(b[36:], h.DescriptorSize)
	le.PutUint32(b[44:], h.NumGTEsPerGT)
	le.PutUint64(b[48:], h.RGDOffset)
	le.PutUint64(b[56:], h.GDOffset)
	le.PutUint64(b[64:], h.OverHead)
	if h.UncleanShutdown {
		b[72] = 1
	}
	b[73], b[74], b[75], b[76] = '\n', ' ', '\r', '\n'
	le.PutUint16(b[77:], h.CompressAlgorithm)
	return b
}
