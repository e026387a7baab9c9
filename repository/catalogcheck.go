package repository

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"runtime/debug"
	"syscall"
)

// verifyCatalogFile checks index.db before bbolt touches it. bbolt trusts
// its file: opened with NoFreelistSync it walks every page to rebuild the
// free list, and a bad page makes it panic in a goroutine of its own (which
// no recover can catch), index past the mapping or recurse forever. So the
// whole page tree is validated here first, read-only, the way bbolt's own
// consistency check would (meta pages, page bounds, page types, each page
// referenced once, key order), plus the catalog's own value shapes (§9), so
// that nothing that reads the catalog later can fail on what it finds. A
// missing or empty file is fine (bbolt creates one). Any error means: move
// the file aside and rebuild the catalog from the packs.
func verifyCatalogFile(path string) (err error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", path)
	}
	size := st.Size()
	if size == 0 {
		return nil
	}
	if size < 2*1024 || size > 1<<40 {
		return fmt.Errorf("catalog file is %d bytes", size)
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("map catalog: %w", err)
	}
	defer syscall.Munmap(data)
	// Belt and braces: a bug here, or the file shrinking under us, must be
	// an error too.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("catalog verification failed: %v", p)
		}
	}()
	v := &boltVerifier{data: data}
	return v.run()
}

// bbolt v1 on-disk layout (go.etcd.io/bbolt internal/common).
const (
	boltMagic        = 0xED0CDAED
	boltVersion      = 2
	boltPageHeader   = 16 // id u64, flags u16, count u16, overflow u32
	boltElemSize     = 16 // branch: pos u32, ksize u32, pgid u64; leaf: flags u32, pos u32, ksize u32, vsize u32
	boltMetaSumBytes = 56 // the meta fields covered by its FNV-64a checksum
	boltBranchFlag   = 0x01
	boltLeafFlag     = 0x02
	boltFreelistFlag = 0x10
	boltBucketFlag   = 0x01 // leaf element flag: the value is a bucket
	boltNoFreelist   = ^uint64(0)
	boltBucketHeader = 16 // root pgid u64, sequence u64
	boltMaxDepth     = 64
)

type boltMeta struct {
	pageSize uint32
	root     uint64
	freelist uint64
	hwm      uint64 // high-water mark: pages [0, hwm) exist
	txid     uint64
}

// boltMetaAt decodes and validates the meta page at off (nil if invalid).
func boltMetaAt(data []byte, off int64) *boltMeta {
	if off < 0 || off+boltPageHeader+80-16 > int64(len(data)) {
		return nil
	}
	m := data[off+boltPageHeader:]
	le := binary.LittleEndian
	if le.Uint32(m[0:]) != boltMagic || le.Uint32(m[4:]) != boltVersion {
		return nil
	}
	h := fnv.New64a()
	h.Write(m[:boltMetaSumBytes])
	if h.Sum64() != le.Uint64(m[56:]) {
		return nil
	}
	return &boltMeta{pageSize: le.Uint32(m[8:]), root: le.Uint64(m[16:]), freelist: le.Uint64(m[32:]), hwm: le.Uint64(m[40:]), txid: le.Uint64(m[48:])}
}

type boltVerifier struct {
	data    []byte
	ps      int64
	hwm     uint64
	visited []uint64 // bitset of pages reached
	seen    map[catalogBucket]bool
}

// catalogBucket says which catalog bucket a subtree belongs to (value
// shapes are checked per bucket).
type catalogBucket int

const (
	bucketOther catalogBucket = iota // the root bucket or an unknown one: bbolt rules only
	bucketIsMeta
	bucketIsBlobs
	bucketIsPacks
	bucketIsPoints
	bucketIsCopyMap // copymap.go
)

