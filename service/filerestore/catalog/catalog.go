// Package catalog owns the file catalog of restore points: for each point,
// every path of every browsable volume with its type, size and mtime, kept
// in one bbolt file per repository so that "which restore points hold
// report.docx?" answers in well under a second over millions of files.
//
// The catalog is a cache: it can always be rebuilt from the restore point,
// so a missing, stale or damaged catalog file costs time, never data. The
// format (FORMAT.md next to this file) is versioned; a file of another
// version is refused with ErrVersion and the caller rebuilds it.
//
// Paths are stored once per repository in a dictionary (volume + path ->
// path id, with a reference count), and each point holds a bucket of path
// id -> (type, size, mtime). A search scans the dictionary — the distinct
// paths, not points x paths — and looks each matching path up in every
// point's bucket, so adding the hundredth nightly point of a VM adds
// nothing to what a search scans.
//
// A [Builder] writes a point's entries in bounded batches and remembers
// which volumes are complete: a build interrupted by a stop or a crash
// resumes at the first incomplete volume, and re-adding an entry already
// there is a no-op, so a resumed volume does not double-count.
package catalog

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
)

// FormatVersion is the catalog format version (FORMAT.md).
const FormatVersion = 1

// Sentinel errors callers branch on.
var (
	// ErrVersion: the file holds a catalog of another format version.
	ErrVersion = errors.New("catalog format version not supported")
	// ErrBadPattern: a search pattern is not a valid glob.
	ErrBadPattern = errors.New("bad search pattern")
	// ErrNotFound: no catalog for that restore point.
	ErrNotFound = errors.New("no catalog for this restore point")
	// ErrInUse: another process holds the catalog file.
	ErrInUse = errors.New("catalog file in use by another process")
)

var (
	bucketMeta   = []byte("meta")
	bucketPoints = []byte("points")
	bucketPaths  = []byte("paths")
	bucketFiles  = []byte("files")
	keyVersion   = []byte("version")
)

// Entry types, as guestfs.TypeOf names them.
const (
	TypeFile    = "file"
	TypeDir     = "dir"
	TypeSymlink = "symlink"
	TypeOther   = "other"
)

var typeCodes = map[string]byte{TypeFile: 1, TypeDir: 2, TypeSymlink: 3, TypeOther: 4}
var typeNames = [...]string{1: TypeFile, 2: TypeDir, 3: TypeSymlink, 4: TypeOther}

// PointInfo describes one catalogued restore point.
type PointInfo struct {
	ID          string    `json:"id"`
	VM          string    `json:"vm"`
	VMUUID      string    `json:"vmUuid,omitempty"`
	Time        time.Time `json:"time"`
	Complete    bool      `json:"complete"`
	Files       int64     `json:"files"`
	DoneVolumes []string  `json:"doneVolumes,omitempty"`
	Errors      []string  `json:"errors,omitempty"` // volumes or directories that could not be read
	// Partial says why the catalog stopped short of the point's end (an
	// indexing budget); "" when every browsable volume was walked.
	Partial      string    `json:"partial,omitempty"`
	BuiltAt      time.Time `json:"builtAt,omitzero"`
	BuildSeconds float64   `json:"buildSeconds,omitempty"`
}

// Store is one repository's catalog file.
type Store struct {
	db   *bolt.DB
	path string
}

// Open opens (creating it if needed) the catalog file at path.
func Open(p string) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return nil, fmt.Errorf("catalog directory: %w", err)
	}
	db, err := bolt.Open(p, 0o600, &bolt.Options{Timeout: 2 * time.Second, NoFreelistSync: true})
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			return nil, fmt.Errorf("open catalog %s: %w", p, ErrInUse)
		}
		return nil, fmt.Errorf("open catalog %s: %w", p, err)
	}
	s := &Store{db: db, path: p}
	err = db.Update(func(tx *bolt.Tx) error {
		m, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		if v := m.Get(keyVersion); v != nil {
			if string(v) != fmt.Sprint(FormatVersion) {
				return fmt.Errorf("catalog %s is version %q, this build reads %d: %w", p, v, FormatVersion, ErrVersion)
			}
		} else if err := m.Put(keyVersion, []byte(fmt.Sprint(FormatVersion))); err != nil {
			return err
		}
		for _, b := range [][]byte{bucketPoints, bucketPaths, bucketFiles} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// Path is the file's path.
func (s *Store) Path() string { return s.path }

// Close closes the file.
func (s *Store) Close() error { return s.db.Close() }

// Points returns every catalogued point (complete or not) by id.
func (s *Store) Points() (map[string]PointInfo, error) {
	out := map[string]PointInfo{}
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketPoints).ForEach(func(k, v []byte) error {
			var pi PointInfo
			if err := json.Unmarshal(v, &pi); err != nil {
				return fmt.Errorf("catalog point %s: %w", k, err)
			}
			out[string(k)] = pi
			return nil
		})
	})
	return out, err
}

