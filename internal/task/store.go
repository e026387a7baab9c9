package task

import (
	"context"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/vmvault/vmvault/internal/state/schema"
)

// bTasks is declared with the rest of state.db in internal/state/schema
// (internal/state/FORMAT.md).
var bTasks = schema.BucketTasks

// BoltStore keeps task summaries in a bucket "tasks" of a bbolt database the
// caller owns (the daemon's state.db): task id -> format byte json, then the
// JSON of Info. Ids start with the creation time in hex, so key order is
// creation order.
type BoltStore struct {
	db *bolt.DB
}

// NewBoltStore creates the bucket if needed.
func NewBoltStore(db *bolt.DB) (*BoltStore, error) {
	err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bTasks)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("task store: %w", err)
	}
	return &BoltStore{db: db}, nil
}

// PutTask stores a summary.
func (s *BoltStore) PutTask(ctx context.Context, t Info) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b, err := schema.Encode(t)
	if err != nil {
		return fmt.Errorf("encode task %s: %w", t.ID, err)
	}
	return s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bTasks).Put([]byte(t.ID), b) })
}

// Task returns one summary.
func (s *BoltStore) Task(ctx context.Context, id string) (Info, error) {
	var t Info
	if err := ctx.Err(); err != nil {
		return t, err
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bTasks).Get([]byte(id))
		if v == nil {
			return fmt.Errorf("task %s: %w", id, ErrNotFound)
		}
		if err := schema.Decode(v, &t); err != nil {
			return fmt.Errorf("decode task %s: %w", id, err)
		}
		return nil
	})
	return t, err
}

// Tasks returns up to limit summaries, newest first.
func (s *BoltStore) Tasks(ctx context.Context, limit int) ([]Info, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []Info
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bTasks).Cursor()
		for k, v := c.Last(); k != nil; k, v = c.Prev() {
			var t Info
			if err := schema.Decode(v, &t); err != nil {
				return fmt.Errorf("decode task %s: %w", k, err)
			}
			out = append(out, t)
			if limit > 0 && len(out) == limit {
				break
			}
		}
		return nil
	})
	return out, err
}
