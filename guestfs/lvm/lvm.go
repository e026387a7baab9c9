// Package lvm reads LVM2 physical volumes: the label and PV header, the
// metadata area's circular buffer, and the text metadata (VGs, PVs, LVs
// and their segments), and maps a linear logical volume to byte ranges on
// its physical volumes. It only reads.
//
// What is mapped: linear LVs ("striped" segments with one stripe) of any
// number of segments on any number of PVs. What is refused, with a reason
// the caller shows: striped LVs of several stripes, mirrors, RAID, thin
// pools and thin LVs, caches, VDO, integrity and snapshots. Their data is
// not laid out linearly on a PV (RAID and mirror legs need their metadata
// to know which leg is current, thin LVs need the pool's b-tree and
// snapshots need the COW exception store) and reading them wrongly would
// restore plausible garbage. Segments that overlap or leave gaps, and PV
// extents past a PV's end, are errors.
//
// No Go library for LVM2 metadata was worth taking, so this is ours; the
// format is documented in lvm2's doc/lvm2-raid.txt and lib/format_text.
package lvm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// Errors callers branch on.
var (
	ErrNoLabel     = errors.New("no LVM2 label")
	ErrCorrupt     = errors.New("corrupt LVM2 metadata")
	ErrUnsupported = errors.New("unsupported logical volume layout")
)

const (
	sector      = 512
	mdaMagic    = " LVM2 x[5A%r0N*>"
	maxMetadata = 16 << 20 // text metadata of one VG
	maxAreas    = 16
)

// PV is what a physical volume's label and newest metadata say.
type PV struct {
	UUID     string // 32 characters, without dashes
	Size     int64  // device size from the PV header
	Metadata []byte // the newest VG metadata text, or nil for an orphan PV
}

// ReadLabel reads the PV label in the first four sectors, the PV header
// and the newest metadata text of the first metadata area.
func ReadLabel(r io.ReaderAt, size int64) (*PV, error) {
	head := make([]byte, 4*sector)
	n, err := r.ReadAt(head, 0)
	if n < len(head) && err != nil {
		return nil, fmt.Errorf("read PV label: %w", err)
	}
	le := binary.LittleEndian
	for s := 0; s < 4; s++ {
		l := head[s*sector : (s+1)*sector]
		if string(l[:8]) != "LABELONE" || string(l[24:32]) != "LVM2 001" {
			continue
		}
		off := int(le.Uint32(l[20:]))
		if off < 32 || off+40 > sector {
			return nil, fmt.Errorf("%w: PV header at offset %d", ErrCorrupt, off)
		}
		ph := l[off:]
		pv := &PV{UUID: string(ph[:32]), Size: int64(le.Uint64(ph[32:]))}
		// Data areas, a zero entry, then metadata areas, a zero entry.
		p := 40
		areas := func() ([][2]int64, error) {
			var out [][2]int64
			for {
				if off+p+16 > sector {
					return nil, fmt.Errorf("%w: PV header area list runs off the label sector", ErrCorrupt)
				}
				o, sz := int64(le.Uint64(ph[p:])), int64(le.Uint64(ph[p+8:]))
				p += 16
				if o == 0 {
					return out, nil
				}
				if len(out) >= maxAreas {
					return nil, fmt.Errorf("%w: too many areas", ErrCorrupt)
				}
				out = append(out, [2]int64{o, sz})
			}
		}
		if _, err := areas(); err != nil {
			return nil, err
		}
		mdas, err := areas()
		if err != nil {
			return nil, err
		}
		var lastErr error
		for _, m := range mdas {
			txt, err := readMDA(r, size, m[0], m[1])
			if err != nil {
				lastErr = err
				continue
			}
			pv.Metadata = txt
			return pv, nil
		}
		if lastErr != nil {
			return nil, lastErr
		}
		return pv, nil
	}
	return nil, ErrNoLabel
}

