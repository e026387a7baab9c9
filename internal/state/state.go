package state

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/vmvault/vmvault/internal/failpoint"
	"github.com/vmvault/vmvault/internal/state/schema"
	"github.com/vmvault/vmvault/policy"
)

// DB is the appliance's state database. It is safe for concurrent use.
type DB struct {
	db   *bolt.DB
	path string
}

// Open opens (creating if needed) the state database at path. It fails fast
// if another process holds it, and refuses a schema newer than SchemaVersion.
//
// The file is verified before it is used (every page read, bbolt's
// consistency check, this package's records decoded). A damaged file is a
// *CorruptError (errors.Is ErrCorrupt) naming the file and the newest copy
// in CopiesDir(path) that verifies; Open never panics, whatever the file
// holds. A missing or empty file while copies exist is refused the same way
// (ErrMissing): starting empty would silently drop every user and job.
func Open(path string) (*DB, error) {
	fi, statErr := os.Stat(path)
	switch {
	case statErr != nil && !errors.Is(statErr, os.ErrNotExist):
		return nil, fmt.Errorf("open state db %s: %w", path, statErr)
	case statErr != nil || fi.Size() == 0:
		if copies, _ := ListCopies(CopiesDir(path), false); len(copies) > 0 {
			what := "missing"
			if statErr == nil {
				what = "empty"
			}
			return nil, newCorruptError(path, fmt.Errorf("%w: the file is %s but %d copies of it exist", ErrMissing, what, len(copies)))
		}
	default:
		// The checks below read the file without bbolt's lock: make sure no
		// daemon is writing it, or a page in flux would look like damage.
		if err := notHeld(path); err != nil {
			return nil, fmt.Errorf("open state db %s: %w", path, heldErr(err))
		}
		if err := precheck(path); err != nil {
			return nil, newCorruptError(path, err)
		}
	}
	bdb, err := openGuarded(path, &bolt.Options{Timeout: time.Second})
	if err != nil {
		if isCorruption(err) {
			return nil, newCorruptError(path, err)
		}
		return nil, fmt.Errorf("open state db %s: %w", path, heldErr(err))
	}
	// A newer schema may use record formats this program cannot read: say
	// so rather than call the file damaged.
	if err := guard(func() error { return bdb.View(schemaNotNewer) }); err != nil {
		_ = bdb.Close()
		if errors.Is(err, ErrSchemaTooNew) {
			return nil, fmt.Errorf("open state db %s: %w", path, err)
		}
		return nil, newCorruptError(path, err)
	}
	if err := verifyOpen(bdb); err != nil {
		_ = bdb.Close()
		return nil, newCorruptError(path, err)
	}
	// Before a migration rewrites the file, a verified copy of it as it is
	// goes with the rolling copies: the way back to the program that wrote
	// it (`serve --restore-state`), whatever the new version does.
	var from uint32
	if err := guard(func() error {
		return bdb.View(func(tx *bolt.Tx) (err error) { from, err = fileVersion(tx); return err })
	}); err != nil {
		_ = bdb.Close()
		return nil, newCorruptError(path, err)
	}
	if from < SchemaVersion {
		now := time.Now()
		if _, err := (&DB{db: bdb, path: path}).writeCopy(CopiesDir(path), now, schemaCopyName(now, from)); err != nil {
			_ = bdb.Close()
			return nil, fmt.Errorf("open state db %s: copy it before migrating schema %d to %d: %w", path, from, SchemaVersion, err)
		}
	}
	err = guard(func() error { return bdb.Update(initSchema) })
	if err != nil {
		_ = bdb.Close()
		if errors.Is(err, ErrSchemaTooNew) {
			return nil, fmt.Errorf("open state db %s: %w", path, err)
		}
		return nil, newCorruptError(path, err)
	}
	return &DB{db: bdb, path: path}, nil
}

