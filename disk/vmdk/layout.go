package vmdk

import (
	"encoding/binary"
	"fmt"
	"sort"
)

// A hosted sparse extent is a small map (header, descriptor, grain
// directory, grain tables) over data grains. A hostile map can make a small
// file describe a huge amount of work: every GD entry naming one grain table,
// every grain table entry naming one grain, tables inside the header. So the
// layout is checked once at open, before any grain is read:
//
//   - every grain table the GD names lies inside the file, and no two of
//     them, the header, the embedded descriptor, the GD, the redundant GD or
//     the footer overlap: the tables then total at most the file's size, and
//     reading each once (what the scan and allocated do) is bounded by it;
//   - every allocated grain starts inside the file, after overHead, and
//     outside all that metadata;
//   - the allocated grains fit in the file: uncompressed ones take a whole
//     grain each, compressed ones at least a sector (more for grains so large
//     that deflate's 1032:1 limit needs it). So the data a backup reads is
//     bounded by the file's size (uncompressed) or about gb/512 times it.
//
// Allocated grains sharing a sector are refused when adjacent in a table
// (the common forgery); others are caught by the count.

// deflateMaxRatio is deflate's best possible compression (258-byte matches
// coded in 2 bits): a full grain cannot be stored in fewer bytes than
// grain/1032.
const deflateMaxRatio = 1032

type spanKind uint8

const (
	spanHeader spanKind = iota
	spanDescriptor
	spanGD
	spanRGD
	spanFooter
	spanGT
)

// span is a byte range [off, end) of the file holding metadata.
type span struct {
	off, end int64
	kind     spanKind
	idx      int // grain table number (spanGT)
}

func (sp span) String() string {
	var what string
	switch sp.kind {
	case spanHeader:
		what = "the sparse header"
	case spanDescriptor:
		what = "the embedded descriptor"
	case spanGD:
		what = "the grain directory"
	case spanRGD:
		what = "the redundant grain directory"
	case spanFooter:
		what = "the footer"
	default:
		what = fmt.Sprintf("grain table %d", sp.idx)
	}
	return fmt.Sprintf("%s (bytes %d-%d)", what, sp.off, sp.end)
}

func roundSector(n int64) int64 { return (n + SectorSize - 1) / SectorSize * SectorSize }

// metadata returns the sorted, checked-disjoint metadata spans of the file.
func (s *sparseExtent) metadata() ([]span, error) {
	gtBytes := int64(s.h.NumGTEsPerGT) * 4
	var tables int64
	for _, sec := range s.gd {
		if sec != 0 {
			tables++
		}
	}
	// Before allocating a span per table: disjoint tables cannot number
	// more than the file holds.
	if tables*gtBytes > s.fsize {
		return nil, fmt.Errorf("%s: grain directory names %d grain tables of %d bytes, more than the %d-byte file holds (tables shared or overlapping): %w",
			s.name, tables, gtBytes, s.fsize, ErrCorrupt)
	}
	spans := make([]span, 0, tables+5)
	add := func(off, n int64, kind spanKind, idx int) {
		spans = append(spans, span{off, min(off+roundSector(n), s.fsize), kind, idx})
	}
	add(0, SectorSize, spanHeader, 0)
	if s.h.DescriptorSize > 0 {
		if off := int64(s.h.DescriptorOffset) * SectorSize; off < s.fsize {
			add(off, int64(s.h.DescriptorSize)*SectorSize, spanDescriptor, 0)
		}
	}
	gdBytes := int64(len(s.gd)) * 4
	add(int64(s.h.GDOffset)*SectorSize, gdBytes, spanGD, 0)
	// The redundant GD is not read, only kept clear of grains and tables;
	// where it lies outside the file it is ignored rather than refused.
	if s.h.Flags&flagRGD != 0 && s.h.RGDOffset != 0 && s.h.RGDOffset <= uint64(s.fsize)/SectorSize {
		if off := int64(s.h.RGDOffset) * SectorSize; off+gdBytes <= s.fsize {
			add(off, gdBytes, spanRGD, 0)
		}
	}
	if s.footer {
		// footer marker, footer, end-of-stream marker (readFooter checked
		// the file holds them).
		add(s.fsize-3*SectorSize, 3*SectorSize, spanFooter, 0)
	}
	for i, sec := range s.gd {
		if sec == 0 {
			continue
		}
		off := int64(sec) * SectorSize
		if off+gtBytes > s.fsize {
			return nil, fmt.Errorf("%s: grain table %d at sector %d lies outside the %d-byte file: %w", s.name, i, sec, s.fsize, ErrCorrupt)
		}
		add(off, gtBytes, spanGT, i)
	}
	sort.Slice(spans, func(a, b int) bool {
		if spans[a].off != spans[b].off {
			return spans[a].off < spans[b].off
		}
		return spans[a].kind < spans[b].kind
	})
	for i := 1; i < len(spans); i++ {
		if spans[i].off < spans[i-1].end {
			return nil, fmt.Errorf("%s: %v overlaps %v: %w", s.name, spans[i], spans[i-1], ErrCorrupt)
		}
	}
	return spans, nil
}

