package repository

import (
	"context"
	"fmt"
	"sort"

	bolt "go.etcd.io/bbolt"

	"github.com/vmvault/vmvault/internal/failpoint"
)

// reconcile makes the catalog agree with the files (packs are the truth,
// commit records decide which points exist). It runs at Open (where an empty
// catalog makes it a full recatalog) and from Recatalog.
func (r *Repository) reconcile(ctx context.Context, progress func(Progress)) error {
	report := func(phase string, done, total int64) {
		if progress != nil {
			progress(Progress{Phase: phase, Done: done, Total: total})
		}
	}
	// Records before packs: a commit record is written only after every
	// pack it needs was acknowledged, so every pack of a record listed here
	// is in the pack listing that follows, even while another appliance
	// writes into the repository (a read-only open).
	recs, err := r.listRecords()
	if err != nil {
		return err
	}
	onDisk, err := r.listPackFiles()
	if err != nil {
		return fmt.Errorf("list packs: %w", err)
	}
	if r.opts.ReadOnly || r.mw != nil { // another writer's deletions and reclaims
		if err := r.pruneReplica(onDisk, recs); err != nil {
			return fmt.Errorf("refresh read-only catalog: %w", err)
		}
	}
	// 1. Finish an interrupted reclaim: condemned packs that are gone lose
	// their entries; the rest become ordinary packs again (the next reclaim
	// recomputes everything).
	var interrupted bool
	if err := r.db.View(func(tx *bolt.Tx) error {
		interrupted = tx.Bucket(bucketMeta).Get(metaReclaim) != nil
		return nil
	}); err != nil {
		return err
	}
	if interrupted {
		if err := failpoint.Hit("reconcile.reclaim"); err != nil {
			return fmt.Errorf("recover interrupted reclaim: %w", err)
		}
		if err := r.db.Update(func(tx *bolt.Tx) error {
			packs, blobs := tx.Bucket(bucketPacks), tx.Bucket(bucketBlobs)
			gone := map[packID]bool{}
			err := packs.ForEach(func(k, v []byte) error {
				pi, err := decodePackInfo(v)
				if err != nil {
					return err
				}
				id := packID(k)
				if _, ok := onDisk[id]; !ok && pi.State == blobStateCondemned {
					gone[id] = true
				} else if pi.State != blobStateLive {
					pi.State = blobStateLive
					return packs.Put(k, encodePackInfo(pi))
				}
				return nil
			})
			if err != nil {
				return err
			}
			for id := range gone {
				if err := packs.Delete(id[:]); err != nil {
					return err
				}
			}
			var del [][]byte
			var fix [][2][]byte
			err = blobs.ForEach(func(k, v []byte) error {
				l, err := decodeBlobLoc(v)
				if err != nil {
					return err
				}
				if gone[l.Pack] {
					del = append(del, append([]byte(nil), k...))
				} else if l.State == blobStateCondemned {
					l.State = blobStateLive
					fix = append(fix, [2][]byte{append([]byte(nil), k...), encodeBlobLoc(l)})
				}
				return nil
			})
			if err != nil {
				return err
			}
			for _, k := range del {
				if err := blobs.Delete(k); err != nil {
					return err
				}
			}
			for _, kv := range fix {
				if err := blobs.Put(kv[0], kv[1]); err != nil {
					return err
				}
			}
			return tx.Bucket(bucketMeta).Delete(metaReclaim)
		}); err != nil {
			return fmt.Errorf("recover interrupted reclaim: %w", err)
		}
	}

	// 2. Index packs that reached their final name but not the catalog
	// (crash between rename and index transaction, or a recatalog). A pack
	// whose header is damaged is salvaged: the blobs that verify are
	// indexed. Packs with no verifiable blob are left for check to report
	// and reclaim to remove.
	known := map[packID]bool{}
	if err := r.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketPacks).ForEach(func(k, v []byte) error {
			known[packID(k)] = true
			return nil
		})
	}); err != nil {
		return err
	}
	var todo []packID
	for id := range onDisk {
		if !known[id] {
			todo = append(todo, id)
		}
	}
	for i, id := range todo {
		if err := ctx.Err(); err != nil {
			return err
		}
		entries, size, err := r.readPackHeader(id)
		if err != nil {
			// Damaged magic, trailer or header: its blobs may be intact.
			herr := err
			var hint []packEntry
			if r.salvageHints != nil {
				hint = r.salvageHints(id)
			}
			if entries, size, err = r.salvagePack(id, hint); err != nil {
				continue
			}
			r.warn(fmt.Sprintf("pack %s: %v; salvaged the %d blobs that verify against their ids (check reports the pack)", id, herr, len(entries)))
		}
		if err := failpoint.Hit("reconcile.pack"); err != nil {
			return fmt.Errorf("index pack %s: %w", id, err)
		}
		if err := r.db.Update(func(tx *bolt.Tx) error { return indexPackTx(tx, id, uint64(size), entries) }); err != nil {
			return fmt.Errorf("index pack %s: %w", id, err)
		}
		report("index packs", int64(i+1), int64(len(todo)))
	}

	// 3. Points: commit records are the truth. An entry whose record is
	// missing is kept and reported by check (FORMAT.md §13: a deleted record
	// is detected, not silently forgotten); `repo delete` or a recatalog
	// drops it.
	files := map[ID]bool{}
	for _, id := range recs {
		files[id] = true
	}
	inCat := map[ID]bool{}
	lockedInCat := map[ID]bool{}
	if err := r.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketPoints).ForEach(func(k, v []byte) error {
			inCat[ID(k)] = true
			if p, err := decodePointValue(v); err == nil && p.Locked {
				lockedInCat[ID(k)] = true
			}
			return nil
		})
	}); err != nil {
		return err
	}
	var missing []string
	for id := range inCat {
		if !files[id] {
			missing = append(missing, id.String())
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		r.warn(fmt.Sprintf("the catalog lists %d restore point(s) whose commit record is missing from points/ (e.g. %s): check reports them; restore the files, or delete the points", len(missing), missing[0]))
	}
	var add []Point
	var n int64
	for id := range files {
		if err := ctx.Err(); err != nil {
			return err
		}
		n++
		if inCat[id] {
			rec, err := r.readRecord(id)
			if err != nil || rec.Locked == lockedInCat[id] {
				continue // unreadable records are check's business (and stop reclaim)
			}
		}
		p, err := r.loadPointFromFiles(ctx, id)
		if err != nil {
			continue
		}
		add = append(add, p)
		report("index points", n, int64(len(files)))
	}
	if err := failpoint.Hit("reconcile.points"); err != nil {
		return fmt.Errorf("index points: %w", err)
	}
	if len(add) == 0 {
		return nil
	}
	return r.db.Update(func(tx *bolt.Tx) error {
		for _, p := range add {
			if err := putPointTx(tx, p); err != nil {
				return err
			}
		}
		return nil
	})
}
