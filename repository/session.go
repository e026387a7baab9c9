package repository

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/vmvault/vmvault/internal/failpoint"
)

// Extent is one run of a disk map: Length bytes at Offset, either a data
// blob (ID), a slice of a data blob (bytes [Skip, Skip+Length) of blob ID,
// format v1.1) or a hole (Zero, no blob).
type Extent struct {
	Offset, Length int64
	ID             ID
	Zero           bool
	// Skip is the offset of the extent's first byte inside the blob's
	// plaintext (0 unless Slice).
	Skip int64
	// Slice is set by the decoders for an extent that does not cover its
	// whole blob. PutDisk ignores the caller's value and derives it from
	// the blob's length (Skip > 0 or Length < the blob's length), so that
	// equal maps always encode to the same bytes.
	Slice bool
}

// Progress reports a long operation's phase and position.
type Progress struct {
	Phase string `json:"phase"`
	Done  int64  `json:"done"`
	Total int64  `json:"total"`
}

// Session is one backup in progress. Its methods are goroutine-safe.
type Session struct {
	r       *Repository
	gen     uint64    // repository generation at start (reclaim barrier)
	started time.Time // its packs were all written after this (lockextend.go)

	// guarded by r.mu
	used  []ID                      // every blob this session references (32 bytes per chunk, duplicates allowed)
	packs map[*packWriter]struct{}  // packs holding blobs it added
	waits map[*pendingBlob]struct{} // other sessions' pending blobs it deduplicated against
	roots map[ID]bool               // disk maps built by PutDisk in this session
	done  bool

	mwID string // session id in the writer lease (several writers)
}

// NewSession starts a backup session.
func (r *Repository) NewSession(ctx context.Context) (*Session, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := r.writable("new backup session"); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, ErrClosed
	}
	s := &Session{r: r, gen: r.gen, started: r.now(), packs: map[*packWriter]struct{}{}, waits: map[*pendingBlob]struct{}{}, roots: map[ID]bool{}}
	r.sessions[s] = struct{}{}
	if r.mw != nil {
		r.mu.Unlock()
		err := r.mwSessionStart(ctx, s)
		r.mu.Lock()
		if err != nil {
			delete(r.sessions, s)
			s.done = true
			r.sessDone.Broadcast()
			r.mu.Unlock()
			r.mwSessionEnd(s)
			r.mu.Lock()
			return nil, err
		}
	}
	return s, nil
}

// PutChunk stores one data chunk, deduplicated against the catalog and every
// open session's pending blobs. It returns the id, whether the blob was
// newly added, and the stored (on-disk) bytes added.
func (s *Session) PutChunk(ctx context.Context, data []byte) (id ID, added bool, stored int, err error) {
	if err := ctx.Err(); err != nil {
		return id, false, 0, err
	}
	if len(data) == 0 || len(data) > MaxBlobSize {
		return id, false, 0, fmt.Errorf("put chunk: size %d out of range (0, %d]", len(data), MaxBlobSize)
	}
	id = s.r.codec.id(data)
	if s.r.mw != nil {
		s.r.mwMaybeCatchUp(ctx)
	}
	added, stored, err = s.put(BlobData, id, data)
	return id, added, stored, err
}