// Point returns one point's catalog description (ErrNotFound when none).
func (s *Store) Point(id string) (PointInfo, error) {
	var pi PointInfo
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketPoints).Get([]byte(id))
		if v == nil {
			return fmt.Errorf("point %s: %w", id, ErrNotFound)
		}
		return json.Unmarshal(v, &pi)
	})
	return pi, err
}

// Drop removes a point's catalog and the paths only it referenced. Dropping
// an unknown point is not an error.
func (s *Store) Drop(ctx context.Context, id string) error {
	// Deleted in batches: a point of millions of files must not make one
	// transaction hold every freed page.
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		more := false
		err := s.db.Update(func(tx *bolt.Tx) error {
			files := tx.Bucket(bucketFiles)
			pb := files.Bucket([]byte(id))
			if pb == nil {
				return tx.Bucket(bucketPoints).Delete([]byte(id))
			}
			paths := tx.Bucket(bucketPaths)
			c := pb.Cursor()
			n := 0
			var keys [][]byte
			for k, _ := c.First(); k != nil && n < batchSize; k, _ = c.Next() {
				keys = append(keys, append([]byte(nil), k...))
				n++
			}
			for _, k := range keys {
				if err := unref(paths, k); err != nil {
					return err
				}
				if err := pb.Delete(k); err != nil {
					return err
				}
			}
			if n == batchSize {
				more = true
				return nil
			}
			if err := files.DeleteBucket([]byte(id)); err != nil {
				return err
			}
			return tx.Bucket(bucketPoints).Delete([]byte(id))
		})
		if err != nil {
			return fmt.Errorf("drop catalog of %s: %w", id, err)
		}
		if !more {
			return nil
		}
	}
}

// The reverse index (path id -> dictionary key) lives in the paths bucket
// under a 0xFF prefix: dictionary keys are volume ids, which are printable.
const revPrefix = 0xFF

func revKey(pid []byte) []byte { return append([]byte{revPrefix}, pid...) }

// unref drops one reference to a path id, deleting the path at zero.
func unref(paths *bolt.Bucket, pid []byte) error {
	dk := paths.Get(revKey(pid))
	if dk == nil {
		return nil
	}
	dk = append([]byte(nil), dk...)
	v := paths.Get(dk)
	if len(v) < 8 {
		return paths.Delete(revKey(pid))
	}
	refs, n := binary.Uvarint(v[8:])
	if n <= 0 || refs <= 1 {
		if err := paths.Delete(dk); err != nil {
			return err
		}
		return paths.Delete(revKey(pid))
	}
	nv := binary.AppendUvarint(append([]byte(nil), v[:8]...), refs-1)
	return paths.Put(dk, nv)
}

const batchSize = 5000

// Builder writes one point's catalog. It is not safe for concurrent use.
type Builder struct {
	s     *Store
	info  PointInfo
	done  map[string]bool
	batch []pending
	start time.Time
}

type pending struct {
	vol, path string
	val       []byte
}

// Build starts (or resumes) the catalog of a point. info's VM and Time are
// recorded; a previous incomplete build's finished volumes are kept.
func (s *Store) Build(info PointInfo) (*Builder, error) {
	b := &Builder{s: s, info: info, done: map[string]bool{}, start: time.Now()}
	old, err := s.Point(info.ID)
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return nil, err
	default:
		b.info.Files = old.Files
		b.info.DoneVolumes = old.DoneVolumes
		b.info.Errors = old.Errors
		for _, v := range old.DoneVolumes {
			b.done[v] = true
		}
	}
	b.info.Complete = false
	return b, b.s.db.Update(func(tx *bolt.Tx) error { return b.putInfo(tx) })
}

