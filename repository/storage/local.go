package storage

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/vmvault/vmvault/internal/failpoint"
)

var errNotExist = os.ErrNotExist

// tmpSuffix marks a staged local file (deleted by Clean).
const tmpSuffix = ".tmp"

// Local is a repository directory on a local (or NFS) file system.
type Local struct {
	dir    string
	noSync bool
}

// NewLocal returns the Local backend for dir. noSync skips fsync (tests
// only).
func NewLocal(dir string, noSync bool) *Local { return &Local{dir: dir, noSync: noSync} }

// Dir returns the directory.
func (l *Local) Dir() string { return l.dir }

func (l *Local) Location() string { return l.dir }

func (l *Local) path(name string) string { return filepath.Join(l.dir, filepath.FromSlash(name)) }

func (l *Local) Close() error { return nil }

// Put writes name via name.tmp: write, fsync, rename, fsync dir.
func (l *Local) Put(ctx context.Context, name string, r io.Reader, size int64, steps Steps) error {
	st, err := l.Create(ctx, name)
	if err != nil {
		return err
	}
	if err := hit(steps.Write); err != nil {
		st.Abort()
		return fmt.Errorf("write %s: %w", name, err)
	}
	n, err := io.Copy(st, r)
	if err == nil && n != size {
		err = fmt.Errorf("wrote %d bytes, want %d", n, size)
	}
	if err != nil {
		st.Abort()
		return fmt.Errorf("write %s: %w", name, err)
	}
	return st.Commit(ctx, steps)
}

func hit(step string) error {
	if step == "" {
		return nil
	}
	return failpoint.Hit(step)
}

type localStaged struct {
	l    *Local
	f    *os.File
	tmp  string
	path string
}

func (l *Local) Create(ctx context.Context, name string) (Staged, error) {
	p := l.path(name)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return nil, err
	}
	// A temp name of its own: two writers of one name at once (two copy
	// jobs committing the same point into one target) must not share, and
	// truncate, one staging file; each renames a complete file, the last
	// wins. Clean's patterns (*.tmp) still match it.
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := p + "." + hex.EncodeToString(rnd[:]) + tmpSuffix
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	return &localStaged{l: l, f: f, tmp: tmp, path: p}, nil
}

func (s *localStaged) Write(p []byte) (int, error) { return s.f.Write(p) }

func (s *localStaged) Abort() {
	s.f.Close()
	os.Remove(s.tmp)
}

func (s *localStaged) Commit(ctx context.Context, steps Steps) error {
	if !s.l.noSync {
		err := hit(steps.Fsync)
		if err == nil {
			err = s.f.Sync()
		}
		if err != nil {
			s.Abort()
			return fmt.Errorf("fsync %s: %w", s.tmp, err)
		}
	}
	if err := s.f.Close(); err != nil {
		os.Remove(s.tmp)
		return err
	}
	if err := hit(steps.Rename); err != nil {
		os.Remove(s.tmp)
		return fmt.Errorf("rename %s: %w", s.tmp, err)
	}
	if err := os.Rename(s.tmp, s.path); err != nil {
		os.Remove(s.tmp)
		return err
	}
	if !s.l.noSync {
		if err := hit(steps.Dirsync); err != nil {
			return fmt.Errorf("fsync dir of %s: %w", s.path, err)
		}
		return SyncDir(filepath.Dir(s.path))
	}
	return nil
}

type localObject struct {
	*os.File
	size int64
}

func (o localObject) Size() int64 { return o.size }

func (l *Local) Open(ctx context.Context, name string) (Object, error) {
	f, err := os.Open(l.path(name))
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return localObject{f, st.Size()}, nil
}

func (l *Local) GetRange(ctx context.Context, name string, off, length int64) ([]byte, error) {
	f, err := os.Open(l.path(name))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if length < 0 {
		return io.ReadAll(io.NewSectionReader(f, off, 1<<62))
	}
	b := make([]byte, length)
	n, err := f.ReadAt(b, off)
	if n == len(b) {
		return b, nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return nil, fmt.Errorf("read %s at %d: %w", name, off, err)
}

func (l *Local) Stat(ctx context.Context, name string) (int64, error) {
	st, err := os.Stat(l.path(name))
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// List walks the directory of prefix (a prefix ending in "/" names a
// directory; otherwise its parent directory is walked and filtered).
func (l *Local) List(ctx context.Context, prefix string, fn func(name string, size int64) error) error {
	root := l.dir
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		root = l.path(prefix[:i])
	}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) && p == root {
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if !d.Type().IsRegular() || strings.HasSuffix(p, tmpSuffix) {
			return nil
		}
		rel, err := filepath.Rel(l.dir, p)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		if !strings.HasPrefix(name, prefix) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			if os.IsNotExist(err) { // deleted meanwhile
				return nil
			}
			return err
		}
		return fn(name, info.Size())
	})
	return err
}

func (l *Local) Delete(ctx context.Context, name string) error {
	if err := os.Remove(l.path(name)); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}

func (l *Local) SyncDeletes(ctx context.Context, prefix string) error {
	if l.noSync {
		return nil
	}
	dir := l.dir
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		dir = l.path(prefix[:i])
	}
	return SyncDir(dir)
}

// Clean deletes staged files left by a crash.
func (l *Local) Clean(ctx context.Context) error {
	for _, p := range []string{"packs/*/*" + tmpSuffix, "points/*" + tmpSuffix, "holds/*" + tmpSuffix, "appconfig/*" + tmpSuffix, "keys/*" + tmpSuffix, "*" + tmpSuffix} {
		m, err := filepath.Glob(filepath.Join(l.dir, filepath.FromSlash(p)))
		if err != nil {
			return err
		}
		for _, f := range m {
			if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
				return err
			}
		}
	}
	return nil
}

// SyncDir fsyncs a directory (a rename or unlink in it becomes durable).
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync dir %s: %w", dir, err)
	}
	return nil
}

// PutBytes is Put for an in-memory object.
func PutBytes(ctx context.Context, s Storage, name string, b []byte, steps Steps) error {
	return s.Put(ctx, name, bytes.NewReader(b), int64(len(b)), steps)
}

// ReadAll reads a whole object.
func ReadAll(ctx context.Context, s Storage, name string) ([]byte, error) {
	return s.GetRange(ctx, name, 0, -1)
}
