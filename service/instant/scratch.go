package instant

import (
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	billy "github.com/go-git/go-billy/v5"
)

// Scratch files are what a hypervisor creates beside the disks of a VM it
// runs from the export: ESXi's NFS v3 lock files (.lck-*), vmware.log,
// the .nvram, the swap file. They are plain files in the session's
// directory (scratch/), never in the repository, created, written,
// renamed and removed freely within limits; the point's own files stay
// as they are (no scratch file may take one of their names).
//
// A scratch file's handle index is derived from its name (the top bit
// set, so it never meets a point file's index): handles stay valid across
// a restart of the appliance without a table on disk. A rename therefore
// gives the file a new handle; clients look names up again after a
// rename, as after any namespace change.

// ErrScratchFull: too many scratch files or bytes in one session.
var ErrScratchFull = fmt.Errorf("scratch space of the export is full: %w", syscall.ENOSPC)

const (
	// DefaultScratchLimit caps the bytes the scratch files of a session
	// hold on disk (allocated, not their apparent size: a swap file is
	// sparse until the guest swaps).
	DefaultScratchLimit = 4 << 30
	maxScratchFiles     = 1024
	maxScratchName      = 255
	scratchBit          = 1 << 31
)

type scratchDir struct {
	dir   string
	limit int64
	used  atomic.Int64 // allocated bytes of every scratch file

	mu     sync.Mutex
	byName map[string]uint32
	byIdx  map[uint32]string
	taken  func(string) bool // a point file's name
}

func openScratch(dir string, limit int64, taken func(string) bool) (*scratchDir, error) {
	if limit == 0 {
		limit = DefaultScratchLimit
	}
	sd := &scratchDir{dir: dir, limit: limit, byName: map[string]uint32{}, byIdx: map[uint32]string{}, taken: taken}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("scratch directory: %w", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("scratch directory: %w", err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() || validScratchName(e.Name()) != nil || taken(e.Name()) {
			continue // not ours to serve; Remove leaves it for an operator
		}
		if _, err := sd.register(e.Name()); err != nil {
			return nil, err
		}
		if fi, err := e.Info(); err == nil {
			sd.used.Add(allocated(fi))
		}
	}
	return sd, nil
}

func validScratchName(n string) error {
	if n == "" || n == "." || n == ".." || len(n) > maxScratchName || strings.ContainsAny(n, "/\x00\\") {
		return &os.PathError{Op: "create", Path: n, Err: os.ErrInvalid}
	}
	return nil
}

func scratchIdx(name string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(name))
	return h.Sum32() | scratchBit
}

// register adds name; the caller holds mu or is single-threaded.
func (sd *scratchDir) register(name string) (uint32, error) {
	idx := scratchIdx(name)
	if other, ok := sd.byIdx[idx]; ok && other != name {
		// Two names, one 31-bit hash: refuse the second rather than let
		// one handle name two files.
		return 0, &os.PathError{Op: "create", Path: name, Err: os.ErrExist}
	}
	sd.byName[name], sd.byIdx[idx] = idx, name
	return idx, nil
}

func (sd *scratchDir) path(name string) string { return filepath.Join(sd.dir, name) }

func (sd *scratchDir) lookup(name string) (uint32, bool) {
	sd.mu.Lock()
	defer sd.mu.Unlock()
	idx, ok := sd.byName[name]
	return idx, ok
}

func (sd *scratchDir) nameOf(idx uint32) (string, bool) {
	sd.mu.Lock()
	defer sd.mu.Unlock()
	n, ok := sd.byIdx[idx]
	return n, ok
}