// VolumeDone reports whether a previous build finished the volume.
func (b *Builder) VolumeDone(vol string) bool { return b.done[vol] }

// Add records one entry: p is the path inside the volume ("etc/hostname").
func (b *Builder) Add(vol, p, typ string, size int64, mtime time.Time) error {
	code := typeCodes[typ]
	if code == 0 {
		code = typeCodes[TypeOther]
	}
	val := []byte{code}
	val = binary.AppendUvarint(val, uint64(max(size, 0)))
	val = binary.AppendVarint(val, mtime.UnixNano())
	b.batch = append(b.batch, pending{vol, p, val})
	if len(b.batch) >= batchSize {
		return b.flush()
	}
	return nil
}

// Error records that part of a volume could not be read (the catalog stays
// usable: it holds what could).
func (b *Builder) Error(msg string) {
	if len(b.info.Errors) < 100 {
		b.info.Errors = append(b.info.Errors, msg)
	}
}

// Stop records why the build stops short (the point is then finished with
// Finish and not tried again). Unlike Error it is never dropped.
func (b *Builder) Stop(reason string) { b.info.Partial = reason }

// FinishVolume marks a volume complete: a resumed build skips it.
func (b *Builder) FinishVolume(vol string) error {
	if err := b.flush(); err != nil {
		return err
	}
	b.done[vol] = true
	b.info.DoneVolumes = append(b.info.DoneVolumes, vol)
	return b.s.db.Update(func(tx *bolt.Tx) error { return b.putInfo(tx) })
}

// Finish marks the point's catalog complete.
func (b *Builder) Finish() error {
	if err := b.flush(); err != nil {
		return err
	}
	b.info.Complete = true
	b.info.BuiltAt = time.Now().UTC()
	b.info.BuildSeconds = time.Since(b.start).Seconds()
	return b.s.db.Update(func(tx *bolt.Tx) error { return b.putInfo(tx) })
}

// Info is the point's description as built so far.
func (b *Builder) Info() PointInfo { return b.info }

func (b *Builder) putInfo(tx *bolt.Tx) error {
	v, err := json.Marshal(b.info)
	if err != nil {
		return err
	}
	return tx.Bucket(bucketPoints).Put([]byte(b.info.ID), v)
}

func dictKey(vol, p string) []byte {
	k := make([]byte, 0, len(vol)+1+len(p))
	k = append(k, vol...)
	k = append(k, 0)
	return append(k, p...)
}

func (b *Builder) flush() error {
	if len(b.batch) == 0 {
		return nil
	}
	err := b.s.db.Update(func(tx *bolt.Tx) error {
		paths := tx.Bucket(bucketPaths)
		pb, err := tx.Bucket(bucketFiles).CreateBucketIfNotExists([]byte(b.info.ID))
		if err != nil {
			return err
		}
		for _, e := range b.batch {
			dk := dictKey(e.vol, e.path)
			var pid []byte
			var refs uint64
			if v := paths.Get(dk); len(v) >= 8 {
				pid = append([]byte(nil), v[:8]...)
				refs, _ = binary.Uvarint(v[8:])
			} else {
				seq, err := paths.NextSequence()
				if err != nil {
					return err
				}
				pid = binary.BigEndian.AppendUint64(nil, seq)
				if err := paths.Put(revKey(pid), dk); err != nil {
					return err
				}
			}
			if pb.Get(pid) == nil {
				refs++
				b.info.Files++
				if err := paths.Put(dk, binary.AppendUvarint(append([]byte(nil), pid...), refs)); err != nil {
					return err
				}
			}
			if err := pb.Put(pid, e.val); err != nil {
				return err
			}
		}
		return b.putInfo(tx)
	})
	if err != nil {
		return fmt.Errorf("write catalog of %s: %w", b.info.ID, err)
	}
	b.batch = b.batch[:0]
	return nil
}

