package guestfs

import (
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/vmvault/vmvault/guestfs/internal/fsutil"
	ntfs "www.velocidex.com/golang/go-ntfs/parser"
)

// NTFS goes through www.velocidex.com/golang/go-ntfs (a forensics tool's
// parser): it passes mkntfs + ntfs-3g images with resident, non-resident,
// sparse and compressed (LZNT1) data and Unicode names. What this adapter
// adds: listings from the directory index itself (one entry per Win32 or
// POSIX name, DOS 8.3 aliases dropped, the metafiles $MFT… hidden), an
// exact-then-case-insensitive name lookup, alternate data streams listed as
// "name:stream" files (a name NTFS itself cannot hold, so never ambiguous),
// a small listing cache and sizes checked against the reader. Reparse
// points (NTFS symlinks, junctions) are listed as their own data or as
// directories; their targets are not resolved.
func init() { backends[KindNTFS] = openNTFS }

const ntfsCacheDirs = 8

type ntfsBackend struct {
	ctx *ntfs.NTFSContext

	mu   sync.Mutex
	dirs map[int64][]ntfsEnt
	dord []int64
}

type ntfsEnt struct {
	name  string // "file" or "file:stream"
	mft   int64
	ads   string
	dir   bool
	size  int64
	mtime time.Time
}

func (e ntfsEnt) mode() fs.FileMode {
	if e.dir {
		return fs.ModeDir | 0o755
	}
	return 0o644
}

func openNTFS(r io.ReaderAt, size int64) (backend, error) {
	c, err := ntfs.GetNTFSContext(r, 0)
	if err != nil {
		return nil, err
	}
	return &ntfsBackend{ctx: c, dirs: map[int64][]ntfsEnt{}}, nil
}

func (b *ntfsBackend) close() error { return nil }

func (b *ntfsBackend) list(dir int64) ([]ntfsEnt, error) {
	b.mu.Lock()
	ents, ok := b.dirs[dir]
	b.mu.Unlock()
	if ok {
		return ents, nil
	}
	m, err := b.ctx.GetMFT(dir)
	if err != nil {
		return nil, err
	}
	type key struct {
		ref  int64
		name string
	}
	seen := map[key]bool{}
	for _, rec := range m.Dir(b.ctx) {
		fn := rec.File()
		if fn.NameType().Name == "DOS" {
			continue
		}
		ref := int64(rec.MftReference())
		name := fn.Name()
		if (dir == 5 && ref < 27 && strings.HasPrefix(name, "$")) || name == "" || name == "." {
			continue // metafiles
		}
		k := key{ref, name}
		if seen[k] {
			continue
		}
		seen[k] = true
		if len(ents) >= maxNTFSEntries {
			return nil, fmt.Errorf("%w: directory %d has more than %d entries", ErrCorrupt, dir, maxNTFSEntries)
		}
		cm, err := b.ctx.GetMFT(ref)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		infos := ntfs.Stat(b.ctx, cm)
		base := ntfsEnt{name: name, mft: ref, dir: cm.Flags().IsSet("DIRECTORY")}
		var ads []ntfsEnt
		for _, in := range infos {
			if i := strings.IndexByte(in.Name, ':'); i >= 0 {
				s := in.Name[i+1:]
				ads = append(ads, ntfsEnt{name: name + ":" + s, mft: ref, ads: s, size: in.Size, mtime: in.Mtime.UTC()})
				continue
			}
			if base.mtime.IsZero() || in.Size > 0 {
				base.mtime = in.Mtime.UTC()
				if !base.dir {
					base.size = in.Size
				}
			}
		}
		for i := range ads {
			if ads[i].mtime.IsZero() {
				ads[i].mtime = base.mtime
			}
		}
		ents = append(ents, base)
		ents = append(ents, ads...)
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].name < ents[j].name })
	b.mu.Lock()
	fsutil.FIFOPut(b.dirs, &b.dord, ntfsCacheDirs, dir, ents)
	b.mu.Unlock()
	return ents, nil
}

const maxNTFSEntries = 1 << 23

// find returns the entry at a clean path; the root is MFT record 5.
func (b *ntfsBackend) find(p string) (ntfsEnt, error) {
	cur := ntfsEnt{name: ".", mft: 5, dir: true}
	if p == "." {
		if m, err := b.ctx.GetMFT(5); err == nil {
			for _, in := range ntfs.Stat(b.ctx, m) {
				cur.mtime = in.Mtime.UTC()
				break
			}
		}
		return cur, nil
	}
	parts := strings.Split(p, "/")
	for i, c := range parts {
		if !cur.dir || cur.ads != "" {
			return ntfsEnt{}, ErrNotDir
		}
		ents, err := b.list(cur.mft)
		if err != nil {
			return ntfsEnt{}, err
		}
		j := sort.Search(len(ents), func(j int) bool { return ents[j].name >= c })
		if j < len(ents) && ents[j].name == c {
			cur = ents[j]
		} else {
			// NTFS names are case-insensitive, as Windows users expect.
			found := false
			for _, e := range ents {
				if strings.EqualFold(e.name, c) {
					cur, found = e, true
					break
				}
			}
			if !found {
				return ntfsEnt{}, fs.ErrNotExist
			}
		}
		if cur.ads != "" && i != len(parts)-1 {
			return ntfsEnt{}, ErrNotDir
		}
	}
	return cur, nil
}

