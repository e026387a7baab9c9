package state

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"io"
	"os"
	"runtime/debug"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// state.db is not rebuildable (users, tokens, jobs, run history live only
// there), so it is checked before the daemon trusts it, and the check must
// survive any file: bbolt trusts its pages and panics, or faults on an
// address past the mapping, when they are garbage. Three layers keep that
// from ever reaching the daemon:
//
//  1. precheck reads the meta pages and the freelist with plain reads and
//     refuses what bbolt would act on blindly (a short file, a freelist
//     whose count would be allocated, pages past the end).
//  2. Everything that then touches the mapping runs under guard: panics are
//     recovered and memory faults become panics (debug.SetPanicOnFault).
//  3. walk reads every bucket, key and value through bbolt in the caller's
//     goroutine, so that tx.Check, which runs in a goroutine of bbolt's own
//     where nothing can be recovered, only ever sees pages already read.

// bbolt's on-disk constants (go.etcd.io/bbolt/internal/common), checked by
// precheck before bbolt maps the file.
const (
	boltMagic        = 0xED0CDAED
	boltVersion      = 2
	boltPageHeader   = 16
	boltBranchFlag   = 0x01
	boltLeafFlag     = 0x02
	boltMetaFlag     = 0x04
	boltFreelistFlag = 0x10
	boltBucketLeaf   = 0x01 // leaf element flag: the value is a bucket
	boltElement      = 16   // size of a branch or leaf element header
	boltNoFreelist   = ^uint64(0)
)

// guard runs fn, turning a panic or a memory fault inside it into an error.
func guard(fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("bbolt failed reading it: %v", r)
		}
	}()
	return fn()
}

type boltMeta struct {
	pageSize uint32
	root     uint64
	freelist uint64
	pgid     uint64
	txid     uint64
}

// parseMeta decodes and validates a meta page as bbolt does (magic, version,
// FNV-64a checksum of the fields before it). bbolt writes them in the host's
// byte order; vmvault runs on little-endian hosts only.
func parseMeta(page []byte) (boltMeta, error) {
	if len(page) < boltPageHeader+64 {
		return boltMeta{}, errors.New("meta page cut short")
	}
	m := page[boltPageHeader:]
	le := binary.LittleEndian
	if le.Uint32(m[0:]) != boltMagic {
		return boltMeta{}, errors.New("not a bbolt file (bad magic)")
	}
	if v := le.Uint32(m[4:]); v != boltVersion {
		return boltMeta{}, fmt.Errorf("bbolt version %d, want %d", v, boltVersion)
	}
	h := fnv.New64a()
	h.Write(m[:56])
	if h.Sum64() != le.Uint64(m[56:]) {
		return boltMeta{}, errors.New("meta page checksum mismatch")
	}
	return boltMeta{pageSize: le.Uint32(m[8:]), root: le.Uint64(m[16:]), freelist: le.Uint64(m[32:]), pgid: le.Uint64(m[40:]), txid: le.Uint64(m[48:])}, nil
}