// put stores a blob of any type unless an equal one is known.
func (s *Session) put(t BlobType, id ID, data []byte) (bool, int, error) {
	r := s.r
	r.mu.Lock()
	if s.done || r.closed {
		r.mu.Unlock()
		return false, 0, ErrSessionClosed
	}
	r.inflight.Add(1)
	defer r.inflight.Done()
	if pb, ok := r.pending[id]; ok {
		s.used = append(s.used, id)
		s.waits[pb] = struct{}{}
		r.mu.Unlock()
		return false, 0, nil
	}
	if _, cond := r.condemned[id]; !cond {
		loc, ok, err := r.lookup(id)
		if err != nil {
			r.mu.Unlock()
			return false, 0, err
		}
		// A blob check found corrupt is written afresh (self-healing).
		if ok && loc.State != blobStateCorrupt && !r.mwCondemnedPack(loc.Pack) {
			s.used = append(s.used, id)
			r.mu.Unlock()
			return false, 0, nil
		}
	}
	pb := &pendingBlob{ready: make(chan struct{}), rawLen: uint32(len(data)), typ: t}
	r.pending[id] = pb
	s.used = append(s.used, id)
	r.mu.Unlock()

	// Compression and sealing run in the caller's goroutine.
	bound := encBound(len(data))
	enc, scratch, flags := r.codec.encode(encBufs.get(bound), encBufs.get(bound), t, id, data)
	pw, err := r.appendBlob(packEntry{Type: t, Flags: flags, RawLen: uint32(len(data)), StoredLen: uint32(len(enc)), ID: id}, enc, pb)
	n := len(enc)
	encBufs.put(enc)
	encBufs.put(scratch)

	r.mu.Lock()
	if err != nil {
		if r.pending[id] == pb {
			delete(r.pending, id)
		}
		pb.err = err
		close(pb.ready)
		r.mu.Unlock()
		return false, 0, err
	}
	close(pb.ready)
	s.packs[pw] = struct{}{}
	r.mu.Unlock()
	return true, n, nil
}

// refState classifies a referenced id.
type refState int

const (
	refOK refState = iota
	refCondemned
	refMissing
)

// refInfo is what reference learnt about an id: its state, type and
// plaintext length.
type refInfo struct {
	state refState
	typ   BlobType
	raw   int64
}

// reference marks ids as used by this session, under r.mu, so that a
// concurrent reclaim keeps them, and returns each one's type and length.
func (s *Session) reference(ids []ID) ([]refInfo, error) {
	r := s.r
	out := make([]refInfo, len(ids))
	r.mu.Lock()
	defer r.mu.Unlock()
	if s.done {
		return nil, ErrSessionClosed
	}
	err := r.db.View(func(tx *bolt.Tx) error {
		for i, id := range ids {
			if pb, ok := r.pending[id]; ok {
				out[i] = refInfo{typ: pb.typ, raw: int64(pb.rawLen)}
				s.used = append(s.used, id)
				s.waits[pb] = struct{}{}
				continue
			}
			loc, ok := lookupTx(tx, id)
			switch {
			case !ok || loc.State == blobStateCorrupt:
				out[i].state = refMissing
			default:
				out[i] = refInfo{typ: loc.Type, raw: int64(loc.RawLen)}
				if _, c := r.condemned[id]; c || r.mwCondemnedPack(loc.Pack) {
					out[i].state = refCondemned
				} else {
					s.used = append(s.used, id)
				}
			}
		}
		return nil
	})
	return out, err
}

// rescue re-writes a condemned blob (still readable: deletion waits for the
// barrier, and gcMu keeps the delete step out while we copy).
func (s *Session) rescue(ctx context.Context, id ID) error {
	r := s.r
	r.gcMu.RLock()
	defer r.gcMu.RUnlock()
	loc, ok, err := r.lookup(id)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("blob %s: %w", id, ErrCondemned)
	}
	data, err := r.loadBlob(ctx, id, nil)
	if err != nil {
		if errors.Is(err, ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("blob %s: %w", id, ErrCondemned)
		}
		return err
	}
	_, _, err = s.put(loc.Type, id, data)
	return err
}

// referenceAll marks ids as used, rescuing condemned ones, and returns each
// one's type and length.
func (s *Session) referenceAll(ctx context.Context, what string, ids []ID) ([]refInfo, error) {
	info, err := s.reference(ids)
	if err != nil {
		return nil, err
	}
	for i, v := range info {
		switch v.state {
		case refMissing:
			if err := s.packFailure(); err != nil { // the real cause, not "not found"
				return nil, fmt.Errorf("%s: %w", what, err)
			}
			return nil, fmt.Errorf("%s references blob %s which is not in the repository: %w", what, ids[i], ErrNotFound)
		case refCondemned:
			if err := s.rescue(ctx, ids[i]); err != nil {
				return nil, fmt.Errorf("%s: %w", what, err)
			}
		}
	}
	return info, nil
}