func (v *boltVerifier) run() error {
	// Page size: from a valid first meta page, else from the second one
	// (probing the sizes bbolt supports), as bbolt does.
	var ps int64
	if m := boltMetaAt(v.data, 0); m != nil {
		ps = int64(m.pageSize)
	} else {
		for i := 0; i <= 14 && ps == 0; i++ {
			if m := boltMetaAt(v.data, 1024<<i); m != nil {
				ps = int64(m.pageSize)
			}
		}
	}
	if ps < 1024 || ps > 1<<16 || ps&(ps-1) != 0 {
		return fmt.Errorf("no valid meta page (page size %d)", ps)
	}
	v.ps = ps
	m0, m1 := boltMetaAt(v.data, 0), boltMetaAt(v.data, ps)
	// bbolt uses the valid meta with the highest transaction id.
	m := m0
	if m == nil || (m1 != nil && m1.txid > m0.txid) {
		m = m1
	}
	if m == nil {
		return errors.New("both meta pages are invalid")
	}
	if int64(m.pageSize) != ps {
		return fmt.Errorf("meta pages disagree on the page size (%d, %d)", ps, m.pageSize)
	}
	if m.hwm < 3 || m.hwm > uint64(len(v.data))/uint64(ps) {
		return fmt.Errorf("high-water mark of %d pages does not fit a %d-byte file", m.hwm, len(v.data))
	}
	v.hwm = m.hwm
	v.visited = make([]uint64, (m.hwm+63)/64)
	v.mark(0)
	v.mark(1)
	if m.freelist != boltNoFreelist {
		if err := v.freelist(m.freelist); err != nil {
			return err
		}
	}
	v.seen = map[catalogBucket]bool{}
	if _, err := v.tree(m.root, nil, nil, 0, bucketOther, true); err != nil {
		return err
	}
	if v.seen[bucketIsMeta] && !(v.seen[bucketIsBlobs] && v.seen[bucketIsPacks] && v.seen[bucketIsPoints]) {
		return errors.New("catalog buckets are missing")
	}
	return nil
}

func (v *boltVerifier) mark(id uint64) bool {
	w, b := id/64, uint64(1)<<(id%64)
	if v.visited[w]&b != 0 {
		return false
	}
	v.visited[w] |= b
	return true
}

// page returns page id and its overflow pages, checking bounds, identity
// and that no page is reached twice.
func (v *boltVerifier) page(id uint64) ([]byte, error) {
	if id < 2 || id >= v.hwm {
		return nil, fmt.Errorf("page %d: out of bounds (high-water mark %d)", id, v.hwm)
	}
	off := int64(id) * v.ps
	hdr := v.data[off : off+boltPageHeader]
	if binary.LittleEndian.Uint64(hdr) != id {
		return nil, fmt.Errorf("page %d: identifies as %d", id, binary.LittleEndian.Uint64(hdr))
	}
	over := uint64(binary.LittleEndian.Uint32(hdr[12:]))
	if id+over >= v.hwm {
		return nil, fmt.Errorf("page %d: %d overflow pages run past the high-water mark", id, over)
	}
	for i := id; i <= id+over; i++ {
		if !v.mark(i) {
			return nil, fmt.Errorf("page %d: multiple references", i)
		}
	}
	return v.data[off : off+int64(over+1)*v.ps], nil
}

func (v *boltVerifier) freelist(id uint64) error {
	p, err := v.page(id)
	if err != nil {
		return fmt.Errorf("freelist: %w", err)
	}
	if binary.LittleEndian.Uint16(p[8:]) != boltFreelistFlag {
		return fmt.Errorf("freelist page %d has flags %#x", id, binary.LittleEndian.Uint16(p[8:]))
	}
	n, start := uint64(binary.LittleEndian.Uint16(p[10:])), uint64(boltPageHeader)
	if n == 0xFFFF {
		if len(p) < boltPageHeader+8 {
			return errors.New("freelist page too short")
		}
		n, start = binary.LittleEndian.Uint64(p[boltPageHeader:]), boltPageHeader+8
	}
	if n > (uint64(len(p))-start)/8 {
		return fmt.Errorf("freelist page %d: %d ids do not fit", id, n)
	}
	for i := uint64(0); i < n; i++ {
		fid := binary.LittleEndian.Uint64(p[start+8*i:])
		if fid < 2 || fid >= v.hwm || !v.mark(fid) {
			return fmt.Errorf("freelist page %d: bad or repeated free page %d", id, fid)
		}
	}
	return nil
}

