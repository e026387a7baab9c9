package repository

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/vmvault/vmvault/internal/failpoint"
)

// ReclaimReport summarises a Reclaim.
type ReclaimReport struct {
	LiveBlobs int `json:"liveBlobs"`
	// DeadBlobs counts the unreferenced blobs this reclaim removed;
	// DeadBlobsKept those it left in packs that are mostly live (a later
	// reclaim removes them once their pack qualifies).
	DeadBlobs     int `json:"deadBlobs"`
	DeadBlobsKept int `json:"deadBlobsKept"`
	PacksDeleted  int `json:"packsDeleted"`
	PacksRepacked int `json:"packsRepacked"` // packs whose live blobs were copied (mostly dead or small)
	OrphanFiles   int `json:"orphanFiles"`
	// OrphanFilesKept counts unindexed pack files left in place because a
	// restore point references a blob that is not indexed.
	OrphanFilesKept int `json:"orphanFilesKept"`
	// Held are packs kept because their object lock has not expired
	// (immutable repositories; objectlock.go), earliest first.
	Held          []HeldObject `json:"held,omitempty"`
	BytesFreed    int64        `json:"bytesFreed"`
	BytesRepacked int64        `json:"bytesRepacked"`
	// PacksDeferred qualified but wait for the next reclaim (one reclaim
	// takes a bounded number of blobs: ReclaimPlan.PacksDeferred).
	PacksDeferred int `json:"packsDeferred,omitempty"`
}

// repackThreshold: a pack whose live bytes are below this fraction is repacked.
const repackThreshold = 0.5

// Packs smaller than PackSize/smallPackDivisor are merged by reclaim when at
// least smallPackMerge of them exist.
const (
	smallPackDivisor = 4
	smallPackMerge   = 8
)

// markPoints adds every blob referenced by committed restore points to live.
// The commit records on disk are the truth (FORMAT.md §11), not the catalog:
// a point whose catalog entry was never written (a failed catalog
// transaction after Commit) or was dropped (an unreadable record at a
// recatalog) is still live. A record that exists but cannot be read stops
// reclaim: its blobs are unknown, so nothing may be deleted. Points the
// catalog lists without a record on disk (check reports them) are marked
// too, until `repo delete` or a recatalog forgets them.
func (r *Repository) markPoints(ctx context.Context, live *liveSet, progress func(Progress)) error {
	type markTarget struct {
		id     string
		config ID
		disks  []Disk
	}
	ids, err := r.listRecords()
	if err != nil {
		return err
	}
	if r.mw != nil {
		// Several writers: the packs of every record listed were published
		// before it (FORMAT.md §12a), so reading the log now finds them.
		if err := r.mwCatchUp(ctx); err != nil {
			return err
		}
	}
	onDisk := map[ID]bool{}
	var pts []markTarget
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return err
		}
		rec, err := r.readRecord(id)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted since the listing
		}
		if err != nil {
			return fmt.Errorf("commit record %s cannot be read (repair or remove the file; its blobs are unknown): %w", r.recordPath(id), err)
		}
		onDisk[id] = true
		b, err := r.loadBlob(ctx, rec.Manifest, nil)
		if err != nil {
			return fmt.Errorf("restore point %s: manifest: %w", id, err)
		}
		m, err := decodeManifest(b)
		if err != nil {
			return fmt.Errorf("restore point %s: %w", id, err)
		}
		pts = append(pts, markTarget{id.String(), m.Config, m.Disks})
	}
	cat, err := r.List(ctx)
	if err != nil {
		return err
	}
	for _, p := range cat {
		if pid, err := ParseID(p.ID); err == nil && !onDisk[pid] {
			pts = append(pts, markTarget{p.ID, p.ConfigID, p.Disks})
		}
	}
	for n, p := range pts {
		if progress != nil {
			progress(Progress{Phase: "mark", Done: int64(n), Total: int64(len(pts))})
		}
		pid, _ := ParseID(p.id)
		live.addMeta(pid)
		if !p.config.IsZero() {
			live.addMeta(p.config)
		}
		for _, d := range p.disks {
			// A root or segment already marked had all its blobs marked:
			// incremental points share almost everything with their parent.
			if live.hasMeta(d.Map) {
				continue
			}
			live.addMeta(d.Map)
			dr, err := r.loadRoot(ctx, d.Map)
			if err != nil {
				return fmt.Errorf("restore point %s: %w", p.id, err)
			}
			for _, ref := range dr.Segs {
				if live.hasMeta(ref.ID) {
					continue
				}
				live.addMeta(ref.ID)
				s, err := r.loadSegment(ctx, ref)
				if err != nil {
					return fmt.Errorf("restore point %s: %w", p.id, err)
				}
				for _, e := range s.Extents {
					if !e.Zero {
						live.add(e.ID)
					}
				}
			}
		}
	}
	return nil
}