// checkDataRef validates a data extent against its blob: a data blob long
// enough for [Skip, Skip+Length). It reports whether the extent is a slice.
func checkDataRef(e Extent, info refInfo) (slice bool, err error) {
	if info.typ != BlobData {
		return false, fmt.Errorf("extent at %d references blob %s of type %s, not data", e.Offset, e.ID, info.typ)
	}
	if e.Skip < 0 || e.Skip+e.Length > info.raw {
		return false, fmt.Errorf("extent at %d: bytes [%d,+%d) of blob %s exceed its %d bytes", e.Offset, e.Skip, e.Length, e.ID, info.raw)
	}
	return e.Skip != 0 || e.Length != info.raw, nil
}

// PutDisk stores a disk map and returns its root id. Extents must be
// contiguous from 0 to size, in order; Zero extents are holes.
func (s *Session) PutDisk(ctx context.Context, size int64, extents []Extent) (ID, error) {
	var root ID
	if size < 0 {
		return root, fmt.Errorf("put disk: negative size %d", size)
	}
	// Validate and coalesce holes.
	var ext []Extent
	var off int64
	for i, e := range extents {
		if e.Offset != off || e.Length <= 0 {
			return root, fmt.Errorf("put disk: extent %d [%d,+%d) is not contiguous at %d", i, e.Offset, e.Length, off)
		}
		if !e.Zero && (e.ID.IsZero() || e.Length > MaxBlobSize || e.Skip < 0 || e.Skip > MaxBlobSize-e.Length) {
			return root, fmt.Errorf("put disk: extent %d: data extent needs a blob id and at most %d bytes", i, MaxBlobSize)
		}
		if e.Zero {
			e.ID, e.Skip = ID{}, 0
			if n := len(ext); n > 0 && ext[n-1].Zero {
				ext[n-1].Length += e.Length
				off += e.Length
				continue
			}
		}
		ext = append(ext, e)
		off += e.Length
	}
	if off != size {
		return root, fmt.Errorf("put disk: extents cover %d bytes, size is %d", off, size)
	}
	// Every data blob must exist and be long enough; mark them used in
	// batches, each id once (an incremental's map slices one blob many
	// times). Whether an extent is a slice follows from the blob's length.
	const batch = 4096
	known := map[ID]refInfo{}
	inBatch := map[ID]bool{}
	ids := make([]ID, 0, batch)
	var pend []int
	flush := func() error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if len(ids) > 0 {
			info, err := s.referenceAll(ctx, "put disk", ids)
			if err != nil {
				return err
			}
			for k, id := range ids {
				known[id] = info[k]
			}
		}
		for _, j := range pend {
			sl, err := checkDataRef(ext[j], known[ext[j].ID])
			if err != nil {
				return fmt.Errorf("put disk: %w", err)
			}
			ext[j].Slice = sl
		}
		ids, pend = ids[:0], pend[:0]
		clear(inBatch)
		return nil
	}
	for i := range ext {
		if ext[i].Zero {
			continue
		}
		if id := ext[i].ID; !inBatch[id] {
			if _, ok := known[id]; !ok {
				ids = append(ids, id)
				inBatch[id] = true
			}
		}
		pend = append(pend, i)
		if len(ids) == batch {
			if err := flush(); err != nil {
				return root, err
			}
		}
	}
	if err := flush(); err != nil {
		return root, err
	}
	// Segments: extents grouped by the span their start offset falls in.
	dr := diskRoot{Size: size, Span: segmentSpan}
	for i := 0; i < len(ext); {
		j := i + 1
		span := ext[i].Offset / segmentSpan
		for j < len(ext) && ext[j].Offset/segmentSpan == span {
			j++
		}
		b := encodeSegment(ext[i].Offset, ext[i:j])
		sid := s.r.codec.id(b)
		if _, _, err := s.put(BlobSegment, sid, b); err != nil {
			return root, fmt.Errorf("put disk: segment: %w", err)
		}
		end := ext[j-1].Offset + ext[j-1].Length
		dr.Segs = append(dr.Segs, segRef{Start: ext[i].Offset, Length: end - ext[i].Offset, ID: sid})
		i = j
	}
	b := encodeRoot(dr)
	root = s.r.codec.id(b)
	if _, _, err := s.put(BlobRoot, root, b); err != nil {
		return root, fmt.Errorf("put disk: root: %w", err)
	}
	s.r.mu.Lock()
	if s.roots != nil {
		s.roots[root] = true
	}
	s.r.mu.Unlock()
	return root, nil
}