// readMDA reads the newest metadata text from a metadata area: a 512-byte
// header, then a circular buffer whose first raw location names the text.
func readMDA(r io.ReaderAt, size, off, length int64) ([]byte, error) {
	if off <= 0 || length < 2*sector || off+length > size || length > 1<<30 {
		return nil, fmt.Errorf("%w: metadata area %d+%d outside the PV", ErrCorrupt, off, length)
	}
	h := make([]byte, sector)
	if _, err := r.ReadAt(h, off); err != nil {
		return nil, fmt.Errorf("read metadata area header: %w", err)
	}
	if string(h[4:20]) != mdaMagic {
		return nil, fmt.Errorf("%w: bad metadata area magic", ErrCorrupt)
	}
	le := binary.LittleEndian
	mdaSize := int64(le.Uint64(h[32:]))
	if mdaSize != length {
		mdaSize = min(mdaSize, length)
	}
	roff, rsize := int64(le.Uint64(h[40:])), int64(le.Uint64(h[48:]))
	if rsize == 0 {
		return nil, nil // orphan PV: no VG yet
	}
	if rsize > maxMetadata || roff < sector || roff >= mdaSize || rsize > mdaSize-sector {
		return nil, fmt.Errorf("%w: metadata text at %d+%d in a %d-byte area", ErrCorrupt, roff, rsize, mdaSize)
	}
	txt := make([]byte, rsize)
	first := min(rsize, mdaSize-roff)
	if _, err := r.ReadAt(txt[:first], off+roff); err != nil {
		return nil, fmt.Errorf("read metadata text: %w", err)
	}
	if first < rsize { // wrapped around to just after the header
		if _, err := r.ReadAt(txt[first:], off+sector); err != nil {
			return nil, fmt.Errorf("read metadata text: %w", err)
		}
	}
	if i := bytes.IndexByte(txt, 0); i >= 0 {
		txt = txt[:i]
	}
	return txt, nil
}

// VG is a parsed volume group.
type VG struct {
	Name       string
	ID         string
	Seqno      int64
	ExtentSize int64 // bytes
	PVs        map[string]*PVInfo
	LVs        []*LV
}

// PVInfo is one PV as the VG metadata describes it.
type PVInfo struct {
	Name    string // "pv0"
	UUID    string // without dashes
	PEStart int64  // bytes
	PECount int64
}

// LV is one logical volume.
type LV struct {
	Name     string
	Visible  bool
	Segments []Segment
}

// Segment is one segment of an LV.
type Segment struct {
	Start, Count int64 // in extents
	Type         string
	Stripes      []Stripe
	Extra        map[string]bool // other keys present (origin, pool, ...)
}

// Stripe is where a segment's data lies on a PV.
type Stripe struct {
	PV string
	PE int64
}

// Range maps LV bytes [Off, Off+Len) to PV bytes starting at PVOff.
type Range struct {
	Off, Len int64
	PV       string // the PV's UUID
	PVOff    int64
}

// Map returns the byte ranges of a linear LV, or an error wrapping
// ErrUnsupported (with the reason) or ErrCorrupt.
func (vg *VG) Map(lv *LV) ([]Range, error) {
	segs := append([]Segment(nil), lv.Segments...)
	sort.Slice(segs, func(i, j int) bool { return segs[i].Start < segs[j].Start })
	var out []Range
	next := int64(0)
	for _, s := range segs {
		switch {
		case s.Type == "striped" && len(s.Stripes) == 1:
		case s.Type == "striped":
			return nil, fmt.Errorf("%w: striped over %d PVs", ErrUnsupported, len(s.Stripes))
		case strings.HasPrefix(s.Type, "thin"):
			return nil, fmt.Errorf("%w: thin provisioning (%s) needs the pool's metadata b-tree", ErrUnsupported, s.Type)
		case strings.HasPrefix(s.Type, "raid") || s.Type == "mirror":
			return nil, fmt.Errorf("%w: %s legs need the RAID metadata to tell which is current", ErrUnsupported, s.Type)
		case s.Type == "snapshot":
			return nil, fmt.Errorf("%w: a snapshot needs its COW exception store", ErrUnsupported)
		default:
			return nil, fmt.Errorf("%w: segment type %q", ErrUnsupported, s.Type)
		}
		if s.Start != next {
			if s.Start < next {
				return nil, fmt.Errorf("%w: LV %s: segments overlap at extent %d", ErrCorrupt, lv.Name, s.Start)
			}
			return nil, fmt.Errorf("%w: LV %s: gap before extent %d", ErrCorrupt, lv.Name, s.Start)
		}
		if s.Count <= 0 || s.Count > 1<<40 {
			return nil, fmt.Errorf("%w: LV %s: segment of %d extents", ErrCorrupt, lv.Name, s.Count)
		}
		st := s.Stripes[0]
		pv, ok := vg.PVs[st.PV]
		if !ok {
			return nil, fmt.Errorf("%w: LV %s: segment on unknown PV %q", ErrCorrupt, lv.Name, st.PV)
		}
		if st.PE < 0 || st.PE+s.Count > pv.PECount {
			return nil, fmt.Errorf("%w: LV %s: extents %d+%d past the end of %s (%d extents)", ErrCorrupt, lv.Name, st.PE, s.Count, st.PV, pv.PECount)
		}
		out = append(out, Range{Off: s.Start * vg.ExtentSize, Len: s.Count * vg.ExtentSize, PV: pv.UUID, PVOff: pv.PEStart + st.PE*vg.ExtentSize})
		next = s.Start + s.Count
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: LV %s has no segments", ErrCorrupt, lv.Name)
	}
	// Two LVs' segments on the same PV extents would also be damage, but
	// that is the VG's concern: see Check.
	return out, nil
}

