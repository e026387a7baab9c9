// Package part reads partition tables: MBR with its extended and logical
// partitions (the EBR chain) and GPT (primary header, with the backup
// header at the disk's end as a fallback). It only reads; every offset and
// count from the disk is checked against the disk's size, and the EBR chain
// is bounded, so a hostile table gives an error, never a hang.
//
// go-diskfs v1.9.4's mbr.Read was measured and not taken: it returns the
// four primary entries only and never follows an extended partition's EBR
// chain, so logical partitions (sfdisk's "type=5") are invisible to it.
package part

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"unicode/utf16"
)

const sector = 512

// maxLogical bounds the EBR chain: Linux itself stops well below this.
const maxLogical = 256

// maxGPTEntries bounds the GPT entry array (128 is the usual count).
const maxGPTEntries = 1024

// ErrNoTable means the disk has neither an MBR signature nor a GPT.
var ErrNoTable = errors.New("no partition table")

// Partition is one partition.
type Partition struct {
	Number int    // as Linux numbers them: 1-4 primary, 5.. logical; GPT: entry index + 1
	Start  int64  // byte offset on the disk
	Size   int64  // bytes
	Type   string // MBR: "0x83"; GPT: type GUID in canonical form
	Name   string // GPT partition name
	GUID   string // GPT unique partition GUID
}

// Well-known type identifiers.
const (
	GPTTypeLinuxLVM = "E6D6D379-F507-44C2-A23C-238F2A3DF928"
	GPTTypeBIOSBoot = "21686148-6449-6E6F-744E-656564454649"
	GPTTypeMSR      = "E3C9E316-0B5C-4DB8-817D-F92DF00215AE"
)

// Table is a parsed partition table.
type Table struct {
	Kind       string // "mbr" or "gpt"
	Partitions []Partition
}

// Read reads the partition table of a disk of the given size.
func Read(r io.ReaderAt, size int64) (*Table, error) {
	if size < sector {
		return nil, ErrNoTable
	}
	mbr := make([]byte, sector)
	if _, err := r.ReadAt(mbr, 0); err != nil {
		return nil, fmt.Errorf("read MBR: %w", err)
	}
	if mbr[510] != 0x55 || mbr[511] != 0xAA {
		// A GPT disk always has a protective MBR, but look anyway: some
		// tools write the GPT alone.
		if t, err := readGPT(r, size); err == nil {
			return t, nil
		}
		return nil, ErrNoTable
	}
	protective := false
	for i := 0; i < 4; i++ {
		if mbr[446+16*i+4] == 0xEE {
			protective = true
		}
	}
	if protective {
		t, err := readGPT(r, size)
		if err != nil {
			return nil, fmt.Errorf("protective MBR but %w", err)
		}
		return t, nil
	}
	// A FAT or NTFS boot sector also ends in 55 AA: a partition table whose
	// entries do not make sense is no table (the caller probes the whole disk).
	return readMBR(r, size, mbr)
}

type mbrEntry struct {
	typ         byte
	start, size uint32
}

func entries(b []byte) [4]mbrEntry {
	var e [4]mbrEntry
	for i := range e {
		p := b[446+16*i:]
		e[i] = mbrEntry{typ: p[4], start: binary.LittleEndian.Uint32(p[8:]), size: binary.LittleEndian.Uint32(p[12:])}
	}
	return e
}

func isExtended(t byte) bool { return t == 0x05 || t == 0x0f || t == 0x85 }

func readMBR(r io.ReaderAt, size int64, mbr []byte) (*Table, error) {
	t := &Table{Kind: "mbr"}
	if b := mbr[446:510]; bytes.Count(b, []byte{0}) == len(b) {
		return nil, ErrNoTable
	}
	var ext *mbrEntry
	for i, e := range entries(mbr) {
		if e.typ == 0 || e.size == 0 {
			continue
		}
		// Bit 7 clear or set are the only valid boot flags; anything else
		// is a boot sector's code, not a table.
		if f := mbr[446+16*i]; f != 0 && f != 0x80 {
			return nil, ErrNoTable
		}
		start, sz := int64(e.start)*sector, int64(e.size)*sector
		if start == 0 || start >= size {
			return nil, fmt.Errorf("%w: MBR partition %d starts at sector %d, outside the %d-byte disk", ErrNoTable, i+1, e.start, size)
		}
		if start+sz > size {
			sz = size - start // a table written for a bigger disk: clamp, as Linux does
		}
		if isExtended(e.typ) {
			if ext != nil {
				return nil, fmt.Errorf("MBR has two extended partitions")
			}
			e := e
			ext = &e
			continue
		}
		t.Partitions = append(t.Partitions, Partition{Number: i + 1, Start: start, Size: sz, Type: fmt.Sprintf("0x%02x", e.typ)})
	}
	if ext != nil {
		logical, err := readEBRChain(r, size, int64(ext.start), int64(ext.size))
		t.Partitions = append(t.Partitions, logical...)
		if err != nil {
			return t, fmt.Errorf("extended partition: %w", err)
		}
	}
	return t, nil
}

