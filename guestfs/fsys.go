package guestfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/vmvault/vmvault/guestfs/exfat"
	"github.com/vmvault/vmvault/guestfs/ext4"
	"github.com/vmvault/vmvault/guestfs/fat"
	"github.com/vmvault/vmvault/guestfs/internal/fsutil"
	"github.com/vmvault/vmvault/guestfs/lvm"
	"github.com/vmvault/vmvault/guestfs/xfs"
)

// backend is one file-system reader. Its paths are always clean io/fs paths
// with no symbolic link in any component but (for lstat and readlink) the
// last: fsys resolves links before calling it.
type backend interface {
	lstat(p string) (fs.FileInfo, error)
	readDir(p string) ([]fs.DirEntry, error)
	readlink(p string) (string, error)
	open(p string) (File, error) // a regular file
	close() error
}

// markCorrupt makes a reader's own corruption error match ErrCorrupt too,
// keeping its message.
func markCorrupt(err error) error {
	for _, c := range []error{ext4.ErrCorrupt, xfs.ErrCorrupt, fat.ErrCorrupt, lvm.ErrCorrupt, exfat.ErrCorrupt} {
		if errors.Is(err, c) && !errors.Is(err, ErrCorrupt) {
			return corruptError{err}
		}
	}
	return err
}

type corruptError struct{ err error }

func (c corruptError) Error() string   { return c.err.Error() }
func (c corruptError) Unwrap() []error { return []error{c.err, ErrCorrupt} }

// recoverPanics is false only in fuzz tests, so that a reader's panic is
// found and fixed rather than hidden.
var recoverPanics = true

// maxLinks bounds the symbolic links followed in one lookup, as Linux does.
const maxLinks = 40

// maxDepth bounds the components of a resolved path: a hostile file system
// can nest links that expand without looping.
const maxDepth = 4096

// fsys implements FS over a backend: symlink resolution, path checks, panic
// recovery and error wrapping live here, once, for every reader.
type fsys struct {
	ctx context.Context
	vol Volume
	b   backend
}

var _ FS = (*fsys)(nil)

func (f *fsys) Volume() Volume { return f.vol }

func (f *fsys) Close() error { return f.b.close() }

// guard runs a backend call, turning a panic (a reader choking on hostile
// input) into ErrCorrupt and library not-found errors into ErrNotExist.
func guard[T any](f *fsys, op, name string, call func() (T, error)) (v T, err error) {
	defer func() {
		if !recoverPanics {
			return
		}
		if p := recover(); p != nil {
			var zero T
			v, err = zero, &fs.PathError{Op: op, Path: name, Err: fmt.Errorf("%w: the reader failed: %v", ErrCorrupt, p)}
		}
	}()
	if err := f.ctx.Err(); err != nil {
		return v, err
	}
	v, err = call()
	if err != nil {
		if cerr := f.ctx.Err(); cerr != nil {
			return v, cerr
		}
		err = markCorrupt(err)
		var pe *fs.PathError
		if !errors.As(err, &pe) {
			err = &fs.PathError{Op: op, Path: name, Err: err}
		}
	}
	return v, err
}

func (f *fsys) lstat(p string) (fs.FileInfo, error) {
	return guard(f, "lstat", p, func() (fs.FileInfo, error) { return f.b.lstat(p) })
}

func (f *fsys) readlinkRaw(p string) (string, error) {
	return guard(f, "readlink", p, func() (string, error) { return f.b.readlink(p) })
}

// resolve returns the symlink-free path that name designates. With
// followLast false a link in the last component is not followed (Lstat).
func (f *fsys) resolve(op, name string, followLast bool) (string, error) {
	if !fs.ValidPath(name) {
		return "", &fs.PathError{Op: op, Path: name, Err: ErrBadPath}
	}
	if name == "." {
		return ".", nil
	}
	todo := strings.Split(name, "/")
	var cur []string
	links := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			// Only link targets hold "..": it stops at the root, inside the volume.
			if len(cur) > 0 {
				cur = cur[:len(cur)-1]
			}
			continue
		}
		cand := path.Join(append(append([]string{}, cur...), c)...)
		last := len(todo) == 0
		fi, err := f.lstat(cand)
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink != 0 && (!last || followLast) {
			if links++; links > maxLinks {
				return "", &fs.PathError{Op: op, Path: name, Err: ErrLinkLoop}
			}
			t, err := f.readlinkRaw(cand)
			if err != nil {
				return "", err
			}
			if strings.HasPrefix(t, "/") {
				cur = cur[:0]
			}
			parts := strings.Split(t, "/")
			if len(parts)+len(todo) > maxDepth {
				return "", &fs.PathError{Op: op, Path: name, Err: ErrLinkLoop}
			}
			todo = append(parts, todo...)
			continue
		}
		if !last && !fi.IsDir() {
			return "", &fs.PathError{Op: op, Path: cand, Err: ErrNotDir}
		}
		cur = append(cur, c)
	}
	if len(cur) == 0 {
		return ".", nil
	}
	return path.Join(cur...), nil
}