// precheck refuses a file that bbolt would crash on rather than report:
// it finds the meta page bbolt will use and checks that every page it
// names, and the freelist's length, lie inside the file.
func precheck(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	readAt := func(off int64, n int) ([]byte, error) {
		buf := make([]byte, n)
		m, err := f.ReadAt(buf, off)
		if err != nil && !(errors.Is(err, io.EOF) && m == n) {
			return nil, err
		}
		return buf, nil
	}
	// bbolt takes the page size from meta 0, else from a meta 1 found at
	// 1 KiB << i; both metas are then read at that page size.
	var metas []boltMeta
	var problems []string
	first, err := readAt(0, 0x1000)
	if err != nil {
		return fmt.Errorf("file of %d bytes is too short for a bbolt database", size)
	}
	m0, err0 := parseMeta(first)
	ps := int64(0)
	if err0 == nil {
		ps = int64(m0.pageSize)
	} else {
		problems = append(problems, "meta page 0: "+err0.Error())
		for i := 0; i <= 14 && ps == 0; i++ {
			pos := int64(1024) << i
			if pos >= size-1024 {
				break
			}
			b, err := readAt(pos, int(min(0x1000, size-pos)))
			if err != nil {
				continue
			}
			if m, err := parseMeta(b); err == nil {
				ps = int64(m.pageSize)
			}
		}
	}
	if ps < 1024 || ps > 16<<20 || ps&(ps-1) != 0 {
		if ps == 0 {
			return fmt.Errorf("no valid meta page (%s)", problems[0])
		}
		return fmt.Errorf("meta page gives page size %d", ps)
	}
	if err0 == nil {
		metas = append(metas, m0)
	}
	if b, err := readAt(ps, int(min(ps, 0x1000))); err == nil {
		if m1, err := parseMeta(b); err == nil {
			metas = append(metas, m1)
		} else {
			problems = append(problems, "meta page 1: "+err.Error())
		}
	}
	if len(metas) == 0 {
		return fmt.Errorf("no valid meta page (%v)", problems)
	}
	// bbolt uses the newest valid meta page.
	m := metas[0]
	if len(metas) == 2 && metas[1].txid > m.txid {
		m = metas[1]
	}
	if int64(m.pageSize) != ps {
		return fmt.Errorf("meta pages disagree on the page size (%d, %d)", m.pageSize, ps)
	}
	pages := size / ps
	if m.pgid < 3 || m.pgid > uint64(pages) {
		return fmt.Errorf("truncated or damaged: the meta page names %d pages of %d bytes, the file holds %d bytes", m.pgid, ps, size)
	}
	// tx.Check reads both meta pages' headers, whichever is in use.
	for id := range int64(2) {
		hdr, err := readAt(id*ps, boltPageHeader)
		if err != nil {
			return fmt.Errorf("read meta page %d: %w", id, err)
		}
		if got, flags := binary.LittleEndian.Uint64(hdr), binary.LittleEndian.Uint16(hdr[8:]); got != uint64(id) || flags != boltMetaFlag {
			return fmt.Errorf("meta page %d has id %d, flags %#x", id, got, flags)
		}
	}
	w := &treeWalker{f: f, ps: ps, pgid: m.pgid, seen: map[uint64]bool{}}
	if err := w.page(m.root, 0); err != nil {
		return err
	}
	if m.freelist == boltNoFreelist {
		return nil
	}
	if m.freelist < 2 || m.freelist >= m.pgid {
		return fmt.Errorf("freelist page %d outside the file's %d pages", m.freelist, m.pgid)
	}
	hdr, err := readAt(int64(m.freelist)*ps, boltPageHeader+8)
	if err != nil {
		return fmt.Errorf("read freelist page %d: %w", m.freelist, err)
	}
	le := binary.LittleEndian
	if id, flags := le.Uint64(hdr[0:]), le.Uint16(hdr[8:]); id != m.freelist || flags != boltFreelistFlag {
		return fmt.Errorf("freelist page %d has id %d, flags %#x", m.freelist, id, flags)
	}
	count, overflow := uint64(le.Uint16(hdr[10:])), uint64(le.Uint32(hdr[12:]))
	if m.freelist+overflow >= m.pgid {
		return fmt.Errorf("freelist page %d overflows past page %d", m.freelist, m.pgid)
	}
	extra := uint64(0)
	if count == 0xFFFF {
		count, extra = le.Uint64(hdr[16:]), 1
	}
	if span := (overflow + 1) * uint64(ps); count > span/8 || boltPageHeader+(count+extra)*8 > span {
		return fmt.Errorf("freelist page %d lists %d pages, more than it can hold", m.freelist, count)
	}
	ids, err := readAt(int64(m.freelist)*ps+boltPageHeader+int64(extra*8), int(count*8))
	if err != nil {
		return fmt.Errorf("read freelist: %w", err)
	}
	for i := uint64(0); i < count; i++ {
		if id := le.Uint64(ids[i*8:]); id < 2 || id >= m.pgid {
			return fmt.Errorf("freelist names page %d outside the file's %d pages", id, m.pgid)
		}
	}
	return nil
}