// elem returns the key (and, for leaves, the value) of element i of page p.
func boltElem(p []byte, i int, leaf bool) (flags uint32, key, val []byte, child uint64, err error) {
	at := boltPageHeader + i*boltElemSize
	if at+boltElemSize > len(p) {
		return 0, nil, nil, 0, fmt.Errorf("element %d past the page", i)
	}
	e := p[at : at+boltElemSize]
	le := binary.LittleEndian
	var pos, ks, vs uint64
	if leaf {
		flags, pos, ks, vs = le.Uint32(e[0:]), uint64(le.Uint32(e[4:])), uint64(le.Uint32(e[8:])), uint64(le.Uint32(e[12:]))
	} else {
		pos, ks, child = uint64(le.Uint32(e[0:])), uint64(le.Uint32(e[4:])), le.Uint64(e[8:])
	}
	start := uint64(at) + pos
	if start+ks+vs > uint64(len(p)) {
		return 0, nil, nil, 0, fmt.Errorf("element %d: key/value past the page", i)
	}
	key = p[start : start+ks]
	if leaf {
		val = p[start+ks : start+ks+vs]
	}
	return flags, key, val, child, nil
}

// tree validates the subtree at page id (keys in [lo, hi)) and returns its
// greatest key, mirroring bbolt's key order rules.
func (v *boltVerifier) tree(id uint64, lo, hi []byte, depth int, b catalogBucket, root bool) ([]byte, error) {
	if depth > boltMaxDepth {
		return nil, fmt.Errorf("page %d: tree deeper than %d", id, boltMaxDepth)
	}
	p, err := v.page(id)
	if err != nil {
		return nil, err
	}
	return v.node(id, p, lo, hi, depth, b, root)
}

func (v *boltVerifier) node(id uint64, p []byte, lo, hi []byte, depth int, b catalogBucket, root bool) ([]byte, error) {
	flags := binary.LittleEndian.Uint16(p[8:])
	n := int(binary.LittleEndian.Uint16(p[10:]))
	if boltPageHeader+n*boltElemSize > len(p) {
		return nil, fmt.Errorf("page %d: %d elements do not fit", id, n)
	}
	var prev []byte
	switch flags {
	case boltBranchFlag:
		if n == 0 {
			return nil, fmt.Errorf("page %d: empty branch", id)
		}
		run := lo
		for i := 0; i < n; i++ {
			_, key, _, child, err := boltElem(p, i, false)
			if err != nil {
				return nil, fmt.Errorf("page %d: %w", id, err)
			}
			if err := keyOrder(id, i, key, run, hi); err != nil {
				return nil, err
			}
			next := hi
			if i < n-1 {
				_, nk, _, _, err := boltElem(p, i+1, false)
				if err != nil {
					return nil, fmt.Errorf("page %d: %w", id, err)
				}
				next = nk
			}
			max, err := v.tree(child, key, next, depth+1, b, root)
			if err != nil {
				return nil, err
			}
			run, prev = max, max
		}
		return prev, nil
	case boltLeafFlag:
		for i := 0; i < n; i++ {
			ef, key, val, _, err := boltElem(p, i, true)
			if err != nil {
				return nil, fmt.Errorf("page %d: %w", id, err)
			}
			run := prev
			if i == 0 {
				run = lo
			}
			if err := keyOrder(id, i, key, run, hi); err != nil {
				return nil, err
			}
			prev = key
			if err := v.value(id, ef, key, val, depth, b, root); err != nil {
				return nil, err
			}
		}
		return prev, nil
	}
	return nil, fmt.Errorf("page %d: not a branch or leaf page (flags %#x)", id, flags)
}

