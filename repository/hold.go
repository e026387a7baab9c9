package repository

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
	"time"

	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/repository/storage"
)

// Time locks (FORMAT.md §8a): a restore point can be locked until a date
// by a hold object holds/<point id>-<until>. Holds are only ever added (a
// later date adds a later hold), never rewritten, and removed only with
// their point after every one has expired, so no API can shorten a time
// lock. The effective date is the latest of a point's holds.

// PointLockedError is ErrPointLocked with the date the protection ends and
// what protects the point.
type PointLockedError struct {
	Point string
	Until time.Time // zero: locked until unlocked (Lock)
	By    string    // "lock", "time lock", "object lock"
}

func (e *PointLockedError) Error() string {
	if e.Until.IsZero() {
		return fmt.Sprintf("restore point %s is locked (%s)", e.Point, e.By)
	}
	return fmt.Sprintf("restore point %s is locked until %s (%s)", e.Point, e.Until.UTC().Format(time.RFC3339), e.By)
}

// Is makes errors.Is(err, ErrPointLocked) true.
func (e *PointLockedError) Is(target error) bool { return target == ErrPointLocked }

var magicHold = magic("vmvault point hold v1")

const (
	holdPrefix      = "holds/"
	holdPayloadSize = 48 // version u8 | reserved 7 | point id [32] | until i64
	holdPayloadVer  = 1
)

func holdName(id ID, until time.Time) string {
	return fmt.Sprintf("%s%s-%020d", holdPrefix, id, until.Unix())
}

// parseHoldName returns the point and date a hold's name carries.
func parseHoldName(name string) (ID, time.Time, bool) {
	base, ok := strings.CutPrefix(name, holdPrefix)
	if !ok {
		return ID{}, time.Time{}, false
	}
	ids, secs, ok := strings.Cut(base, "-")
	if !ok || len(secs) != 20 || strings.Trim(secs, "0123456789") != "" {
		return ID{}, time.Time{}, false
	}
	id, err := ParseID(ids)
	if err != nil || id.String() != ids {
		return ID{}, time.Time{}, false
	}
	n, err := strconv.ParseInt(secs, 10, 64)
	if err != nil || n <= 0 {
		return ID{}, time.Time{}, false
	}
	return id, time.Unix(n, 0).UTC(), true
}

func (c *codec) encodeHold(id ID, until time.Time) []byte {
	p := make([]byte, holdPayloadSize)
	p[0] = holdPayloadVer
	copy(p[8:40], id[:])
	binary.LittleEndian.PutUint64(p[40:], uint64(until.Unix()))
	out := append([]byte(nil), magicHold[:]...)
	if c.encrypted {
		return append(out, c.sealMeta(p, magicHold[:])...)
	}
	out = append(out, p...)
	return binary.LittleEndian.AppendUint32(out, crc32.Checksum(p, crcTable))
}

func (c *codec) decodeHold(b []byte) (ID, time.Time, error) {
	const what = "point hold"
	if len(b) < 8 || !bytes.Equal(b[:8], magicHold[:]) {
		return ID{}, time.Time{}, formatErr(what, "bad magic")
	}
	b = b[8:]
	var p []byte
	if c.encrypted {
		var err error
		if p, err = c.openMeta(what, b, magicHold[:]); err != nil {
			return ID{}, time.Time{}, err
		}
	} else {
		if len(b) != holdPayloadSize+4 || crc32.Checksum(b[:holdPayloadSize], crcTable) != binary.LittleEndian.Uint32(b[holdPayloadSize:]) {
			return ID{}, time.Time{}, formatErr(what, "bad length or checksum")
		}
		p = b[:holdPayloadSize]
	}
	if len(p) != holdPayloadSize || p[0] != holdPayloadVer {
		return ID{}, time.Time{}, formatErr(what, "unsupported version or size")
	}
	for _, c := range p[1:8] {
		if c != 0 {
			return ID{}, time.Time{}, formatErr(what, "reserved bytes are not zero")
		}
	}
	var id ID
	copy(id[:], p[8:40])
	return id, time.Unix(int64(binary.LittleEndian.Uint64(p[40:])), 0).UTC(), nil
}