// treeWalker checks the B+tree's structure from the file's bytes, with
// bounds-checked slices: every page reachable from the root bucket (and
// its sub-buckets, inline ones included) lies inside the file, is named
// once, says what it is, and has its elements, keys and values inside it.
// bbolt and tx.Check then follow only pointers checked here: tx.Check
// recurses without a cycle check and reads keys in a goroutine where a
// fault cannot be recovered.
type treeWalker struct {
	f     *os.File
	ps    int64
	pgid  uint64
	seen  map[uint64]bool
	pages int
}

const maxTreeDepth = 64

func (w *treeWalker) page(id uint64, depth int) error {
	if depth > maxTreeDepth {
		return fmt.Errorf("page %d: tree deeper than %d", id, maxTreeDepth)
	}
	if id < 2 || id >= w.pgid {
		return fmt.Errorf("page %d referenced, outside the file's %d pages", id, w.pgid)
	}
	hdr := make([]byte, boltPageHeader)
	if _, err := w.f.ReadAt(hdr, int64(id)*w.ps); err != nil {
		return fmt.Errorf("read page %d: %w", id, err)
	}
	le := binary.LittleEndian
	overflow := uint64(le.Uint32(hdr[12:]))
	if got := le.Uint64(hdr); got != id {
		return fmt.Errorf("page %d identifies itself as page %d", id, got)
	}
	if id+overflow >= w.pgid {
		return fmt.Errorf("page %d overflows past the file's %d pages", id, w.pgid)
	}
	for i := id; i <= id+overflow; i++ {
		if w.seen[i] {
			return fmt.Errorf("page %d referenced twice", i)
		}
		w.seen[i] = true
	}
	buf := make([]byte, (overflow+1)*uint64(w.ps))
	if _, err := w.f.ReadAt(buf, int64(id)*w.ps); err != nil {
		return fmt.Errorf("read page %d: %w", id, err)
	}
	return w.nodes(fmt.Sprintf("page %d", id), buf, depth)
}

// nodes checks one branch or leaf page held in buf (a page with its
// overflow, or an inline bucket's page).
func (w *treeWalker) nodes(where string, buf []byte, depth int) error {
	le := binary.LittleEndian
	if len(buf) < boltPageHeader {
		return fmt.Errorf("%s: shorter than a page header", where)
	}
	flags, count := le.Uint16(buf[8:]), uint64(le.Uint16(buf[10:]))
	if flags != boltBranchFlag && flags != boltLeafFlag {
		return fmt.Errorf("%s: flags %#x, not a branch or leaf page", where, flags)
	}
	size := uint64(len(buf))
	if boltPageHeader+count*boltElement > size {
		return fmt.Errorf("%s: %d elements do not fit in %d bytes", where, count, size)
	}
	for i := range count {
		e := boltPageHeader + i*boltElement
		el := buf[e : e+boltElement]
		if flags == boltBranchFlag {
			pos, ksize, child := uint64(le.Uint32(el[0:])), uint64(le.Uint32(el[4:])), le.Uint64(el[8:])
			if e+pos+ksize > size {
				return fmt.Errorf("%s: branch element %d points outside the page", where, i)
			}
			if err := w.page(child, depth+1); err != nil {
				return err
			}
			continue
		}
		eflags, pos, ksize, vsize := le.Uint32(el[0:]), uint64(le.Uint32(el[4:])), uint64(le.Uint32(el[8:])), uint64(le.Uint32(el[12:]))
		if e+pos+ksize+vsize > size {
			return fmt.Errorf("%s: leaf element %d points outside the page", where, i)
		}
		if eflags&boltBucketLeaf == 0 {
			continue
		}
		v := buf[e+pos+ksize : e+pos+ksize+vsize]
		if len(v) < 16 {
			return fmt.Errorf("%s: bucket header of element %d cut short", where, i)
		}
		if root := le.Uint64(v); root != 0 {
			if err := w.page(root, depth+1); err != nil {
				return err
			}
		} else if depth >= maxTreeDepth {
			return fmt.Errorf("%s: buckets nested deeper than %d", where, maxTreeDepth)
		} else if err := w.nodes(fmt.Sprintf("%s, inline bucket %d", where, i), v[16:], depth+1); err != nil {
			return err
		}
	}
	return nil
}

