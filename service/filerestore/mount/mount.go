// Package mount serves restore-point volumes as a read-only FUSE file
// system (github.com/hanwen/go-fuse/v2), one top-level directory per
// volume ID, for administrators who prefer cp and grep. Everything goes
// through guestfs.FS, so links resolve inside their volume and damaged file
// systems give EIO for the file concerned.
package mount

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"path"
	"sort"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/vmvault/vmvault/guestfs"
)

// Mount mounts vols (volume ID -> open file system) read-only at dir. The
// caller unmounts with the server's Unmount and then closes the volumes.
func Mount(dir string, vols map[string]guestfs.FS) (*fuse.Server, error) {
	root := &node{vols: vols}
	ttl := time.Hour // a restore point never changes
	return gofs.Mount(dir, root, &gofs.Options{
		EntryTimeout: &ttl, AttrTimeout: &ttl,
		MountOptions: fuse.MountOptions{FsName: "vmvault", Name: "vmvault", Options: []string{"ro"}, MaxReadAhead: 1 << 20},
	})
}

type node struct {
	gofs.Inode
	vols map[string]guestfs.FS // the top directory only
	fsys guestfs.FS
	path string
}

var (
	_ gofs.NodeLookuper   = (*node)(nil)
	_ gofs.NodeReaddirer  = (*node)(nil)
	_ gofs.NodeGetattrer  = (*node)(nil)
	_ gofs.NodeReadlinker = (*node)(nil)
	_ gofs.NodeOpener     = (*node)(nil)
)

func errno(err error) syscall.Errno {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, guestfs.ErrNotExist), errors.Is(err, guestfs.ErrBadPath):
		return syscall.ENOENT
	case errors.Is(err, guestfs.ErrNotDir):
		return syscall.ENOTDIR
	case errors.Is(err, guestfs.ErrIsDir):
		return syscall.EISDIR
	case errors.Is(err, guestfs.ErrLinkLoop):
		return syscall.ELOOP
	case errors.Is(err, context.Canceled):
		return syscall.EINTR
	}
	return syscall.EIO
}

func unixType(m fs.FileMode) uint32 {
	switch {
	case m.IsDir():
		return syscall.S_IFDIR
	case m&fs.ModeSymlink != 0:
		return syscall.S_IFLNK
	case m.IsRegular():
		return syscall.S_IFREG
	case m&fs.ModeNamedPipe != 0:
		return syscall.S_IFIFO
	case m&fs.ModeSocket != 0:
		return syscall.S_IFSOCK
	case m&fs.ModeCharDevice != 0:
		return syscall.S_IFCHR
	case m&fs.ModeDevice != 0:
		return syscall.S_IFBLK
	}
	return syscall.S_IFREG
}

func fill(fi fs.FileInfo, a *fuse.Attr) {
	m := fi.Mode()
	a.Mode = unixType(m) | guestfs.UnixPerm(m)
	a.Size = uint64(max(fi.Size(), 0))
	a.Blocks = (a.Size + 511) / 512
	a.Nlink = 1
	a.SetTimes(nil, ptr(fi.ModTime()), ptr(fi.ModTime()))
}

func ptr[T any](v T) *T { return &v }

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if n.fsys == nil {
		v, ok := n.vols[name]
		if !ok {
			return nil, syscall.ENOENT
		}
		fi, err := v.Lstat(".")
		if err != nil {
			return nil, errno(err)
		}
		fill(fi, &out.Attr)
		return n.NewInode(ctx, &node{fsys: v, path: "."}, gofs.StableAttr{Mode: syscall.S_IFDIR}), 0
	}
	p := path.Join(n.path, name)
	fi, err := n.fsys.Lstat(p)
	if err != nil {
		return nil, errno(err)
	}
	fill(fi, &out.Attr)
	return n.NewInode(ctx, &node{fsys: n.fsys, path: p}, gofs.StableAttr{Mode: unixType(fi.Mode())}), 0
}

func (n *node) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	var out []fuse.DirEntry
	if n.fsys == nil {
		for id := range n.vols {
			out = append(out, fuse.DirEntry{Name: id, Mode: syscall.S_IFDIR})
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
		return gofs.NewListDirStream(out), 0
	}
	ents, err := n.fsys.ReadDir(n.path)
	if err != nil {
		return nil, errno(err)
	}
	for _, e := range ents {
		out = append(out, fuse.DirEntry{Name: e.Name(), Mode: unixType(e.Type())})
	}
	return gofs.NewListDirStream(out), 0
}

func (n *node) Getattr(ctx context.Context, f gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if n.fsys == nil {
		out.Mode = syscall.S_IFDIR | 0o555
		return 0
	}
	fi, err := n.fsys.Lstat(n.path)
	if err != nil {
		return errno(err)
	}
	fill(fi, &out.Attr)
	return 0
}

func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	if n.fsys == nil {
		return nil, syscall.EINVAL
	}
	t, err := n.fsys.Readlink(n.path)
	if err != nil {
		return nil, errno(err)
	}
	return []byte(t), 0
}

func (n *node) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if n.fsys == nil {
		return nil, 0, syscall.EISDIR
	}
	if flags&(syscall.O_WRONLY|syscall.O_RDWR|syscall.O_TRUNC|syscall.O_APPEND) != 0 {
		return nil, 0, syscall.EROFS
	}
	f, err := n.fsys.OpenFile(n.path)
	if err != nil {
		return nil, 0, errno(err)
	}
	return &handle{f: f}, fuse.FOPEN_KEEP_CACHE, 0
}

type handle struct{ f guestfs.File }

var (
	_ gofs.FileReader   = (*handle)(nil)
	_ gofs.FileReleaser = (*handle)(nil)
)

func (h *handle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	n, err := h.f.ReadAt(dest, off)
	if err != nil && err != io.EOF {
		return nil, errno(err)
	}
	return fuse.ReadResultData(dest[:n]), 0
}

func (h *handle) Release(ctx context.Context) syscall.Errno {
	h.f.Close()
	return 0
}