// liveSetHint is the number of blobs the catalog's packs hold (their
// header counts): what the live set can hold at most, short of points
// that reference blobs the catalog lost.
func (r *Repository) liveSetHint() int {
	n := 0
	r.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketPacks).ForEach(func(_, v []byte) error {
			if pi, err := decodePackInfo(v); err == nil {
				n += int(pi.Count)
			}
			return nil
		})
	})
	return min(n, 1<<31)
}

// liveBlobMissing reports whether a live blob is neither indexed nor
// pending. Metadata ids are looked up whole; data prefixes are merged
// with a walk of the catalog in key order (one sequential pass, no
// random lookups). A data prefix counts as indexed when some catalog id
// starts with it: a live chunk missing from the catalog whose 8-byte
// prefix another indexed id shares is taken as present, with probability
// catalog/2^64 (5e-12 at 100 million chunks) per missing chunk — the one
// answer the prefixes give less exactly than whole ids; it only matters
// when a live chunk is already lost from the catalog and orphan files
// exist (FORMAT.md, reclaim notes).
func (r *Repository) liveBlobMissing(live *liveSet) bool {
	var missing []ID
	var missingPre []uint64
	r.db.View(func(tx *bolt.Tx) error {
		for id := range live.exact {
			if _, ok := lookupTx(tx, id); !ok {
				missing = append(missing, id)
			}
		}
		c := tx.Bucket(bucketBlobs).Cursor()
		k, v := c.First()
		for _, p := range live.sortedPrefixes() {
			for k != nil && keyPrefix(k) < p {
				k, v = c.Next()
			}
			found := false
			for k != nil && keyPrefix(k) == p {
				if _, err := decodeBlobLoc(v); err == nil && len(k) == len(ID{}) {
					found = true
				}
				k, v = c.Next()
			}
			if !found {
				missingPre = append(missingPre, p)
			}
		}
		return nil
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range missing {
		if _, ok := r.pending[id]; !ok {
			return true
		}
	}
	if len(missingPre) == 0 {
		return false
	}
	pend := make(map[uint64]bool, len(r.pending))
	for id := range r.pending {
		pend[idPrefix(id)] = true
	}
	for _, p := range missingPre {
		if !pend[p] {
			return true
		}
	}
	return false
}

// keyPrefix is a catalog key's first 8 bytes as a big-endian number (a
// shorter key is padded with zeros).
func keyPrefix(k []byte) uint64 {
	var b [8]byte
	copy(b[:], k)
	return binary.BigEndian.Uint64(b[:])
}

// PlanReclaim is a dry run of Reclaim: it marks the live set and returns
// what a reclaim would delete, repack and free now, changing nothing. It
// waits for a running reclaim (one maintenance at a time).
func (r *Repository) PlanReclaim(ctx context.Context, progress func(Progress)) (ReclaimPlan, error) {
	if err := r.enter(); err != nil {
		return ReclaimPlan{}, err
	}
	defer r.leave()
	r.maintMu.Lock()
	defer r.maintMu.Unlock()
	defer r.startMark()()
	live := newLiveSet(r.liveSetHint())
	if err := r.markPoints(ctx, live, progress); err != nil {
		return ReclaimPlan{}, fmt.Errorf("plan reclaim: mark: %w", err)
	}
	r.mu.Lock()
	snap, err := r.reclaimSnapshot(live)
	r.mu.Unlock()
	if err != nil {
		return ReclaimPlan{}, fmt.Errorf("plan reclaim: %w", err)
	}
	pl, err := func() (ReclaimPlan, error) {
		defer snap.close() // even on a panic: an open read transaction blocks Close
		return planReclaim(snap)
	}()
	if err != nil {
		return ReclaimPlan{}, err
	}
	if err := r.findOrphans(&pl, live); err != nil {
		return ReclaimPlan{}, fmt.Errorf("plan reclaim: %w", err)
	}
	return pl, nil
}

// reclaim removes what no restore point references and repacks mostly-dead
// packs. It is safe while sessions write (see the package documentation).
// Reclaim refuses to delete anything when a restore point cannot be read,
// because then the live set is unknown. Reclaim wraps it (diskfull.go).
//
// The decisions come from planReclaim (pure); the phases below carry them
// out in the order FORMAT.md's deletion protocol requires: mark, condemn
// (atomic with dedup lookups), repack (new packs indexed before anything
// is deleted), barrier (sessions older than the condemn end), delete the
// files and sync their directories, and only then drop catalog entries.
func (r *Repository) reclaim(ctx context.Context, progress func(Progress)) (*ReclaimReport, error) {
	if err := r.enter(); err != nil {
		return nil, err
	}
	defer r.leave()
	r.maintMu.Lock()
	defer r.maintMu.Unlock()
	rep := &ReclaimReport{}
	phase := func(p string, done, total int64) {
		if progress != nil {
			progress(Progress{Phase: p, Done: done, Total: total})
		}
	}

	var mwr *mwReclaim
	if r.mw != nil {
		var err error
		if mwr, err = r.mwReclaimBegin(ctx); err != nil {
			return nil, fmt.Errorf("reclaim (nothing deleted): %w", err)
		}
		defer mwr.release()
	}

	// 1. Mark.
	endMark := r.startMark()
	defer endMark()
	live := newLiveSet(r.liveSetHint())
	if err := r.markPoints(ctx, live, progress); err != nil {
		return nil, fmt.Errorf("reclaim: mark (nothing deleted): %w", err)
	}
	if err := r.markHeldPoints(ctx, live); err != nil { // hold.go
		return nil, fmt.Errorf("reclaim: mark (nothing deleted): %w", err)
	}

	// 2. Plan and condemn.
	pl, condemned, gen, err := r.reclaimCondemn(live)
	if err != nil {
		return nil, err
	}
	rep.LiveBlobs, rep.PacksDeferred = pl.LiveBlobs, pl.PacksDeferred
	if mwr != nil {
		// Another writer's pack can land at any moment: no orphans here
		// (reconcile indexed every pack listed before the mark).
		if err := mwr.condemn(ctx, &pl); err != nil {
			return nil, fmt.Errorf("reclaim (nothing deleted): %w", err)
		}
	} else if err := r.findOrphans(&pl, live); err != nil {
		return nil, fmt.Errorf("reclaim: %w", err)
	}
	rep.OrphanFilesKept = pl.OrphanFilesKept

	// 3. Repack.
	keep, err := r.reclaimRepack(ctx, &pl, rep, phase)
	if err != nil {
		return rep, err
	}

	// 4. Barrier.
	if err := r.reclaimBarrier(ctx, gen, phase); err != nil {
		return rep, err
	}
	if mwr != nil {
		if err := r.mwPublish(ctx, nil); err != nil { // the repacked packs
			return rep, fmt.Errorf("reclaim: %w", err)
		}
		if err := r.mwBarrier(ctx, phase); err != nil {
			return rep, err
		}
		if err := mwr.remark(ctx, &pl, keep); err != nil {
			return rep, fmt.Errorf("reclaim: re-mark (nothing deleted): %w", err)
		}
	}

	// 5. Delete: files first, then catalog entries.
	r.gcMu.Lock()
	defer r.gcMu.Unlock()
	gone, err := r.reclaimDelete(ctx, &pl, keep, rep, phase)
	if err != nil {
		return rep, err
	}
	var reindex []string
	if mwr != nil {
		reindex = mwr.survivors(&pl, gone)
	}
	removed, err := r.reclaimDropEntries(&pl, gone)
	if err != nil {
		return rep, err
	}
	if mwr != nil {
		if err := mwr.finish(ctx, gone, reindex); err != nil {
			return rep, fmt.Errorf("reclaim: %w", err)
		}
	}
	rep.DeadBlobs, rep.DeadBlobsKept = removed, max(pl.DeadBlobs+pl.DeadBlobsKept-removed, 0)
	r.mu.Lock()
	for _, id := range condemned {
		delete(r.condemned, id)
	}
	r.mu.Unlock()
	phase("done", int64(len(pl.packs)), int64(len(pl.packs)))
	return rep, nil
}

// startMark makes commits record the blobs of points committed while the
// mark runs (they are live too); the returned func ends it.
func (r *Repository) startMark() func() {
	r.mu.Lock()
	r.marking, r.markExtra = true, map[ID]struct{}{}
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		r.marking, r.markExtra = false, nil
		r.mu.Unlock()
	}
}

// reclaimSnapshot adds to live what sessions hold (points committed during
// the mark, blobs open sessions use, pending blobs) and opens a read
// transaction on the catalog from which planReclaim walks its packs and
// blobs in key order (streamed: the catalog is not copied into memory).
// The caller holds r.mu, and calls close before any catalog update in
// this goroutine (bbolt: a writer growing the file waits for readers).
func (r *Repository) reclaimSnapshot(live *liveSet) (reclaimSnapshot, error) {
	for id := range r.markExtra {
		live.add(id)
	}
	for s := range r.sessions {
		for _, id := range s.used {
			live.add(id)
		}
	}
	for id := range r.pending {
		live.add(id)
	}
	tx, err := r.db.Begin(false)
	if err != nil {
		return reclaimSnapshot{}, err
	}
	return reclaimSnapshot{
		live:     live,
		packSize: int64(r.cfg.PackSize),
		maxBlobs: r.reclaimMaxBlobs,
		eachPack: func(fn func(packID, packInfo) error) error {
			return tx.Bucket(bucketPacks).ForEach(func(k, v []byte) error {
				pi, err := decodePackInfo(v)
				if err != nil {
					return err
				}
				if len(k) != len(packID{}) {
					return fmt.Errorf("catalog: pack key of %d bytes", len(k))
				}
				return fn(packID(k), pi)
			})
		},
		eachBlob: func(fn func(ID, blobLoc) error) error {
			return tx.Bucket(bucketBlobs).ForEach(func(k, v []byte) error {
				l, err := decodeBlobLoc(v)
				if err != nil {
					return err
				}
				if len(k) != len(ID{}) {
					return fmt.Errorf("catalog: blob key of %d bytes", len(k))
				}
				return fn(ID(k), l)
			})
		},
		close: func() { tx.Rollback() },
	}, nil
}

// reclaimCondemn plans the reclaim and condemns the doomed packs and their
// dead blobs, atomically with respect to sessions' dedup lookups (under
// r.mu). State left by an earlier, cancelled reclaim is recomputed from
// scratch. It returns the plan, the condemned blob ids and the generation
// sessions started from now on carry.
func (r *Repository) reclaimCondemn(live *liveSet) (ReclaimPlan, []ID, uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.condemned = map[ID]struct{}{}
	snap, err := r.reclaimSnapshot(live)
	if err != nil {
		return ReclaimPlan{}, nil, 0, fmt.Errorf("reclaim: %w", err)
	}
	pl, err := func() (ReclaimPlan, error) {
		defer snap.close() // before the condemn's write transactions, and on a panic
		return planReclaim(snap)
	}()
	if err != nil {
		return pl, nil, 0, fmt.Errorf("reclaim: %w", err)
	}
	var condemned []ID
	if len(pl.packs) > 0 {
		if err := failpoint.Hit("reclaim.condemn"); err != nil {
			return pl, nil, 0, fmt.Errorf("reclaim: condemn: %w", err)
		}
		// In transactions of at most catalogBatch entries: dead blobs are
		// spread over the whole key space, and one transaction over all
		// of them held every page of the catalog in memory (bbolt copies
		// each page it changes). The first sets the reclaim mark, so a
		// crash between them is recovered at open like one after them.
		var txc []ID // condemned by the running transaction
		err = r.updateBatched(pl.packs, func() { txc = txc[:0] }, func(tx *bolt.Tx, pp plannedPack, first bool) (int, error) {
			if first {
				if err := tx.Bucket(bucketMeta).Put(metaReclaim, []byte{1}); err != nil {
					return 0, err
				}
			}
			if v := tx.Bucket(bucketPacks).Get(pp.id[:]); v != nil {
				pi, err := decodePackInfo(v)
				if err != nil {
					return 0, err
				}
				pi.State = blobStateCondemned
				if err := tx.Bucket(bucketPacks).Put(pp.id[:], encodePackInfo(pi)); err != nil {
					return 0, err
				}
			}
			n := 1
			for _, bid := range pp.dead {
				l, ok := lookupTx(tx, bid)
				if !ok || l.Pack != pp.id {
					continue
				}
				l.State = blobStateCondemned
				if err := tx.Bucket(bucketBlobs).Put(bid[:], encodeBlobLoc(l)); err != nil {
					return n, err
				}
				txc = append(txc, bid)
				n++
			}
			return n, nil
		}, func() { condemned = append(condemned, txc...) }, nil)
		if err != nil {
			// Packs condemned by the transactions that committed stay so
			// until the next reclaim or open: only unreferenced blobs are
			// condemned, and a condemned blob is never deduplicated.
			return pl, nil, 0, fmt.Errorf("reclaim: condemn: %w", err)
		}
		for _, id := range condemned {
			r.condemned[id] = struct{}{}
		}
	}
	r.gen++
	return pl, condemned, r.gen, nil
}

// findOrphans adds the orphan pack files to the plan: on disk, not in the
// catalog (at the snapshot nor now), not being written.
func (r *Repository) findOrphans(pl *ReclaimPlan, live *liveSet) error {
	onDisk, err := r.listPackFiles()
	if err != nil {
		return err
	}
	known := map[packID]bool{}
	for id := range onDisk {
		if _, ok := slices.BinarySearchFunc(pl.indexed, id, func(a, b packID) int { return bytes.Compare(a[:], b[:]) }); ok {
			known[id] = true
		}
	}
	// Open packs before the catalog: a pack sealed and indexed between the
	// two reads is then seen by the second.
	r.mu.Lock()
	for id := range onDisk {
		if _, ok := r.openPacks[id]; ok {
			known[id] = true
		}
	}
	r.mu.Unlock()
	if err := r.db.View(func(tx *bolt.Tx) error {
		for id := range onDisk {
			if !known[id] && tx.Bucket(bucketPacks).Get(id[:]) != nil {
				known[id] = true
			}
		}
		return nil
	}); err != nil {
		return err
	}
	planOrphans(pl, onDisk, known, func() bool { return r.liveBlobMissing(live) })
	return nil
}

// reclaimRepack copies the live blobs of the planned packs into new packs
// (normal write order: they are indexed before the old ones are deleted).
// A pack whose live blob cannot be read or does not verify is kept (never
// propagate corruption); keep says which.
func (r *Repository) reclaimRepack(ctx context.Context, pl *ReclaimPlan, rep *ReclaimReport, phase func(string, int64, int64)) (map[packID]bool, error) {
	keep := map[packID]bool{}
	// Object lock (objectlock.go): packs still under retention are kept,
	// orphans among them too.
	ids := make([]packID, len(pl.packs))
	for n, pp := range pl.packs {
		ids[n] = pp.id
	}
	orphanIDs := make([]packID, len(pl.orphans))
	for n, o := range pl.orphans {
		orphanIDs[n] = o.id
	}
	kept, err := r.holdLockedPacks(ctx, ids, orphanIDs, keep, rep)
	if err != nil {
		return keep, fmt.Errorf("reclaim: %w", err)
	}
	if len(kept) != len(pl.orphans) {
		stay := map[packID]bool{}
		for _, id := range kept {
			stay[id] = true
		}
		pl.orphans = slices.DeleteFunc(pl.orphans, func(o orphanFile) bool { return !stay[o.id] })
	}
	written := map[*packWriter]struct{}{}
	// One read buffer and one copy for the whole repack (appendBlob writes
	// the copy before it returns): a fresh pair per blob was two MiB of
	// garbage per 1 MiB chunk, and the heap grew with it.
	var buf, stored []byte
	for n, pp := range pl.packs {
		phase("repack", int64(n), int64(len(pl.packs)))
		if keep[pp.id] { // held by its object lock
			continue
		}
		if len(pp.live) > 0 {
			rep.PacksRepacked++
		}
		for _, e := range pp.live {
			if err := ctx.Err(); err != nil {
				return keep, err
			}
			buf = slices.Grow(buf[:0], int(e.StoredLen))[:e.StoredLen]
			if err := r.readPackAt(pp.id, buf, int64(e.Offset)); err != nil {
				keep[pp.id] = true
				break
			}
			// The stored bytes are position independent, so they are copied
			// verbatim once verified (decode may work in place).
			stored = append(stored[:0], buf...)
			if _, err := r.codec.decode(nil, e, buf); err != nil {
				keep[pp.id] = true
				break
			}
			if err := failpoint.Hit("reclaim.repack"); err != nil {
				return keep, fmt.Errorf("reclaim: repack: %w", err)
			}
			pw, err := r.appendBlob(e, stored, nil)
			if err != nil {
				return keep, fmt.Errorf("reclaim: repack: %w", err)
			}
			written[pw] = struct{}{}
			rep.BytesRepacked += int64(e.StoredLen)
		}
	}
	for pw := range written {
		r.sealPack(pw)
	}
	for pw := range written {
		<-pw.done
		if pw.err != nil {
			return keep, fmt.Errorf("reclaim: repack: %w", pw.err)
		}
	}
	return keep, nil
}

// reclaimBarrier waits until every session that started before the
// condemn step (generation < gen) has ended: it may read what is deleted
// next.
func (r *Repository) reclaimBarrier(ctx context.Context, gen uint64, phase func(string, int64, int64)) error {
	if err := failpoint.Hit("reclaim.barrier"); err != nil {
		return fmt.Errorf("reclaim: %w", err)
	}
	for {
		r.mu.Lock()
		old := false
		for s := range r.sessions {
			if s.gen < gen {
				old = true
				break
			}
		}
		r.mu.Unlock()
		if !old {
			return nil
		}
		phase("wait for backups", 0, 0)
		select {
		case <-ctx.Done():
			return fmt.Errorf("reclaim: waiting for running backups: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// reclaimDelete deletes the planned packs not kept and the orphan files,
// then syncs their directories. The caller holds gcMu. It returns the
// packs deleted.
func (r *Repository) reclaimDelete(ctx context.Context, pl *ReclaimPlan, keep map[packID]bool, rep *ReclaimReport, phase func(string, int64, int64)) (map[packID]bool, error) {
	gone := map[packID]bool{}
	dirs := map[string]bool{}
	for n, pp := range pl.packs {
		phase("delete", int64(n), int64(len(pl.packs)))
		if keep[pp.id] {
			continue
		}
		if err := failpoint.Hit("reclaim.delete"); err != nil {
			return gone, fmt.Errorf("reclaim: delete pack %s: %w", pp.id, err)
		}
		if err := r.store.Delete(ctx, packName(pp.id)); err != nil {
			return gone, fmt.Errorf("reclaim: delete pack %s: %w", pp.id, err)
		}
		r.files.forget(pp.id)
		gone[pp.id] = true
		dirs[packDir(pp.id)] = true
		rep.PacksDeleted++
		rep.BytesFreed += int64(pp.info.Size)
	}
	for _, o := range pl.orphans {
		if err := failpoint.Hit("reclaim.delete"); err != nil {
			return gone, fmt.Errorf("reclaim: delete orphan pack %s: %w", o.id, err)
		}
		if err := r.store.Delete(ctx, packName(o.id)); err != nil {
			return gone, fmt.Errorf("reclaim: delete orphan pack %s: %w", o.id, err)
		}
		dirs[packDir(o.id)] = true
		rep.OrphanFiles++
		rep.BytesFreed += o.size
	}
	if r.opts.NoFsync {
		return gone, nil
	}
	for d := range dirs {
		if err := failpoint.Hit("reclaim.dirsync"); err != nil {
			return gone, fmt.Errorf("reclaim: %w", err)
		}
		if err := r.store.SyncDeletes(ctx, d); err != nil {
			return gone, err
		}
	}
	return gone, nil
}

// catalogBatch is the most catalog entries one of reclaim's transactions
// changes: a transaction keeps a copy of each page it changes, and
// reclaim's changes are spread over the whole catalog (~16 KiB of heap per
// entry at worst: 128 MiB).
const catalogBatch = 8192

// updateBatched runs fn for each pack in catalog transactions of about
// catalogBatch changed entries (fn returns how many it changed). begin,
// when non-nil, runs as each transaction starts and committed after each
// commits; last, when non-nil, runs in the final transaction. first tells
// fn it runs first in the first transaction.
func (r *Repository) updateBatched(packs []plannedPack, begin func(), fn func(tx *bolt.Tx, pp plannedPack, first bool) (int, error), committed func(), last func(tx *bolt.Tx) error) error {
	for lo := 0; lo < len(packs) || (lo == 0 && last != nil); {
		hi := lo
		err := r.db.Update(func(tx *bolt.Tx) error {
			if begin != nil {
				begin()
			}
			hi = lo
			changed := 0
			batch := catalogBatch
			if r.reclaimBatch > 0 {
				batch = r.reclaimBatch
			}
			for hi < len(packs) && changed < batch {
				n, err := fn(tx, packs[hi], hi == 0)
				if err != nil {
					return err
				}
				changed += n
				hi++
			}
			if hi == len(packs) && last != nil {
				return last(tx)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if committed != nil {
			committed()
		}
		if hi == len(packs) {
			return nil
		}
		lo = hi
	}
	return nil
}

// packDir is the directory of a pack file, as the store names it.
func packDir(id packID) string {
	s := id.String()
	return "packs/" + s[:2] + "/"
}

// reclaimDropEntries drops the catalog entries of the deleted packs that
// still point at them, returns the packs kept to ordinary (live) state,
// and ends the reclaim's catalog mark. It returns the dead blobs dropped.
func (r *Repository) reclaimDropEntries(pl *ReclaimPlan, gone map[packID]bool) (int, error) {
	if err := failpoint.Hit("reclaim.catalog"); err != nil {
		return 0, fmt.Errorf("reclaim: update catalog: %w", err)
	}
	// In batches (updateBatched): the reclaim mark goes with the last, so
	// a crash between them finishes at open (reconcile).
	removed, txRemoved := 0, 0
	err := r.updateBatched(pl.packs, func() { txRemoved = 0 }, func(tx *bolt.Tx, pp plannedPack, _ bool) (int, error) {
		blobs, packs := tx.Bucket(bucketBlobs), tx.Bucket(bucketPacks)
		id := pp.id
		n := 1
		if !gone[id] {
			// Kept (unreadable live blob): back to an ordinary pack.
			if v := packs.Get(id[:]); v != nil {
				if pi, err := decodePackInfo(v); err == nil {
					pi.State = blobStateLive
					if err := packs.Put(id[:], encodePackInfo(pi)); err != nil {
						return n, err
					}
				}
			}
			for _, bid := range pp.dead {
				if l, ok := lookupTx(tx, bid); ok && l.Pack == id && l.State == blobStateCondemned {
					l.State = blobStateLive
					if err := blobs.Put(bid[:], encodeBlobLoc(l)); err != nil {
						return n, err
					}
					n++
				}
			}
			return n, nil
		}
		for _, e := range pp.live {
			if l, ok := lookupTx(tx, e.ID); ok && l.Pack == id {
				if err := blobs.Delete(e.ID[:]); err != nil {
					return n, err
				}
				n++
			}
		}
		for _, bid := range pp.dead {
			if l, ok := lookupTx(tx, bid); ok && l.Pack == id {
				if err := blobs.Delete(bid[:]); err != nil {
					return n, err
				}
				txRemoved++
				n++
			}
		}
		return n, packs.Delete(id[:])
	}, func() { removed += txRemoved }, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Delete(metaReclaim)
	})
	if err != nil {
		return 0, fmt.Errorf("reclaim: update catalog: %w", err)
	}
	return removed, nil
}