func keyOrder(id uint64, i int, key, prev, hi []byte) error {
	if prev != nil {
		if c := bytes.Compare(prev, key); c > 0 || (i > 0 && c == 0) {
			return fmt.Errorf("page %d: key %d out of order", id, i)
		}
	}
	if hi != nil && bytes.Compare(key, hi) >= 0 {
		return fmt.Errorf("page %d: key %d not below its parent's next key", id, i)
	}
	return nil
}

// value checks one leaf element: a nested bucket (only in the root bucket:
// the catalog nests nothing deeper) or a value of bucket b.
func (v *boltVerifier) value(id uint64, flags uint32, key, val []byte, depth int, b catalogBucket, root bool) error {
	switch flags {
	case 0:
		if root && catalogBucketOf(key) != bucketOther {
			return fmt.Errorf("catalog bucket %q is a plain value", key)
		}
		return checkCatalogValue(b, key, val)
	case boltBucketFlag:
	default:
		return fmt.Errorf("page %d: unknown element flags %#x", id, flags)
	}
	if b != bucketOther || !root {
		return fmt.Errorf("page %d: unexpected nested bucket %x", id, key)
	}
	if len(val) < boltBucketHeader {
		return fmt.Errorf("page %d: bucket %q header too short", id, key)
	}
	child := catalogBucketOf(key)
	v.seen[child] = true
	broot := binary.LittleEndian.Uint64(val)
	if broot != 0 {
		_, err := v.tree(broot, nil, nil, depth+1, child, false)
		return err
	}
	// An inline bucket: a leaf page inside the value.
	inl := val[boltBucketHeader:]
	if len(inl) < boltPageHeader || binary.LittleEndian.Uint16(inl[8:]) != boltLeafFlag {
		return fmt.Errorf("page %d: inline bucket %q is not a leaf page", id, key)
	}
	_, err := v.node(id, inl, nil, nil, depth+1, child, false)
	return err
}

func catalogBucketOf(name []byte) catalogBucket {
	switch string(name) {
	case string(bucketMeta):
		return bucketIsMeta
	case string(bucketBlobs):
		return bucketIsBlobs
	case string(bucketPacks):
		return bucketIsPacks
	case string(bucketPoints):
		return bucketIsPoints
	case string(bucketCopyMap):
		return bucketIsCopyMap
	}
	return bucketOther
}

// checkCatalogValue checks the shape of a catalog entry (FORMAT.md §9), so
// that the decoders (and slice-to-array conversions of keys) never fail on
// an entry of a verified catalog.
func checkCatalogValue(b catalogBucket, key, val []byte) error {
	var err error
	switch b {
	case bucketIsMeta:
		if bytes.Equal(key, metaSchema) && (len(val) != 1 || val[0] != catalogSchema) {
			err = errors.New("bad schema")
		}
	case bucketIsBlobs:
		if len(key) != len(ID{}) {
			err = errors.New("bad key length")
		} else {
			_, err = decodeBlobLoc(val)
		}
	case bucketIsPacks:
		if len(key) != len(packID{}) {
			err = errors.New("bad key length")
		} else {
			_, err = decodePackInfo(val)
		}
	case bucketIsCopyMap:
		if len(key) != copyMapKeyLen || len(val) != copyMapValLen {
			err = errors.New("bad copy map entry length")
		}
	case bucketIsPoints:
		var p Point
		if len(key) != len(ID{}) {
			err = errors.New("bad key length")
		} else if p, err = decodePointValue(val); err == nil {
			if pid, perr := ParseID(p.ID); perr != nil || !bytes.Equal(pid[:], key) {
				err = errors.New("point id differs from its key")
			}
		}
	}
	if err != nil {
		return fmt.Errorf("catalog entry %x: %w", key[:min(len(key), 32)], err)
	}
	return nil
}
