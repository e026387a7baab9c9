package copyjob

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/vmvault/vmvault/internal/state"
	"github.com/vmvault/vmvault/internal/state/schema"
	"github.com/vmvault/vmvault/web/api"
)

// The buckets this package owns in the daemon's state database (beside
// internal/state's and the other owners'), reached through its
// state.Store, which refuses every other bucket. Values are JSON.
//
//	copy-jobs   job id                       -> Job
//	copy-runs   job id 0x00 run id           -> Run (run ids sort by start)
var (
	bJobs = schema.BucketCopyJobs
	bRuns = schema.BucketCopyRuns
)

// KeepRuns is how many runs of one job are kept (the oldest go first).
const KeepRuns = 200

// Store keeps copy jobs and their runs in state.db. It is safe for
// concurrent use.
type Store struct{ db *state.Store }

// NewStore keeps copy jobs in db, the daemon's state database (state.Open
// created the buckets).
func NewStore(db *state.DB) (*Store, error) {
	st, err := db.Store(schema.OwnerCopyJobs)
	if err != nil {
		return nil, fmt.Errorf("copy job store: %w", err)
	}
	return &Store{db: st}, nil
}

// buckets opens this package's buckets in tx.
func buckets(tx *state.Tx) (jobs, runs *state.Bucket, err error) {
	if jobs, err = tx.Bucket(bJobs); err != nil {
		return nil, nil, err
	}
	if runs, err = tx.Bucket(bRuns); err != nil {
		return nil, nil, err
	}
	return jobs, runs, nil
}

// Jobs returns every copy job, by id.
func (s *Store) Jobs(ctx context.Context) ([]Job, error) {
	out := []Job{}
	err := s.db.View(func(tx *state.Tx) error {
		jobs, _, err := buckets(tx)
		if err != nil {
			return err
		}
		return jobs.ForEach(func(k, v []byte) error {
			var j Job
			if err := schema.Decode(v, &j); err != nil {
				return fmt.Errorf("copy job %q: %w", k, err)
			}
			out = append(out, j)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("read copy jobs: %w", err)
	}
	return out, nil
}

// Job returns one copy job; an unknown id matches api.ErrNotFound.
func (s *Store) Job(ctx context.Context, id string) (Job, error) {
	var j Job
	err := s.db.View(func(tx *state.Tx) error {
		jobs, _, err := buckets(tx)
		if err != nil {
			return err
		}
		v := jobs.Get([]byte(id))
		if v == nil {
			return fmt.Errorf("copy job %q: %w", id, api.ErrNotFound)
		}
		return schema.Decode(v, &j)
	})
	return j, err
}

// PutJob saves j (validate it first), replacing a job of the same id.
func (s *Store) PutJob(ctx context.Context, j Job) error {
	v, err := schema.Encode(j)
	if err != nil {
		return fmt.Errorf("encode copy job %s: %w", j.ID, err)
	}
	err = s.db.Update(func(tx *state.Tx) error {
		jobs, _, err := buckets(tx)
		if err != nil {
			return err
		}
		return jobs.Put([]byte(j.ID), v)
	})
	if err != nil {
		return fmt.Errorf("save copy job %s: %w", j.ID, err)
	}
	return nil
}

// DeleteJob removes a job and its runs; an unknown id matches api.ErrNotFound.
func (s *Store) DeleteJob(ctx context.Context, id string) error {
	return s.db.Update(func(tx *state.Tx) error {
		b, runs, err := buckets(tx)
		if err != nil {
			return err
		}
		if b.Get([]byte(id)) == nil {
			return fmt.Errorf("copy job %q: %w", id, api.ErrNotFound)
		}
		if err := b.Delete([]byte(id)); err != nil {
			return err
		}
		return deletePrefix(runs, runPrefix(id), 0)
	})
}

func runPrefix(job string) []byte { return append([]byte(job), 0) }

// NewRunID returns a run id of job that sorts by start.
func NewRunID(job string, start time.Time) string {
	return fmt.Sprintf("%s/%020d", job, start.UnixNano())
}

// PutRun saves r (new or updated) and prunes the job's runs to KeepRuns.
func (s *Store) PutRun(ctx context.Context, r Run) error {
	v, err := schema.Encode(r)
	if err != nil {
		return fmt.Errorf("encode copy run %s: %w", r.ID, err)
	}
	err = s.db.Update(func(tx *state.Tx) error {
		_, b, err := buckets(tx)
		if err != nil {
			return err
		}
		if err := b.Put(append(runPrefix(r.Job), r.ID...), v); err != nil {
			return err
		}
		return deletePrefix(b, runPrefix(r.Job), KeepRuns)
	})
	if err != nil {
		return fmt.Errorf("save copy run %s: %w", r.ID, err)
	}
	return nil
}

// deletePrefix deletes the keys under prefix but the newest keep.
func deletePrefix(b *state.Bucket, prefix []byte, keep int) error {
	var keys [][]byte
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		keys = append(keys, append([]byte(nil), k...))
	}
	if len(keys) <= keep {
		return nil
	}
	for _, k := range keys[:len(keys)-keep] {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// Runs returns up to limit runs of job, newest first.
func (s *Store) Runs(ctx context.Context, job string, limit int) ([]Run, error) {
	out := []Run{}
	prefix := runPrefix(job)
	err := s.db.View(func(tx *state.Tx) error {
		_, runs, err := buckets(tx)
		if err != nil {
			return err
		}
		c := runs.Cursor()
		var k, v []byte
		// The last key under prefix: seek past it, step back.
		if k, _ = c.Seek(append(append([]byte(nil), prefix[:len(prefix)-1]...), 1)); k == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
		for ; k != nil && bytes.HasPrefix(k, prefix) && (limit <= 0 || len(out) < limit); k, v = c.Prev() {
			var r Run
			if err := schema.Decode(v, &r); err != nil {
				return fmt.Errorf("copy run %q: %w", k, err)
			}
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read runs of copy job %s: %w", job, err)
	}
	return out, nil
}

// RunsSince returns the runs of every job that started at or after since,
// oldest first.
func (s *Store) RunsSince(ctx context.Context, since time.Time) ([]Run, error) {
	var out []Run
	err := s.db.View(func(tx *state.Tx) error {
		_, runs, err := buckets(tx)
		if err != nil {
			return err
		}
		return runs.ForEach(func(k, v []byte) error {
			var r Run
			if err := schema.Decode(v, &r); err != nil {
				return fmt.Errorf("copy run %q: %w", k, err)
			}
			if !r.Start.Before(since) {
				out = append(out, r)
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("read copy runs: %w", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out, nil
}

// markInterrupted ends every run left running by a previous process.
func (s *Store) markInterrupted(ctx context.Context, now time.Time) (int, error) {
	n := 0
	err := s.db.Update(func(tx *state.Tx) error {
		_, b, err := buckets(tx)
		if err != nil {
			return err
		}
		type kv struct{ k, v []byte }
		var upd []kv
		err = b.ForEach(func(k, v []byte) error {
			var r Run
			if err := schema.Decode(v, &r); err != nil || r.State != RunRunning {
				return nil
			}
			r.State, r.End = RunInterrupted, now
			r.Error = strings.TrimSpace(r.Error + " the appliance stopped during the copy; the next run resumes it")
			nv, err := schema.Encode(r)
			if err != nil {
				return err
			}
			upd = append(upd, kv{append([]byte(nil), k...), nv})
			return nil
		})
		if err != nil {
			return err
		}
		for _, u := range upd {
			if err := b.Put(u.k, u.v); err != nil {
				return err
			}
		}
		n = len(upd)
		return nil
	})
	return n, err
}
