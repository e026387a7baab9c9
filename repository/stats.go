package repository

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/vmvault/vmvault/internal/failpoint"
	bolt "go.etcd.io/bbolt"
)

// PointStats are per restore point figures.
type PointStats struct {
	ID           string `json:"id"`
	LogicalBytes int64  `json:"logicalBytes"`
	UniqueBytes  int64  `json:"uniqueBytes"` // plaintext bytes referenced by no other point
}

// Stats describe the repository's space use.
type Stats struct {
	Points           int          `json:"points"`
	LogicalBytes     int64        `json:"logicalBytes"` // sum of disk capacities over points
	UniqueBytes      int64        `json:"uniqueBytes"`  // plaintext bytes of live blobs
	StoredBytes      int64        `json:"storedBytes"`  // on-disk bytes of live blobs
	DiskBytes        int64        `json:"diskBytes"`    // all files of the repository
	DeadBytes        int64        `json:"deadBytes"`    // on-disk bytes of indexed blobs no point references: what reclaim can free
	Packs            int          `json:"packs"`
	Blobs            int          `json:"blobs"`
	DedupRatio       float64      `json:"dedupRatio"`       // LogicalBytes / UniqueBytes
	CompressionRatio float64      `json:"compressionRatio"` // UniqueBytes / StoredBytes
	PerPoint         []PointStats `json:"perPoint"`
}

// Stats computes space figures by walking every restore point.
func (r *Repository) Stats(ctx context.Context) (*Stats, error) {
	if err := r.enter(); err != nil {
		return nil, err
	}
	defer r.leave()
	pts, err := r.List(ctx)
	if err != nil {
		return nil, err
	}
	st := &Stats{Points: len(pts), PerPoint: make([]PointStats, len(pts))}
	type owner struct{ count, first, last int32 }
	owners := map[ID]*owner{}
	for i, p := range pts {
		st.LogicalBytes += p.LogicalBytes
		st.PerPoint[i] = PointStats{ID: p.ID, LogicalBytes: p.LogicalBytes}
		ref := func(id ID) {
			o := owners[id]
			if o == nil {
				owners[id] = &owner{count: 1, first: int32(i), last: int32(i)}
				return
			}
			if o.last != int32(i) {
				o.count++
				o.last = int32(i)
			}
		}
		pid, _ := ParseID(p.ID)
		ref(pid)
		if !p.ConfigID.IsZero() {
			ref(p.ConfigID)
		}
		for _, d := range p.Disks {
			ref(d.Map)
			dr, err := r.loadRoot(ctx, d.Map)
			if err != nil {
				return nil, fmt.Errorf("stats: point %s: %w", p.ID, err)
			}
			for _, sr := range dr.Segs {
				ref(sr.ID)
				s, err := r.loadSegment(ctx, sr)
				if err != nil {
					return nil, fmt.Errorf("stats: point %s: %w", p.ID, err)
				}
				for _, e := range s.Extents {
					if !e.Zero {
						ref(e.ID)
					}
				}
			}
		}
	}
	err = r.db.View(func(tx *bolt.Tx) error {
		st.Packs = tx.Bucket(bucketPacks).Stats().KeyN
		st.Blobs = tx.Bucket(bucketBlobs).Stats().KeyN
		for id, o := range owners {
			l, ok := lookupTx(tx, id)
			if !ok {
				continue
			}
			st.UniqueBytes += int64(l.RawLen)
			st.StoredBytes += int64(l.StoredLen)
			if o.count == 1 {
				st.PerPoint[o.first].UniqueBytes += int64(l.RawLen)
			}
		}
		return tx.Bucket(bucketBlobs).ForEach(func(k, v []byte) error {
			var id ID
			if len(k) != len(id) {
				return nil
			}
			copy(id[:], k)
			if owners[id] != nil {
				return nil
			}
			if l, err := decodeBlobLoc(v); err == nil {
				st.DeadBytes += int64(l.StoredLen)
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	err = r.store.List(ctx, "", func(_ string, size int64) error {
		st.DiskBytes += size
		return nil
	})
	if err != nil {
		return nil, err
	}
	if st.UniqueBytes > 0 {
		st.DedupRatio = float64(st.LogicalBytes) / float64(st.UniqueBytes)
	}
	if st.StoredBytes > 0 {
		st.CompressionRatio = float64(st.UniqueBytes) / float64(st.StoredBytes)
	}
	return st, nil
}

// Recatalog rebuilds index.db from the packs and commit records alone. No
// session may be open; readers must not run concurrently.
func (r *Repository) Recatalog(ctx context.Context, progress func(Progress)) error {
	return r.diskFull(r.recatalog(ctx, progress))
}

func (r *Repository) recatalog(ctx context.Context, progress func(Progress)) error {
	if err := r.enter(); err != nil {
		return err
	}
	defer r.leave()
	r.maintMu.Lock()
	defer r.maintMu.Unlock()
	r.mu.Lock()
	busy := len(r.sessions) > 0
	open := make([]*packWriter, 0, len(r.openPacks))
	for _, pw := range r.openPacks {
		open = append(open, pw)
	}
	r.mu.Unlock()
	if busy {
		return fmt.Errorf("recatalog: %w", ErrBusy)
	}
	for _, pw := range open {
		r.sealPack(pw)
		<-pw.done
	}
	path := filepath.Join(r.dir, "index.db")
	old := path + ".old"
	if err := r.db.Close(); err != nil {
		return fmt.Errorf("recatalog: close catalog: %w", err)
	}
	if err := failpoint.Hit("recatalog.rename"); err != nil {
		if oerr := r.openCatalog(); oerr != nil {
			return fmt.Errorf("recatalog: %v; reopening the catalog failed: %w", err, oerr)
		}
		return fmt.Errorf("recatalog: %w", err)
	}
	if err := os.Rename(path, old); err != nil {
		if oerr := r.openCatalog(); oerr != nil {
			return fmt.Errorf("recatalog: %v; reopening the catalog failed: %w", err, oerr)
		}
		return fmt.Errorf("recatalog: %w", err)
	}
	restore := func(cause error) error {
		if r.db != nil {
			r.db.Close()
		}
		os.Remove(path)
		if err := os.Rename(old, path); err != nil {
			return fmt.Errorf("recatalog: %v; restoring the old catalog failed: %w", cause, err)
		}
		if err := r.openCatalog(); err != nil {
			return fmt.Errorf("recatalog: %v; reopening the old catalog failed: %w", cause, err)
		}
		return fmt.Errorf("recatalog: %w", cause)
	}
	r.db = nil
	if err := failpoint.Hit("recatalog.open"); err != nil {
		return restore(err)
	}
	if err := r.openCatalog(); err != nil {
		return restore(err)
	}
	// The old catalog (when it is sound) knows where the blobs of a pack
	// with a damaged header are; it is never required.
	hints := openHintCatalog(old)
	if hints != nil {
		r.salvageHints = func(id packID) []packEntry { return packEntriesOf(hints, id) }
	}
	err := r.reconcile(ctx, progress)
	if hints != nil {
		// Before restore: the hints hold a lock on the old file, which
		// restore reopens as the catalog.
		r.salvageHints = nil
		hints.Close()
	}
	if err != nil {
		return restore(err)
	}
	if err := failpoint.Hit("recatalog.done"); err != nil {
		return fmt.Errorf("recatalog: %w", err)
	}
	os.Remove(old)
	return nil
}