func (f *fsys) Stat(name string) (fs.FileInfo, error) {
	p, err := f.resolve("stat", name, true)
	if err != nil {
		return nil, err
	}
	return f.lstat(p)
}

func (f *fsys) Lstat(name string) (fs.FileInfo, error) {
	p, err := f.resolve("lstat", name, false)
	if err != nil {
		return nil, err
	}
	return f.lstat(p)
}

func (f *fsys) Readlink(name string) (string, error) {
	p, err := f.resolve("readlink", name, false)
	if err != nil {
		return "", err
	}
	fi, err := f.lstat(p)
	if err != nil {
		return "", err
	}
	if fi.Mode()&fs.ModeSymlink == 0 {
		return "", &fs.PathError{Op: "readlink", Path: name, Err: errors.New("not a symbolic link")}
	}
	return f.readlinkRaw(p)
}

func (f *fsys) ReadDir(name string) ([]fs.DirEntry, error) {
	ents, _, err := f.ReadDirSkipped(name)
	return ents, err
}

// ReadDirSkipped is ReadDir that also returns the entries it leaves out:
// a name with a slash or a NUL, or a dot entry, would let a caller build a
// path that means something else (UnsafeName), so such entries are never
// returned, but callers that show or restore a directory say which.
func (f *fsys) ReadDirSkipped(name string) ([]fs.DirEntry, []Skipped, error) {
	p, err := f.resolve("readdir", name, true)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.lstat(p)
	if err != nil {
		return nil, nil, err
	}
	if !fi.IsDir() {
		return nil, nil, &fs.PathError{Op: "readdir", Path: name, Err: ErrNotDir}
	}
	ents, err := guard(f, "readdir", p, func() ([]fs.DirEntry, error) { return f.b.readDir(p) })
	if err != nil {
		return nil, nil, err
	}
	var skipped []Skipped
	out := ents[:0]
	for _, e := range ents {
		if why := UnsafeName(e.Name()); why != "" {
			skipped = append(skipped, Skipped{Dir: SlashPath(name), Name: e.Name(), Reason: why})
			continue
		}
		out = append(out, guardedEntry{e, f, p})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out, skipped, nil
}

// ReadDirSkipped reads a directory of fsys and the entries left out because
// no path can name them: the FS's own report when it keeps one (this
// package's file systems), otherwise ReadDir's entries filtered here.
func ReadDirSkipped(fsys interface {
	ReadDir(string) ([]fs.DirEntry, error)
}, name string) ([]fs.DirEntry, []Skipped, error) {
	if r, ok := fsys.(interface {
		ReadDirSkipped(string) ([]fs.DirEntry, []Skipped, error)
	}); ok {
		return r.ReadDirSkipped(name)
	}
	ents, err := fsys.ReadDir(name)
	if err != nil {
		return nil, nil, err
	}
	var skipped []Skipped
	out := make([]fs.DirEntry, 0, len(ents))
	for _, e := range ents {
		if why := UnsafeName(e.Name()); why != "" {
			skipped = append(skipped, Skipped{Dir: SlashPath(name), Name: e.Name(), Reason: why})
			continue
		}
		out = append(out, e)
	}
	return out, skipped, nil
}

// SlashPath shows a clean io/fs path ("." or "etc/ssh") as the volume's
// absolute path ("/" or "/etc/ssh").
func SlashPath(p string) string {
	p = path.Clean("/" + p)
	return p
}

// guardedEntry recovers panics in a backend's lazy DirEntry.Info.
type guardedEntry struct {
	fs.DirEntry
	f   *fsys
	dir string
}

func (g guardedEntry) Info() (fs.FileInfo, error) {
	return guard(g.f, "stat", path.Join(g.dir, g.Name()), func() (fs.FileInfo, error) { return g.DirEntry.Info() })
}

func (f *fsys) OpenFile(name string) (File, error) {
	p, err := f.resolve("open", name, true)
	if err != nil {
		return nil, err
	}
	fi, err := f.lstat(p)
	if err != nil {
		return nil, err
	}
	switch {
	case fi.IsDir():
		return nil, &fs.PathError{Op: "open", Path: name, Err: ErrIsDir}
	case !fi.Mode().IsRegular():
		return nil, &fs.PathError{Op: "open", Path: name, Err: ErrNotRegular}
	}
	fl, err := guard(f, "open", p, func() (File, error) { return f.b.open(p) })
	if err != nil {
		return nil, err
	}
	return &guardedFile{f: f, name: p, File: fl}, nil
}

// Open opens a regular file or a directory (as io/fs wants for fs.WalkDir
// and http.FS).
func (f *fsys) Open(name string) (fs.File, error) {
	fi, err := f.Stat(name)
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		return &dirFile{f: f, name: name, fi: fi}, nil
	}
	return f.OpenFile(name)
}