// adoptMap references every blob of a disk map this session did not build
// (an unchanged disk reusing its parent's root), so that a concurrent
// reclaim cannot delete them even if the parent is deleted meanwhile.
func (s *Session) adoptMap(ctx context.Context, root ID) error {
	s.r.mu.Lock()
	own := s.roots[root]
	s.r.mu.Unlock()
	if own {
		return nil
	}
	dr, err := s.r.loadRoot(ctx, root)
	if err != nil {
		return err
	}
	for _, ref := range dr.Segs {
		if _, err := s.referenceAll(ctx, "commit: reused disk map", []ID{ref.ID}); err != nil {
			return err
		}
		seg, err := s.r.loadSegment(ctx, ref)
		if err != nil {
			return err
		}
		var ids []ID
		var exts []Extent
		for _, e := range seg.Extents {
			if !e.Zero {
				ids, exts = append(ids, e.ID), append(exts, e)
			}
		}
		if len(ids) > 0 {
			info, err := s.referenceAll(ctx, "commit: reused disk map", ids)
			if err != nil {
				return err
			}
			for k, e := range exts {
				sl, err := checkDataRef(e, info[k])
				if err == nil && sl != e.Slice {
					err = fmt.Errorf("extent at %d of blob %s is encoded as slice=%v", e.Offset, e.ID, e.Slice)
				}
				if err != nil {
					return fmt.Errorf("commit: reused disk map: %w", err)
				}
			}
		}
	}
	return nil
}

