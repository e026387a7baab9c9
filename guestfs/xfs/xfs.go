// Package xfs is a read-only reader of XFS file systems (v5, the RHEL
// default, and v4) over an io.ReaderAt: extent and B+tree data forks,
// unwritten extents (read as zeros), short-form, block, leaf and node
// directories, local and remote symbolic links, big timestamps.
//
// It was written rather than taking github.com/masahiro331/go-xfs-filesystem
// (measured on mkfs.xfs images): that library cannot read a symbolic link's
// target at all (no Readlink; remote links only log "not support"), has no
// ReadAt (its File seeks one reader shared by every file), keeps one map
// entry per block of a file, and panics on some paths ("implement me").
//
// Every number read from the disk is checked before use: block numbers
// against the file system's size, B+tree depth and record counts, directory
// records against their block. Damage is an error wrapping ErrCorrupt.
package xfs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sort"
	"sync"
	"time"

	"github.com/vmvault/vmvault/guestfs/internal/fsutil"
)

// ErrCorrupt marks damaged or hostile structures.
var ErrCorrupt = errors.New("corrupt XFS file system")

var be = binary.BigEndian

const (
	maxExtents    = 1 << 22
	maxDirBytes   = 1 << 30
	maxDirEntries = 1 << 23
	maxSymlink    = 4096
	maxBtreeDepth = 8
	cacheDirs     = 8
)

// FS is an open XFS file system, safe for concurrent use.
type FS struct {
	r                         io.ReaderAt
	size                      int64
	bs                        int64
	dbs                       int64 // directory block size
	dblocks                   uint64
	agblocks                  uint64
	agcount                   uint64
	agblklog, inopblog        uint
	inodeSize                 int64
	rootIno                   uint64
	v5, ftype, bigtimeFeature bool
	nrext64                   bool

	mu    sync.Mutex
	dirs  map[uint64]map[string]uint64
	dord  []uint64
	cache map[int64][]byte // inode blocks by byte offset
	order []int64
}

// cacheBlocks bounds the inode blocks kept (8 MiB at 4 KiB): a listing
// reads every entry's inode, and inodes sit 8 or 16 to a block.
const cacheBlocks = 2048

// block reads the file-system block at byte offset off through the cache.
func (f *FS) block(off int64) ([]byte, error) {
	f.mu.Lock()
	b, ok := f.cache[off]
	f.mu.Unlock()
	if ok {
		return b, nil
	}
	b = make([]byte, f.bs)
	if _, err := f.r.ReadAt(b, off); err != nil {
		return nil, err
	}
	f.mu.Lock()
	fsutil.FIFOPut(f.cache, &f.order, cacheBlocks, off, b)
	f.mu.Unlock()
	return b, nil
}

// Open reads the superblock of the XFS file system in r (size bytes).
func Open(r io.ReaderAt, size int64) (*FS, error) {
	sb := make([]byte, 512)
	if _, err := r.ReadAt(sb, 0); err != nil {
		return nil, fmt.Errorf("read superblock: %w", err)
	}
	if string(sb[:4]) != "XFSB" {
		return nil, fmt.Errorf("%w: no XFS superblock", ErrCorrupt)
	}
	f := &FS{r: r, size: size, dirs: map[uint64]map[string]uint64{}, cache: map[int64][]byte{}}
	f.bs = int64(be.Uint32(sb[4:]))
	f.dblocks = be.Uint64(sb[8:])
	f.rootIno = be.Uint64(sb[56:])
	f.agblocks = uint64(be.Uint32(sb[84:]))
	f.agcount = uint64(be.Uint32(sb[88:]))
	ver := be.Uint16(sb[100:])
	f.inodeSize = int64(be.Uint16(sb[104:]))
	blocklog, inodelog := uint(sb[120]), uint(sb[122])
	f.inopblog, f.agblklog = uint(sb[123]), uint(sb[124])
	dirblklog := uint(sb[192])
	if blocklog < 9 || blocklog > 16 || f.bs != 1<<blocklog || inodelog < 8 || inodelog > 11 || f.inodeSize != 1<<inodelog ||
		f.inopblog != blocklog-inodelog || f.agblklog > 31 || f.agblocks == 0 || f.agblocks > 1<<f.agblklog || f.agcount == 0 || dirblklog > 8 {
		return nil, fmt.Errorf("%w: implausible superblock geometry", ErrCorrupt)
	}
	f.dbs = f.bs << dirblklog
	f.v5 = ver&0xf == 5
	if f.v5 {
		inc := be.Uint32(sb[216:])
		f.ftype = inc&0x1 != 0
		f.bigtimeFeature = inc&0x8 != 0
		f.nrext64 = inc&0x20 != 0
	} else {
		f.ftype = be.Uint32(sb[200:])&0x200 != 0
	}
	return f, nil
}

