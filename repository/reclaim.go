package repository

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/vmvault/vmvault/internal/failpoint"
	bolt "go.etcd.io/bbolt"
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
func (r *Repository) markPoints(ctx context.Context, live map[ID]struct{}, progress func(Progress)) error {
	type markTarget struct {
		id     string
		config ID
		disks  []Disk
	}
	ids, err := r.listRecords()
	if err != nil {
		return err
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
		live[pid] = struct{}{}
		if !p.config.IsZero() {
			live[p.config] = struct{}{}
		}
		for _, d := range p.disks {
			// A root or segment already marked had all its blobs marked:
			// incremental points share almost everything with their parent.
			if _, seen := live[d.Map]; seen {
				continue
			}
			live[d.Map] = struct{}{}
			dr, err := r.loadRoot(ctx, d.Map)
			if err != nil {
				return fmt.Errorf("restore point %s: %w", p.id, err)
			}
			for _, ref := range dr.Segs {
				if _, seen := live[ref.ID]; seen {
					continue
				}
				live[ref.ID] = struct{}{}
				s, err := r.loadSegment(ctx, ref)
				if err != nil {
					return fmt.Errorf("restore point %s: %w", p.id, err)
				}
				for _, e := range s.Extents {
					if !e.Zero {
						live[e.ID] = struct{}{}
					}
				}
			}
		}
	}
	return nil
}