// flush makes every blob this session references durable and indexed.
func (s *Session) flush(ctx context.Context) error {
	r := s.r
	r.mu.Lock()
	waits := make([]*pendingBlob, 0, len(s.waits))
	for pb := range s.waits {
		waits = append(waits, pb)
	}
	packs := make([]*packWriter, 0, len(s.packs))
	for pw := range s.packs {
		packs = append(packs, pw)
	}
	r.mu.Unlock()
	for _, pb := range waits {
		select {
		case <-pb.ready:
		case <-ctx.Done():
			return ctx.Err()
		}
		if pb.err != nil {
			return fmt.Errorf("deduplicated blob failed in another session: %w", pb.err)
		}
		packs = append(packs, pb.pw)
	}
	for _, pw := range packs {
		r.sealPack(pw)
	}
	for _, pw := range packs {
		select {
		case <-pw.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		if pw.err != nil {
			return pw.err
		}
	}
	return nil
}

// commit flushes packs, writes the manifest and commits the restore point
// LAST (commit record file, then catalog). Commit wraps it (diskfull.go).
func (s *Session) commit(ctx context.Context, p NewPoint) (Point, error) {
	r := s.r
	if p.Time.IsZero() {
		return Point{}, errors.New("commit: restore point time is required")
	}
	m := manifest{VM: p.VM, Time: p.Time.UTC(), Parent: p.Parent, Consistency: p.Consistency,
		Disks: make([]Disk, len(p.Disks)), Warnings: p.Warnings, Partial: p.Partial, Tags: p.Tags}
	if r.mw != nil {
		m.Writer = &PointWriter{ID: r.mw.id, Appliance: r.mw.appliance}
	}
	if len(p.Config) > 0 {
		if len(p.Config) > MaxBlobSize {
			return Point{}, fmt.Errorf("commit: VM configuration of %d bytes is too large", len(p.Config))
		}
		m.Config = r.codec.id(p.Config)
		if _, _, err := s.put(BlobVMConfig, m.Config, p.Config); err != nil {
			return Point{}, fmt.Errorf("commit: config: %w", err)
		}
	}
	roots := make([]ID, len(p.Disks))
	for i, d := range p.Disks {
		if d.Map.IsZero() || d.Capacity < 0 {
			return Point{}, fmt.Errorf("commit: disk %d has no map or a negative capacity", i)
		}
		m.Disks[i] = d
		roots[i] = d.Map
	}
	if _, err := s.referenceAll(ctx, "commit", roots); err != nil {
		return Point{}, err
	}
	for _, root := range roots {
		if err := s.adoptMap(ctx, root); err != nil {
			return Point{}, fmt.Errorf("commit: %w", err)
		}
	}
	mb, err := encodeManifest(m)
	if err != nil {
		return Point{}, err
	}
	mid := r.codec.id(mb)
	if _, _, err := s.put(BlobManifest, mid, mb); err != nil {
		return Point{}, fmt.Errorf("commit: manifest: %w", err)
	}
	if err := s.flush(ctx); err != nil {
		return Point{}, fmt.Errorf("commit: flush: %w", err)
	}
	if r.mw != nil {
		if err := s.mwBeforeCommit(ctx); err != nil {
			return Point{}, fmt.Errorf("commit: %w", err)
		}
	}
	// Every referenced blob must still be indexed and not condemned: reclaim
	// keeps our used set alive, so this is a safety net, not a code path.
	r.mu.Lock()
	var bad []ID
	verr := r.db.View(func(tx *bolt.Tx) error {
		for _, id := range s.used {
			if loc, ok := lookupTx(tx, id); !ok {
				bad = append(bad, id)
			} else if _, c := r.condemned[id]; c || r.mwCondemnedPack(loc.Pack) {
				bad = append(bad, id)
			}
		}
		return nil
	})
	r.mu.Unlock()
	if verr != nil {
		return Point{}, verr
	}
	if len(bad) > 0 {
		return Point{}, fmt.Errorf("commit: %d referenced blobs (e.g. %s) are not durable: %w", len(bad), bad[0], ErrCondemned)
	}
	if err := s.coverSessionPacks(ctx); err != nil {
		return Point{}, err
	}
	pt := pointFrom(mid, m, false)
	if err := r.writeRecord(record{Manifest: mid}); err != nil {
		return Point{}, fmt.Errorf("commit: %w", err)
	}
	if err := failpoint.Hit("catalog.point"); err != nil {
		return pt, fmt.Errorf("commit: catalog (point %s is committed; reopen to repair): %w", pt.ID, err)
	}
	if err := r.db.Update(func(tx *bolt.Tx) error { return putPointTx(tx, pt) }); err != nil {
		// The record is durable: the point exists and Open will re-catalog it.
		return pt, fmt.Errorf("commit: catalog (point %s is committed; reopen to repair): %w", pt.ID, err)
	}
	s.end()
	r.mwSessionEnd(s)
	return pt, nil
}

// Abort ends the session without a restore point. Blobs already written stay
// (indexed per pack) for reuse by the next backup or removal by reclaim.
// Idempotent; safe after Commit.
func (s *Session) Abort() {
	s.end()
	s.r.mwSessionEnd(s)
}

func (s *Session) end() {
	r := s.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if s.done {
		return
	}
	s.done = true
	if r.marking {
		for _, id := range s.used {
			r.markExtra[id] = struct{}{}
		}
	}
	delete(r.sessions, s)
	s.used, s.packs, s.waits, s.roots = nil, nil, nil, nil
	r.sessDone.Broadcast()
}

// BlobSizes returns the plaintext length of each blob (0 when unknown); see
// Repository.BlobSizes.
func (s *Session) BlobSizes(ctx context.Context, ids []ID) ([]int64, error) {
	return s.r.BlobSizes(ctx, ids)
}
