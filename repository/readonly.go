package repository

import (
	"context"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// ErrReadOnly: a write (backup session, delete, lock, reclaim, appliance
// configuration) on a repository opened with OpenOptions.ReadOnly.
var ErrReadOnly = errors.New("repository is opened read-only")

// ReadOnly reports whether the repository was opened with
// OpenOptions.ReadOnly.
func (r *Repository) ReadOnly() bool { return r.opts.ReadOnly }

// writable fails a write on a read-only repository.
func (r *Repository) writable(op string) error {
	if r.opts.ReadOnly {
		return fmt.Errorf("%s %s: %w", op, r.store.Location(), ErrReadOnly)
	}
	return nil
}

// Refresh brings the catalog up to date with the repository's objects: the
// packs and commit records another appliance wrote since Open (or the last
// Refresh) become visible, and in read-only mode what its owner deleted
// (points, reclaimed packs) disappears. A read-only repository refreshes by
// itself when a point id is not found or a pack it knows is gone; the owner of a repository never
// needs to (it holds the lock, so nothing changes behind it).
func (r *Repository) Refresh(ctx context.Context) error {
	if err := r.enter(); err != nil {
		return err
	}
	defer r.leave()
	r.refreshMu.Lock()
	defer r.refreshMu.Unlock()
	r.maintMu.Lock()
	defer r.maintMu.Unlock()
	return r.refreshLocked(ctx)
}

// refreshLocked is Refresh; the caller holds refreshMu and maintMu.
func (r *Repository) refreshLocked(ctx context.Context) error {
	ctx = context.WithValue(ctx, refreshedKey{}, true) // reads inside never refresh again
	if err := catalogGuard(func() error { return r.reconcile(ctx, nil) }); err != nil {
		return fmt.Errorf("refresh catalog of %s: %w", r.store.Location(), err)
	}
	if err := r.loadHolds(ctx); err != nil {
		return fmt.Errorf("refresh catalog of %s: %w", r.store.Location(), err)
	}
	return nil
}

// refreshAfterMissingPack is the refresh of a read-only catalog whose pack
// is gone (the owner reclaimed it). It never waits for maintenance of
// this process (PlanReclaim, Recatalog hold maintMu and may be the very
// caller, through their reads); when another refresh is running it waits
// for that one instead of starting its own.
func (r *Repository) refreshAfterMissingPack(ctx context.Context) error {
	if !r.refreshMu.TryLock() {
		r.refreshMu.Lock() // another refresh: its result is ours
		r.refreshMu.Unlock()
		return nil
	}
	defer r.refreshMu.Unlock()
	if !r.maintMu.TryLock() {
		return nil // maintenance in this process: it sees the files itself
	}
	defer r.maintMu.Unlock()
	return r.refreshLocked(ctx)
}

// pruneReplica drops from a read-only catalog what the owner removed: packs
// no longer in the bucket (reclaimed; their blobs now live in the packs
// that replaced them, which reconcile indexes next) and points whose commit
// record is gone. The owner's catalog never needs this: nothing changes
// behind the lock holder, and there a missing record is damage that check
// reports, not a deletion.
func (r *Repository) pruneReplica(onDisk map[packID]int64, records []ID) error {
	dropped := false
	defer func() {
		if dropped { // a blob whose kept copy is in a pack we know
			if err := r.reindexShortPacks(context.Background()); err != nil {
				r.warn(fmt.Sprintf("re-index packs after a reclaim: %v", err))
			}
		}
	}()
	recs := make(map[ID]bool, len(records))
	for _, id := range records {
		recs[id] = true
	}
	return r.db.Update(func(tx *bolt.Tx) error {
		packs, blobs, points := tx.Bucket(bucketPacks), tx.Bucket(bucketBlobs), tx.Bucket(bucketPoints)
		gone := map[packID]bool{}
		if err := packs.ForEach(func(k, _ []byte) error {
			if _, ok := onDisk[packID(k)]; !ok {
				gone[packID(k)] = true
			}
			return nil
		}); err != nil {
			return err
		}
		if len(gone) > 0 {
			dropped = true
			for id := range gone {
				if err := packs.Delete(id[:]); err != nil {
					return err
				}
			}
			var del [][]byte
			if err := blobs.ForEach(func(k, v []byte) error {
				if l, err := decodeBlobLoc(v); err == nil && gone[l.Pack] {
					del = append(del, append([]byte(nil), k...))
				}
				return nil
			}); err != nil {
				return err
			}
			for _, k := range del {
				if err := blobs.Delete(k); err != nil {
					return err
				}
			}
		}
		var drop [][]byte
		if err := points.ForEach(func(k, _ []byte) error {
			if !recs[ID(k)] {
				drop = append(drop, append([]byte(nil), k...))
			}
			return nil
		}); err != nil {
			return err
		}
		for _, k := range drop {
			if err := points.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
}

// refreshedKey marks a context whose Point lookup already refreshed once.
type refreshedKey struct{}

func refreshed(ctx context.Context) bool { return ctx.Value(refreshedKey{}) != nil }
