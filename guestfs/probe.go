package guestfs

import (
	"bytes"
	"encoding/binary"
	"io"
	"strings"
	"unicode/utf16"
)

// probe reads the first sectors of a volume and names its kind and label
// from the superblock's magic numbers. It never fails: a volume it cannot
// read or recognise is "unknown".
func probe(r io.ReaderAt, size int64) (kind, label string) {
	const n = 72 << 10 // past the ext superblock (1024+1024) and btrfs' (64 KiB + 4 KiB)
	b := make([]byte, min(int64(n), size))
	m, _ := r.ReadAt(b, 0)
	b = b[:m]
	at := func(off int, s string) bool {
		return len(b) >= off+len(s) && string(b[off:off+len(s)]) == s
	}
	switch {
	case at(0, "LUKS\xba\xbe") || at(0, "SKUL\xba\xbe"):
		return KindLUKS, ""
	case at(3, "-FVE-FS-"):
		return KindBitLocker, ""
	case at(0, "XFSB"):
		return KindXFS, cstr(b[108:120])
	case at(3, "NTFS    "):
		return KindNTFS, "" // the label lives in $Volume; the NTFS reader fills it in
	case at(3, "EXFAT   "):
		return KindExFAT, ""
	case isLVM2Label(b):
		return KindLVM2PV, ""
	case len(b) >= 2048 && binary.LittleEndian.Uint16(b[1024+56:]) == 0xEF53:
		sb := b[1024:]
		compat := binary.LittleEndian.Uint32(sb[92:])
		incompat := binary.LittleEndian.Uint32(sb[96:])
		rocompat := binary.LittleEndian.Uint32(sb[100:])
		label = cstr(sb[120:136])
		switch {
		// extents, 64bit, flex_bg, inline data; huge_file, dir_nlink, extra_isize, metadata_csum
		case incompat&(0x40|0x80|0x200|0x8000) != 0 || rocompat&(0x8|0x20|0x40|0x400) != 0:
			return KindExt4, label
		case compat&0x4 != 0:
			return KindExt3, label
		}
		return KindExt2, label
	case at(0x10040, "_BHRfS_M"):
		return KindBtrfs, cstr(b[0x1012b : 0x1012b+256])
	case isSwap(b):
		return KindSwap, ""
	}
	if l, ok := fatLabel(b); ok {
		return KindVFAT, l
	}
	return KindUnknown, ""
}

func isLVM2Label(b []byte) bool {
	for s := 0; s < 4; s++ {
		o := s * 512
		if len(b) >= o+32 && string(b[o:o+8]) == "LABELONE" && string(b[o+24:o+32]) == "LVM2 001" {
			return true
		}
	}
	return false
}

func isSwap(b []byte) bool {
	for _, ps := range []int{4096, 8192, 16384, 65536} {
		if len(b) >= ps && (string(b[ps-10:ps]) == "SWAPSPACE2" || string(b[ps-10:ps]) == "SWAP-SPACE") {
			return true
		}
	}
	return false
}

// fatLabel recognises a FAT boot sector by a sane BIOS parameter block (the
// "FAT12   " strings are informational and not always present).
func fatLabel(b []byte) (string, bool) {
	if len(b) < 512 || b[510] != 0x55 || b[511] != 0xAA || (b[0] != 0xEB && b[0] != 0xE9) {
		return "", false
	}
	bps := binary.LittleEndian.Uint16(b[11:])
	spc := b[13]
	reserved := binary.LittleEndian.Uint16(b[14:])
	nfats := b[16]
	if bps < 512 || bps > 4096 || bps&(bps-1) != 0 || spc == 0 || spc&(spc-1) != 0 || reserved == 0 || nfats == 0 || nfats > 4 {
		return "", false
	}
	fatsz16 := binary.LittleEndian.Uint16(b[22:])
	var l []byte
	if fatsz16 == 0 { // FAT32
		l = b[71:82]
	} else {
		l = b[43:54]
	}
	s := strings.TrimRight(string(l), " \x00")
	if s == "NO NAME" {
		s = ""
	}
	return s, true
}

func cstr(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return strings.TrimSpace(string(b))
}

func utf16le(b []byte) string {
	u := make([]uint16, len(b)/2)
	for i := range u {
		u[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	return string(utf16.Decode(u))
}