// fsbOffset turns a file-system block number (AG number and AG block packed
// with agblklog) into a byte offset, checking it lies inside the volume.
func (f *FS) fsbOffset(fsb uint64, n int64) (int64, error) {
	ag, agb := fsb>>f.agblklog, fsb&(1<<f.agblklog-1)
	if ag >= f.agcount || agb >= f.agblocks {
		return 0, fmt.Errorf("%w: block %d outside the file system", ErrCorrupt, fsb)
	}
	off := int64(ag*f.agblocks+agb) * f.bs
	if off < 0 || off+n*f.bs > f.size {
		return 0, fmt.Errorf("%w: block %d (+%d) past the volume's end", ErrCorrupt, fsb, n)
	}
	return off, nil
}

func (f *FS) readBlocks(fsb uint64, n int64) ([]byte, error) {
	off, err := f.fsbOffset(fsb, n)
	if err != nil {
		return nil, err
	}
	b := make([]byte, n*f.bs)
	if _, err := f.r.ReadAt(b, off); err != nil {
		return nil, fmt.Errorf("read block %d: %w", fsb, err)
	}
	return b, nil
}

type inode struct {
	ino    uint64
	mode   uint16
	format byte
	size   int64
	mtime  time.Time
	nexts  uint64
	fork   []byte // the data fork
}

func (f *FS) inode(ino uint64) (*inode, error) {
	ag := ino >> (f.agblklog + f.inopblog)
	agb := (ino >> f.inopblog) & (1<<f.agblklog - 1)
	idx := ino & (1<<f.inopblog - 1)
	if ag >= f.agcount || agb >= f.agblocks {
		return nil, fmt.Errorf("%w: inode %d out of range", ErrCorrupt, ino)
	}
	blk, err := f.block(int64(ag*f.agblocks+agb) * f.bs)
	if err != nil {
		return nil, fmt.Errorf("read inode %d: %w", ino, err)
	}
	// A copy: the data fork is handed out with the inode.
	raw := append([]byte(nil), blk[int64(idx)*f.inodeSize:int64(idx+1)*f.inodeSize]...)
	if raw[0] != 'I' || raw[1] != 'N' {
		return nil, fmt.Errorf("%w: inode %d has no magic", ErrCorrupt, ino)
	}
	in := &inode{ino: ino, mode: be.Uint16(raw[2:]), format: raw[5]}
	ver := raw[4]
	core := int64(100)
	var flags2 uint64
	if ver == 3 {
		core = 176
		flags2 = be.Uint64(raw[120:])
	}
	in.size = int64(be.Uint64(raw[56:]))
	if in.size < 0 {
		return nil, fmt.Errorf("%w: inode %d has size %d", ErrCorrupt, ino, in.size)
	}
	if f.nrext64 && flags2&(1<<4) != 0 {
		in.nexts = be.Uint64(raw[24:])
	} else {
		in.nexts = uint64(be.Uint32(raw[76:]))
	}
	ts := raw[40:48]
	if flags2&(1<<3) != 0 { // bigtime: nanoseconds since 1901-12-13
		ns := be.Uint64(ts)
		in.mtime = time.Unix(int64(ns/1e9)-(1<<31), int64(ns%1e9)).UTC()
	} else {
		nsec := int64(be.Uint32(ts[4:]))
		if nsec >= 1e9 {
			nsec = 0
		}
		in.mtime = time.Unix(int64(int32(be.Uint32(ts))), nsec).UTC()
	}
	forkoff := int64(raw[82]) * 8
	end := f.inodeSize
	if forkoff > 0 {
		end = core + forkoff
	}
	if end > f.inodeSize || end < core {
		return nil, fmt.Errorf("%w: inode %d fork offset %d", ErrCorrupt, ino, forkoff)
	}
	in.fork = raw[core:end]
	return in, nil
}

