// Package fat is a read-only reader of FAT12, FAT16 and FAT32 file systems
// (EFI system partitions, USB sticks) with VFAT long names, over an
// io.ReaderAt.
//
// It was written rather than taking go-diskfs v1.9.4's fat12/16/32
// packages: their cluster-chain walk (getClusterList) has no bound, so a
// FAT whose chain loops back on itself — one flipped entry in a damaged
// image — makes it append forever until memory runs out. Here every chain
// is bounded by the number of clusters the file's size needs (and by the
// volume's cluster count for directories), and every cluster number is
// checked against the volume.
package fat

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf16"

	"github.com/vmvault/vmvault/guestfs/internal/fsutil"
)

// ErrCorrupt marks damaged or hostile structures.
var ErrCorrupt = errors.New("corrupt FAT file system")

var le = binary.LittleEndian

const maxDirBytes = 65536 * 32 // the FAT limit of entries per directory

// FS is an open FAT file system, safe for concurrent use.
type FS struct {
	r         io.ReaderAt
	bits      int // 12, 16 or 32
	bps       int64
	csize     int64 // bytes per cluster
	fatOff    int64
	rootOff   int64 // FAT12/16 fixed root directory
	rootSize  int64
	rootClus  uint32 // FAT32
	dataOff   int64
	nclusters uint32

	mu     sync.Mutex
	fatBuf []byte
	fatAt  int64

	dmu  sync.Mutex
	dirs map[uint32][]*entry // by first cluster (0: the root)
	dord []uint32
}

const cacheDirs = 8

// Open reads the boot sector of the FAT file system in r (size bytes).
func Open(r io.ReaderAt, size int64) (*FS, error) {
	b := make([]byte, 512)
	if _, err := r.ReadAt(b, 0); err != nil {
		return nil, fmt.Errorf("read boot sector: %w", err)
	}
	f := &FS{r: r, fatAt: -1, dirs: map[uint32][]*entry{}}
	f.bps = int64(le.Uint16(b[11:]))
	spc := int64(b[13])
	reserved := int64(le.Uint16(b[14:]))
	nfats := int64(b[16])
	rootEnt := int64(le.Uint16(b[17:]))
	tot := int64(le.Uint16(b[19:]))
	if tot == 0 {
		tot = int64(le.Uint32(b[32:]))
	}
	fatsz := int64(le.Uint16(b[22:]))
	if fatsz == 0 {
		fatsz = int64(le.Uint32(b[36:]))
		f.rootClus = le.Uint32(b[44:])
	}
	if f.bps < 512 || f.bps > 4096 || f.bps&(f.bps-1) != 0 || spc == 0 || spc&(spc-1) != 0 || reserved == 0 || nfats == 0 || fatsz == 0 {
		return nil, fmt.Errorf("%w: implausible boot sector", ErrCorrupt)
	}
	f.csize = spc * f.bps
	rootSecs := (rootEnt*32 + f.bps - 1) / f.bps
	f.fatOff = reserved * f.bps
	f.rootOff = (reserved + nfats*fatsz) * f.bps
	f.rootSize = rootEnt * 32
	f.dataOff = f.rootOff + rootSecs*f.bps
	dataSecs := tot - (reserved + nfats*fatsz + rootSecs)
	if dataSecs <= 0 || f.dataOff > size {
		return nil, fmt.Errorf("%w: no data region", ErrCorrupt)
	}
	n := dataSecs / spc
	switch {
	case n < 4085:
		f.bits = 12
	case n < 65525:
		f.bits = 16
	default:
		f.bits = 32
	}
	if f.bits == 32 && f.rootClus < 2 {
		return nil, fmt.Errorf("%w: FAT32 root cluster %d", ErrCorrupt, f.rootClus)
	}
	// Clusters past the volume's end cannot be read: clamp to what is there.
	if maxN := (size - f.dataOff) / f.csize; n > maxN {
		n = maxN
	}
	if n > fatsz*f.bps*8/int64(f.bits) {
		n = fatsz * f.bps * 8 / int64(f.bits)
	}
	f.nclusters = uint32(n)
	return f, nil
}