// Check reports PV extents claimed by two segments (of any LVs).
func (vg *VG) Check() error {
	type use struct {
		pv         string
		start, end int64
		lv         string
	}
	var uses []use
	for _, lv := range vg.LVs {
		for _, s := range lv.Segments {
			for _, st := range s.Stripes {
				uses = append(uses, use{st.PV, st.PE, st.PE + s.Count, lv.Name})
			}
		}
	}
	sort.Slice(uses, func(i, j int) bool {
		if uses[i].pv != uses[j].pv {
			return uses[i].pv < uses[j].pv
		}
		return uses[i].start < uses[j].start
	})
	for i := 1; i < len(uses); i++ {
		a, b := uses[i-1], uses[i]
		if a.pv == b.pv && b.start < a.end {
			return fmt.Errorf("%w: %s and %s both use extents %d-%d of %s", ErrCorrupt, a.lv, b.lv, b.start, min(a.end, b.end)-1, a.pv)
		}
	}
	return nil
}

// Parse parses the text metadata of one VG.
func Parse(text []byte) (*VG, error) {
	p := &parser{s: text}
	root, err := p.section(0)
	if err != nil {
		return nil, err
	}
	var name string
	var sec *section
	for _, k := range root.order {
		if s, ok := root.subs[k]; ok {
			if sec != nil {
				return nil, fmt.Errorf("%w: two VGs in one metadata text", ErrCorrupt)
			}
			name, sec = k, s
		}
	}
	if sec == nil {
		return nil, fmt.Errorf("%w: no VG section", ErrCorrupt)
	}
	vg := &VG{Name: name, PVs: map[string]*PVInfo{}}
	vg.ID, _ = sec.str("id")
	vg.Seqno, _ = sec.num("seqno")
	es, ok := sec.num("extent_size")
	if !ok || es <= 0 || es > 1<<32 {
		return nil, fmt.Errorf("%w: VG %s: extent_size %d", ErrCorrupt, name, es)
	}
	vg.ExtentSize = es * sector
	if pvs := sec.subs["physical_volumes"]; pvs != nil {
		for _, pn := range pvs.order {
			ps := pvs.subs[pn]
			if ps == nil {
				continue
			}
			id, _ := ps.str("id")
			start, _ := ps.num("pe_start")
			count, _ := ps.num("pe_count")
			if start < 0 || count < 0 || start > 1<<40 || count > 1<<40 {
				return nil, fmt.Errorf("%w: PV %s: pe_start %d pe_count %d", ErrCorrupt, pn, start, count)
			}
			vg.PVs[pn] = &PVInfo{Name: pn, UUID: strings.ReplaceAll(id, "-", ""), PEStart: start * sector, PECount: count}
		}
	}
	if lvs := sec.subs["logical_volumes"]; lvs != nil {
		for _, ln := range lvs.order {
			ls := lvs.subs[ln]
			if ls == nil {
				continue
			}
			lv := &LV{Name: ln}
			for _, st := range ls.strs("status") {
				if st == "VISIBLE" {
					lv.Visible = true
				}
			}
			for _, sn := range ls.order {
				ss := ls.subs[sn]
				if ss == nil || !strings.HasPrefix(sn, "segment") {
					continue
				}
				seg := Segment{Extra: map[string]bool{}}
				seg.Start, _ = ss.num("start_extent")
				seg.Count, _ = ss.num("extent_count")
				seg.Type, _ = ss.str("type")
				for k := range ss.vals {
					seg.Extra[k] = true
				}
				list := ss.vals["stripes"]
				if len(list)%2 != 0 {
					return nil, fmt.Errorf("%w: LV %s %s: odd stripes list", ErrCorrupt, ln, sn)
				}
				for i := 0; i+1 < len(list); i += 2 {
					pvn, ok1 := list[i].(string)
					pe, ok2 := list[i+1].(int64)
					if !ok1 || !ok2 {
						return nil, fmt.Errorf("%w: LV %s %s: bad stripes list", ErrCorrupt, ln, sn)
					}
					seg.Stripes = append(seg.Stripes, Stripe{PV: pvn, PE: pe})
				}
				lv.Segments = append(lv.Segments, seg)
			}
			vg.LVs = append(vg.LVs, lv)
		}
	}
	return vg, nil
}

// section is a parsed "name { ... }" block.
type section struct {
	vals  map[string][]any // a scalar is a one-element list; strings are string, numbers int64
	subs  map[string]*section
	order []string
}

func (s *section) str(k string) (string, bool) {
	if v := s.vals[k]; len(v) == 1 {
		x, ok := v[0].(string)
		return x, ok
	}
	return "", false
}

