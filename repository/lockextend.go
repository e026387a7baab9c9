package repository

import (
	"context"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/vmvault/vmvault/repository/storage"
)

// An immutable repository locks each object for a period from its upload,
// but dedup makes a new point reuse old packs: once an old pack's lock
// ends, anyone holding the bucket's credentials could delete data a newer,
// still-locked point needs. The invariant kept here (FORMAT.md §3
// object_lock): every pack a point needs is locked at least until that
// point's own lock ends. A commit extends the reused packs whose lock ends
// sooner before it writes its record; ExtendLocks re-establishes it for
// every point (maintenance, `repo extend-locks`); check reports a pack
// that breaks it.

// lockSlack is how far past what is needed an extension goes, so that the
// commits of the following days find their reused packs covered without
// a request to the server: a quarter of the period, between 1 hour and 7
// days.
func (o *ObjectLock) lockSlack() time.Duration {
	return min(max(o.period()/4, time.Hour), 7*24*time.Hour)
}

// knownPackLock returns the cached lower bound of a pack's retention.
func (r *Repository) knownPackLock(id packID) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.packLocks[id]
}

func (r *Repository) notePackLock(id packID, until time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.packLocks == nil {
		r.packLocks = map[packID]time.Time{}
	}
	if until.After(r.packLocks[id]) {
		r.packLocks[id] = until
	}
}

// coverPacks makes each pack locked until need at least: packs whose lock
// is known to last are skipped, the others are extended to need plus the
// slack. It returns how many it extended.
func (r *Repository) coverPacks(ctx context.Context, packs map[packID]time.Time) (int, error) {
	ol := r.cfg.ObjectLock
	ext, ok := storage.As[retentionExtender](r.store)
	if ol == nil || !ok {
		return 0, nil
	}
	n := 0
	for id, need := range packs {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		if !r.knownPackLock(id).Before(need) {
			continue
		}
		cur, err := r.objectLockedUntil(ctx, packName(id))
		if err != nil {
			return n, fmt.Errorf("object lock of pack %s: %w", id, err)
		}
		if !cur.Before(need) {
			r.notePackLock(id, cur)
			continue
		}
		until := need.Add(ol.lockSlack()).UTC().Truncate(time.Second)
		if err := ext.ExtendRetention(ctx, packName(id), until); err != nil {
			return n, fmt.Errorf("extend the object lock of pack %s to %s: %w", id, until.Format(time.RFC3339), err)
		}
		r.notePackLock(id, until)
		n++
	}
	return n, nil
}

// commitLockNeed is how long a commit record written now stays locked, as
// objectLockedUntil will see it: the period plus the skew allowance.
func (r *Repository) commitLockNeed() time.Time {
	return r.now().Add(r.cfg.ObjectLock.period() + lockSkew)
}

// coverSessionPacks extends the packs a session reuses (those it did not
// write) so that they outlast the commit record it is about to write.
func (s *Session) coverSessionPacks(ctx context.Context) error {
	r := s.r
	if r.cfg.ObjectLock == nil {
		return nil
	}
	if _, ok := storage.As[retentionExtender](r.store); !ok {
		return nil
	}
	need := r.commitLockNeed()
	r.mu.Lock()
	// The packs this session wrote are retained for the period plus the
	// slack from their upload (SetRetention): they need nothing unless the
	// backup took longer than the slack.
	fresh := map[packID]bool{}
	if !s.started.Add(r.cfg.ObjectLock.period() + r.cfg.ObjectLock.lockSlack()).Before(need) {
		for pw := range s.packs {
			fresh[pw.id] = true
		}
	}
	packs := map[packID]time.Time{}
	err := r.db.View(func(tx *bolt.Tx) error {
		for _, id := range s.used {
			if loc, ok := lookupTx(tx, id); ok && !fresh[loc.Pack] {
				packs[loc.Pack] = need
			}
		}
		return nil
	})
	r.mu.Unlock()
	if err != nil {
		return err
	}
	if _, err := r.coverPacks(ctx, packs); err != nil {
		return fmt.Errorf("commit: keep the reused packs locked as long as the new point: %w", err)
	}
	return nil
}