// next returns the FAT entry of cluster c, and whether it ends the chain.
func (f *FS) next(c uint32) (uint32, bool, error) {
	var off int64
	switch f.bits {
	case 12:
		off = int64(c) + int64(c)/2
	case 16:
		off = int64(c) * 2
	default:
		off = int64(c) * 4
	}
	sec := (off / f.bps) * f.bps
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fatAt != sec {
		// Two sectors: a FAT12 entry may straddle a sector boundary.
		buf := make([]byte, 2*f.bps)
		n, err := f.r.ReadAt(buf, f.fatOff+sec)
		if n < int(f.bps) {
			return 0, false, fmt.Errorf("read FAT: %w", err)
		}
		f.fatBuf, f.fatAt = buf[:n], sec
	}
	o := off - sec
	if o+4 > int64(len(f.fatBuf)) && f.bits == 32 || o+2 > int64(len(f.fatBuf)) {
		return 0, false, fmt.Errorf("%w: FAT entry %d past the FAT", ErrCorrupt, c)
	}
	var v uint32
	switch f.bits {
	case 12:
		v = uint32(le.Uint16(f.fatBuf[o:]))
		if c&1 == 1 {
			v >>= 4
		}
		v &= 0xFFF
		return v, v >= 0xFF8, nil
	case 16:
		v = uint32(le.Uint16(f.fatBuf[o:]))
		return v, v >= 0xFFF8, nil
	}
	v = le.Uint32(f.fatBuf[o:]) & 0x0FFFFFFF
	return v, v >= 0x0FFFFFF8, nil
}

// run is a stretch of contiguous clusters.
type run struct {
	first uint32
	n     int64
}

// chain follows a cluster chain for at most limit clusters.
func (f *FS) chain(first uint32, limit int64) ([]run, error) {
	var out []run
	c := first
	for i := int64(0); i < limit; i++ {
		if c < 2 || c-2 >= f.nclusters {
			return nil, fmt.Errorf("%w: cluster %d outside the volume", ErrCorrupt, c)
		}
		if k := len(out); k > 0 && out[k-1].first+uint32(out[k-1].n) == c {
			out[k-1].n++
		} else {
			out = append(out, run{c, 1})
		}
		nx, eoc, err := f.next(c)
		if err != nil {
			return nil, err
		}
		if eoc {
			return out, nil
		}
		c = nx
	}
	return out, nil // the size says where the file ends; the rest of a chain is ignored
}

func (f *FS) clusterOff(c uint32) int64 { return f.dataOff + int64(c-2)*f.csize }

// readRuns reads [off, off+len(p)) of the byte stream the runs hold.
func (f *FS) readRuns(runs []run, p []byte, off int64) error {
	for done := 0; done < len(p); {
		pos := off + int64(done)
		ci := pos / f.csize
		var base int64
		found := false
		for _, r := range runs {
			if ci < base+r.n {
				phys := f.clusterOff(r.first) + (ci-base)*f.csize + pos%f.csize
				n := int(min(int64(len(p)-done), (base+r.n)*f.csize-pos))
				if _, err := f.r.ReadAt(p[done:done+n], phys); err != nil {
					return fmt.Errorf("read cluster %d: %w", r.first+uint32(ci-base), err)
				}
				done += n
				found = true
				break
			}
			base += r.n
		}
		if !found {
			return fmt.Errorf("%w: cluster chain shorter than the file", ErrCorrupt)
		}
	}
	return nil
}

type entry struct {
	name  string
	dir   bool
	size  int64
	first uint32
	mtime time.Time
	ro    bool
}

func (e *entry) mode() fs.FileMode {
	if e.dir {
		return fs.ModeDir | 0o755
	}
	if e.ro {
		return 0o444
	}
	return 0o644
}

func fatTime(d, t uint16) time.Time {
	if d == 0 {
		return time.Time{}
	}
	return time.Date(1980+int(d>>9), time.Month(d>>5&0xF), int(d&0x1F), int(t>>11), int(t>>5&0x3F), int(t&0x1F)*2, 0, time.UTC)
}