// Clone makes info.ID's catalog a copy of src's (a complete catalog), for a
// point whose disks are byte for byte those of src (the same disk maps):
// nothing is walked. The copy is written in batches; an interrupted clone
// is resumed by cloning again.
func (s *Store) Clone(ctx context.Context, src string, info PointInfo) error {
	from, err := s.Point(src)
	if err != nil {
		return err
	}
	if !from.Complete {
		return fmt.Errorf("clone catalog of %s: source %s is incomplete: %w", info.ID, src, ErrNotFound)
	}
	var after []byte
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		done := false
		err := s.db.Update(func(tx *bolt.Tx) error {
			files := tx.Bucket(bucketFiles)
			sb := files.Bucket([]byte(src))
			if sb == nil {
				done = true
				return nil
			}
			db, err := files.CreateBucketIfNotExists([]byte(info.ID))
			if err != nil {
				return err
			}
			paths := tx.Bucket(bucketPaths)
			c := sb.Cursor()
			k, v := c.First()
			if after != nil {
				k, v = c.Seek(after)
				if k != nil && bytes.Equal(k, after) {
					k, v = c.Next()
				}
			}
			n := 0
			for ; k != nil && n < batchSize; k, v = c.Next() {
				if db.Get(k) == nil {
					dk := paths.Get(revKey(k))
					if dk == nil {
						return fmt.Errorf("path id %x without a dictionary entry: %w", k, ErrNotFound)
					}
					dk = append([]byte(nil), dk...)
					pv := paths.Get(dk)
					if len(pv) < 8 {
						return fmt.Errorf("dictionary entry %q damaged", dk)
					}
					refs, _ := binary.Uvarint(pv[8:])
					if err := paths.Put(dk, binary.AppendUvarint(append([]byte(nil), pv[:8]...), refs+1)); err != nil {
						return err
					}
				}
				if err := db.Put(k, v); err != nil {
					return err
				}
				after = append(after[:0], k...)
				n++
			}
			if k == nil {
				done = true
				pi := from
				pi.ID, pi.VM, pi.VMUUID, pi.Time = info.ID, info.VM, info.VMUUID, info.Time
				pi.BuiltAt, pi.BuildSeconds = time.Now().UTC(), 0
				b, err := json.Marshal(pi)
				if err != nil {
					return err
				}
				return tx.Bucket(bucketPoints).Put([]byte(info.ID), b)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("clone catalog of %s from %s: %w", info.ID, src, err)
		}
		if done {
			return nil
		}
	}
}

// Query is a search.
type Query struct {
	// Pattern: with any of * ? [ it is a glob (path.Match syntax) on the
	// name or on the whole path ("/etc/*.conf"); else a substring of the
	// path. Case-insensitive either way.
	Pattern string
	// VM keeps only points of this VM (name or instance UUID); "" keeps all.
	VM string
	// Since keeps only points taken at or after it; zero keeps all.
	Since time.Time
	// Limit bounds the paths returned (default 1000).
	Limit int
}

// Version is one restore point's copy of a path.
type Version struct {
	RestorePoint string    `json:"restorePoint"`
	Repository   string    `json:"repository,omitempty"`
	Time         time.Time `json:"time"`
	Size         int64     `json:"size"`
	Mtime        time.Time `json:"mtime"`
}

// Hit is one path of one VM with every catalogued point that holds it,
// newest point first.
type Hit struct {
	VM       string    `json:"vm"`
	Volume   string    `json:"volume"`
	Path     string    `json:"path"` // "/etc/hostname"
	Type     string    `json:"type"`
	Versions []Version `json:"versions"`
}

// Result is a search's answer.
type Result struct {
	Hits      []Hit `json:"hits"`
	Truncated bool  `json:"truncated"` // more paths matched than Limit
	Scanned   int64 `json:"scanned"`   // distinct paths looked at
	// Pending are the points not catalogued yet (their files cannot be
	// found until they are); filled by the service, which knows the points.
	Pending []string `json:"pending,omitempty"`
	// Partial are the points whose catalogs stopped short (an indexing
	// budget: a hostile or huge guest), with the reason: their files past
	// that point are not found.
	Partial []PartialPoint `json:"partial,omitempty"`
}

// PartialPoint is a point whose catalog is partial, and why.
type PartialPoint struct {
	RestorePoint string `json:"restorePoint"`
	Reason       string `json:"reason"`
}

// matcher decides on "/"+path (lowercase).
type matcher func(full []byte) bool

func compile(pattern string) (matcher, error) {
	if pattern == "" {
		return nil, fmt.Errorf("%w: empty pattern", ErrBadPattern)
	}
	pat := strings.ToLower(pattern)
	if !strings.ContainsAny(pat, "*?[") {
		needle := []byte(pat)
		return func(full []byte) bool { return bytes.Contains(full, needle) }, nil
	}
	if _, err := path.Match(pat, ""); err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrBadPattern, pattern, err)
	}
	onPath := strings.HasPrefix(pat, "/")
	return func(full []byte) bool {
		s := string(full)
		if onPath {
			ok, _ := path.Match(pat, s)
			return ok
		}
		ok, _ := path.Match(pat, s[strings.LastIndexByte(s, '/')+1:])
		return ok
	}, nil
}

