package guestfs

import (
	"io"
	"io/fs"

	"github.com/vmvault/vmvault/guestfs/fat"
)

func init() {
	backends[KindVFAT] = openFAT
}

type fatBackend struct{ f *fat.FS }

func openFAT(r io.ReaderAt, size int64) (backend, error) {
	f, err := fat.Open(r, size)
	if err != nil {
		return nil, err
	}
	return fatBackend{f}, nil
}

func (b fatBackend) lstat(p string) (fs.FileInfo, error)     { return b.f.Lstat(p) }
func (b fatBackend) readDir(p string) ([]fs.DirEntry, error) { return b.f.ReadDir(p) }
func (b fatBackend) readlink(p string) (string, error)       { return b.f.Readlink(p) }
func (b fatBackend) open(p string) (File, error)             { return b.f.Open(p) }
func (b fatBackend) close() error                            { return nil }