// guardedFile recovers panics in a backend's reads.
type guardedFile struct {
	File
	f    *fsys
	name string
	off  int64
}

func (g *guardedFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, &fs.PathError{Op: "read", Path: g.name, Err: fs.ErrInvalid}
	}
	if off >= g.Size() {
		return 0, io.EOF
	}
	type res struct {
		n   int
		err error
	}
	r, err := guard(g.f, "read", g.name, func() (res, error) {
		n, err := g.File.ReadAt(p, off)
		return res{n, err}, nil
	})
	if err != nil {
		return 0, err
	}
	if r.err != nil && r.err != io.EOF {
		if cerr := g.f.ctx.Err(); cerr != nil {
			return r.n, cerr
		}
		return r.n, &fs.PathError{Op: "read", Path: g.name, Err: r.err}
	}
	return r.n, r.err
}

// DataExtents implements Sparse.
func (g *guardedFile) DataExtents() ([][2]int64, bool) {
	s, ok := g.File.(interface{ DataExtents() [][2]int64 })
	if !ok {
		return nil, false
	}
	r, err := guard(g.f, "extents", g.name, func() ([][2]int64, error) { return s.DataExtents(), nil })
	return r, err == nil
}

func (g *guardedFile) Read(p []byte) (int, error) { return fsutil.ReadSeq(g, p, &g.off) }

type dirFile struct {
	f    *fsys
	name string
	fi   fs.FileInfo
	ents []fs.DirEntry
	read bool
}

func (d *dirFile) Stat() (fs.FileInfo, error) { return d.fi, nil }
func (d *dirFile) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.name, Err: ErrIsDir}
}
func (d *dirFile) Close() error { return nil }

func (d *dirFile) ReadDir(n int) ([]fs.DirEntry, error) {
	if !d.read {
		ents, err := d.f.ReadDir(d.name)
		if err != nil {
			return nil, err
		}
		d.ents, d.read = ents, true
	}
	if n <= 0 {
		e := d.ents
		d.ents = nil
		return e, nil
	}
	if len(d.ents) == 0 {
		return nil, io.EOF
	}
	n = min(n, len(d.ents))
	e := d.ents[:n]
	d.ents = d.ents[n:]
	return e, nil
}

func listDir(f FS, name string) ([]Entry, error) {
	readlink := f.Readlink
	if ff, ok := f.(*fsys); ok {
		// Resolve the directory once: each entry's link target is then read
		// without walking the path again (a 100,000-entry directory).
		p, err := ff.resolve("readdir", name, true)
		if err != nil {
			return nil, err
		}
		name, readlink = p, ff.readlinkRaw
	}
	ents, err := f.ReadDir(name)
	if err != nil {
		return nil, err
	}
	return entriesOf(ents, name, readlink)
}

// ListSkipped is List that also returns the entries left out because no
// path can name them (see ReadDirSkipped).
func ListSkipped(f FS, name string) ([]Entry, []Skipped, error) {
	readlink := f.Readlink
	if ff, ok := f.(*fsys); ok {
		p, err := ff.resolve("readdir", name, true)
		if err != nil {
			return nil, nil, err
		}
		readlink = ff.readlinkRaw
		ents, sk, err := ff.ReadDirSkipped(p)
		if err != nil {
			return nil, nil, err
		}
		for i := range sk {
			sk[i].Dir = SlashPath(name)
		}
		out, err := entriesOf(ents, p, readlink)
		return out, sk, err
	}
	ents, sk, err := ReadDirSkipped(f, name)
	if err != nil {
		return nil, nil, err
	}
	out, err := entriesOf(ents, name, readlink)
	return out, sk, err
}

func entriesOf(ents []fs.DirEntry, name string, readlink func(string) (string, error)) ([]Entry, error) {
	out := make([]Entry, 0, len(ents))
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path.Join(name, e.Name()), err)
		}
		en := Entry{Name: e.Name(), Type: TypeOf(fi.Mode()), Size: fi.Size(), Mtime: fi.ModTime().UTC(), Mode: fi.Mode()}
		if en.Type == "symlink" {
			if en.Target, err = readlink(path.Join(name, e.Name())); err != nil {
				return nil, err
			}
		}
		if en.Type != "file" {
			en.Size = 0
			if en.Type == "symlink" {
				en.Size = int64(len(en.Target))
			}
		}
		out = append(out, en)
	}
	return out, nil
}