// heldErr adds ErrHeld to bbolt's lock timeout (the error keeps matching
// bbolt's ErrTimeout too).
func heldErr(err error) error {
	if errors.Is(err, bolterrors.ErrTimeout) {
		return fmt.Errorf("%w: %w", ErrHeld, err)
	}
	return err
}

// notHeld waits up to a second for no other process to hold the bbolt lock
// (flock) on path; held, it returns bbolt's ErrTimeout like bolt.Open.
func notHeld(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	deadline := time.Now().Add(time.Second)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return err
		}
		if time.Now().After(deadline) {
			return bolterrors.ErrTimeout
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Path returns the database file's path.
func (d *DB) Path() string { return d.path }

// Bolt returns the underlying bbolt database for internal/auth and
// internal/task, whose BoltStores keep users, tokens and tasks in this one
// file (one lock, one backup, one place an operator has to know about) and
// write only the buckets schema declares for them, with its codec. Every
// other owner of buckets here (settings, copy jobs, approvals) goes through
// its Store instead, which refuses the buckets it does not own. Open has
// created every bucket and migrated them to SchemaVersion.
func (d *DB) Bolt() *bolt.DB { return d.db }

// Close closes the database.
func (d *DB) Close() error { return d.db.Close() }

// Schema returns the stored schema version.
func (d *DB) Schema(ctx context.Context) (int, error) {
	var v int
	err := d.view(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bMeta).Get(kSchema)
		if len(b) != 4 {
			return fmt.Errorf("schema version: %w", ErrCorrupt)
		}
		v = int(binary.BigEndian.Uint32(b))
		return nil
	})
	return v, err
}

// view and update run transactions under guard: a page damaged after Open
// verified the file (a disk error, another writer) is an ErrCorrupt naming
// the file, never a panic of the daemon. bbolt rolls the transaction back.
func (d *DB) view(ctx context.Context, fn func(*bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return d.guarded(func() error { return d.db.View(fn) })
}

func (d *DB) update(ctx context.Context, fn func(*bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return d.guarded(func() error {
		return d.db.Update(func(tx *bolt.Tx) error {
			if err := failpoint.Hit("state.tx"); err != nil {
				return err
			}
			return fn(tx)
		})
	})
}

func (d *DB) guarded(fn func() error) error {
	panicked := true
	err := guard(func() error {
		err := fn()
		panicked = false
		return err
	})
	if panicked {
		return fmt.Errorf("state db %s: %w: %w", d.path, ErrCorrupt, err)
	}
	return err
}

func encode(v any) ([]byte, error) { return schema.Encode(v) }

// decode reads a record written by encode; bad input is ErrCorrupt, never a panic.
func decode(b []byte, v any) error {
	if err := schema.Decode(b, v); err != nil {
		return fmt.Errorf("record: %w (%w)", ErrCorrupt, err)
	}
	return nil
}

// readAll decodes every record of a bucket, in key order.
func readAll[T any](ctx context.Context, d *DB, bucket []byte, what string) ([]T, error) {
	var out []T
	err := d.view(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).ForEach(func(k, v []byte) error {
			var rec T
			if err := decode(v, &rec); err != nil {
				return fmt.Errorf("%s %q: %w", what, k, err)
			}
			out = append(out, rec)
			return nil
		})
	})
	return out, err
}

func putRecord(b *bolt.Bucket, key []byte, v any) error {
	val, err := encode(v)
	if err != nil {
		return err
	}
	return b.Put(key, val)
}

func timeKey(t time.Time) []byte {
	return binary.BigEndian.AppendUint64(nil, timeBits(t))
}

// timeBits maps a time to an unsigned, order-preserving integer (zero and
// pre-1678 times sort first).
func timeBits(t time.Time) uint64 { return schema.TimeBits(t) }

func join(parts ...[]byte) []byte { return bytes.Join(parts, []byte{0}) }

