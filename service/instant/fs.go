package instant

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	billy "github.com/go-git/go-billy/v5"
	nfsfile "github.com/willscott/go-nfs/file"

	"github.com/vmvault/vmvault/internal/clock"
)

// exportFS is a session as the billy.Filesystem go-nfs serves: one flat
// directory; the point's files are never created, removed or renamed,
// other names are scratch files (scratch.go).
type exportFS struct{ s *Session }

var errReadOnly = &os.PathError{Op: "write", Path: "export", Err: os.ErrPermission}

func (f *exportFS) node(name string) (*node, error) {
	n := f.s.lookup(name)
	if n == nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: os.ErrNotExist}
	}
	return n, nil
}

// Capabilities: writable (the -flat files), no truncation or locks.
func (f *exportFS) Capabilities() billy.Capability {
	return billy.WriteCapability | billy.ReadCapability | billy.ReadAndWriteCapability | billy.SeekCapability
}

func (f *exportFS) Create(name string) (billy.File, error) {
	return f.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
}

func (f *exportFS) Open(name string) (billy.File, error) { return f.OpenFile(name, os.O_RDONLY, 0) }

func (f *exportFS) OpenFile(name string, flag int, perm os.FileMode) (billy.File, error) {
	n, err := f.node(name)
	if err != nil {
		return f.s.scratch.open(strings.TrimPrefix(name, "/"), flag, perm)
	}
	if n.dir {
		return nil, &os.PathError{Op: "open", Path: name, Err: errors.New("is a directory")}
	}
	write := flag&(os.O_WRONLY|os.O_RDWR) != 0
	if (write && n.disk == nil) || flag&(os.O_TRUNC|os.O_APPEND) != 0 || flag&(os.O_CREATE|os.O_EXCL) == os.O_CREATE|os.O_EXCL {
		return nil, errReadOnly
	}
	return &openFile{n: n, write: write, clk: f.s.clk}, nil
}

func (f *exportFS) Stat(name string) (os.FileInfo, error) {
	n, err := f.node(name)
	if err != nil {
		return f.s.scratch.stat(strings.TrimPrefix(name, "/"))
	}
	return info{n: n, mod: f.s.mod}, nil
}

func (f *exportFS) Lstat(name string) (os.FileInfo, error) { return f.Stat(name) }

func (f *exportFS) Rename(from, to string) error {
	if f.s.lookup(from) != nil {
		return errReadOnly
	}
	return f.s.scratch.rename(strings.TrimPrefix(from, "/"), strings.TrimPrefix(to, "/"))
}

func (f *exportFS) Remove(name string) error {
	if f.s.lookup(name) != nil {
		return errReadOnly
	}
	return f.s.scratch.remove(strings.TrimPrefix(name, "/"))
}

func (f *exportFS) Join(elem ...string) string { return strings.Join(elem, "/") }

func (f *exportFS) TempFile(string, string) (billy.File, error) { return nil, errReadOnly }

func (f *exportFS) ReadDir(name string) ([]os.FileInfo, error) {
	n, err := f.node(name)
	if err != nil {
		return nil, err
	}
	if !n.dir {
		return nil, &os.PathError{Op: "readdir", Path: name, Err: errors.New("not a directory")}
	}
	var out []os.FileInfo
	for _, c := range f.s.nodes[1:] {
		out = append(out, info{n: c, mod: f.s.mod})
	}
	for _, name := range f.s.scratch.names() {
		if fi, err := f.s.scratch.stat(name); err == nil {
			out = append(out, fi)
		}
	}
	return out, nil
}

func (f *exportFS) MkdirAll(string, os.FileMode) error { return errReadOnly }
func (f *exportFS) Symlink(string, string) error       { return errReadOnly }
func (f *exportFS) Readlink(name string) (string, error) {
	return "", &os.PathError{Op: "readlink", Path: name, Err: os.ErrInvalid}
}
func (f *exportFS) Chroot(string) (billy.Filesystem, error) { return nil, errReadOnly }
func (f *exportFS) Root() string                            { return "/" }