func (in *inode) isDir() bool  { return in.mode&0xF000 == 0x4000 }
func (in *inode) isReg() bool  { return in.mode&0xF000 == 0x8000 }
func (in *inode) isLink() bool { return in.mode&0xF000 == 0xA000 }

func (in *inode) fileMode() fs.FileMode {
	m := fs.FileMode(in.mode & 0o777)
	if in.mode&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	if in.mode&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if in.mode&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	switch in.mode & 0xF000 {
	case 0x8000:
	case 0x4000:
		m |= fs.ModeDir
	case 0xA000:
		m |= fs.ModeSymlink
	case 0x2000:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case 0x6000:
		m |= fs.ModeDevice
	case 0x1000:
		m |= fs.ModeNamedPipe
	case 0xC000:
		m |= fs.ModeSocket
	default:
		m |= fs.ModeIrregular
	}
	return m
}

// extent maps file blocks [off, off+n) to file-system block fsb.
type extent struct {
	off, fsb, n uint64
	unwritten   bool
}

func unpack(b []byte) extent {
	l0, l1 := be.Uint64(b), be.Uint64(b[8:])
	return extent{
		unwritten: l0>>63 != 0,
		off:       (l0 & (1<<63 - 1)) >> 9,
		fsb:       (l0&(1<<9-1))<<43 | l1>>21,
		n:         l1 & (1<<21 - 1),
	}
}

// extents returns the sorted data extents of an extents- or btree-format inode.
func (f *FS) extents(in *inode) ([]extent, error) {
	var out []extent
	switch in.format {
	case 2:
		if in.nexts > uint64(len(in.fork)/16) {
			return nil, fmt.Errorf("%w: inode %d claims %d extents in its fork", ErrCorrupt, in.ino, in.nexts)
		}
		for i := uint64(0); i < in.nexts; i++ {
			out = append(out, unpack(in.fork[i*16:]))
		}
	case 3:
		if len(in.fork) < 4 {
			return nil, fmt.Errorf("%w: inode %d btree root too small", ErrCorrupt, in.ino)
		}
		level, nrecs := int(be.Uint16(in.fork)), int(be.Uint16(in.fork[2:]))
		maxr := (len(in.fork) - 4) / 16
		if level == 0 || level > maxBtreeDepth || nrecs > maxr {
			return nil, fmt.Errorf("%w: inode %d btree root level %d with %d records", ErrCorrupt, in.ino, level, nrecs)
		}
		visits := 0
		for i := 0; i < nrecs; i++ {
			ptr := be.Uint64(in.fork[4+maxr*8+i*8:])
			if err := f.walkBtree(ptr, level-1, &out, &visits); err != nil {
				return nil, fmt.Errorf("inode %d: %w", in.ino, err)
			}
		}
	default:
		return nil, fmt.Errorf("%w: inode %d has data fork format %d", ErrCorrupt, in.ino, in.format)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].off < out[j].off })
	for i, e := range out {
		if e.n == 0 {
			return nil, fmt.Errorf("%w: inode %d: empty extent", ErrCorrupt, in.ino)
		}
		if _, err := f.fsbOffset(e.fsb, int64(e.n)); err != nil && !e.unwritten {
			return nil, fmt.Errorf("inode %d: %w", in.ino, err)
		}
		if i > 0 && e.off < out[i-1].off+out[i-1].n {
			return nil, fmt.Errorf("%w: inode %d has overlapping extents", ErrCorrupt, in.ino)
		}
	}
	return out, nil
}