func shortName(b []byte, ntres byte) string {
	base := strings.TrimRight(string(b[:8]), " ")
	ext := strings.TrimRight(string(b[8:11]), " ")
	if len(base) > 0 && base[0] == 0x05 {
		base = "\xe5" + base[1:]
	}
	if ntres&0x08 != 0 {
		base = strings.ToLower(base)
	}
	if ntres&0x10 != 0 {
		ext = strings.ToLower(ext)
	}
	if ext != "" {
		return base + "." + ext
	}
	return base
}

func lfnChecksum(b []byte) byte {
	var s byte
	for _, c := range b[:11] {
		s = (s&1)<<7 + s>>1 + c
	}
	return s
}

// readDir parses the entries of a directory's bytes.
func (f *FS) readDirBytes(b []byte) ([]*entry, error) {
	var out []*entry
	var lfn []uint16
	var lfnSum byte
	lfnNext := 0
	for p := 0; p+32 <= len(b); p += 32 {
		e := b[p : p+32]
		if e[0] == 0 {
			break
		}
		if e[0] == 0xE5 {
			lfn = nil
			continue
		}
		attr := e[11]
		if attr&0x3F == 0x0F { // a long-name slot
			ord := int(e[0] & 0x3F)
			if e[0]&0x40 != 0 {
				lfn, lfnSum, lfnNext = make([]uint16, 13*ord), e[13], ord
			}
			if lfn == nil || ord != lfnNext || ord == 0 || e[13] != lfnSum || 13*ord > len(lfn) {
				lfn = nil
				continue
			}
			u := lfn[13*(ord-1):]
			for i, o := range []int{1, 3, 5, 7, 9, 14, 16, 18, 20, 22, 24, 28, 30} {
				u[i] = le.Uint16(e[o:])
			}
			lfnNext--
			continue
		}
		if attr&0x08 != 0 { // volume label
			lfn = nil
			continue
		}
		name := shortName(e, e[12])
		if lfn != nil && lfnNext == 0 && lfnSum == lfnChecksum(e) {
			n := 0
			for n < len(lfn) && lfn[n] != 0 && lfn[n] != 0xFFFF {
				n++
			}
			name = string(utf16.Decode(lfn[:n]))
		}
		lfn = nil
		// A long name with a "/" or a NUL is kept: guestfs drops it from
		// every directory listing and reports it (guestfs.UnsafeName).
		if name == "." || name == ".." || name == "" {
			continue
		}
		first := uint32(le.Uint16(e[26:]))
		if f.bits == 32 {
			first |= uint32(le.Uint16(e[20:])) << 16
		}
		out = append(out, &entry{name: name, dir: attr&0x10 != 0, size: int64(le.Uint32(e[28:])), first: first,
			mtime: fatTime(le.Uint16(e[24:]), le.Uint16(e[22:])), ro: attr&0x01 != 0})
	}
	return out, nil
}

// dirEntries lists a directory (nil: the root) through a small cache.
func (f *FS) dirEntries(e *entry) ([]*entry, error) {
	key := uint32(0)
	if e != nil {
		key = e.first
	}
	f.dmu.Lock()
	ents, ok := f.dirs[key]
	f.dmu.Unlock()
	if ok {
		return ents, nil
	}
	ents, err := f.readDir(e)
	if err != nil {
		return nil, err
	}
	f.dmu.Lock()
	fsutil.FIFOPut(f.dirs, &f.dord, cacheDirs, key, ents)
	f.dmu.Unlock()
	return ents, nil
}

func (f *FS) readDir(e *entry) ([]*entry, error) {
	var b []byte
	if e == nil { // the root
		if f.bits != 32 {
			b = make([]byte, f.rootSize)
			if _, err := f.r.ReadAt(b, f.rootOff); err != nil {
				return nil, fmt.Errorf("read root directory: %w", err)
			}
			return f.readDirBytes(b)
		}
		e = &entry{dir: true, first: f.rootClus}
	}
	if e.first == 0 {
		return nil, nil
	}
	runs, err := f.chain(e.first, maxDirBytes/f.csize+1)
	if err != nil {
		return nil, err
	}
	var n int64
	for _, r := range runs {
		n += r.n * f.csize
	}
	b = make([]byte, min(n, maxDirBytes+f.csize))
	if err := f.readRuns(runs, b, 0); err != nil {
		return nil, err
	}
	return f.readDirBytes(b)
}

