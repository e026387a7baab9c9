package guestfs

import (
	"io"
	"io/fs"

	"github.com/vmvault/vmvault/guestfs/exfat"
)

func init() {
	backends[KindExFAT] = openExFAT
	labelers[KindExFAT] = func(r io.ReaderAt, size int64) string {
		if f, err := exfat.Open(r, size); err == nil {
			return f.Label()
		}
		return ""
	}
}

type exfatBackend struct{ f *exfat.FS }

func openExFAT(r io.ReaderAt, size int64) (backend, error) {
	f, err := exfat.Open(r, size)
	if err != nil {
		return nil, err
	}
	return exfatBackend{f}, nil
}

func (b exfatBackend) lstat(p string) (fs.FileInfo, error)     { return b.f.Lstat(p) }
func (b exfatBackend) readDir(p string) ([]fs.DirEntry, error) { return b.f.ReadDir(p) }
func (b exfatBackend) readlink(p string) (string, error)       { return b.f.Readlink(p) }
func (b exfatBackend) open(p string) (File, error)             { return b.f.Open(p) }
func (b exfatBackend) close() error                            { return nil }
