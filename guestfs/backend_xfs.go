package guestfs

import (
	"io"
	"io/fs"

	"github.com/vmvault/vmvault/guestfs/xfs"
)

func init() {
	backends[KindXFS] = openXFS
}

type xfsBackend struct{ f *xfs.FS }

func openXFS(r io.ReaderAt, size int64) (backend, error) {
	f, err := xfs.Open(r, size)
	if err != nil {
		return nil, err
	}
	return xfsBackend{f}, nil
}

func (b xfsBackend) lstat(p string) (fs.FileInfo, error)     { return b.f.Lstat(p) }
func (b xfsBackend) readDir(p string) ([]fs.DirEntry, error) { return b.f.ReadDir(p) }
func (b xfsBackend) readlink(p string) (string, error)       { return b.f.Readlink(p) }
func (b xfsBackend) open(p string) (File, error)             { return b.f.Open(p) }
func (b xfsBackend) close() error                            { return nil }