// find returns the entry at a clean path (nil for the root). Names match
// exactly first, then case-insensitively, as FAT does.
func (f *FS) find(p string) (*entry, error) {
	if p == "." {
		return nil, nil
	}
	var cur *entry
	for _, c := range strings.Split(p, "/") {
		if cur != nil && !cur.dir {
			return nil, fmt.Errorf("%s: not a directory", p)
		}
		ents, err := f.dirEntries(cur)
		if err != nil {
			return nil, err
		}
		var hit *entry
		for _, e := range ents {
			if e.name == c {
				hit = e
				break
			}
		}
		if hit == nil {
			for _, e := range ents {
				if strings.EqualFold(e.name, c) {
					hit = e
					break
				}
			}
		}
		if hit == nil {
			return nil, fs.ErrNotExist
		}
		cur = hit
	}
	return cur, nil
}

type info struct{ e *entry }

var rootEntry = &entry{name: ".", dir: true}

func (i info) Name() string       { return i.e.name }
func (i info) Size() int64        { return map[bool]int64{true: 0, false: i.e.size}[i.e.dir] }
func (i info) Mode() fs.FileMode  { return i.e.mode() }
func (i info) ModTime() time.Time { return i.e.mtime }
func (i info) IsDir() bool        { return i.e.dir }
func (i info) Sys() any           { return fsutil.ID(i.e.first) }

type dirent struct{ e *entry }

func (d dirent) Name() string               { return d.e.name }
func (d dirent) IsDir() bool                { return d.e.dir }
func (d dirent) Type() fs.FileMode          { return d.e.mode().Type() }
func (d dirent) Info() (fs.FileInfo, error) { return info(d), nil }

var pathErr = fsutil.PathErr

// Lstat describes the file at name.
func (f *FS) Lstat(name string) (fs.FileInfo, error) {
	e, err := f.find(name)
	if err != nil {
		return nil, pathErr("lstat", name, err)
	}
	if e == nil {
		e = rootEntry
	}
	return info{e}, nil
}

// ReadDir lists the directory at name, sorted by name.
func (f *FS) ReadDir(name string) ([]fs.DirEntry, error) {
	e, err := f.find(name)
	if err != nil {
		return nil, pathErr("readdir", name, err)
	}
	if e != nil && !e.dir {
		return nil, pathErr("readdir", name, fs.ErrInvalid)
	}
	ents, err := f.dirEntries(e)
	if err != nil {
		return nil, pathErr("readdir", name, err)
	}
	out := make([]fs.DirEntry, len(ents))
	for i, e := range ents {
		out[i] = dirent{e}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out, nil
}

// Readlink fails: FAT has no symbolic links.
func (f *FS) Readlink(name string) (string, error) {
	return "", pathErr("readlink", name, fs.ErrInvalid)
}

// File is an open regular file.
type File struct {
	fs   *FS
	e    *entry
	runs []run
	off  int64
}

// Open opens the regular file at name.
func (f *FS) Open(name string) (*File, error) {
	e, err := f.find(name)
	if err != nil {
		return nil, pathErr("open", name, err)
	}
	if e == nil || e.dir {
		return nil, pathErr("open", name, fs.ErrInvalid)
	}
	fl := &File{fs: f, e: e}
	if e.size > 0 {
		if fl.runs, err = f.chain(e.first, (e.size+f.csize-1)/f.csize); err != nil {
			return nil, pathErr("open", name, err)
		}
	}
	return fl, nil
}

func (fl *File) Size() int64                { return fl.e.size }
func (fl *File) Stat() (fs.FileInfo, error) { return info{fl.e}, nil }
func (fl *File) Close() error               { return nil }

func (fl *File) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fs.ErrInvalid
	}
	if off >= fl.e.size {
		return 0, io.EOF
	}
	want := len(p)
	p = p[:min(int64(len(p)), fl.e.size-off)]
	if err := fl.fs.readRuns(fl.runs, p, off); err != nil {
		return 0, err
	}
	if len(p) < want {
		return len(p), io.EOF
	}
	return len(p), nil
}

func (fl *File) Read(p []byte) (int, error) { return fsutil.ReadSeq(fl, p, &fl.off) }
