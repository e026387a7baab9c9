package repository

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/vmvault/vmvault/repository/storage"
)

// ObjectLock is the retention of an immutable repository (FORMAT.md §3
// object_lock): every pack, commit record and time lock is written with
// a retention of Days in Mode, and the repository itself never deletes
// one before its retention ends, whatever the server enforces.
type ObjectLock struct {
	Mode string `json:"mode"` // "governance" or "compliance"
	Days int    `json:"days"`
}

// maxLockDays bounds a retention (100 years).
const maxLockDays = 36500

func (o *ObjectLock) validate() error {
	if o.Mode != "governance" && o.Mode != "compliance" {
		return fmt.Errorf("object lock mode %q: want governance or compliance", o.Mode)
	}
	if o.Days < 1 || o.Days > maxLockDays {
		return fmt.Errorf("object lock of %d days: want 1 to %d", o.Days, maxLockDays)
	}
	return nil
}

func (o *ObjectLock) period() time.Duration { return time.Duration(o.Days) * 24 * time.Hour }

// lockSkew covers the difference between the server's clock (its
// Last-Modified) and the writer's (which set the retain-until date) when
// the server reports no retention of its own.
const lockSkew = time.Hour

// retainer is a backend that writes objects with a retention period.
type retainer interface {
	SetRetention(mode string, d, packExtra time.Duration) error
}

// lockInformer reports an object's write time and the retain-until date
// the server holds for it.
type lockInformer interface {
	LockInfo(ctx context.Context, name string) (modified, retainUntil time.Time, err error)
}

// setupObjectLock makes an immutable repository's backend write with its
// retention (at Open).
func (r *Repository) setupObjectLock() error {
	ol := r.cfg.ObjectLock
	if ol == nil {
		return nil
	}
	if rt, ok := storage.As[retainer](r.store); ok {
		return rt.SetRetention(ol.Mode, ol.period(), ol.lockSlack())
	}
	// A backend without retention (a bucket copied to a directory): the
	// repository's own refusals still hold.
	return nil
}

// objectLockedUntil returns when the retention of an object of an
// immutable repository ends: the later of the server's retain-until date
// and write time + the configured period (+ lockSkew when the server
// reports none). Zero for a repository without object lock or a missing
// object.
func (r *Repository) objectLockedUntil(ctx context.Context, name string) (time.Time, error) {
	ol := r.cfg.ObjectLock
	if ol == nil {
		return time.Time{}, nil
	}
	var mod, until time.Time
	if st, ok := storage.As[lockInformer](r.store); ok {
		var err error
		if mod, until, err = st.LockInfo(ctx, name); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return time.Time{}, nil
			}
			return time.Time{}, err
		}
	} else {
		fi, err := os.Stat(filepath.Join(r.storeDir(), filepath.FromSlash(name)))
		if err != nil {
			if os.IsNotExist(err) {
				return time.Time{}, nil
			}
			return time.Time{}, err
		}
		mod = fi.ModTime()
	}
	end := mod.Add(ol.period())
	if until.IsZero() {
		end = end.Add(lockSkew)
	}
	if until.After(end) {
		end = until
	}
	return end.UTC(), nil
}

// HeldObject is an object reclaim kept because its object lock has not
// expired.
type HeldObject struct {
	Name  string    `json:"name"`
	Until time.Time `json:"until"`
}

// objectLockedPacks returns, of the packs reclaim wants to delete (doomed
// and orphans), those whose object lock has not expired, with the date.
// Reclaim keeps them (and does not repack them: the copy would be wasted
// until the original may go) and reports them.
func (r *Repository) objectLockedPacks(ctx context.Context, packs ...[]packID) (map[packID]time.Time, error) {
	if r.cfg.ObjectLock == nil {
		return nil, nil
	}
	held := map[packID]time.Time{}
	now := r.now()
	for _, ids := range packs {
		for _, id := range ids {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			u, err := r.objectLockedUntil(ctx, packName(id))
			if err != nil {
				return nil, fmt.Errorf("object lock of pack %s: %w", id, err)
			}
			if u.After(now) {
				held[id] = u
			}
		}
	}
	return held, nil
}

// holdLockedPacks applies objectLockedPacks to a reclaim: held packs are
// marked kept, dropped from the orphans, and listed in the report.
func (r *Repository) holdLockedPacks(ctx context.Context, doomed []packID, orphans []packID, keep map[packID]bool, rep *ReclaimReport) ([]packID, error) {
	held, err := r.objectLockedPacks(ctx, doomed, orphans)
	if err != nil || len(held) == 0 {
		return orphans, err
	}
	for id, u := range held {
		keep[id] = true
		rep.Held = append(rep.Held, HeldObject{Name: packName(id), Until: u})
	}
	slices.SortFunc(rep.Held, func(a, b HeldObject) int { return a.Until.Compare(b.Until) })
	return slices.DeleteFunc(orphans, func(id packID) bool { _, ok := held[id]; return ok }), nil
}

// retentionExtender is a backend that can lengthen an object's retention.
type retentionExtender interface {
	ExtendRetention(ctx context.Context, name string, until time.Time) error
}

// extendPointRetention makes the server keep everything a time-locked
// point needs — its commit record and every pack holding one of its
// blobs — at least until until (immutable repositories on S3). LockUntil
// calls it before writing the hold.
func (r *Repository) extendPointRetention(ctx context.Context, p Point, pid ID, until time.Time) error {
	ext, ok := storage.As[retentionExtender](r.store)
	if !ok || r.cfg.ObjectLock == nil {
		return nil
	}
	live := map[ID]struct{}{pid: {}}
	if !p.ConfigID.IsZero() {
		live[p.ConfigID] = struct{}{}
	}
	for _, d := range p.Disks {
		if err := r.walkMapIDs(ctx, d.Map, func(id ID, _ bool) { live[id] = struct{}{} }); err != nil {
			return err
		}
	}
	packs := map[packID]bool{}
	for id := range live {
		loc, ok, err := r.lookup(id)
		if err != nil {
			return err
		}
		if ok {
			packs[loc.Pack] = true
		}
	}
	for id := range packs {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := ext.ExtendRetention(ctx, packName(id), until); err != nil {
			return err
		}
	}
	return ext.ExtendRetention(ctx, recordName(pid), until)
}