// LockReport is the result of ExtendLocks.
type LockReport struct {
	Points   int `json:"points"`
	Packs    int `json:"packs"`    // packs some point needs
	Extended int `json:"extended"` // packs whose lock was lengthened
}

// ShortLock is a pack locked for less time than a point that needs it.
type ShortLock struct {
	Pack     string
	Until    time.Time
	Need     time.Time
	NeededBy string // the point whose lock lasts longest
}

// lockNeeds returns, for every pack some point needs, until when it must
// stay locked (the latest lock end of the points needing it) and which
// point asks for that date.
func (r *Repository) lockNeeds(ctx context.Context, progress func(Progress)) (map[packID]time.Time, map[packID]string, int, error) {
	pts, err := r.List(ctx)
	if err != nil {
		return nil, nil, 0, err
	}
	need := map[packID]time.Time{}
	by := map[packID]string{}
	for i, p := range pts {
		if progress != nil {
			progress(Progress{Phase: "points", Done: int64(i), Total: int64(len(pts))})
		}
		pid, err := ParseID(p.ID)
		if err != nil {
			continue
		}
		until, err := r.objectLockedUntil(ctx, recordName(pid))
		if err != nil {
			return nil, nil, 0, fmt.Errorf("object lock of the record of %s: %w", p.ID, err)
		}
		if h := r.heldUntil(pid); h.After(until) {
			until = h
		}
		if !until.After(r.now()) {
			continue // its lock has ended: nothing to keep for it
		}
		ids := map[ID]struct{}{}
		if !p.ConfigID.IsZero() {
			ids[p.ConfigID] = struct{}{}
		}
		ids[pid] = struct{}{}
		for _, d := range p.Disks {
			if err := r.walkMapIDs(ctx, d.Map, func(id ID, _ bool) { ids[id] = struct{}{} }); err != nil {
				return nil, nil, 0, fmt.Errorf("point %s: %w", p.ID, err)
			}
		}
		for id := range ids {
			loc, ok, err := r.lookup(id)
			if err != nil {
				return nil, nil, 0, err
			}
			if ok && until.After(need[loc.Pack]) {
				need[loc.Pack], by[loc.Pack] = until, p.ID
			}
		}
	}
	return need, by, len(pts), nil
}

// ExtendLocks re-establishes the invariant for every point of an immutable
// repository: each pack is locked at least as long as the longest lock of
// the points that need it (record retention or time lock). A repository
// without object lock has nothing to extend.
func (r *Repository) ExtendLocks(ctx context.Context, progress func(Progress)) (*LockReport, error) {
	if err := r.enter(); err != nil {
		return nil, err
	}
	defer r.leave()
	if err := r.writable("extend object locks"); err != nil {
		return nil, err
	}
	rep := &LockReport{}
	if r.cfg.ObjectLock == nil {
		return rep, nil
	}
	need, _, n, err := r.lockNeeds(ctx, progress)
	if err != nil {
		return nil, err
	}
	rep.Points, rep.Packs = n, len(need)
	rep.Extended, err = r.coverPacks(ctx, need)
	return rep, err
}

// shortLocks lists the packs whose retention ends before that of a point
// needing them (check).
func (r *Repository) shortLocks(ctx context.Context) ([]ShortLock, error) {
	// A backend that cannot set retention (an immutable repository copied
	// to a directory) has nothing a server enforces and nothing to extend:
	// its objects' lock ends follow their write times, so a record always
	// "outlives" the packs written before it.
	if _, ok := storage.As[retentionExtender](r.store); r.cfg.ObjectLock == nil || !ok {
		return nil, nil
	}
	need, by, _, err := r.lockNeeds(ctx, nil)
	if err != nil {
		return nil, err
	}
	var out []ShortLock
	for id, n := range need {
		cur, err := r.objectLockedUntil(ctx, packName(id))
		if err != nil {
			return nil, fmt.Errorf("object lock of pack %s: %w", id, err)
		}
		if cur.Before(n) {
			out = append(out, ShortLock{Pack: packName(id), Until: cur, Need: n, NeededBy: by[id]})
		}
	}
	return out, nil
}
