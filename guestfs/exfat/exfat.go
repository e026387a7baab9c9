// Package exfat is a read-only reader of exFAT file systems (SD cards, USB
// disks, Windows data volumes) over an io.ReaderAt.
//
// It reads the boot region (whose checksum sector it verifies), the FAT,
// the allocation bitmap's directory entry, and directory entry sets (a file
// entry, its stream extension and its file name entries, with the set's
// checksum verified). Files are read through their FAT chain or, when the
// stream extension says NoFatChain, as one contiguous run of clusters.
// Bytes past a file's ValidDataLength read as zeros, as the exFAT
// specification says. Names are returned as stored; lookups match exactly
// first, then case-insensitively (Unicode simple folding, which covers the
// ASCII the up-case table maps; the up-case table itself is not read).
//
// Every chain is bounded by the clusters the entry's size needs and every
// cluster number is checked against the cluster heap, so a chain that loops
// or points past the volume is an error, never a hang.
package exfat

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf16"

	"github.com/vmvault/vmvault/guestfs/internal/fsutil"
)

// ErrCorrupt marks damaged or hostile structures.
var ErrCorrupt = errors.New("corrupt exFAT file system")

var le = binary.LittleEndian

// maxDirBytes is the exFAT limit on a directory's size (256 MiB).
const maxDirBytes = 256 << 20

const cacheDirs = 8

// FS is an open exFAT file system, safe for concurrent use.
type FS struct {
	r         io.ReaderAt
	bps       int64 // bytes per sector
	csize     int64 // bytes per cluster
	fatOff    int64
	heapOff   int64
	nclusters uint32
	root      *entry
	label     string

	mu     sync.Mutex
	fatBuf []byte
	fatAt  int64

	dmu  sync.Mutex
	dirs map[uint32][]*entry
	dord []uint32
}

// Open reads the boot region of the exFAT file system in r (size bytes).
func Open(r io.ReaderAt, size int64) (*FS, error) {
	b := make([]byte, 512)
	if _, err := r.ReadAt(b, 0); err != nil {
		return nil, fmt.Errorf("read boot sector: %w", err)
	}
	if string(b[3:11]) != "EXFAT   " || b[510] != 0x55 || b[511] != 0xAA {
		return nil, fmt.Errorf("%w: no exFAT boot signature", ErrCorrupt)
	}
	bpsShift, spcShift := uint(b[108]), uint(b[109])
	if bpsShift < 9 || bpsShift > 12 || bpsShift+spcShift > 25 {
		return nil, fmt.Errorf("%w: sector shift %d, cluster shift %d", ErrCorrupt, bpsShift, spcShift)
	}
	f := &FS{r: r, bps: 1 << bpsShift, fatAt: -1, dirs: map[uint32][]*entry{}}
	f.csize = f.bps << spcShift
	if err := f.checkBootChecksum(); err != nil {
		return nil, err
	}
	volLen := int64(le.Uint64(b[72:]))
	fatOff, fatLen := int64(le.Uint32(b[80:])), int64(le.Uint32(b[84:]))
	heapOff := int64(le.Uint32(b[88:]))
	f.nclusters = le.Uint32(b[92:])
	rootClus := le.Uint32(b[96:])
	if b[110] != 1 && b[110] != 2 {
		return nil, fmt.Errorf("%w: %d FATs", ErrCorrupt, b[110])
	}
	if fatOff < 24 || fatLen == 0 || heapOff < fatOff+fatLen || volLen <= 0 {
		return nil, fmt.Errorf("%w: implausible layout (FAT at %d+%d, heap at %d)", ErrCorrupt, fatOff, fatLen, heapOff)
	}
	f.fatOff, f.heapOff = fatOff*f.bps, heapOff*f.bps
	if f.heapOff >= size {
		return nil, fmt.Errorf("%w: cluster heap at %d past the volume's end (%d)", ErrCorrupt, f.heapOff, size)
	}
	// Clusters past the volume (or the FAT) cannot be read: clamp.
	if maxN := (size - f.heapOff) / f.csize; int64(f.nclusters) > maxN {
		f.nclusters = uint32(maxN)
	}
	if maxN := fatLen*f.bps/4 - 2; int64(f.nclusters) > maxN {
		f.nclusters = uint32(max(maxN, 0))
	}
	if !f.valid(rootClus) {
		return nil, fmt.Errorf("%w: root directory cluster %d outside the cluster heap", ErrCorrupt, rootClus)
	}
	f.root = &entry{name: ".", dir: true, first: rootClus, id: uint64(rootClus)}
	// The root's length comes from its FAT chain (it has no stream entry).
	runs, err := f.chain(rootClus, maxDirBytes/f.csize, true)
	if err != nil {
		return nil, fmt.Errorf("root directory: %w", err)
	}
	f.root.runs = runs
	f.root.size = runsLen(runs) * f.csize
	return f, nil
}

