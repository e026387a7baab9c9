package state

import (
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/vmvault/vmvault/internal/state/schema"
)

// ErrNotOwner is returned by Tx.Bucket for a bucket the store's owner does
// not own (schema.Buckets says whose each one is), and by DB.Store for an
// owner that owns none.
var ErrNotOwner = errors.New("state db: bucket not owned")

// Store is one owner's share of state.db: transactions that reach the
// buckets schema declares for that owner and refuse every other. The
// packages that keep records in state.db beside internal/state (settings,
// copy jobs, approvals) take a Store, never the bbolt file, so each bucket
// is read and written by one package only. Open has created the buckets.
// A Store is safe for concurrent use.
type Store struct {
	d     *DB
	owner schema.Owner
	names map[string]bool
}

// Store returns the handle of owner's buckets; an owner that owns none
// (internal/state itself included: it needs no handle) is ErrNotOwner.
func (d *DB) Store(owner schema.Owner) (*Store, error) {
	names := map[string]bool{}
	if owner != schema.OwnerState {
		for _, n := range schema.BucketsOf(owner) {
			names[string(n)] = true
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%w: %q owns no bucket of state.db", ErrNotOwner, owner)
	}
	return &Store{d: d, owner: owner, names: names}, nil
}

// Owner is whose buckets the store reaches.
func (s *Store) Owner() schema.Owner { return s.owner }

// View runs fn in a read-only transaction. A page damaged after Open is an
// ErrCorrupt, never a panic.
func (s *Store) View(fn func(*Tx) error) error {
	return s.d.guarded(func() error {
		return s.d.db.View(func(tx *bolt.Tx) error { return fn(&Tx{tx: tx, s: s}) })
	})
}

// Update runs fn in a read-write transaction, committed if fn returns nil.
func (s *Store) Update(fn func(*Tx) error) error {
	return s.d.guarded(func() error {
		return s.d.db.Update(func(tx *bolt.Tx) error { return fn(&Tx{tx: tx, s: s}) })
	})
}

// Tx is a transaction of a Store. It is valid only inside View or Update.
type Tx struct {
	tx *bolt.Tx
	s  *Store
}

// Bucket returns the top-level bucket name; a bucket of another owner is
// ErrNotOwner.
func (t *Tx) Bucket(name []byte) (*Bucket, error) {
	if !t.s.names[string(name)] {
		return nil, fmt.Errorf("%w: %s may not open bucket %q", ErrNotOwner, t.s.owner, name)
	}
	b := t.tx.Bucket(name)
	if b == nil { // Open created every declared bucket
		return nil, fmt.Errorf("state db %s: bucket %q missing: %w", t.s.d.path, name, ErrCorrupt)
	}
	return &Bucket{b: b}, nil
}

// Bucket is one bucket of a Tx: bbolt's operations, nothing more. Values
// returned are valid only inside the transaction; copy them to keep them.
type Bucket struct{ b *bolt.Bucket }

// Get returns the value of key, nil if absent.
func (b *Bucket) Get(key []byte) []byte { return b.b.Get(key) }

// Put sets key to value (write transactions only).
func (b *Bucket) Put(key, value []byte) error { return b.b.Put(key, value) }

// Delete removes key; an absent key is not an error.
func (b *Bucket) Delete(key []byte) error { return b.b.Delete(key) }

// ForEach calls fn for every key in order; an error stops it.
func (b *Bucket) ForEach(fn func(k, v []byte) error) error { return b.b.ForEach(fn) }

// Cursor returns a cursor over the bucket's keys in order.
func (b *Bucket) Cursor() *Cursor { return &Cursor{c: b.b.Cursor()} }

// Cursor walks a Bucket's keys (nil key: past either end).
type Cursor struct{ c *bolt.Cursor }

// First moves to the first key.
func (c *Cursor) First() (k, v []byte) { return c.c.First() }

// Last moves to the last key.
func (c *Cursor) Last() (k, v []byte) { return c.c.Last() }

// Seek moves to key, or the first key after it.
func (c *Cursor) Seek(key []byte) (k, v []byte) { return c.c.Seek(key) }

// Next moves to the next key.
func (c *Cursor) Next() (k, v []byte) { return c.c.Next() }

// Prev moves to the previous key.
func (c *Cursor) Prev() (k, v []byte) { return c.c.Prev() }