// loadHolds reads every hold into r.holds (at Open; this process holds the
// repository lock, so afterwards only LockUntil and Delete change them). A
// hold whose content does not match its name, or cannot be read, still
// holds until the date of its name, with a warning: damage never unlocks.
func (r *Repository) loadHolds(ctx context.Context) error {
	holds := map[ID]time.Time{}
	var names []string
	if err := r.store.List(ctx, holdPrefix, func(name string, _ int64) error {
		names = append(names, name)
		return nil
	}); err != nil {
		return fmt.Errorf("list time locks: %w", err)
	}
	for _, name := range names {
		id, until, ok := parseHoldName(name)
		if !ok {
			continue
		}
		b, err := storage.ReadAll(ctx, r.store, name)
		if storage.IsNotExist(err) {
			continue
		}
		if err == nil {
			var hid ID
			var hu time.Time
			if hid, hu, err = r.codec.decodeHold(b); err == nil && (hid != id || !hu.Equal(until)) {
				err = fmt.Errorf("names point %s until %s", hid, hu.Format(time.RFC3339))
			}
		}
		if err != nil {
			r.warn(fmt.Sprintf("time lock %s is damaged (%v); the point stays locked until the date of its name", r.objectPath(name), err))
		}
		if until.After(holds[id]) {
			holds[id] = until
		}
	}
	r.mu.Lock()
	r.holds = holds
	r.mu.Unlock()
	return nil
}

func (r *Repository) now() time.Time {
	if r.opts.Clock != nil {
		return r.opts.Clock.Now()
	}
	return clock.Real().Now()
}

// heldUntil returns the end of a point's time lock (zero: none).
func (r *Repository) heldUntil(id ID) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.holds[id]
}

// applyHolds shows time locks in points read from the catalog: a point
// whose time lock runs is Locked (so retention keeps it) with LockedUntil.
func (r *Repository) applyHolds(pts []Point) {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range pts {
		id, err := ParseID(pts[i].ID)
		if err != nil {
			continue
		}
		if u, ok := r.holds[id]; ok && u.After(now) {
			pts[i].LockedUntil = u
			pts[i].Locked = true
		}
	}
}

// LockUntil locks a restore point until a date: until then Delete, and so
// retention, refuse it, and reclaim keeps its data even if its commit
// record goes missing. A time lock can be extended, never shortened: a
// date before the current one is refused with a PointLockedError naming
// the current date. The date is kept to the second.
func (r *Repository) LockUntil(ctx context.Context, id string, until time.Time) error {
	p, pid, leave, err := r.pointChange(ctx, "time-lock", id)
	if err != nil {
		return err
	}
	defer leave()
	until = until.UTC().Truncate(time.Second)
	if !until.After(r.now()) {
		return fmt.Errorf("lock %s until %s: the date is not in the future", p.ID, until.Format(time.RFC3339))
	}
	cur := r.heldUntil(pid)
	if until.Equal(cur) {
		return nil
	}
	if until.Before(cur) {
		return fmt.Errorf("lock %s until %s: a time lock cannot be shortened: %w", p.ID, until.Format(time.RFC3339),
			&PointLockedError{Point: p.ID, Until: cur, By: "time lock"})
	}
	if err := r.extendPointRetention(ctx, p, pid, until); err != nil {
		return fmt.Errorf("lock %s until %s: extend the object lock of its data: %w", p.ID, until.Format(time.RFC3339), err)
	}
	if err := r.putHold(ctx, pid, until); err != nil {
		return fmt.Errorf("lock %s until %s: %w", p.ID, until.Format(time.RFC3339), err)
	}
	r.mu.Lock()
	if until.After(r.holds[pid]) {
		r.holds[pid] = until
	}
	r.mu.Unlock()
	return nil
}

func (r *Repository) putHold(ctx context.Context, id ID, until time.Time) error {
	return storage.PutBytes(ctx, r.store, holdName(id, until), r.codec.encodeHold(id, until),
		storage.Steps{Write: "hold.write", Fsync: "hold.fsync", Rename: "hold.rename", Dirsync: "hold.dirsync"})
}