// Label is the volume label from the root directory ("" if none, or if
// the root directory cannot be read).
func (f *FS) Label() string {
	if _, err := f.dirEntries(f.root); err != nil {
		return ""
	}
	f.dmu.Lock()
	defer f.dmu.Unlock()
	return f.label
}

// checkBootChecksum verifies the main boot region's checksum sector (12th
// sector): a damaged boot region is refused rather than misread.
func (f *FS) checkBootChecksum() error {
	buf := make([]byte, 12*f.bps)
	if _, err := f.r.ReadAt(buf, 0); err != nil {
		return fmt.Errorf("read boot region: %w", err)
	}
	var sum uint32
	for i, c := range buf[:11*f.bps] {
		if i == 106 || i == 107 || i == 112 {
			continue
		}
		sum = (sum&1)<<31 | sum>>1
		sum += uint32(c)
	}
	for o := 11 * f.bps; o < 12*f.bps; o += 4 {
		if le.Uint32(buf[o:]) != sum {
			return fmt.Errorf("%w: boot region checksum %#08x does not match %#08x", ErrCorrupt, le.Uint32(buf[o:]), sum)
		}
	}
	return nil
}

func (f *FS) valid(c uint32) bool { return c >= 2 && c-2 < f.nclusters }

// next returns the FAT entry of cluster c. The FAT is read 64 KiB at a
// time: a 1 GiB file's chain is 256 K entries.
func (f *FS) next(c uint32) (uint32, error) {
	off := int64(c) * 4
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fatBuf == nil || off < f.fatAt || off+4 > f.fatAt+int64(len(f.fatBuf)) {
		sec := (off / f.bps) * f.bps
		buf := make([]byte, max(64<<10, f.bps))
		n, err := f.r.ReadAt(buf, f.fatOff+sec)
		if n < int(f.bps) {
			return 0, fmt.Errorf("read FAT: %w", err)
		}
		f.fatBuf, f.fatAt = buf[:n-n%int(f.bps)], sec
	}
	return le.Uint32(f.fatBuf[off-f.fatAt:]), nil
}

// run is a stretch of contiguous clusters.
type run struct {
	first uint32
	n     int64
}

func runsLen(rs []run) int64 {
	var n int64
	for _, r := range rs {
		n += r.n
	}
	return n
}

// chain follows a FAT chain for at most limit clusters. With open true
// the chain may end early (a directory's length is its chain's).
func (f *FS) chain(first uint32, limit int64, open bool) ([]run, error) {
	var out []run
	c := first
	for i := int64(0); i < limit; i++ {
		if !f.valid(c) {
			return nil, fmt.Errorf("%w: cluster %d outside the cluster heap", ErrCorrupt, c)
		}
		if k := len(out); k > 0 && out[k-1].first+uint32(out[k-1].n) == c {
			out[k-1].n++
		} else {
			out = append(out, run{c, 1})
		}
		nx, err := f.next(c)
		if err != nil {
			return nil, err
		}
		switch {
		case nx == 0xFFFFFFFF:
			if !open && i+1 < limit {
				return nil, fmt.Errorf("%w: cluster chain of %d clusters, the size needs %d", ErrCorrupt, i+1, limit)
			}
			return out, checkOverlap(out)
		case nx == 0xFFFFFFF7:
			return nil, fmt.Errorf("%w: bad cluster %d in a chain", ErrCorrupt, c)
		}
		c = nx
	}
	return out, checkOverlap(out) // the size says where the data ends
}