// maxNodes bounds the bmap B+tree nodes one file may visit: a hostile tree
// whose pointers all name the same empty leaf would otherwise never end.
const maxNodes = 1 << 16

func (f *FS) walkBtree(fsb uint64, level int, out *[]extent, visits *int) error {
	if *visits++; *visits > maxNodes {
		return fmt.Errorf("%w: bmap btree of more than %d nodes", ErrCorrupt, maxNodes)
	}
	b, err := f.readBlocks(fsb, 1)
	if err != nil {
		return err
	}
	hdr := 24
	magic := string(b[:4])
	if magic == "BMA3" {
		hdr = 72
	} else if magic != "BMAP" {
		return fmt.Errorf("%w: bmap btree block %d has magic %q", ErrCorrupt, fsb, magic)
	}
	if int(be.Uint16(b[4:])) != level {
		return fmt.Errorf("%w: bmap btree block %d at the wrong level", ErrCorrupt, fsb)
	}
	nrecs := int(be.Uint16(b[6:]))
	if level == 0 {
		if hdr+nrecs*16 > len(b) {
			return fmt.Errorf("%w: bmap leaf %d with %d records", ErrCorrupt, fsb, nrecs)
		}
		if len(*out)+nrecs > maxExtents {
			return fmt.Errorf("%w: too many extents", ErrCorrupt)
		}
		for i := 0; i < nrecs; i++ {
			*out = append(*out, unpack(b[hdr+i*16:]))
		}
		return nil
	}
	maxr := (len(b) - hdr) / 16
	if nrecs > maxr {
		return fmt.Errorf("%w: bmap node %d with %d records", ErrCorrupt, fsb, nrecs)
	}
	for i := 0; i < nrecs; i++ {
		if err := f.walkBtree(be.Uint64(b[hdr+maxr*8+i*8:]), level-1, out, visits); err != nil {
			return err
		}
	}
	return nil
}

// File is an open regular file (or a directory's or remote link's data).
type File struct {
	fs    *FS
	in    *inode
	name  string
	ext   []extent
	local []byte
	off   int64
}

func (f *FS) openInode(in *inode, name string) (*File, error) {
	fl := &File{fs: f, in: in, name: name}
	if in.format == 1 {
		n := min(in.size, int64(len(in.fork)))
		fl.local = in.fork[:n]
		return fl, nil
	}
	e, err := f.extents(in)
	if err != nil {
		return nil, err
	}
	fl.ext = e
	return fl, nil
}

func (fl *File) Size() int64 { return fl.in.size }

// ReadAt reads file bytes; holes and unwritten extents read as zeros.
func (fl *File) ReadAt(p []byte, off int64) (int, error) {
	return fl.readAt(p, off, fl.in.size)
}

func (fl *File) readAt(p []byte, off, size int64) (int, error) {
	if off < 0 {
		return 0, fs.ErrInvalid
	}
	if off >= size {
		return 0, io.EOF
	}
	want := len(p)
	if rem := size - off; int64(want) > rem {
		p = p[:rem]
	}
	if fl.local != nil {
		n := 0
		if off < int64(len(fl.local)) {
			n = copy(p, fl.local[off:])
		}
		clear(p[n:])
	} else {
		bs := fl.fs.bs
		for done := 0; done < len(p); {
			pos := off + int64(done)
			lb := uint64(pos / bs)
			i := sort.Search(len(fl.ext), func(i int) bool { return fl.ext[i].off+fl.ext[i].n > lb })
			var chunk int64
			if i == len(fl.ext) || fl.ext[i].off > lb {
				end := size
				if i < len(fl.ext) {
					end = min(end, int64(fl.ext[i].off)*bs)
				}
				chunk = min(end-pos, int64(len(p)-done))
				clear(p[done : done+int(chunk)])
			} else {
				e := fl.ext[i]
				chunk = min(int64(e.off+e.n)*bs-pos, int64(len(p)-done))
				if e.unwritten {
					clear(p[done : done+int(chunk)])
				} else {
					// An extent never crosses an AG, so its blocks are contiguous.
					base, err := fl.fs.fsbOffset(e.fsb, int64(e.n))
					if err != nil {
						return done, err
					}
					phys := base + int64(lb-e.off)*bs + pos%bs
					if _, err := fl.fs.r.ReadAt(p[done:done+int(chunk)], phys); err != nil {
						return done, fmt.Errorf("read %s at %d: %w", fl.name, pos, err)
					}
				}
			}
			done += int(chunk)
		}
	}
	if len(p) < want {
		return len(p), io.EOF
	}
	return len(p), nil
}