// PutJob stores a job (insert or replace). The caller validates it first.
func (d *DB) PutJob(ctx context.Context, j policy.Job) error {
	if j.ID == "" {
		return fmt.Errorf("put job: empty id")
	}
	return d.update(ctx, func(tx *bolt.Tx) error {
		if err := putRecord(tx.Bucket(bJobs), []byte(j.ID), j); err != nil {
			return fmt.Errorf("put job %s: %w", j.ID, err)
		}
		return nil
	})
}

// Job returns one job or ErrNotFound.
func (d *DB) Job(ctx context.Context, id string) (policy.Job, error) {
	var j policy.Job
	err := d.view(ctx, func(tx *bolt.Tx) error {
		v := tx.Bucket(bJobs).Get([]byte(id))
		if v == nil {
			return fmt.Errorf("job %s: %w", id, ErrNotFound)
		}
		return decode(v, &j)
	})
	return j, err
}

// DeleteJob removes a job and its per-VM scheduler state; its run history stays.
func (d *DB) DeleteJob(ctx context.Context, id string) error {
	return d.update(ctx, func(tx *bolt.Tx) error {
		if tx.Bucket(bJobs).Get([]byte(id)) == nil {
			return fmt.Errorf("delete job %s: %w", id, ErrNotFound)
		}
		if err := tx.Bucket(bJobs).Delete([]byte(id)); err != nil {
			return err
		}
		c := tx.Bucket(bVMState).Cursor()
		prefix := append([]byte(id), 0)
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Seek(prefix) {
			if err := c.Delete(); err != nil {
				return err
			}
		}
		return nil
	})
}

// Jobs returns every job, ordered by id.
func (d *DB) Jobs(ctx context.Context) ([]policy.Job, error) {
	return readAll[policy.Job](ctx, d, bJobs, "job")
}

// PutRun stores a run (insert or replace) and maintains the open-run and per-job indexes.
func (d *DB) PutRun(ctx context.Context, r policy.JobRun) error {
	return d.PutRuns(ctx, []policy.JobRun{r})
}