// checkOverlap refuses a chain that uses a cluster twice: a loop in the
// FAT would otherwise read the same cluster over and over as if it were
// data.
func checkOverlap(rs []run) error {
	if len(rs) < 2 {
		return nil
	}
	s := slices.Clone(rs)
	slices.SortFunc(s, func(a, b run) int { return cmp.Compare(a.first, b.first) })
	for i := 1; i < len(s); i++ {
		if int64(s[i-1].first)+s[i-1].n > int64(s[i].first) {
			return fmt.Errorf("%w: cluster chain uses cluster %d twice (a loop in the FAT)", ErrCorrupt, s[i].first)
		}
	}
	return nil
}

// runs returns the clusters holding n bytes from first (contiguous or chained).
func (f *FS) runs(first uint32, n int64, noChain bool) ([]run, error) {
	need := (n + f.csize - 1) / f.csize
	if need == 0 {
		return nil, nil
	}
	if need > int64(f.nclusters) {
		return nil, fmt.Errorf("%w: %d bytes need %d clusters, the volume has %d", ErrCorrupt, n, need, f.nclusters)
	}
	if noChain {
		if !f.valid(first) || int64(first-2)+need > int64(f.nclusters) {
			return nil, fmt.Errorf("%w: contiguous clusters %d+%d outside the cluster heap", ErrCorrupt, first, need)
		}
		return []run{{first, need}}, nil
	}
	return f.chain(first, need, false)
}

func (f *FS) clusterOff(c uint32) int64 { return f.heapOff + int64(c-2)*f.csize }

// readRuns reads [off, off+len(p)) of the byte stream the runs hold.
func (f *FS) readRuns(runs []run, p []byte, off int64) error {
	ri, base := 0, int64(0) // runs are searched once per call, forward
	for done := 0; done < len(p); {
		pos := off + int64(done)
		ci := pos / f.csize
		for ri < len(runs) && ci >= base+runs[ri].n {
			base += runs[ri].n
			ri++
		}
		if ri == len(runs) {
			return fmt.Errorf("%w: cluster chain shorter than the data", ErrCorrupt)
		}
		r := runs[ri]
		phys := f.clusterOff(r.first) + (ci-base)*f.csize + pos%f.csize
		n := int(min(int64(len(p)-done), (base+r.n)*f.csize-pos))
		if _, err := f.r.ReadAt(p[done:done+n], phys); err != nil {
			return fmt.Errorf("read cluster %d: %w", r.first+uint32(ci-base), err)
		}
		done += n
	}
	return nil
}