func (fl *File) Read(p []byte) (int, error) { return fsutil.ReadSeq(fl, p, &fl.off) }

func (fl *File) Stat() (fs.FileInfo, error) { return &info{name: baseName(fl.name), in: fl.in}, nil }
func (fl *File) Close() error               { return nil }

// DataExtents returns the byte ranges holding data, for sparse copies.
func (fl *File) DataExtents() [][2]int64 {
	if fl.local != nil {
		return [][2]int64{{0, fl.in.size}}
	}
	var out [][2]int64
	for _, e := range fl.ext {
		if e.unwritten {
			continue
		}
		s, l := int64(e.off)*fl.fs.bs, int64(e.n)*fl.fs.bs
		if s >= fl.in.size {
			break
		}
		out = append(out, [2]int64{s, min(l, fl.in.size-s)})
	}
	return out
}

type info struct {
	name string
	in   *inode
}

func (i *info) Name() string       { return i.name }
func (i *info) Size() int64        { return i.in.size }
func (i *info) Mode() fs.FileMode  { return i.in.fileMode() }
func (i *info) ModTime() time.Time { return i.in.mtime }
func (i *info) IsDir() bool        { return i.in.isDir() }
func (i *info) Sys() any           { return fsutil.ID(i.in.ino) }

var baseName = fsutil.BaseName

type dirent struct {
	name string
	ino  uint64
	fs   *FS
}

func (d *dirent) Name() string { return d.name }
func (d *dirent) IsDir() bool  { return d.Type().IsDir() }
func (d *dirent) Type() fs.FileMode {
	if fi, err := d.Info(); err == nil {
		return fi.Mode().Type()
	}
	return fs.ModeIrregular
}
func (d *dirent) Info() (fs.FileInfo, error) {
	in, err := d.fs.inode(d.ino)
	if err != nil {
		return nil, err
	}
	return &info{name: d.name, in: in}, nil
}