// PutRuns stores several runs in one transaction: the scheduler closes an
// interrupted run and opens the run resuming it together, so a crash never
// leaves both open (or neither).
func (d *DB) PutRuns(ctx context.Context, rs []policy.JobRun) error {
	for _, r := range rs {
		if r.ID == "" || r.Job == "" {
			return fmt.Errorf("put run: empty id or job")
		}
	}
	return d.update(ctx, func(tx *bolt.Tx) error {
		for _, r := range rs {
			id := []byte(r.ID)
			if err := putRecord(tx.Bucket(bRuns), id, r); err != nil {
				return fmt.Errorf("put run %s: %w", r.ID, err)
			}
			if err := tx.Bucket(bRunsByJob).Put(join([]byte(r.Job), timeKey(r.Start), id), schema.EncodeEmpty()); err != nil {
				return err
			}
			var err error
			if r.End.IsZero() {
				err = tx.Bucket(bRunsOpen).Put(id, schema.EncodeEmpty())
			} else {
				err = tx.Bucket(bRunsOpen).Delete(id)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// Run returns one run or ErrNotFound.
func (d *DB) Run(ctx context.Context, id string) (policy.JobRun, error) {
	var r policy.JobRun
	err := d.view(ctx, func(tx *bolt.Tx) error {
		v := tx.Bucket(bRuns).Get([]byte(id))
		if v == nil {
			return fmt.Errorf("run %s: %w", id, ErrNotFound)
		}
		return decode(v, &r)
	})
	return r, err
}

// OpenRuns returns the runs that have no end yet (after a crash: the ones to resume or close).
func (d *DB) OpenRuns(ctx context.Context) ([]policy.JobRun, error) {
	var out []policy.JobRun
	err := d.view(ctx, func(tx *bolt.Tx) error {
		runs := tx.Bucket(bRuns)
		return tx.Bucket(bRunsOpen).ForEach(func(k, _ []byte) error {
			var r policy.JobRun
			if err := decode(runs.Get(k), &r); err != nil {
				return fmt.Errorf("run %s: %w", k, err)
			}
			out = append(out, r)
			return nil
		})
	})
	return out, err
}

// Runs returns up to limit runs of a job, newest start first (limit <= 0: all).
func (d *DB) Runs(ctx context.Context, job string, limit int) ([]policy.JobRun, error) {
	var out []policy.JobRun
	err := d.view(ctx, func(tx *bolt.Tx) error {
		runs := tx.Bucket(bRuns)
		prefix := append([]byte(job), 0)
		c := tx.Bucket(bRunsByJob).Cursor()
		// Seek past the prefix, then walk backwards: newest first.
		k, _ := c.Seek(append([]byte(job), 1))
		if k == nil {
			k, _ = c.Last()
		} else {
			k, _ = c.Prev()
		}
		for ; k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Prev() {
			rest := k[len(prefix):]
			if len(rest) < 9 {
				return fmt.Errorf("run index key: %w", ErrCorrupt)
			}
			var r policy.JobRun
			if err := decode(runs.Get(rest[9:]), &r); err != nil {
				return fmt.Errorf("run %s: %w", rest[9:], err)
			}
			out = append(out, r)
			if limit > 0 && len(out) == limit {
				break
			}
		}
		return nil
	})
	return out, err
}

// PutVMState stores the scheduler's state for one VM in one job.
func (d *DB) PutVMState(ctx context.Context, s policy.VMState) error {
	return d.update(ctx, func(tx *bolt.Tx) error {
		return putRecord(tx.Bucket(bVMState), join([]byte(s.Job), []byte(s.VM)), s)
	})
}

// PutVMStates stores several per-VM states in one transaction.
func (d *DB) PutVMStates(ctx context.Context, states []policy.VMState) error {
	return d.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bVMState)
		for _, s := range states {
			if err := putRecord(b, join([]byte(s.Job), []byte(s.VM)), s); err != nil {
				return err
			}
		}
		return nil
	})
}

// VMStates returns every per-VM scheduler state, ordered by job then VM.
func (d *DB) VMStates(ctx context.Context) ([]policy.VMState, error) {
	return readAll[policy.VMState](ctx, d, bVMState, "vm state")
}

// Checkpoint returns the last time the scheduler recorded itself alive (zero if never).
func (d *DB) Checkpoint(ctx context.Context) (time.Time, error) {
	var t time.Time
	err := d.view(ctx, func(tx *bolt.Tx) error {
		v := tx.Bucket(bScheduler).Get(kCheckpoint)
		if v == nil {
			return nil
		}
		var err error
		if t, err = schema.DecodeTime(v); err != nil {
			return fmt.Errorf("checkpoint: %w (%w)", ErrCorrupt, err)
		}
		return nil
	})
	return t, err
}

// SetCheckpoint records that the scheduler has evaluated everything up to t.
func (d *DB) SetCheckpoint(ctx context.Context, t time.Time) error {
	return d.update(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bScheduler).Put(kCheckpoint, schema.EncodeTime(t))
	})
}

// LastReport returns when the last daily report was sent (zero if never);
// with SetLastReport it is notify.ReportLog.
func (d *DB) LastReport(ctx context.Context) (time.Time, error) {
	var t time.Time
	err := d.view(ctx, func(tx *bolt.Tx) error {
		v := tx.Bucket(bNotify).Get(kLastDailyReport)
		if v == nil {
			return nil
		}
		var err error
		t, err = decodeLastReport(v)
		return err
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("read the last daily report's time: %w", err)
	}
	return t, nil
}

// decodeLastReport decodes the stored time (bytes: RFC 3339, UTC).
func decodeLastReport(v []byte) (time.Time, error) {
	var t time.Time
	p, err := schema.DecodeBytes(v)
	if err == nil {
		err = t.UnmarshalText(p)
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("decode %q: %w (%w)", v, ErrCorrupt, err)
	}
	return t, nil
}

// SetLastReport records when the last daily report was sent (RFC 3339, UTC).
func (d *DB) SetLastReport(ctx context.Context, t time.Time) error {
	v, err := t.UTC().MarshalText()
	if err != nil {
		return fmt.Errorf("record the daily report's time: %w", err)
	}
	err = d.update(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bNotify).Put(kLastDailyReport, schema.EncodeBytes(v))
	})
	if err != nil {
		return fmt.Errorf("record the daily report's time: %w", err)
	}
	return nil
}

