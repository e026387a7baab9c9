// Package fsutil owns the plumbing that guestfs's file system readers (ext4,
// xfs, fat, ntfs and the guarded io/fs view) share: sequential reads on top
// of ReadAt, io/fs path errors and names, path walks and sorted listings. It
// keeps one copy of each so the readers cannot drift apart in how they
// report EOF, errors or order.
package fsutil

import (
	"fmt"
	"io"
	"io/fs"
	"sort"
	"strings"
)

// ReadSeq implements io.Reader.Read for a file that has ReadAt: it reads at
// *off, advances *off by what was read and, as io.Reader wants, reports a
// short final read without io.EOF (the next call returns it).
func ReadSeq(r io.ReaderAt, p []byte, off *int64) (int, error) {
	n, err := r.ReadAt(p, *off)
	*off += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

// PathErr wraps err as an *fs.PathError, as io/fs callers expect.
func PathErr(op, name string, err error) error {
	return &fs.PathError{Op: op, Path: name, Err: err}
}

// BaseName is the last element of a clean io/fs path ("." for the root).
func BaseName(p string) string {
	if p == "." || p == "" {
		return "."
	}
	return p[strings.LastIndexByte(p, '/')+1:]
}

// Walk resolves a clean io/fs path from root one element at a time with
// step, following no links; isDir says whether a node may be stepped into.
func Walk[N any](root N, name string, isDir func(N) bool, step func(dir N, elem string) (N, error)) (N, error) {
	if name == "." {
		return root, nil
	}
	in := root
	for _, c := range strings.Split(name, "/") {
		if !isDir(in) {
			var zero N
			return zero, fmt.Errorf("%s: not a directory", name)
		}
		next, err := step(in, c)
		if err != nil {
			var zero N
			return zero, err
		}
		in = next
	}
	return in, nil
}

// SortedEntries returns ents as fs.DirEntry values sorted by name, the order
// fs.ReadDirFS promises.
func SortedEntries[E fs.DirEntry](ents []E) []fs.DirEntry {
	out := make([]fs.DirEntry, len(ents))
	for i, e := range ents {
		out[i] = e
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}

// FIFOPut stores v under k in the cache m and, once order holds limit keys,
// first drops the oldest: the bounded metadata and listing caches of the
// readers. The caller holds the lock that guards m and order.
func FIFOPut[K comparable, V any](m map[K]V, order *[]K, limit int, k K, v V) {
	if len(*order) >= limit {
		delete(m, (*order)[0])
		*order = (*order)[1:]
	}
	m[k] = v
	*order = append(*order, k)
}

// ID is what every reader's fs.FileInfo.Sys returns: the file's identity
// inside its volume (the inode number on ext4 and XFS, the MFT record on
// NTFS, the first cluster of a FAT directory). Two paths with one ID are
// one directory reached twice — a hard link to a directory, or a loop a
// hostile image planted — which is how a tree walk knows where to stop.
type ID uint64
