package vmdk

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Descriptor is a parsed VMDK text descriptor (standalone file or embedded in
// a sparse extent).
type Descriptor struct {
	Version    int
	CID        uint32
	ParentCID  uint32 // 0xffffffff when the disk has no parent
	CreateType string
	// ParentFileNameHint names the parent of a delta (child) disk.
	ParentFileNameHint string
	Extents            []DescriptorExtent
	// DDB holds the disk database ("ddb.adapterType" etc.) and any other
	// key = value line, keys as written.
	DDB map[string]string
}

// DescriptorExtent is one extent line: ACCESS SECTORS TYPE ["FILE" [OFFSET]].
type DescriptorExtent struct {
	Access   string // RW, RDONLY, NOACCESS
	Sectors  int64
	Type     string // FLAT, VMFS, SPARSE, ZERO, VMFSSPARSE, SESPARSE, VMFSRDM, VMFSRAW
	Filename string // relative to the descriptor's directory; empty for ZERO (and in govmomi's embedded descriptors)
	Offset   int64  // sectors into Filename (FLAT only)
}

// NoParentCID is the parentCID of a disk without a parent.
const NoParentCID = 0xffffffff

// maxExtents bounds extent lines; twoGbMaxExtent* of 8 TiB needs 4096.
const maxExtents = 4096

// HasParent reports whether the descriptor describes a delta (child) disk.
// Like QEMU it goes by parentFileNameHint: govmomi's writer leaves
// parentCID=0 in standalone disks, so parentCID alone proves nothing.
func (d *Descriptor) HasParent() bool { return d.ParentFileNameHint != "" }

// Capacity is the sum of the extents' sizes in bytes.
func (d *Descriptor) Capacity() int64 {
	var n int64
	for _, e := range d.Extents {
		n += e.Sectors * SectorSize
	}
	return n
}

// ParseDescriptor parses a VMDK text descriptor. Text after the first NUL is
// ignored (embedded descriptors are zero padded). Input over 1 MiB is refused.
func ParseDescriptor(b []byte) (*Descriptor, error) {
	if len(b) > maxDescriptorBytes {
		return nil, fmt.Errorf("descriptor: %d bytes exceeds %d: %w", len(b), maxDescriptorBytes, ErrCorrupt)
	}
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	d := &Descriptor{ParentCID: NoParentCID, DDB: map[string]string{}}
	var total int64
	sawCreateType := false
	for lineNo, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		if line == "" || line[0] == '#' {
			continue
		}
		first := line
		if i := strings.IndexAny(line, " \t"); i >= 0 {
			first = line[:i]
		}
		switch first {
		case "RW", "RDONLY", "NOACCESS":
			e, err := parseExtentLine(line)
			if err != nil {
				return nil, fmt.Errorf("descriptor line %d: %w", lineNo+1, err)
			}
			if len(d.Extents) >= maxExtents {
				return nil, fmt.Errorf("descriptor: more than %d extents: %w", maxExtents, ErrCorrupt)
			}
			total += e.Sectors
			if total > maxCapacitySectors {
				return nil, fmt.Errorf("descriptor: extents total more than %d sectors: %w", int64(maxCapacitySectors), ErrCorrupt)
			}
			d.Extents = append(d.Extents, e)
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("descriptor line %d: %q is neither key=value nor an extent: %w", lineNo+1, clip(line), ErrCorrupt)
		}
		k = strings.TrimSpace(k)
		v = unquote(strings.TrimSpace(v))
		var err error
		switch k {
		case "version":
			d.Version, err = strconv.Atoi(v)
		case "CID":
			d.CID, err = parseCID(v)
		case "parentCID":
			d.ParentCID, err = parseCID(v)
		case "parentFileNameHint":
			d.ParentFileNameHint = v
		case "createType":
			d.CreateType, sawCreateType = v, true
		default:
			d.DDB[k] = v
		}
		if err != nil {
			return nil, fmt.Errorf("descriptor line %d: %s %q: %w", lineNo+1, k, clip(v), ErrCorrupt)
		}
	}
	if !sawCreateType {
		return nil, fmt.Errorf("descriptor: no createType: %w", ErrNotVMDK)
	}
	if len(d.Extents) == 0 {
		return nil, fmt.Errorf("descriptor: no extents: %w", ErrCorrupt)
	}
	return d, nil
}

func parseCID(v string) (uint32, error) {
	n, err := strconv.ParseUint(v, 16, 32)
	return uint32(n), err
}

func unquote(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return s[1 : len(s)-1]
	}
	return s
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

func parseExtentLine(line string) (DescriptorExtent, error) {
	var e DescriptorExtent
	// The file name is quoted and may contain spaces, so split around it.
	head, rest := line, ""
	if i := strings.IndexByte(line, '"'); i >= 0 {
		j := strings.IndexByte(line[i+1:], '"')
		if j < 0 {
			return e, fmt.Errorf("extent %q: unterminated file name: %w", clip(line), ErrCorrupt)
		}
		head, e.Filename, rest = line[:i], line[i+1:i+1+j], line[i+2+j:]
	}
	f := strings.Fields(head)
	if len(f) != 3 {
		return e, fmt.Errorf("extent %q: want ACCESS SECTORS TYPE: %w", clip(line), ErrCorrupt)
	}
	e.Access, e.Type = f[0], f[2]
	n, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || n <= 0 || n > maxCapacitySectors {
		return e, fmt.Errorf("extent %q: size %q sectors: %w", clip(line), clip(f[1]), ErrCorrupt)
	}
	e.Sectors = n
	switch e.Type {
	case "ZERO":
		if e.Filename != "" {
			return e, fmt.Errorf("extent %q: ZERO extent with a file: %w", clip(line), ErrCorrupt)
		}
	}
	if rf := strings.Fields(rest); len(rf) > 0 {
		off, err := strconv.ParseInt(rf[0], 10, 64)
		if err != nil || off < 0 || off > maxCapacitySectors {
			return e, fmt.Errorf("extent %q: offset %q: %w", clip(line), clip(rf[0]), ErrCorrupt)
		}
		e.Offset = off
	}
	return e, nil
}

// encode renders the descriptor the StreamWriter embeds. Values are quoted
// verbatim as VMware does (no escapes: the format has none).
func (d *Descriptor) encode() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "# Disk DescriptorFile\nversion=%d\nCID=%08x\nparentCID=%08x\ncreateType=\"%s\"\n\n# Extent description\n",
		d.Version, d.CID, d.ParentCID, d.CreateType)
	for _, e := range d.Extents {
		if e.Filename == "" {
			fmt.Fprintf(&b, "%s %d %s\n", e.Access, e.Sectors, e.Type)
		} else if e.Offset != 0 || e.Type == "FLAT" {
			// FLAT lines carry their offset, 0 too: VMware writes it and
			// QEMU refuses a FLAT line without one.
			fmt.Fprintf(&b, "%s %d %s \"%s\" %d\n", e.Access, e.Sectors, e.Type, e.Filename, e.Offset)
		} else {
			fmt.Fprintf(&b, "%s %d %s \"%s\"\n", e.Access, e.Sectors, e.Type, e.Filename)
		}
	}
	b.WriteString("\n# The Disk Data Base\n#DDB\n\n")
	keys := make([]string, 0, len(d.DDB))
	for k := range d.DDB {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s = \"%s\"\n", k, d.DDB[k])
	}
	return []byte(b.String())
}