// readEBRChain follows the linked list of extended boot records. Each EBR's
// first entry is a logical partition relative to that EBR; its second entry
// points at the next EBR relative to the start of the extended partition.
func readEBRChain(r io.ReaderAt, size, extStart, extSize int64) ([]Partition, error) {
	var out []Partition
	seen := map[int64]bool{}
	ebr := extStart
	b := make([]byte, sector)
	for n := 5; ; n++ {
		if n-5 >= maxLogical {
			return out, fmt.Errorf("more than %d logical partitions", maxLogical)
		}
		if seen[ebr] {
			return out, fmt.Errorf("EBR chain loops at sector %d", ebr)
		}
		seen[ebr] = true
		if ebr*sector >= size || ebr < extStart || ebr >= extStart+extSize {
			return out, fmt.Errorf("EBR at sector %d lies outside the extended partition", ebr)
		}
		if _, err := r.ReadAt(b, ebr*sector); err != nil {
			return out, fmt.Errorf("read EBR at sector %d: %w", ebr, err)
		}
		if b[510] != 0x55 || b[511] != 0xAA {
			return out, fmt.Errorf("EBR at sector %d has no signature", ebr)
		}
		e := entries(b)
		if e[0].typ != 0 && e[0].size != 0 {
			start := (ebr + int64(e[0].start)) * sector
			sz := int64(e[0].size) * sector
			if start >= size {
				return out, fmt.Errorf("logical partition %d starts past the disk's end", n)
			}
			if start+sz > size {
				sz = size - start
			}
			out = append(out, Partition{Number: n, Start: start, Size: sz, Type: fmt.Sprintf("0x%02x", e[0].typ)})
		}
		if e[1].typ == 0 || e[1].start == 0 {
			return out, nil
		}
		ebr = extStart + int64(e[1].start)
	}
}

func readGPT(r io.ReaderAt, size int64) (*Table, error) {
	t, err := readGPTAt(r, size, sector)
	if err == nil {
		return t, nil
	}
	// The backup header lives in the disk's last sector.
	if bt, berr := readGPTAt(r, size, size/sector*sector-sector); berr == nil {
		return bt, nil
	}
	return nil, err
}

func readGPTAt(r io.ReaderAt, size, at int64) (*Table, error) {
	h := make([]byte, sector)
	if _, err := r.ReadAt(h, at); err != nil {
		return nil, fmt.Errorf("read GPT header: %w", err)
	}
	if string(h[:8]) != "EFI PART" {
		return nil, fmt.Errorf("no GPT header at byte %d", at)
	}
	hsize := binary.LittleEndian.Uint32(h[12:])
	if hsize < 92 || hsize > sector {
		return nil, fmt.Errorf("GPT header size %d is invalid", hsize)
	}
	want := binary.LittleEndian.Uint32(h[16:])
	hc := append([]byte(nil), h[:hsize]...)
	binary.LittleEndian.PutUint32(hc[16:], 0)
	if crc32.ChecksumIEEE(hc) != want {
		return nil, fmt.Errorf("GPT header checksum mismatch")
	}
	entLBA := int64(binary.LittleEndian.Uint64(h[72:]))
	count := binary.LittleEndian.Uint32(h[80:])
	esize := binary.LittleEndian.Uint32(h[84:])
	if count > maxGPTEntries || esize < 128 || esize > 4096 || esize%8 != 0 {
		return nil, fmt.Errorf("GPT entry array (%d entries of %d bytes) is invalid", count, esize)
	}
	arr := int64(count) * int64(esize)
	if entLBA <= 0 || entLBA > size/sector || entLBA*sector+arr > size {
		return nil, fmt.Errorf("GPT entry array at LBA %d lies outside the disk", entLBA)
	}
	buf := make([]byte, arr)
	if _, err := r.ReadAt(buf, entLBA*sector); err != nil {
		return nil, fmt.Errorf("read GPT entries: %w", err)
	}
	if crc32.ChecksumIEEE(buf) != binary.LittleEndian.Uint32(h[88:]) {
		return nil, fmt.Errorf("GPT entry array checksum mismatch")
	}
	t := &Table{Kind: "gpt"}
	for i := 0; i < int(count); i++ {
		e := buf[i*int(esize):]
		if bytes.Count(e[:16], []byte{0}) == 16 {
			continue
		}
		first := int64(binary.LittleEndian.Uint64(e[32:]))
		last := int64(binary.LittleEndian.Uint64(e[40:]))
		if first <= 0 || last < first || first > size/sector {
			return nil, fmt.Errorf("GPT partition %d (LBA %d-%d) is invalid", i+1, first, last)
		}
		start, sz := first*sector, (last-first+1)*sector
		if start+sz > size {
			sz = size - start
		}
		t.Partitions = append(t.Partitions, Partition{Number: i + 1, Start: start, Size: sz,
			Type: guid(e[0:16]), GUID: guid(e[16:32]), Name: utf16Name(e[56:128])})
	}
	return t, nil
}

// guid formats a mixed-endian GPT GUID canonically.
func guid(b []byte) string {
	return fmt.Sprintf("%08X-%04X-%04X-%X-%X", binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint16(b[4:]),
		binary.LittleEndian.Uint16(b[6:]), b[8:10], b[10:16])
}

func utf16Name(b []byte) string {
	u := make([]uint16, 0, len(b)/2)
	for i := 0; i+1 < len(b); i += 2 {
		c := binary.LittleEndian.Uint16(b[i:])
		if c == 0 {
			break
		}
		u = append(u, c)
	}
	return string(utf16.Decode(u))
}
