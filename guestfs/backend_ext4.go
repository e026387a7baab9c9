package guestfs

import (
	"io"
	"io/fs"

	"github.com/vmvault/vmvault/guestfs/ext4"
)

func init() {
	for _, k := range []string{KindExt2, KindExt3, KindExt4} {
		backends[k] = openExt4
	}
}

type ext4Backend struct{ f *ext4.FS }

func openExt4(r io.ReaderAt, size int64) (backend, error) {
	f, err := ext4.Open(r, size)
	if err != nil {
		return nil, err
	}
	return ext4Backend{f}, nil
}

func (b ext4Backend) lstat(p string) (fs.FileInfo, error)     { return b.f.Lstat(p) }
func (b ext4Backend) readDir(p string) ([]fs.DirEntry, error) { return b.f.ReadDir(p) }
func (b ext4Backend) readlink(p string) (string, error)       { return b.f.Readlink(p) }
func (b ext4Backend) open(p string) (File, error)             { return b.f.Open(p) }
func (b ext4Backend) close() error                            { return nil }