type entry struct {
	name    string
	dir     bool
	size    int64 // DataLength
	valid   int64 // ValidDataLength
	first   uint32
	noChain bool
	mtime   time.Time
	ro      bool
	id      uint64
	runs    []run // directories: resolved when read
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

// timestamp decodes an exFAT timestamp with its 10 ms increment and UTC
// offset. Without a valid offset the time is taken as UTC.
func timestamp(ts uint32, ms10, utcOff byte) time.Time {
	if ts == 0 {
		return time.Time{}
	}
	t := time.Date(1980+int(ts>>25), time.Month(ts>>21&0xF), int(ts>>16&0x1F),
		int(ts>>11&0x1F), int(ts>>5&0x3F), int(ts&0x1F)*2, 0, time.UTC)
	if ms10 <= 199 {
		t = t.Add(time.Duration(ms10) * 10 * time.Millisecond)
	}
	if utcOff&0x80 != 0 {
		off := int(int8(utcOff<<1) >> 1) // 7-bit signed, 15-minute steps
		t = t.Add(-time.Duration(off) * 15 * time.Minute)
	}
	return t
}

func setChecksum(b []byte) uint16 {
	var s uint16
	for i, c := range b {
		if i == 2 || i == 3 {
			continue
		}
		s = (s&1)<<15 | s>>1
		s += uint16(c)
	}
	return s
}

// dirReader streams a directory's bytes cluster run by cluster run.
type dirReader struct {
	f    *FS
	runs []run
	size int64
	buf  []byte
	pos  int64 // of buf[0] in the directory
}

func (d *dirReader) entryAt(off int64) ([]byte, error) {
	if off+32 > d.size {
		return nil, io.EOF
	}
	if off < d.pos || off+32 > d.pos+int64(len(d.buf)) {
		n := min(int64(256<<10), d.size-off)
		n -= n % 32
		if cap(d.buf) < int(n) {
			d.buf = make([]byte, n)
		}
		d.buf = d.buf[:n]
		if err := d.f.readRuns(d.runs, d.buf, off); err != nil {
			return nil, err
		}
		d.pos = off
	}
	return d.buf[off-d.pos : off-d.pos+32], nil
}

// readDir parses a directory's entry sets. Entry sets with a wrong
// checksum or missing parts are damaged: they are errors, not silently
// dropped, so a listing is never quietly incomplete.
func (f *FS) readDir(dir *entry, isRoot bool) ([]*entry, error) {
	if dir.runs == nil && dir.size > 0 {
		if dir.size > maxDirBytes {
			return nil, fmt.Errorf("%w: directory of %d bytes (exFAT allows 256 MiB)", ErrCorrupt, dir.size)
		}
		rs, err := f.runs(dir.first, dir.size, dir.noChain)
		if err != nil {
			return nil, err
		}
		dir.runs = rs
	}
	d := &dirReader{f: f, runs: dir.runs, size: min(dir.size, runsLen(dir.runs)*f.csize)}
	var out []*entry
	set := make([]byte, 0, 19*32)
	for off := int64(0); ; {
		e, err := d.entryAt(off)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		typ := e[0]
		if typ == 0 { // end of directory
			break
		}
		entOff := off
		off += 32
		switch {
		case typ&0x80 == 0: // not in use
			continue
		case typ == 0x83 && isRoot: // volume label
			n := min(int(e[1]), 11)
			l := utf16le(e[2 : 2+2*n])
			f.dmu.Lock()
			f.label = l
			f.dmu.Unlock()
			continue
		case typ != 0x85: // bitmap, up-case table, GUID, vendor entries
			continue
		}
		sec := int(e[1])
		if sec < 2 || sec > 18 {
			return nil, fmt.Errorf("%w: file entry at %d has %d secondary entries", ErrCorrupt, entOff, sec)
		}
		set = append(set[:0], e...)
		for i := 0; i < sec; i++ {
			s, err := d.entryAt(off)
			if err != nil {
				return nil, fmt.Errorf("%w: entry set at %d cut short: %v", ErrCorrupt, entOff, err)
			}
			set = append(set, s...)
			off += 32
		}
		if got, want := setChecksum(set), le.Uint16(set[2:]); got != want {
			return nil, fmt.Errorf("%w: entry set at %d: checksum %#04x, stored %#04x", ErrCorrupt, entOff, got, want)
		}
		st := set[32:64]
		if st[0] != 0xC0 {
			return nil, fmt.Errorf("%w: entry set at %d: no stream extension (type %#02x)", ErrCorrupt, entOff, st[0])
		}
		nameLen := int(st[3])
		var name []uint16
		for i := 2; i <= sec && len(name) < nameLen; i++ {
			ne := set[32*i : 32*i+32]
			if ne[0] != 0xC1 {
				return nil, fmt.Errorf("%w: entry set at %d: name entry %d has type %#02x", ErrCorrupt, entOff, i, ne[0])
			}
			for j := 0; j < 15 && len(name) < nameLen; j++ {
				name = append(name, le.Uint16(ne[2+2*j:]))
			}
		}
		if len(name) < nameLen {
			return nil, fmt.Errorf("%w: entry set at %d: name of %d characters, %d stored", ErrCorrupt, entOff, nameLen, len(name))
		}
		attr := le.Uint16(set[4:])
		en := &entry{
			name:    string(utf16.Decode(name)),
			dir:     attr&0x10 != 0,
			ro:      attr&0x01 != 0,
			first:   le.Uint32(st[20:]),
			valid:   int64(le.Uint64(st[8:])),
			size:    int64(le.Uint64(st[24:])),
			noChain: st[1]&0x02 != 0,
			mtime:   timestamp(le.Uint32(set[12:]), set[21], set[23]),
		}
		if en.size < 0 || en.valid < 0 || en.valid > en.size {
			return nil, fmt.Errorf("%w: %q: data length %d, valid length %d", ErrCorrupt, en.name, en.size, en.valid)
		}
		if st[1]&0x01 == 0 || en.size == 0 { // no allocation
			en.size, en.valid, en.first = 0, 0, 0
		}
		if en.dir {
			en.valid = en.size
			en.id = uint64(en.first)
		} else {
			// Files are named by where their entry set is (their first
			// cluster may be 0 or shared by a hostile image).
			en.id = 1<<63 | uint64(dir.first)<<32 | uint64(entOff/32)
		}
		out = append(out, en)
	}
	return out, nil
}

func utf16le(b []byte) string {
	u := make([]uint16, len(b)/2)
	for i := range u {
		u[i] = le.Uint16(b[2*i:])
	}
	return string(utf16.Decode(u))
}

// dirEntries lists a directory through a small cache.
func (f *FS) dirEntries(e *entry) ([]*entry, error) {
	key := e.first
	f.dmu.Lock()
	ents, ok := f.dirs[key]
	f.dmu.Unlock()
	if ok {
		return ents, nil
	}
	if e.first == 0 {
		return nil, nil // an empty directory with no cluster
	}
	ents, err := f.readDir(e, e == f.root)
	if err != nil {
		return nil, err
	}
	f.dmu.Lock()
	fsutil.FIFOPut(f.dirs, &f.dord, cacheDirs, key, ents)
	f.dmu.Unlock()
	return ents, nil
}

// find returns the entry at a clean path. Names match exactly first, then
// case-insensitively, as exFAT compares them.
func (f *FS) find(p string) (*entry, error) {
	return fsutil.Walk(f.root, p, func(e *entry) bool { return e.dir }, func(dir *entry, c string) (*entry, error) {
		ents, err := f.dirEntries(dir)
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			if e.name == c {
				return e, nil
			}
		}
		for _, e := range ents {
			if strings.EqualFold(e.name, c) {
				return e, nil
			}
		}
		return nil, fs.ErrNotExist
	})
}