func (s *section) num(k string) (int64, bool) {
	if v := s.vals[k]; len(v) == 1 {
		x, ok := v[0].(int64)
		return x, ok
	}
	return 0, false
}

func (s *section) strs(k string) []string {
	var out []string
	for _, v := range s.vals[k] {
		if x, ok := v.(string); ok {
			out = append(out, x)
		}
	}
	return out
}

type parser struct {
	s []byte
	i int
}

const (
	maxNesting = 16
	maxItems   = 1 << 20
)

func (p *parser) skip() {
	for p.i < len(p.s) {
		switch c := p.s[p.i]; {
		case c == '#':
			for p.i < len(p.s) && p.s[p.i] != '\n' {
				p.i++
			}
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) errf(f string, a ...any) error {
	return fmt.Errorf("%w: at byte %d: %s", ErrCorrupt, p.i, fmt.Sprintf(f, a...))
}

func isIdent(c byte) bool {
	return c == '_' || c == '-' || c == '.' || c == '+' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func (p *parser) ident() string {
	st := p.i
	for p.i < len(p.s) && isIdent(p.s[p.i]) {
		p.i++
	}
	return string(p.s[st:p.i])
}

// section parses "key = value" and "name { ... }" items until "}" (or the
// end of the text at the top level).
func (p *parser) section(depth int) (*section, error) {
	if depth > maxNesting {
		return nil, p.errf("sections nested too deep")
	}
	s := &section{vals: map[string][]any{}, subs: map[string]*section{}}
	for n := 0; ; n++ {
		if n > maxItems {
			return nil, p.errf("too many items")
		}
		p.skip()
		if p.i >= len(p.s) {
			if depth > 0 {
				return nil, p.errf("unterminated section")
			}
			return s, nil
		}
		if p.s[p.i] == '}' {
			if depth == 0 {
				return nil, p.errf("unexpected }")
			}
			p.i++
			return s, nil
		}
		k := p.ident()
		if k == "" {
			return nil, p.errf("unexpected %q", p.s[p.i])
		}
		p.skip()
		if p.i >= len(p.s) {
			return nil, p.errf("unexpected end after %q", k)
		}
		switch p.s[p.i] {
		case '{':
			p.i++
			sub, err := p.section(depth + 1)
			if err != nil {
				return nil, err
			}
			if _, dup := s.subs[k]; dup {
				return nil, p.errf("duplicate section %q", k)
			}
			s.subs[k] = sub
			s.order = append(s.order, k)
		case '=':
			p.i++
			p.skip()
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			s.vals[k] = v
		default:
			return nil, p.errf("expected = or { after %q", k)
		}
	}
}

func (p *parser) value() ([]any, error) {
	if p.i >= len(p.s) {
		return nil, p.errf("missing value")
	}
	if p.s[p.i] != '[' {
		v, err := p.scalar()
		if err != nil {
			return nil, err
		}
		return []any{v}, nil
	}
	p.i++
	var out []any
	for {
		p.skip()
		if p.i >= len(p.s) {
			return nil, p.errf("unterminated list")
		}
		if p.s[p.i] == ']' {
			p.i++
			return out, nil
		}
		if len(out) > maxItems {
			return nil, p.errf("list too long")
		}
		v, err := p.scalar()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		p.skip()
		if p.i < len(p.s) && p.s[p.i] == ',' {
			p.i++
		}
	}
}

func (p *parser) scalar() (any, error) {
	if p.i >= len(p.s) {
		return nil, p.errf("missing value")
	}
	if p.s[p.i] == '"' {
		p.i++
		var b strings.Builder
		for p.i < len(p.s) {
			c := p.s[p.i]
			p.i++
			switch c {
			case '"':
				return b.String(), nil
			case '\\':
				if p.i < len(p.s) {
					b.WriteByte(p.s[p.i])
					p.i++
				}
			default:
				b.WriteByte(c)
			}
		}
		return nil, p.errf("unterminated string")
	}
	st := p.i
	if p.i < len(p.s) && (p.s[p.i] == '-' || p.s[p.i] == '+') {
		p.i++
	}
	for p.i < len(p.s) && (p.s[p.i] >= '0' && p.s[p.i] <= '9' || p.s[p.i] == '.') {
		p.i++
	}
	tok := string(p.s[st:p.i])
	if tok == "" {
		return nil, p.errf("unexpected %q", p.s[p.i])
	}
	if strings.Contains(tok, ".") {
		f, err := strconv.ParseFloat(tok, 64)
		if err != nil {
			return nil, p.errf("bad number %q", tok)
		}
		return int64(f), nil
	}
	n, err := strconv.ParseInt(tok, 10, 64)
	if err != nil {
		return nil, p.errf("bad number %q", tok)
	}
	return n, nil
}
