package repository

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/vmvault/vmvault/internal/failpoint"
	"github.com/vmvault/vmvault/repository/storage"
)

// VMIdentity names the protected VM.
type VMIdentity struct {
	Name         string `json:"name"`
	MoRef        string `json:"moref,omitempty"`
	InstanceUUID string `json:"instance_uuid,omitempty"`
	VCenter      string `json:"vcenter,omitempty"`
}

// DiskStats are per-disk backup figures recorded in the manifest.
type DiskStats struct {
	LogicalBytes   int64  `json:"logical_bytes"`
	AllocatedBytes int64  `json:"allocated_bytes"`
	BytesRead      int64  `json:"bytes_read"`
	NewBytes       int64  `json:"new_bytes"`
	StoredBytes    int64  `json:"stored_bytes"`
	Mode           string `json:"mode,omitempty"`
}

// NewDisk is one disk of a restore point being committed.
type NewDisk struct {
	Key      int32     `json:"key"`
	Label    string    `json:"label"`
	Capacity int64     `json:"capacity"`
	Map      ID        `json:"map"`
	ChangeID string    `json:"change_id,omitempty"`
	Stats    DiskStats `json:"stats"`
}

// Disk is a committed disk (same fields as NewDisk).
type Disk = NewDisk

// NewPoint describes a restore point to commit.
type NewPoint struct {
	VM          VMIdentity
	Time        time.Time
	Parent      string
	Consistency string
	Config      []byte // opaque VM configuration, stored as a blob
	Disks       []NewDisk
	Warnings    []string
	Partial     bool
	Tags        map[string]string
}

// Point is a committed restore point.
type Point struct {
	ID          string     `json:"id"`
	VM          VMIdentity `json:"vm"`
	Time        time.Time  `json:"time"`
	Parent      string     `json:"parent,omitempty"`
	Consistency string     `json:"consistency,omitempty"`
	Disks       []Disk     `json:"disks"`
	Warnings    []string   `json:"warnings,omitempty"`
	Partial     bool       `json:"partial"`
	Locked      bool       `json:"locked"`
	// LockedUntil is the end of a running time lock (LockUntil; zero when
	// none). While it runs Locked is true as well, so retention keeps the
	// point. It is not part of the catalog (hold.go keeps it).
	LockedUntil  time.Time         `json:"locked_until,omitzero"`
	Tags         map[string]string `json:"tags,omitempty"`
	LogicalBytes int64             `json:"logical_bytes"`
	ConfigID     ID                `json:"config_id"`
	// Writer is the appliance that committed the point (multi-writer
	// repositories, format 2.0; zero otherwise).
	Writer PointWriter `json:"writer,omitzero"`
}

// manifest is the JSON body of a manifest blob (FORMAT.md "Manifest").
type manifest struct {
	VM          VMIdentity        `json:"vm"`
	Time        time.Time         `json:"time"`
	Parent      string            `json:"parent,omitempty"`
	Consistency string            `json:"consistency,omitempty"`
	Config      ID                `json:"config"`
	Disks       []Disk            `json:"disks"`
	Warnings    []string          `json:"warnings,omitempty"`
	Partial     bool              `json:"partial,omitempty"`
	Tags        map[string]string `json:"tags,omitempty"`
	Writer      *PointWriter      `json:"writer,omitempty"` // v2.0 (§12a)
}

func encodeManifest(m manifest) ([]byte, error) {
	j, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return append(append([]byte(nil), magicManifest[:]...), j...), nil
}

func decodeManifest(b []byte) (manifest, error) {
	var m manifest
	if len(b) < 8 || !bytes.Equal(b[:8], magicManifest[:]) {
		return m, formatErr("manifest", "bad magic")
	}
	if err := json.Unmarshal(b[8:], &m); err != nil {
		return m, formatErr("manifest", "%v", err)
	}
	if m.Disks == nil {
		m.Disks = []Disk{}
	}
	for i, d := range m.Disks {
		if d.Map.IsZero() || d.Capacity < 0 {
			return m, formatErr("manifest", "disk %d: missing map or negative capacity", i)
		}
	}
	return m, nil
}