type info struct{ e *entry }

func (i info) Name() string { return i.e.name }
func (i info) Size() int64 {
	if i.e.dir {
		return 0
	}
	return i.e.size
}
func (i info) Mode() fs.FileMode  { return i.e.mode() }
func (i info) ModTime() time.Time { return i.e.mtime }
func (i info) IsDir() bool        { return i.e.dir }
func (i info) Sys() any           { return fsutil.ID(i.e.id) }

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
	return info{e}, nil
}

// ReadDir lists the directory at name, sorted by name.
func (f *FS) ReadDir(name string) ([]fs.DirEntry, error) {
	e, err := f.find(name)
	if err != nil {
		return nil, pathErr("readdir", name, err)
	}
	if !e.dir {
		return nil, pathErr("readdir", name, fs.ErrInvalid)
	}
	ents, err := f.dirEntries(e)
	if err != nil {
		return nil, pathErr("readdir", name, err)
	}
	out := make([]dirent, len(ents))
	for i, e := range ents {
		out[i] = dirent{e}
	}
	return fsutil.SortedEntries(out), nil
}

// Readlink fails: exFAT has no symbolic links.
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
	if e.dir {
		return nil, pathErr("open", name, fs.ErrInvalid)
	}
	fl := &File{fs: f, e: e}
	if e.size > 0 {
		if fl.runs, err = f.runs(e.first, e.size, e.noChain); err != nil {
			return nil, pathErr("open", name, err)
		}
	}
	return fl, nil
}

func (fl *File) Size() int64                { return fl.e.size }
func (fl *File) Stat() (fs.FileInfo, error) { return info{fl.e}, nil }
func (fl *File) Close() error               { return nil }

// DataExtents: the valid data; the rest up to the size reads as zeros.
func (fl *File) DataExtents() [][2]int64 {
	if fl.e.valid == 0 {
		return nil
	}
	return [][2]int64{{0, fl.e.valid}}
}

func (fl *File) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fs.ErrInvalid
	}
	if off >= fl.e.size {
		return 0, io.EOF
	}
	want := len(p)
	p = p[:min(int64(len(p)), fl.e.size-off)]
	n := int(max(0, min(int64(len(p)), fl.e.valid-off)))
	if n > 0 {
		if err := fl.fs.readRuns(fl.runs, p[:n], off); err != nil {
			return 0, err
		}
	}
	clear(p[n:])
	if len(p) < want {
		return len(p), io.EOF
	}
	return len(p), nil
}

func (fl *File) Read(p []byte) (int, error) { return fsutil.ReadSeq(fl, p, &fl.off) }
