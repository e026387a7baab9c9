package approval

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"

	"github.com/vmvault/vmvault/internal/state"
	"github.com/vmvault/vmvault/internal/state/schema"
	"github.com/vmvault/vmvault/web/api"
)

// The bucket of this package in state.db, declared with its format in
// internal/state/schema.
var bApprovals = schema.BucketApprovals

// errStatus is a transition from a status the action no longer has.
var errStatus = errors.New("status changed")

// store keeps actions in their bucket of state.db, through this package's
// state.Store (which refuses every other bucket).
type store struct{ db *state.Store }

func newStore(db *state.DB) (*store, error) {
	st, err := db.Store(schema.OwnerApprovals)
	if err != nil {
		return nil, fmt.Errorf("approvals store: %w", err)
	}
	return &store{db: st}, nil
}

// view and update run fn on the bucket in one transaction.
func (s *store) view(fn func(*state.Bucket) error) error {
	return s.db.View(func(tx *state.Tx) error {
		b, err := tx.Bucket(bApprovals)
		if err != nil {
			return err
		}
		return fn(b)
	})
}

func (s *store) update(fn func(*state.Bucket) error) error {
	return s.db.Update(func(tx *state.Tx) error {
		b, err := tx.Bucket(bApprovals)
		if err != nil {
			return err
		}
		return fn(b)
	})
}

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func encode(a api.Approval) ([]byte, error) {
	b, err := schema.Encode(a)
	if err != nil {
		return nil, fmt.Errorf("encode approval %s: %w", a.ID, err)
	}
	return b, nil
}

func decode(k, v []byte) (api.Approval, error) {
	var a api.Approval
	if err := schema.Decode(v, &a); err != nil {
		return a, fmt.Errorf("approval %s: %w", k, err)
	}
	return a, nil
}

// create saves a new action unless clash finds an existing one it
// conflicts with (checked in the same transaction, so two requests at
// once cannot both pass); clash's error is returned as is.
func (s *store) create(a api.Approval, clash func(api.Approval) error) error {
	v, err := encode(a)
	if err != nil {
		return err
	}
	return s.update(func(b *state.Bucket) error {
		if err := b.ForEach(func(k, v []byte) error {
			old, err := decode(k, v)
			if err != nil {
				return err
			}
			return clash(old)
		}); err != nil {
			return err
		}
		if err := b.Put([]byte(a.ID), v); err != nil {
			return fmt.Errorf("save approval %s: %w", a.ID, err)
		}
		return nil
	})
}

func (s *store) get(id string) (api.Approval, error) {
	var a api.Approval
	err := s.view(func(b *state.Bucket) error {
		v := b.Get([]byte(id))
		if v == nil {
			return api.Kind(fmt.Errorf("approval %q", id), api.ErrNotFound)
		}
		var err error
		a, err = decode([]byte(id), v)
		return err
	})
	return a, err
}

// list returns every action, newest request first.
func (s *store) list() ([]api.Approval, error) {
	var out []api.Approval
	err := s.view(func(b *state.Bucket) error {
		return b.ForEach(func(k, v []byte) error {
			a, err := decode(k, v)
			if err != nil {
				return err
			}
			out = append(out, a)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list approvals: %w", err)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].RequestedAt.Equal(out[j].RequestedAt) {
			return out[i].RequestedAt.After(out[j].RequestedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// transition changes an action whose status is from with fn, in one
// transaction; errStatus when its status is another (someone was first).
func (s *store) transition(id, from string, fn func(*api.Approval)) (api.Approval, error) {
	var a api.Approval
	err := s.update(func(b *state.Bucket) error {
		v := b.Get([]byte(id))
		if v == nil {
			return api.Kind(fmt.Errorf("approval %q", id), api.ErrNotFound)
		}
		var err error
		if a, err = decode([]byte(id), v); err != nil {
			return err
		}
		if a.Status != from {
			return errStatus
		}
		fn(&a)
		nv, err := encode(a)
		if err != nil {
			return err
		}
		return b.Put([]byte(id), nv)
	})
	return a, err
}

// reopen moves every executing action back to pending (start-up: the
// process that was executing them stopped).
func (s *store) reopen() (int, error) {
	n := 0
	err := s.update(func(b *state.Bucket) error {
		type kv struct{ k, v []byte }
		var upd []kv
		if err := b.ForEach(func(k, v []byte) error {
			a, err := decode(k, v)
			if err != nil {
				return err
			}
			if a.Status != api.ApprovalExecuting {
				return nil
			}
			a.Status = api.ApprovalPending
			nv, err := encode(a)
			if err != nil {
				return err
			}
			upd = append(upd, kv{append([]byte(nil), k...), nv})
			return nil
		}); err != nil {
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
	if err != nil {
		return 0, fmt.Errorf("reopen interrupted approvals: %w", err)
	}
	return n, nil
}