func (sd *scratchDir) names() []string {
	sd.mu.Lock()
	defer sd.mu.Unlock()
	out := make([]string, 0, len(sd.byName))
	for n := range sd.byName {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func allocated(fi os.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return fi.Size()
}

// open opens (and with O_CREATE creates) a scratch file.
func (sd *scratchDir) open(name string, flag int, perm os.FileMode) (billy.File, error) {
	sd.mu.Lock()
	_, exists := sd.byName[name]
	if !exists {
		if flag&os.O_CREATE == 0 {
			sd.mu.Unlock()
			return nil, &os.PathError{Op: "open", Path: name, Err: os.ErrNotExist}
		}
		if err := validScratchName(name); err != nil {
			sd.mu.Unlock()
			return nil, err
		}
		if len(sd.byName) >= maxScratchFiles {
			sd.mu.Unlock()
			return nil, ErrScratchFull
		}
		if _, err := sd.register(name); err != nil {
			sd.mu.Unlock()
			return nil, err
		}
	}
	f, err := os.OpenFile(sd.path(name), flag|syscall.O_NOFOLLOW, perm&0o666|0o600)
	if err != nil {
		if !exists {
			idx := sd.byName[name]
			delete(sd.byName, name)
			delete(sd.byIdx, idx)
		}
		sd.mu.Unlock()
		return nil, err
	}
	sd.mu.Unlock()
	sf := &scratchFile{sd: sd, f: f, name: name}
	if fi, err := f.Stat(); err == nil {
		sf.alloc = allocated(fi)
	}
	return sf, nil
}

func (sd *scratchDir) stat(name string) (os.FileInfo, error) {
	if _, ok := sd.lookup(name); !ok {
		return nil, &os.PathError{Op: "stat", Path: name, Err: os.ErrNotExist}
	}
	fi, err := os.Lstat(sd.path(name))
	if err != nil {
		return nil, err
	}
	return scratchInfo{FileInfo: fi, idx: scratchIdx(name)}, nil
}

func (sd *scratchDir) remove(name string) error {
	sd.mu.Lock()
	defer sd.mu.Unlock()
	idx, ok := sd.byName[name]
	if !ok {
		return &os.PathError{Op: "remove", Path: name, Err: os.ErrNotExist}
	}
	fi, _ := os.Lstat(sd.path(name))
	if err := os.Remove(sd.path(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if fi != nil {
		sd.used.Add(-allocated(fi))
	}
	delete(sd.byName, name)
	delete(sd.byIdx, idx)
	return nil
}

func (sd *scratchDir) rename(from, to string) error {
	if err := validScratchName(to); err != nil {
		return err
	}
	if sd.taken(to) {
		return errReadOnly
	}
	sd.mu.Lock()
	defer sd.mu.Unlock()
	idx, ok := sd.byName[from]
	if !ok {
		return &os.PathError{Op: "rename", Path: from, Err: os.ErrNotExist}
	}
	if from == to {
		return nil
	}
	newIdx := scratchIdx(to)
	if other, ok := sd.byIdx[newIdx]; ok && other != to {
		return &os.PathError{Op: "rename", Path: to, Err: os.ErrExist}
	}
	if old, ok := sd.byName[to]; ok {
		if fi, err := os.Lstat(sd.path(to)); err == nil {
			sd.used.Add(-allocated(fi))
		}
		delete(sd.byIdx, old)
	}
	if err := os.Rename(sd.path(from), sd.path(to)); err != nil {
		return err
	}
	delete(sd.byName, from)
	delete(sd.byIdx, idx)
	sd.byName[to], sd.byIdx[newIdx] = newIdx, to
	return nil
}

// removeAll deletes every scratch file and the directory (session end).
func (sd *scratchDir) removeAll() error {
	sd.mu.Lock()
	defer sd.mu.Unlock()
	var errs []error
	for n := range sd.byName {
		if err := os.Remove(sd.path(n)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	sd.byName, sd.byIdx = map[string]uint32{}, map[uint32]string{}
	if err := os.Remove(sd.dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("scratch directory not removed: %w", err))
	}
	return errors.Join(errs...)
}

type scratchInfo struct {
	os.FileInfo
	idx uint32
}

func (i scratchInfo) Mode() os.FileMode { return i.FileInfo.Mode() & (os.ModeType | 0o666) }

func (i scratchInfo) Sys() any {
	return nfsFileInfo(1, uint64(i.idx)+1)
}

// scratchFile is an open scratch file. Writes are checked against the
// session's scratch limit by the file's allocated bytes, and made durable
// before they are answered (go-nfs answers every WRITE as FILE_SYNC).
type scratchFile struct {
	sd    *scratchDir
	f     *os.File
	name  string
	mu    sync.Mutex
	alloc int64
}

func (s *scratchFile) Name() string { return s.name }

func (s *scratchFile) account() {
	if fi, err := s.f.Stat(); err == nil {
		a := allocated(fi)
		s.sd.used.Add(a - s.alloc)
		s.alloc = a
	}
}

func (s *scratchFile) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sd.used.Load()+int64(len(p)) > s.sd.limit {
		return 0, ErrScratchFull
	}
	n, err := s.f.Write(p)
	s.account()
	if err == nil {
		err = s.f.Sync()
	}
	return n, err
}

func (s *scratchFile) Read(p []byte) (int, error)                { return s.f.Read(p) }
func (s *scratchFile) ReadAt(p []byte, off int64) (int, error)   { return s.f.ReadAt(p, off) }
func (s *scratchFile) Seek(off int64, whence int) (int64, error) { return s.f.Seek(off, whence) }
func (s *scratchFile) Close() error                              { return s.f.Close() }
func (s *scratchFile) Lock() error                               { return nil }
func (s *scratchFile) Unlock() error                             { return nil }

// Truncate sets the apparent size (a sparse swap file costs nothing until
// written); shrinking frees what it held.
func (s *scratchFile) Truncate(size int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if size < 0 {
		return os.ErrInvalid
	}
	err := s.f.Truncate(size)
	s.account()
	return err
}

func (sd *scratchDir) chtimes(name string, mtime time.Time) error {
	if _, ok := sd.lookup(name); !ok {
		return &os.PathError{Op: "chtimes", Path: name, Err: os.ErrNotExist}
	}
	return os.Chtimes(sd.path(name), mtime, mtime)
}

func (sd *scratchDir) chmod(name string, mode os.FileMode) error {
	if _, ok := sd.lookup(name); !ok {
		return &os.PathError{Op: "chmod", Path: name, Err: os.ErrNotExist}
	}
	return os.Chmod(sd.path(name), mode&0o666|0o600)
}