type info struct {
	n   *node
	mod time.Time
}

func (i info) Name() string {
	if i.n.dir {
		return "/"
	}
	return i.n.name
}
func (i info) Size() int64 {
	if i.n.dir {
		return 4096
	}
	return i.n.size
}
func (i info) Mode() fs.FileMode {
	switch {
	case i.n.dir:
		return fs.ModeDir | 0o755
	case i.n.disk != nil:
		return 0o644
	}
	return 0o444
}
func (i info) ModTime() time.Time {
	if ns := i.n.mtime.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return i.mod
}
func (i info) IsDir() bool { return i.n.dir }
func (i info) Sys() any {
	nlink := uint32(1)
	if i.n.dir {
		nlink = 2
	}
	return nfsFileInfo(nlink, uint64(i.n.idx)+1)
}

func nfsFileInfo(nlink uint32, id uint64) any { return &nfsfile.FileInfo{Nlink: nlink, Fileid: id} }

func (n *node) readAt(p []byte, off int64) (int, error) {
	if n.disk != nil {
		return n.disk.ReadAt(p, off)
	}
	if off < 0 {
		return 0, os.ErrInvalid
	}
	if off >= int64(len(n.content)) {
		return 0, io.EOF
	}
	c := copy(p, n.content[off:])
	if c < len(p) {
		return c, io.EOF
	}
	return c, nil
}

// openFile is an open file of the export.
type openFile struct {
	clk   clock.Clock
	n     *node
	write bool
	pos   int64
}

func (o *openFile) Name() string { return o.n.name }

func (o *openFile) ReadAt(p []byte, off int64) (int, error) { return o.n.readAt(p, off) }

func (o *openFile) Read(p []byte) (int, error) {
	c, err := o.n.readAt(p, o.pos)
	o.pos += int64(c)
	return c, err
}

// Write writes at the position, durably: go-nfs answers every WRITE as
// FILE_SYNC.
func (o *openFile) Write(p []byte) (int, error) {
	if !o.write || o.n.disk == nil {
		return 0, errReadOnly
	}
	c, err := o.n.disk.ov.WriteAtSync(p, o.pos)
	o.pos += int64(c)
	if c > 0 {
		o.n.mtime.Store(o.clk.Now().UnixNano())
	}
	return c, err
}

func (o *openFile) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		off += o.pos
	case io.SeekEnd:
		off += o.n.size
	default:
		return 0, os.ErrInvalid
	}
	if off < 0 {
		return 0, os.ErrInvalid
	}
	o.pos = off
	return off, nil
}

func (o *openFile) Close() error  { return nil }
func (o *openFile) Lock() error   { return nil }
func (o *openFile) Unlock() error { return nil }

// Truncate to the current size is a no-op (clients send it); any other
// size is refused: the disk's size is the point's.
func (o *openFile) Truncate(size int64) error {
	if size == o.n.size {
		return nil
	}
	return errReadOnly
}

// change is the billy.Change of an export: the times of the writable
// files may be set (clients touch what they write); modes and owners are
// fixed.
type change struct{ s *Session }

func (c change) Chmod(name string, mode os.FileMode) error {
	if c.s.lookup(name) != nil {
		return errReadOnly
	}
	return c.s.scratch.chmod(strings.TrimPrefix(name, "/"), mode)
}
func (c change) Lchown(string, int, int) error { return errReadOnly }
func (c change) Chown(string, int, int) error  { return errReadOnly }
func (c change) Chtimes(name string, _, mtime time.Time) error {
	n := c.s.lookup(name)
	if n == nil {
		return c.s.scratch.chtimes(strings.TrimPrefix(name, "/"), mtime)
	}
	if n.disk == nil {
		return errReadOnly
	}
	n.mtime.Store(mtime.UnixNano())
	return nil
}