type ntfsInfo struct{ e ntfsEnt }

func (i ntfsInfo) Name() string       { return path.Base(i.e.name) }
func (i ntfsInfo) Size() int64        { return i.e.size }
func (i ntfsInfo) Mode() fs.FileMode  { return i.e.mode() }
func (i ntfsInfo) ModTime() time.Time { return i.e.mtime }
func (i ntfsInfo) IsDir() bool        { return i.e.dir && i.e.ads == "" }
func (i ntfsInfo) Sys() any           { return fsutil.ID(i.e.mft) }

type ntfsDirent struct{ e ntfsEnt }

func (d ntfsDirent) Name() string               { return d.e.name }
func (d ntfsDirent) IsDir() bool                { return d.e.dir && d.e.ads == "" }
func (d ntfsDirent) Type() fs.FileMode          { return ntfsInfo(d).Mode().Type() }
func (d ntfsDirent) Info() (fs.FileInfo, error) { return ntfsInfo(d), nil }

func (b *ntfsBackend) lstat(p string) (fs.FileInfo, error) {
	e, err := b.find(p)
	if err != nil {
		return nil, &fs.PathError{Op: "lstat", Path: p, Err: err}
	}
	if p == "." {
		e.name = "."
	}
	return ntfsInfo{e}, nil
}

func (b *ntfsBackend) readDir(p string) ([]fs.DirEntry, error) {
	e, err := b.find(p)
	if err != nil {
		return nil, err
	}
	ents, err := b.list(e.mft)
	if err != nil {
		return nil, err
	}
	out := make([]fs.DirEntry, len(ents))
	for i, e := range ents {
		out[i] = ntfsDirent{e}
	}
	return out, nil
}

func (b *ntfsBackend) readlink(p string) (string, error) {
	return "", fmt.Errorf("NTFS reparse points are not resolved")
}

func (b *ntfsBackend) open(p string) (File, error) {
	e, err := b.find(p)
	if err != nil {
		return nil, err
	}
	m, err := b.ctx.GetMFT(e.mft)
	if err != nil {
		return nil, err
	}
	f := &ntfsFile{e: e}
	if e.size == 0 {
		return f, nil
	}
	r, err := ntfs.OpenStream(b.ctx, m, ntfs.ATTR_TYPE_DATA, ntfs.WILDCARD_STREAM_ID, e.ads)
	if err != nil {
		return nil, err
	}
	f.r = r
	return f, nil
}

type ntfsFile struct {
	e   ntfsEnt
	r   ntfs.RangeReaderAt
	off int64
}

func (f *ntfsFile) Size() int64                { return f.e.size }
func (f *ntfsFile) Stat() (fs.FileInfo, error) { return ntfsInfo{f.e}, nil }
func (f *ntfsFile) Close() error               { return nil }

// ReadAt reads the stream; bytes past what the parser maps (the gap
// between initialized and actual size) read as zeros, as Windows shows them.
func (f *ntfsFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fs.ErrInvalid
	}
	if off >= f.e.size {
		return 0, io.EOF
	}
	want := len(p)
	p = p[:min(int64(len(p)), f.e.size-off)]
	n := 0
	if f.r != nil {
		var err error
		n, err = f.r.ReadAt(p, off)
		if err != nil && err != io.EOF {
			return n, err
		}
		n = max(0, min(n, len(p)))
	}
	clear(p[n:])
	if len(p) < want {
		return len(p), io.EOF
	}
	return len(p), nil
}

func (f *ntfsFile) Read(p []byte) (int, error) { return fsutil.ReadSeq(f, p, &f.off) }

// DataExtents gives the stream's non-sparse ranges.
func (f *ntfsFile) DataExtents() [][2]int64 {
	if f.r == nil {
		return nil
	}
	var out [][2]int64
	for _, r := range f.r.Ranges() {
		if r.IsSparse || r.Offset >= f.e.size {
			continue
		}
		out = append(out, [2]int64{r.Offset, min(r.Length, f.e.size-r.Offset)})
	}
	return out
}

func init() { labelers[KindNTFS] = ntfsLabel }

// ntfsLabel reads the volume label: the $VOLUME_NAME attribute (0x60) of
// the $Volume metafile (MFT record 3).
func ntfsLabel(r io.ReaderAt, size int64) string {
	c, err := ntfs.GetNTFSContext(r, 0)
	if err != nil {
		return ""
	}
	m, err := c.GetMFT(3)
	if err != nil {
		return ""
	}
	for _, a := range m.EnumerateAttributes(c) {
		if a.Type().Value != 0x60 {
			continue
		}
		n := min(a.DataSize(), 256)
		if n <= 0 {
			return ""
		}
		b := make([]byte, n)
		k, _ := a.Data(c).ReadAt(b, 0)
		return utf16le(b[:k&^1])
	}
	return ""
}