// LockedUntil returns the end of a point's time lock (zero when it has
// none; a date in the past when it expired).
func (r *Repository) LockedUntil(ctx context.Context, id string) (time.Time, error) {
	p, err := r.Point(ctx, id)
	if err != nil {
		return time.Time{}, err
	}
	pid, _ := ParseID(p.ID)
	return r.heldUntil(pid), nil
}

// checkDeletable refuses to delete a point that is locked, time-locked or
// whose commit record is under an object lock that has not expired.
func (r *Repository) checkDeletable(ctx context.Context, p Point, pid ID) error {
	if why, ok := r.inUseBy(pid); ok {
		return &PointLockedError{Point: p.ID, By: "in use: " + why}
	}
	if u := r.heldUntil(pid); u.After(r.now()) {
		return &PointLockedError{Point: p.ID, Until: u, By: "time lock"}
	}
	if p.Locked {
		return &PointLockedError{Point: p.ID, By: "lock"}
	}
	u, err := r.objectLockedUntil(ctx, recordName(pid))
	if err != nil {
		return fmt.Errorf("object lock of %s: %w", r.recordPath(pid), err)
	}
	if u.After(r.now()) {
		return &PointLockedError{Point: p.ID, Until: u, By: "object lock " + r.cfg.ObjectLock.Mode}
	}
	return nil
}

// dropHolds removes a deleted point's expired holds (best effort: a hold
// left behind names a point that no longer exists and protects nothing).
func (r *Repository) dropHolds(ctx context.Context, pid ID) {
	r.mu.Lock()
	_, has := r.holds[pid]
	r.mu.Unlock()
	if !has {
		return
	}
	prefix := holdPrefix + pid.String() + "-"
	var names []string
	_ = r.store.List(ctx, prefix, func(name string, _ int64) error {
		names = append(names, name)
		return nil
	})
	for _, n := range names {
		if u, err := r.objectLockedUntil(ctx, n); err == nil && !u.After(r.now()) {
			_ = r.store.Delete(ctx, n)
		}
	}
	r.mu.Lock()
	delete(r.holds, pid)
	r.mu.Unlock()
}

// markHeldPoints adds to live the blobs of every point whose time lock
// runs but whose commit record is missing (deleted by hand or by an
// attacker): the hold names the manifest, so the data stays. Called by
// reclaim after markPoints.
func (r *Repository) markHeldPoints(ctx context.Context, live *liveSet) error {
	now := r.now()
	r.mu.Lock()
	var ids []ID
	for id, u := range r.holds {
		if !live.hasMeta(id) && u.After(now) {
			ids = append(ids, id)
		}
	}
	r.mu.Unlock()
	for _, id := range ids {
		b, err := r.loadBlob(ctx, id, nil)
		if err != nil {
			return fmt.Errorf("time-locked restore point %s (its commit record is missing): manifest: %w", id, err)
		}
		m, err := decodeManifest(b)
		if err != nil {
			return fmt.Errorf("time-locked restore point %s: %w", id, err)
		}
		live.addMeta(id)
		if !m.Config.IsZero() {
			live.addMeta(m.Config)
		}
		for _, d := range m.Disks {
			if err := r.markMap(ctx, live, d.Map); err != nil {
				return fmt.Errorf("time-locked restore point %s: %w", id, err)
			}
		}
	}
	return nil
}

// markMap adds a disk map and every blob it references to live.
func (r *Repository) markMap(ctx context.Context, live *liveSet, root ID) error {
	return r.walkMapIDs(ctx, root, func(id ID, meta bool) {
		if meta {
			live.addMeta(id)
		} else {
			live.add(id)
		}
	})
}

// walkMapIDs calls fn with a disk map's root, its segments (meta) and every
// data blob they reference.
func (r *Repository) walkMapIDs(ctx context.Context, root ID, fn func(id ID, meta bool)) error {
	fn(root, true)
	dr, err := r.loadRoot(ctx, root)
	if err != nil {
		return err
	}
	for _, ref := range dr.Segs {
		fn(ref.ID, true)
		s, err := r.loadSegment(ctx, ref)
		if err != nil {
			return err
		}
		for _, e := range s.Extents {
			if !e.Zero {
				fn(e.ID, false)
			}
		}
	}
	return nil
}