// lowerInto lowercases b into buf (ASCII fast path, full Unicode otherwise).
func lowerInto(buf, b []byte) []byte {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return append(buf, bytes.ToLower(b)...)
		}
	}
	for _, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf = append(buf, c)
	}
	return buf
}

// Search finds the paths matching q in every complete or partial point's
// catalog. It checks ctx between dictionary pages.
func (s *Store) Search(ctx context.Context, q Query) (Result, error) {
	m, err := compile(q.Pattern)
	if err != nil {
		return Result{}, err
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 1000
	}
	pts, err := s.Points()
	if err != nil {
		return Result{}, err
	}
	var sel []PointInfo
	for _, p := range pts {
		if q.VM != "" && p.VM != q.VM && p.VMUUID != q.VM {
			continue
		}
		if !q.Since.IsZero() && p.Time.Before(q.Since) {
			continue
		}
		sel = append(sel, p)
	}
	sort.Slice(sel, func(i, j int) bool {
		if !sel[i].Time.Equal(sel[j].Time) {
			return sel[i].Time.After(sel[j].Time)
		}
		return sel[i].ID < sel[j].ID
	})
	var res Result
	if len(sel) == 0 {
		return res, nil
	}
	byKey := map[string]int{} // vm\0vol\0path -> index in res.Hits
	err = s.db.View(func(tx *bolt.Tx) error {
		files := tx.Bucket(bucketFiles)
		pbs := make([]*bolt.Bucket, len(sel))
		for i, p := range sel {
			pbs[i] = files.Bucket([]byte(p.ID))
		}
		c := tx.Bucket(bucketPaths).Cursor()
		buf := make([]byte, 0, 256)
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if k[0] == revPrefix {
				break // the reverse index sorts after every dictionary key
			}
			res.Scanned++
			if res.Scanned%65536 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			i := bytes.IndexByte(k, 0)
			if i < 0 || len(v) < 8 {
				continue
			}
			buf = append(buf[:0], '/')
			buf = lowerInto(buf, k[i+1:])
			if !m(buf) {
				continue
			}
			pid := v[:8]
			vol, p := string(k[:i]), "/"+string(k[i+1:])
			for j, pb := range pbs {
				if pb == nil {
					continue
				}
				fv := pb.Get(pid)
				if fv == nil {
					continue
				}
				typ, size, mt, ok := decodeFile(fv)
				if !ok {
					continue
				}
				hk := sel[j].VM + "\x00" + vol + "\x00" + p
				hi, seen := byKey[hk]
				if !seen {
					if len(res.Hits) >= limit {
						res.Truncated = true
						return nil
					}
					hi = len(res.Hits)
					byKey[hk] = hi
					res.Hits = append(res.Hits, Hit{VM: sel[j].VM, Volume: vol, Path: p, Type: typ})
				}
				res.Hits[hi].Versions = append(res.Hits[hi].Versions, Version{RestorePoint: sel[j].ID, Time: sel[j].Time, Size: size, Mtime: mt})
			}
		}
		return nil
	})
	if err != nil {
		return Result{}, fmt.Errorf("search catalog %s: %w", s.path, err)
	}
	return res, nil
}

func decodeFile(v []byte) (typ string, size int64, mtime time.Time, ok bool) {
	if len(v) < 1 || int(v[0]) >= len(typeNames) || typeNames[v[0]] == "" {
		return "", 0, time.Time{}, false
	}
	typ = typeNames[v[0]]
	sz, n := binary.Uvarint(v[1:])
	if n <= 0 || sz > math.MaxInt64 {
		return "", 0, time.Time{}, false
	}
	ns, m := binary.Varint(v[1+n:])
	if m <= 0 {
		return "", 0, time.Time{}, false
	}
	return typ, int64(sz), time.Unix(0, ns).UTC(), true
}