// minGrainRecord is the fewest file bytes one allocated grain can occupy.
func (s *sparseExtent) minGrainRecord() int64 {
	if !s.h.compressed() {
		return s.gb
	}
	return max(SectorSize, roundSector(markerHeaderSize+s.gb/deflateMaxRatio))
}

// lastGrain is the index of the header capacity's last grain, the only one
// a compressed extent may store short.
func (s *sparseExtent) lastGrain() int64 { return (int64(s.h.Capacity) - 1) / int64(s.h.GrainSize) }

// checkLayout enforces the rules above, reading each grain table once.
func (s *sparseExtent) checkLayout() error {
	spans, err := s.metadata()
	if err != nil {
		return err
	}
	// Past the last span but the footer, no search is needed: hosted
	// sparse files keep all metadata in front of the grains.
	var metaEnd int64
	for _, sp := range spans {
		if sp.kind != spanFooter {
			metaEnd = max(metaEnd, sp.end)
		}
	}
	overHead := int64(min(s.h.OverHead, uint64(s.fsize)/SectorSize)) * SectorSize
	capBytes := int64(s.h.Capacity) * SectorSize
	last := s.lastGrain()
	per := int64(s.h.NumGTEsPerGT)
	raw := make([]byte, per*4)
	var allocated int64
	for i, sec := range s.gd {
		if sec == 0 {
			continue
		}
		if _, err := s.f.ReadAt(raw, int64(sec)*SectorSize); err != nil {
			return fmt.Errorf("%s: read grain table %d: %w", s.name, i, eofCorrupt(err))
		}
		var prev uint32
		var prevG int64
		for j := int64(0); j < per; j++ {
			g := int64(i)*per + j
			if g > last {
				break // entries past the capacity are never used
			}
			e := binary.LittleEndian.Uint32(raw[j*4:])
			if s.isZeroGTE(e) {
				continue
			}
			off := int64(e) * SectorSize
			// Bytes of the file the grain must own: an uncompressed grain
			// whole (as much of it as the capacity uses), a compressed one
			// its marker's sector.
			need := min(s.gb, capBytes-g*s.gb)
			if s.h.compressed() {
				need = markerHeaderSize + 1
			}
			switch {
			case off < overHead:
				return fmt.Errorf("%s: grain %d at sector %d lies in the metadata area (overHead %d sectors): %w", s.name, g, e, s.h.OverHead, ErrCorrupt)
			case off+need > s.fsize:
				return fmt.Errorf("%s: grain %d at sector %d lies outside the %d-byte file: %w", s.name, g, e, s.fsize, ErrCorrupt)
			case e == prev:
				return fmt.Errorf("%s: grains %d and %d both at sector %d: %w", s.name, prevG, g, e, ErrCorrupt)
			}
			if off < metaEnd || s.footer {
				end := off + min(roundSector(need), s.fsize-off)
				k := sort.Search(len(spans), func(k int) bool { return spans[k].end > off })
				if k < len(spans) && spans[k].off < end {
					return fmt.Errorf("%s: grain %d at sector %d lies inside %v: %w", s.name, g, e, spans[k], ErrCorrupt)
				}
			}
			prev, prevG = e, g
			allocated++
		}
	}
	// One record of slack: the file's last one may lack its padding.
	if rec := s.minGrainRecord(); allocated > 1 && (allocated-1)*rec > s.fsize {
		return fmt.Errorf("%s: %d allocated grains of at least %d bytes each do not fit in the %d-byte file (grains shared or overlapping): %w",
			s.name, allocated, rec, s.fsize, ErrCorrupt)
	}
	return nil
}