// readDirInode lists a directory's entries, without . and ..
func (f *FS) readDirInode(in *inode) ([]*dirent, error) {
	if !in.isDir() {
		return nil, fs.ErrInvalid
	}
	var out []*dirent
	add := func(name string, ino uint64) error {
		if name == "." || name == ".." || name == "" {
			return nil
		}
		if len(out) >= maxDirEntries {
			return fmt.Errorf("%w: directory inode %d has too many entries", ErrCorrupt, in.ino)
		}
		out = append(out, &dirent{name: name, ino: ino, fs: f})
		return nil
	}
	if in.format == 1 { // short form, inside the inode
		b := in.fork
		if len(b) < 6 {
			return nil, fmt.Errorf("%w: short-form directory inode %d", ErrCorrupt, in.ino)
		}
		count, i8 := int(b[0]), b[1]
		isz := 4
		if i8 > 0 {
			isz, count = 8, int(i8)
		}
		p := 2 + isz
		for i := 0; i < count; i++ {
			if p+3 > len(b) {
				return nil, fmt.Errorf("%w: short-form directory inode %d overruns", ErrCorrupt, in.ino)
			}
			nl := int(b[p])
			p += 3
			ft := 0
			if f.ftype {
				ft = 1
			}
			if p+nl+ft+isz > len(b) {
				return nil, fmt.Errorf("%w: short-form directory inode %d overruns", ErrCorrupt, in.ino)
			}
			name := string(b[p : p+nl])
			p += nl + ft
			var ino uint64
			if isz == 8 {
				ino = be.Uint64(b[p:])
			} else {
				ino = uint64(be.Uint32(b[p:]))
			}
			p += isz
			if err := add(name, ino); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	if in.size > maxDirBytes {
		return nil, fmt.Errorf("%w: directory inode %d of %d bytes", ErrCorrupt, in.ino, in.size)
	}
	fl, err := f.openInode(in, "")
	if err != nil {
		return nil, err
	}
	// Data blocks live below the 32 GiB leaf offset; di_size ends at the
	// last of them.
	buf := make([]byte, f.dbs)
	var offs []int64 // directory blocks that are mapped, in order
	for _, e := range fl.ext {
		if e.unwritten {
			continue
		}
		for o := int64(e.off) * f.bs / f.dbs * f.dbs; o < int64(e.off+e.n)*f.bs && o < in.size; o += f.dbs {
			if len(offs) == 0 || offs[len(offs)-1] < o {
				offs = append(offs, o)
			}
		}
	}
	for _, off := range offs {
		if !fl.mapped(off) {
			continue // a freed directory block
		}
		if _, err := fl.readAt(buf, off, off+f.dbs); err != nil {
			return nil, err
		}
		if err := f.parseDirBlock(in.ino, buf, add); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (fl *File) mapped(off int64) bool {
	lb := uint64(off / fl.fs.bs)
	i := sort.Search(len(fl.ext), func(i int) bool { return fl.ext[i].off+fl.ext[i].n > lb })
	return i < len(fl.ext) && fl.ext[i].off <= lb
}

func (f *FS) parseDirBlock(ino uint64, b []byte, add func(string, uint64) error) error {
	magic := string(b[:4])
	var hdr int
	end := len(b)
	switch magic {
	case "XDB3", "XDD3":
		hdr = 64
	case "XD2B", "XD2D":
		hdr = 16
	default:
		return fmt.Errorf("%w: directory inode %d: block with magic %q", ErrCorrupt, ino, magic)
	}
	if magic == "XDB3" || magic == "XD2B" {
		// A single-block directory ends with its leaf entries and a tail.
		count := int(be.Uint32(b[len(b)-8:]))
		end = len(b) - 8 - count*8
		if count < 0 || end < hdr {
			return fmt.Errorf("%w: directory inode %d: block tail with %d leaves", ErrCorrupt, ino, count)
		}
	}
	for p := hdr; p+8 <= end; {
		if be.Uint16(b[p:]) == 0xFFFF { // free space
			l := int(be.Uint16(b[p+2:]))
			if l < 8 || l%8 != 0 || p+l > end {
				return fmt.Errorf("%w: directory inode %d: bad free record at %d", ErrCorrupt, ino, p)
			}
			p += l
			continue
		}
		if p+11 > end {
			return fmt.Errorf("%w: directory inode %d: truncated entry at %d", ErrCorrupt, ino, p)
		}
		child := be.Uint64(b[p:])
		nl := int(b[p+8])
		sz := 8 + 1 + nl + 2
		if f.ftype {
			sz++
		}
		sz = (sz + 7) &^ 7
		if nl == 0 || p+sz > end {
			return fmt.Errorf("%w: directory inode %d: bad entry at %d", ErrCorrupt, ino, p)
		}
		if err := add(string(b[p+9:p+9+nl]), child); err != nil {
			return err
		}
		p += sz
	}
	return nil
}

func (f *FS) lookupIn(dir *inode, name string) (uint64, error) {
	f.mu.Lock()
	m, ok := f.dirs[dir.ino]
	f.mu.Unlock()
	if !ok {
		ents, err := f.readDirInode(dir)
		if err != nil {
			return 0, err
		}
		m = make(map[string]uint64, len(ents))
		for _, e := range ents {
			m[e.name] = e.ino
		}
		f.mu.Lock()
		fsutil.FIFOPut(f.dirs, &f.dord, cacheDirs, dir.ino, m)
		f.mu.Unlock()
	}
	ino, ok := m[name]
	if !ok {
		return 0, fs.ErrNotExist
	}
	return ino, nil
}

func (f *FS) walk(name string) (*inode, error) {
	root, err := f.inode(f.rootIno)
	if err != nil {
		return nil, err
	}
	return fsutil.Walk(root, name, (*inode).isDir,
		func(dir *inode, c string) (*inode, error) {
			ino, err := f.lookupIn(dir, c)
			if err != nil {
				return nil, err
			}
			return f.inode(ino)
		})
}

var pathErr = fsutil.PathErr

// Lstat describes the file at name without following a final link.
func (f *FS) Lstat(name string) (fs.FileInfo, error) {
	in, err := f.walk(name)
	if err != nil {
		return nil, pathErr("lstat", name, err)
	}
	return &info{name: baseName(name), in: in}, nil
}

// ReadDir lists the directory at name, sorted by name.
func (f *FS) ReadDir(name string) ([]fs.DirEntry, error) {
	in, err := f.walk(name)
	if err != nil {
		return nil, pathErr("readdir", name, err)
	}
	ents, err := f.readDirInode(in)
	if err != nil {
		return nil, pathErr("readdir", name, err)
	}
	return fsutil.SortedEntries(ents), nil
}

// Readlink returns a symbolic link's target exactly as stored.
func (f *FS) Readlink(name string) (string, error) {
	in, err := f.walk(name)
	if err != nil {
		return "", pathErr("readlink", name, err)
	}
	if !in.isLink() {
		return "", pathErr("readlink", name, fs.ErrInvalid)
	}
	if in.size > maxSymlink {
		return "", pathErr("readlink", name, fmt.Errorf("%w: link target of %d bytes", ErrCorrupt, in.size))
	}
	if in.format == 1 {
		if in.size > int64(len(in.fork)) {
			return "", pathErr("readlink", name, fmt.Errorf("%w: local link longer than its fork", ErrCorrupt))
		}
		return string(in.fork[:in.size]), nil
	}
	ext, err := f.extents(in)
	if err != nil {
		return "", pathErr("readlink", name, err)
	}
	// A remote link: its blocks in order, each with a header on v5.
	var target []byte
	for _, e := range ext {
		b, err := f.readBlocks(e.fsb, int64(e.n))
		if err != nil {
			return "", pathErr("readlink", name, err)
		}
		for p := int64(0); p < int64(len(b)) && int64(len(target)) < in.size; p += f.bs {
			blk := b[p : p+f.bs]
			if f.v5 {
				if string(blk[:4]) != "XSLM" {
					return "", pathErr("readlink", name, fmt.Errorf("%w: remote link block without magic", ErrCorrupt))
				}
				n := int64(be.Uint32(blk[8:]))
				if 56+n > f.bs {
					return "", pathErr("readlink", name, fmt.Errorf("%w: remote link block of %d bytes", ErrCorrupt, n))
				}
				target = append(target, blk[56:56+n]...)
			} else {
				target = append(target, blk[:min(f.bs, in.size-int64(len(target)))]...)
			}
		}
	}
	if int64(len(target)) != in.size {
		return "", pathErr("readlink", name, fmt.Errorf("%w: remote link holds %d of %d bytes", ErrCorrupt, len(target), in.size))
	}
	return string(target), nil
}

// Open opens the regular file at name (no link is followed).
func (f *FS) Open(name string) (*File, error) {
	in, err := f.walk(name)
	if err != nil {
		return nil, pathErr("open", name, err)
	}
	if !in.isReg() {
		return nil, pathErr("open", name, fs.ErrInvalid)
	}
	fl, err := f.openInode(in, name)
	if err != nil {
		return nil, pathErr("open", name, err)
	}
	return fl, nil
}
