package repository

// Range check: the data part of a full check (--read-data), one pack at a
// time in sorted pack id order, so that a caller can persist the last pack
// visited and resume after it in another process or another maintenance
// window. The structural part (catalog vs points) stays in Check.

import (
	"context"
	"errors"
	"fmt"
	"sort"

	bolt "go.etcd.io/bbolt"
)

// ErrBadCursor: CheckPacks was given a cursor that is not a pack id (a
// corrupt saved state); the caller starts again from "".
var ErrBadCursor = errors.New("bad check cursor")

// PackCheck is the outcome of reading and verifying one pack in CheckPacks.
type PackCheck struct {
	Pack     string    // the pack's id: a resume cursor (CheckPacks resumes after it)
	Index    int       // 1-based position of the pack among all packs, in id order
	Total    int       // packs in the catalog when CheckPacks started
	Blobs    int64     // blobs read from the pack
	Bytes    int64     // stored bytes read
	Problems []Problem // what this pack's verification found (nil: clean)
	// Quarantined counts corrupt blobs of this pack flagged in the catalog,
	// as Check does, so the next backup of the same data stores a fresh copy.
	Quarantined int
}

// CheckPacks reads and verifies every blob of every catalogued pack whose id
// sorts after from ("" for all), in ascending id order, one pack at a time,
// and calls fn after each. The order is stable across processes and
// concurrent backups (new packs are visited if they sort after the cursor;
// packs a concurrent reclaim removed are skipped), so the last PackCheck.Pack
// passed to fn is a safe resume cursor. fn's error stops the walk and is
// returned. Index and Total count all packs, so Index/Total is the progress
// of the whole check even when resumed.
func (r *Repository) CheckPacks(ctx context.Context, from string, fn func(PackCheck) error) error {
	if from != "" {
		if _, err := parsePackID(from); err != nil {
			return fmt.Errorf("check packs: cursor %q: %v: %w", from, err, ErrBadCursor)
		}
	}
	if err := r.enter(); err != nil {
		return err
	}
	defer r.leave()
	var ids []packID
	if err := r.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketPacks).ForEach(func(k, _ []byte) error {
			if len(k) == len(packID{}) {
				ids = append(ids, packID(k))
			}
			return nil
		})
	}); err != nil {
		return fmt.Errorf("check packs: read catalog: %w", err)
	}
	sort.Slice(ids, func(i, j int) bool { return string(ids[i][:]) < string(ids[j][:]) })
	start := sort.Search(len(ids), func(i int) bool { return ids[i].String() > from })
	for i := start; i < len(ids); i++ {
		id := ids[i]
		if err := ctx.Err(); err != nil {
			return err
		}
		c := &checker{r: r, rep: &CheckReport{}, bad: map[ID]int{}, touched: map[int]map[string]bool{}, cleanSegs: map[ID]bool{}}
		if r.packIndexed(id) {
			entries, _, err := r.readPackHeader(id)
			if err != nil {
				c.problem(Problem{Kind: ProblemBadPack, Pack: id.String(), Message: fmt.Sprintf("pack %s: %v (run a full check: its blobs are verified on their own)", id, err)})
			} else if err := c.readPack(ctx, id, entries); err != nil {
				return fmt.Errorf("check pack %s: %w", id, err)
			}
			if err := c.quarantine(); err != nil {
				return fmt.Errorf("check pack %s: quarantine: %w", id, err)
			}
		} // else: removed by a concurrent reclaim after the snapshot
		pc := PackCheck{Pack: id.String(), Index: i + 1, Total: len(ids), Blobs: c.rep.BlobsRead, Bytes: c.rep.BytesRead, Problems: c.rep.Problems, Quarantined: c.rep.Quarantined}
		if err := fn(pc); err != nil {
			return err
		}
	}
	return nil
}