// walk reads every bucket, key and value in tx, checks that keys ascend and
// that every declared bucket's values are what the file's schema version
// says (valueRule), so that a damaged page shows up here (under guard)
// rather than in a later request.
func walk(tx *bolt.Tx) error {
	version, err := fileVersion(tx)
	if err != nil {
		return err
	}
	var visit func(path string, b *bolt.Bucket, depth int) error
	visit = func(path string, b *bolt.Bucket, depth int) error {
		if depth > 16 {
			return fmt.Errorf("bucket %s: nested deeper than any vmvault writes", path)
		}
		var rule func([]byte) error
		if depth == 1 {
			rule = valueRule(version, path)
		}
		var prev []byte
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if prev != nil && bytes.Compare(prev, k) >= 0 {
				return fmt.Errorf("bucket %s: keys out of order at %q", path, k)
			}
			prev = append(prev[:0], k...)
			if v == nil {
				child := b.Bucket(k)
				if child == nil {
					return fmt.Errorf("bucket %s: key %q has no value and is no bucket", path, k)
				}
				if err := visit(path+"/"+string(k), child, depth+1); err != nil {
					return err
				}
				continue
			}
			if rule != nil {
				if err := rule(v); err != nil {
					return fmt.Errorf("bucket %s: record %q: %w (%w)", path, k, ErrCorrupt, err)
				}
			}
			readSink += crc32.ChecksumIEEE(v) // reads the whole value, under guard
		}
		return nil
	}
	return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
		return visit(string(name), b, 1)
	})
}

// readSink keeps the reads of walk from being optimised away.
var readSink uint32

// check runs bbolt's own consistency check (page accounting, key order,
// freelist) after walk has read every page it will touch.
func check(tx *bolt.Tx) error {
	var errs []error
	for err := range tx.Check() {
		if len(errs) < 5 {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// verifyOpen checks a database bbolt has opened: walk, then tx.Check.
func verifyOpen(db *bolt.DB) error {
	return guard(func() error {
		return db.View(func(tx *bolt.Tx) error {
			if err := walk(tx); err != nil {
				return err
			}
			return check(tx)
		})
	})
}

// isCorruption tells damage to the file from a failure to reach it
// (permissions, a lock held by another daemon).
func isCorruption(err error) bool {
	if errors.Is(err, bolterrors.ErrTimeout) || errors.Is(err, os.ErrPermission) || errors.Is(err, os.ErrNotExist) {
		return false
	}
	return true
}

// Verify reports whether the database file at path is sound: it opens it
// read-only (it must not be open read-write elsewhere), reads every page and
// runs bbolt's consistency check. Damage is an error wrapping ErrCorrupt;
// Verify never panics, whatever the file holds.
func Verify(path string) error {
	err := verifyFile(path)
	if err != nil && isCorruption(err) {
		return fmt.Errorf("%s: %w: %w", path, ErrCorrupt, err)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func verifyFile(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.Size() == 0 {
		return errors.New("empty file")
	}
	if err := precheck(path); err != nil {
		return err
	}
	db, err := openGuarded(path, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return err
	}
	defer db.Close()
	return verifyOpen(db)
}

// openGuarded is bolt.Open under guard. A panic inside bolt.Open leaves its
// file open and locked; the file is closed here so the lock goes with it
// (flock conflicts even within one process).
func openGuarded(path string, opts *bolt.Options) (*bolt.DB, error) {
	var file *os.File
	o := *opts
	o.OpenFile = func(name string, flag int, perm os.FileMode) (*os.File, error) {
		f, err := os.OpenFile(name, flag, perm)
		file = f
		return f, err
	}
	var db *bolt.DB
	err := guard(func() error {
		var err error
		db, err = bolt.Open(path, 0o600, &o)
		return err
	})
	if err != nil && db == nil && file != nil {
		_ = file.Close()
	}
	return db, err
}