func pointFrom(id ID, m manifest, locked bool) Point {
	p := Point{ID: id.String(), VM: m.VM, Time: m.Time, Parent: m.Parent, Consistency: m.Consistency,
		Disks: m.Disks, Warnings: m.Warnings, Partial: m.Partial, Locked: locked, Tags: m.Tags, ConfigID: m.Config}
	if m.Writer != nil {
		p.Writer = *m.Writer
	}
	for _, d := range m.Disks {
		p.LogicalBytes += d.Capacity
	}
	return p
}

// recordName is the storage name of a commit record.
func recordName(id ID) string { return "points/" + id.String() }

// recordPath names a commit record in messages (the location and the name).
func (r *Repository) recordPath(id ID) string { return r.objectPath(recordName(id)) }

// listRecords returns the ids of the commit records under points/ (temp
// files and names that are not ids are not records).
func (r *Repository) listRecords() ([]ID, error) {
	var out []ID
	err := r.store.List(context.Background(), "points/", func(name string, _ int64) error {
		base := strings.TrimPrefix(name, "points/")
		if id, err := ParseID(base); err == nil && id.String() == base {
			out = append(out, id)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list commit records: %w", err)
	}
	return out, nil
}

func (r *Repository) writeRecord(rec record) error {
	if err := storage.PutBytes(context.Background(), r.store, recordName(rec.Manifest), r.codec.encodeRecord(rec), recordSteps); err != nil {
		return fmt.Errorf("write commit record %s: %w", rec.Manifest, err)
	}
	return nil
}

func (r *Repository) readRecord(id ID) (record, error) {
	b, err := storage.ReadAll(context.Background(), r.store, recordName(id))
	if err != nil {
		return record{}, err
	}
	rec, err := r.codec.decodeRecord(b)
	if err != nil {
		return rec, fmt.Errorf("commit record %s: %w", id, err)
	}
	if rec.Manifest != id {
		return rec, fmt.Errorf("commit record %s: names manifest %s: %w", id, rec.Manifest, ErrCorrupt)
	}
	return rec, nil
}

// loadPointFromFiles reads a point from its commit record and manifest blob.
func (r *Repository) loadPointFromFiles(ctx context.Context, id ID) (Point, error) {
	rec, err := r.readRecord(id)
	if err != nil {
		return Point{}, err
	}
	b, err := r.loadBlob(ctx, rec.Manifest, nil)
	if err != nil {
		return Point{}, fmt.Errorf("manifest of point %s: %w", id, err)
	}
	m, err := decodeManifest(b)
	if err != nil {
		return Point{}, fmt.Errorf("point %s: %w", id, err)
	}
	return pointFrom(id, m, rec.Locked), nil
}

func putPointTx(tx *bolt.Tx, p Point) error {
	id, err := ParseID(p.ID)
	if err != nil {
		return err
	}
	p.LockedUntil = time.Time{} // never in the catalog: the holds are the truth
	v, err := encodePointValue(p)
	if err != nil {
		return err
	}
	return tx.Bucket(bucketPoints).Put(id[:], v)
}

// List returns every committed restore point, oldest first, with their
// time locks.
func (r *Repository) List(ctx context.Context) ([]Point, error) {
	if r.mw != nil && !refreshed(ctx) {
		// Points of the other writers (and their deletions).
		if err := r.mwRefreshPoints(ctx); err != nil {
			return nil, fmt.Errorf("list points: %w", err)
		}
	}
	pts, err := r.listCatalog(ctx)
	if err != nil {
		return nil, err
	}
	r.applyHolds(pts)
	return pts, nil
}

// listCatalog returns the points as the catalog has them (the lock flag of
// their commit records, no time locks).
func (r *Repository) listCatalog(ctx context.Context) ([]Point, error) {
	if err := r.enter(); err != nil {
		return nil, err
	}
	defer r.leave()
	var out []Point
	err := r.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketPoints).ForEach(func(k, v []byte) error {
			p, err := decodePointValue(v)
			if err != nil {
				return err
			}
			out = append(out, p)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list points: %w", err)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].Time.Equal(out[j].Time) {
			return out[i].Time.Before(out[j].Time)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// Point returns the restore point with this id or unique id prefix. It
// seeks the prefix in the catalog's points bucket (keys are the raw ids,
// so a hex prefix is a byte range): a lookup costs a few pages whatever
// the number of points, where listing them all cost a JSON decode per
// point (GET /restore-points/{id} calls this per request).
func (r *Repository) Point(ctx context.Context, idOrPrefix string) (Point, error) {
	s := strings.ToLower(strings.TrimSpace(idOrPrefix))
	if s == "" {
		return Point{}, fmt.Errorf("restore point id is empty: %w", ErrNotFound)
	}
	found, err := r.pointsWithPrefix(s, 2)
	if err != nil {
		return Point{}, err
	}
	switch len(found) {
	case 0:
		if r.mw != nil && !refreshed(ctx) {
			if err := r.mwRefreshPoints(ctx); err != nil {
				return Point{}, err
			}
			return r.Point(context.WithValue(ctx, refreshedKey{}, true), idOrPrefix)
		}
		if r.opts.ReadOnly && !refreshed(ctx) {
			// The owner may have committed it since our last look.
			if err := r.Refresh(ctx); err != nil {
				return Point{}, err
			}
			return r.Point(context.WithValue(ctx, refreshedKey{}, true), idOrPrefix)
		}
		return Point{}, fmt.Errorf("restore point %q: %w", idOrPrefix, ErrNotFound)
	case 1:
		r.applyHolds(found)
		return found[0], nil
	}
	return Point{}, fmt.Errorf("restore point %q matches more than one point: %w", idOrPrefix, ErrAmbiguous)
}

// pointsWithPrefix returns up to max catalog points whose hex id starts
// with the lower-case prefix s (an exact id first, alone, when s is one).
func (r *Repository) pointsWithPrefix(s string, max int) ([]Point, error) {
	if len(s) > 2*len(ID{}) {
		return nil, nil
	}
	// The whole bytes of the prefix; an odd last nibble is checked on the
	// hex form. A prefix that is not hex matches nothing, as before.
	key, err := hex.DecodeString(s[:len(s)&^1])
	if err != nil || (len(s)%2 == 1 && !isHexDigit(s[len(s)-1])) {
		return nil, nil
	}
	if err := r.enter(); err != nil {
		return nil, err
	}
	defer r.leave()
	var out []Point
	err = r.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketPoints).Cursor()
		for k, v := c.Seek(key); k != nil && bytes.HasPrefix(k, key); k, v = c.Next() {
			if len(s)%2 == 1 && !strings.HasPrefix(hex.EncodeToString(k), s) {
				continue
			}
			p, err := decodePointValue(v)
			if err != nil {
				return err
			}
			if len(s) == 2*len(ID{}) {
				out = []Point{p}
				return nil
			}
			if out = append(out, p); len(out) == max {
				return nil
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("look up restore point %q: %w", s, err)
	}
	return out, nil
}

func isHexDigit(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' }

// LoadConfigBlob returns the opaque VM configuration of a point (nil when none).
func (r *Repository) LoadConfigBlob(ctx context.Context, p Point) ([]byte, error) {
	if p.ConfigID.IsZero() {
		return nil, nil
	}
	return r.LoadBlob(ctx, p.ConfigID)
}

// Delete removes a restore point (its data is freed by the next Reclaim).
func (r *Repository) Delete(ctx context.Context, id string) error {
	return r.diskFull(r.deletePoint(ctx, id))
}

func (r *Repository) deletePoint(ctx context.Context, id string) error {
	p, pid, leave, err := r.pointChange(ctx, "delete", id)
	if err != nil {
		return err
	}
	defer leave()
	if r.mw != nil {
		// Another appliance may have locked or time-locked it since this
		// catalog learnt of it: ask the objects themselves.
		if err := r.loadHolds(ctx); err != nil {
			return fmt.Errorf("delete %s: %w", p.ID, err)
		}
		rec, err := r.readRecord(pid)
		if err != nil {
			return fmt.Errorf("delete %s: %w", p.ID, err)
		}
		p.Locked = rec.Locked
	}
	if err := r.checkDeletable(ctx, p, pid); err != nil {
		return fmt.Errorf("delete %s: %w", p.ID, err)
	}
	// The catalog entry goes first, the record (the truth) last. A crash
	// between the two leaves a record the catalog lacks: the next open adds
	// it back (the delete did not happen, nothing is lost) and reclaim, which
	// marks from the records on disk, keeps its data meanwhile. The other
	// order would leave a catalog entry without a record, which check must
	// report as damage (missing-record) although nobody lost anything.
	if err := r.db.Update(func(tx *bolt.Tx) error {
		if err := failpoint.Hit("catalog.delete"); err != nil {
			return err
		}
		return tx.Bucket(bucketPoints).Delete(pid[:])
	}); err != nil {
		return fmt.Errorf("delete %s: %w", p.ID, err)
	}
	if err := failpoint.Hit("point.delete"); err != nil {
		return fmt.Errorf("delete %s: %w", p.ID, err)
	}
	if err := r.store.Delete(context.Background(), recordName(pid)); err != nil {
		return fmt.Errorf("delete %s: %w", p.ID, err)
	}
	if err := r.store.SyncDeletes(context.Background(), "points/"); err != nil {
		return fmt.Errorf("delete %s: %w", p.ID, err)
	}
	r.dropHolds(ctx, pid)
	return nil
}

// pointChange begins a change ("delete", "lock", "time-lock") of the
// restore point id (or unique prefix): the repository must be writable and
// stays open until the caller calls leave.
func (r *Repository) pointChange(ctx context.Context, what, id string) (p Point, pid ID, leave func(), err error) {
	if err := r.writable(what + " restore point " + id); err != nil {
		return Point{}, ID{}, nil, err
	}
	if err := r.enter(); err != nil {
		return Point{}, ID{}, nil, err
	}
	if p, err = r.Point(ctx, id); err != nil {
		r.leave()
		return Point{}, ID{}, nil, err
	}
	pid, _ = ParseID(p.ID)
	return p, pid, r.leave, nil
}

// Lock protects a restore point from deletion, retention and reclaim.
func (r *Repository) Lock(ctx context.Context, id string) error { return r.setLocked(ctx, id, true) }

// Unlock removes the protection set by Lock.
func (r *Repository) Unlock(ctx context.Context, id string) error { return r.setLocked(ctx, id, false) }

func (r *Repository) setLocked(ctx context.Context, id string, locked bool) error {
	p, pid, leave, err := r.pointChange(ctx, "lock", id)
	if err != nil {
		return err
	}
	defer leave()
	// A time lock outlives the record's flag: clearing the flag would
	// report "unlocked" for a point that Delete still refuses.
	if u := r.heldUntil(pid); !locked && u.After(r.now()) {
		return fmt.Errorf("unlock %s: a time lock cannot be removed before its date: %w", p.ID,
			&PointLockedError{Point: p.ID, Until: u, By: "time lock"})
	}
	if err := r.writeRecord(record{Manifest: pid, Locked: locked}); err != nil {
		return err
	}
	p.Locked, p.LockedUntil = locked, time.Time{}
	return r.db.Update(func(tx *bolt.Tx) error {
		if err := failpoint.Hit("catalog.lock"); err != nil {
			return err
		}
		return putPointTx(tx, p)
	})
}