// PutMaintenance stores one repository's maintenance progress.
func (d *DB) PutMaintenance(ctx context.Context, m policy.MaintenanceState) error {
	if m.Repository == "" {
		return fmt.Errorf("put maintenance: empty repository")
	}
	return d.update(ctx, func(tx *bolt.Tx) error {
		return putRecord(tx.Bucket(bMaintenance), []byte(m.Repository), m)
	})
}

// Maintenance returns every repository's maintenance progress.
func (d *DB) Maintenance(ctx context.Context) ([]policy.MaintenanceState, error) {
	return readAll[policy.MaintenanceState](ctx, d, bMaintenance, "maintenance")
}

// AddEvent appends an event. Events with equal times keep insertion order.
func (d *DB) AddEvent(ctx context.Context, e policy.Event) error {
	return d.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bEvents)
		seq, err := b.NextSequence()
		if err != nil {
			return err
		}
		return putRecord(b, binary.BigEndian.AppendUint64(timeKey(e.Time), seq), e)
	})
}

// EventQuery filters events. Zero fields do not filter.
type EventQuery struct {
	From, To    time.Time       // [From, To)
	MinSeverity policy.Severity // at least this severe
	Job         string
	VM          string
	Kind        string // the kind, or a prefix of it ending before a dot ("restore" matches "restore.vm")
	User        string // the acting user (audit events)
	Outcome     string // "ok" or "failed" (audit events)
	Limit       int    // at most this many, oldest first (0: no limit)
}

// kindMatches reports whether kind is want or is under it ("restore"
// matches "restore.vm", not "restored").
func kindMatches(kind, want string) bool {
	return want == "" || kind == want || strings.HasPrefix(kind, strings.TrimSuffix(want, ".")+".")
}

// Events returns the events matching q, oldest first.
func (d *DB) Events(ctx context.Context, q EventQuery) ([]policy.Event, error) {
	var out []policy.Event
	end := uint64(math.MaxUint64)
	if !q.To.IsZero() {
		end = timeBits(q.To)
	}
	err := d.view(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket(bEvents).Cursor()
		for k, v := c.Seek(timeKey(q.From)); k != nil; k, v = c.Next() {
			if len(k) != 16 {
				return fmt.Errorf("event key: %w", ErrCorrupt)
			}
			if binary.BigEndian.Uint64(k) >= end {
				break
			}
			var e policy.Event
			if err := decode(v, &e); err != nil {
				return fmt.Errorf("event: %w", err)
			}
			if e.Severity.Rank() < q.MinSeverity.Rank() || (q.Job != "" && e.Job != q.Job) || (q.VM != "" && e.VM != q.VM) ||
				!kindMatches(e.Kind, q.Kind) || (q.User != "" && e.User != q.User) || (q.Outcome != "" && e.Outcome != q.Outcome) {
				continue
			}
			out = append(out, e)
			if q.Limit > 0 && len(out) == q.Limit {
				break
			}
		}
		return nil
	})
	return out, err
}

// PruneEvents deletes events older than before and returns how many it
// deleted. It deletes at most 10000 per call to keep the transaction short;
// call again while it returns 10000.
func (d *DB) PruneEvents(ctx context.Context, before time.Time) (int, error) {
	const batch = 10000
	n := 0
	err := d.update(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket(bEvents).Cursor()
		limit := timeBits(before)
		for k, _ := c.First(); k != nil && n < batch; k, _ = c.First() {
			if len(k) < 8 || binary.BigEndian.Uint64(k) >= limit {
				break
			}
			if err := c.Delete(); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, err
}

var _ policy.Store = (*DB)(nil)