// liveBlobMissing reports whether a live blob is neither indexed nor
// pending.
func (r *Repository) liveBlobMissing(live map[ID]struct{}) bool {
	var missing []ID
	r.db.View(func(tx *bolt.Tx) error {
		for id := range live {
			if _, ok := lookupTx(tx, id); !ok {
				missing = append(missing, id)
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
	return false
}

type packPlan struct {
	info      packInfo
	liveBytes int64
	live      []packEntry // live blobs indexed in this pack
	dead      []ID
}

// reclaim removes what no restore point references and repacks mostly-dead
// packs. It is safe while sessions write (see the package documentation).
// Reclaim refuses to delete anything when a restore point cannot be read,
// because then the live set is unknown. Reclaim wraps it (diskfull.go).
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

	// 1. Mark.
	r.mu.Lock()
	r.marking, r.markExtra = true, map[ID]struct{}{}
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.marking, r.markExtra = false, nil
		r.mu.Unlock()
	}()
	live := map[ID]struct{}{}
	if err := r.markPoints(ctx, live, progress); err != nil {
		return nil, fmt.Errorf("reclaim: mark (nothing deleted): %w", err)
	}
	if err := r.markHeldPoints(ctx, live); err != nil { // hold.go
		return nil, fmt.Errorf("reclaim: mark (nothing deleted): %w", err)
	}

	// 2. Condemn, atomically with respect to sessions' dedup lookups. State
	// left by an earlier, cancelled reclaim is recomputed from scratch.
	r.mu.Lock()
	r.condemned = map[ID]struct{}{}
	for id := range r.markExtra {
		live[id] = struct{}{}
	}
	for s := range r.sessions {
		for _, id := range s.used {
			live[id] = struct{}{}
		}
	}
	for id := range r.pending {
		live[id] = struct{}{}
	}
	plans := map[packID]*packPlan{}
	totalDead := 0
	err := r.db.View(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketPacks).ForEach(func(k, v []byte) error {
			pi, err := decodePackInfo(v)
			if err != nil {
				return err
			}
			plans[packID(k)] = &packPlan{info: pi}
			return nil
		}); err != nil {
			return err
		}
		return tx.Bucket(bucketBlobs).ForEach(func(k, v []byte) error {
			l, err := decodeBlobLoc(v)
			if err != nil {
				return err
			}
			pl := plans[l.Pack]
			if pl == nil {
				pl = &packPlan{}
				plans[l.Pack] = pl
			}
			if _, ok := live[ID(k)]; ok {
				pl.liveBytes += int64(l.StoredLen)
				pl.live = append(pl.live, l.entry(ID(k)))
				rep.LiveBlobs++
			} else {
				pl.dead = append(pl.dead, ID(k))
				totalDead++
			}
			return nil
		})
	})
	if err != nil {
		r.mu.Unlock()
		return nil, fmt.Errorf("reclaim: %w", err)
	}
	doomed := map[packID]*packPlan{}
	var small []packID
	for id, pl := range plans {
		if len(pl.live) == 0 || float64(pl.liveBytes) < repackThreshold*float64(pl.info.Size) {
			doomed[id] = pl
		} else if pl.info.Size < uint64(r.cfg.PackSize)/smallPackDivisor {
			small = append(small, id)
		}
	}
	// Tail packs (every Commit flushes one) accumulate: merge them once
	// there are enough to fill a reasonable pack.
	if len(small) >= smallPackMerge {
		for _, id := range small {
			doomed[id] = plans[id]
		}
	}
	var condemnedIDs []ID
	if len(doomed) > 0 {
		if err := failpoint.Hit("reclaim.condemn"); err != nil {
			r.mu.Unlock()
			return nil, fmt.Errorf("reclaim: condemn: %w", err)
		}
		err = r.db.Update(func(tx *bolt.Tx) error {
			if err := tx.Bucket(bucketMeta).Put(metaReclaim, []byte{1}); err != nil {
				return err
			}
			for id, pl := range doomed {
				if v := tx.Bucket(bucketPacks).Get(id[:]); v != nil {
					pi, err := decodePackInfo(v)
					if err != nil {
						return err
					}
					pi.State = blobStateCondemned
					if err := tx.Bucket(bucketPacks).Put(id[:], encodePackInfo(pi)); err != nil {
						return err
					}
				}
				for _, bid := range pl.dead {
					l, ok := lookupTx(tx, bid)
					if !ok || l.Pack != id {
						continue
					}
					l.State = blobStateCondemned
					if err := tx.Bucket(bucketBlobs).Put(bid[:], encodeBlobLoc(l)); err != nil {
						return err
					}
					condemnedIDs = append(condemnedIDs, bid)
				}
			}
			return nil
		})
		if err != nil {
			r.mu.Unlock()
			return nil, fmt.Errorf("reclaim: condemn: %w", err)
		}
		for _, id := range condemnedIDs {
			r.condemned[id] = struct{}{}
		}
	}
	r.gen++
	gen := r.gen
	r.mu.Unlock()

	// Orphan files: on disk, not in the catalog, not being written.
	onDisk, err := r.listPackFiles()
	if err != nil {
		return nil, fmt.Errorf("reclaim: %w", err)
	}
	r.mu.Lock()
	var orphans []packID
	for id := range onDisk {
		if _, ok := plans[id]; ok {
			continue
		}
		if _, ok := r.openPacks[id]; ok {
			continue
		}
		orphans = append(orphans, id)
	}
	r.mu.Unlock()
	if len(orphans) > 0 {
		// Re-check against the catalog: a pack indexed since the scan is not an orphan.
		_ = r.db.View(func(tx *bolt.Tx) error {
			kept := orphans[:0]
			for _, id := range orphans {
				if tx.Bucket(bucketPacks).Get(id[:]) == nil {
					kept = append(kept, id)
				}
			}
			orphans = kept
			return nil
		})
	}
	if len(orphans) > 0 && r.liveBlobMissing(live) {
		// A restore point needs a blob the catalog lacks: it may be in one
		// of these unindexed files (a pack whose header could not be
		// salvaged), so none of them is deleted.
		rep.OrphanFilesKept, orphans = len(orphans), nil
	}

	// 3. Repack live blobs of doomed packs (normal write order: new packs are
	// indexed before the old ones are deleted).
	keep := map[packID]bool{}
	ids := make([]packID, 0, len(doomed))
	for id := range doomed {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return string(ids[i][:]) < string(ids[j][:]) })
	// Object lock (objectlock.go): packs still under retention are kept.
	if orphans, err = r.holdLockedPacks(ctx, ids, orphans, keep, rep); err != nil {
		return rep, fmt.Errorf("reclaim: %w", err)
	}
	written := map[*packWriter]struct{}{}
	for n, id := range ids {
		pl := doomed[id]
		phase("repack", int64(n), int64(len(ids)))
		if keep[id] { // held by its object lock
			continue
		}
		if len(pl.live) > 0 {
			rep.PacksRepacked++
		}
		for _, e := range pl.live {
			if err := ctx.Err(); err != nil {
				return rep, err
			}
			buf := make([]byte, e.StoredLen)
			if err := r.readPackAt(id, buf, int64(e.Offset)); err != nil {
				keep[id] = true
				break
			}
			// Verify before copying: never propagate corruption. The stored
			// bytes are position independent, so they are copied verbatim.
			stored := append([]byte(nil), buf...)
			if _, err := r.codec.decode(nil, e, buf); err != nil {
				keep[id] = true
				break
			}
			if err := failpoint.Hit("reclaim.repack"); err != nil {
				return rep, fmt.Errorf("reclaim: repack: %w", err)
			}
			pw, err := r.appendBlob(e, stored, nil)
			if err != nil {
				return rep, fmt.Errorf("reclaim: repack: %w", err)
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
			return rep, fmt.Errorf("reclaim: repack: %w", pw.err)
		}
	}

	// 4. Barrier: every session that started before the condemn step must
	// end before anything it might read is deleted.
	if err := failpoint.Hit("reclaim.barrier"); err != nil {
		return rep, fmt.Errorf("reclaim: %w", err)
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
			break
		}
		phase("wait for backups", 0, 0)
		select {
		case <-ctx.Done():
			return rep, fmt.Errorf("reclaim: waiting for running backups: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}

	// 5. Delete: files first, then catalog entries.
	r.gcMu.Lock()
	defer r.gcMu.Unlock()
	var deleted []packID
	for n, id := range ids {
		phase("delete", int64(n), int64(len(ids)))
		if keep[id] {
			continue
		}
		if err := failpoint.Hit("reclaim.delete"); err != nil {
			return rep, fmt.Errorf("reclaim: delete pack %s: %w", id, err)
		}
		if err := r.store.Delete(ctx, packName(id)); err != nil {
			return rep, fmt.Errorf("reclaim: delete pack %s: %w", id, err)
		}
		r.files.forget(id)
		deleted = append(deleted, id)
		rep.PacksDeleted++
		rep.BytesFreed += int64(doomed[id].info.Size)
	}
	for _, id := range orphans {
		if err := failpoint.Hit("reclaim.delete"); err != nil {
			return rep, fmt.Errorf("reclaim: delete orphan pack %s: %w", id, err)
		}
		if err := r.store.Delete(ctx, packName(id)); err != nil {
			return rep, fmt.Errorf("reclaim: delete orphan pack %s: %w", id, err)
		}
		rep.OrphanFiles++
		rep.BytesFreed += onDisk[id]
	}
	if !r.opts.NoFsync && (len(deleted) > 0 || len(orphans) > 0) {
		dirs := map[string]bool{}
		for _, id := range append(deleted, orphans...) {
			s := id.String()
			dirs["packs/"+s[:2]+"/"] = true
		}
		for d := range dirs {
			if err := failpoint.Hit("reclaim.dirsync"); err != nil {
				return rep, fmt.Errorf("reclaim: %w", err)
			}
			if err := r.store.SyncDeletes(ctx, d); err != nil {
				return rep, err
			}
		}
	}
	gone := map[packID]bool{}
	for _, id := range deleted {
		gone[id] = true
	}
	if err := failpoint.Hit("reclaim.catalog"); err != nil {
		return rep, fmt.Errorf("reclaim: update catalog: %w", err)
	}
	removed := 0
	err = r.db.Update(func(tx *bolt.Tx) error {
		removed = 0
		blobs, packs := tx.Bucket(bucketBlobs), tx.Bucket(bucketPacks)
		for id, pl := range doomed {
			if !gone[id] {
				// Kept (unreadable live blob): back to an ordinary pack.
				if v := packs.Get(id[:]); v != nil {
					if pi, err := decodePackInfo(v); err == nil {
						pi.State = blobStateLive
						if err := packs.Put(id[:], encodePackInfo(pi)); err != nil {
							return err
						}
					}
				}
				for _, bid := range pl.dead {
					if l, ok := lookupTx(tx, bid); ok && l.Pack == id && l.State == blobStateCondemned {
						l.State = blobStateLive
						if err := blobs.Put(bid[:], encodeBlobLoc(l)); err != nil {
							return err
						}
					}
				}
				continue
			}
			for _, e := range pl.live {
				if l, ok := lookupTx(tx, e.ID); ok && l.Pack == id {
					if err := blobs.Delete(e.ID[:]); err != nil {
						return err
					}
				}
			}
			for _, bid := range pl.dead {
				if l, ok := lookupTx(tx, bid); ok && l.Pack == id {
					if err := blobs.Delete(bid[:]); err != nil {
						return err
					}
					removed++
				}
			}
			if err := packs.Delete(id[:]); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Delete(metaReclaim)
	})
	if err != nil {
		return rep, fmt.Errorf("reclaim: update catalog: %w", err)
	}
	rep.DeadBlobs, rep.DeadBlobsKept = removed, max(totalDead-removed, 0)
	r.mu.Lock()
	for _, id := range condemnedIDs {
		delete(r.condemned, id)
	}
	r.mu.Unlock()
	phase("done", int64(len(ids)), int64(len(ids)))
	return rep, nil
}
