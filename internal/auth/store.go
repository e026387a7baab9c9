package auth

import (
	"context"
	"fmt"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/vmvault/vmvault/internal/state/schema"
)

// The buckets of auth, declared with the rest of state.db in
// internal/state/schema (internal/state/FORMAT.md).
var (
	bAuth       = schema.BucketAuth
	bTokens     = schema.BucketTokens
	bTokenHash  = schema.BucketTokenHash
	bUsers      = schema.BucketUsers
	kAdminHash  = schema.KeyAdminHash
	authBuckets = [][]byte{bAuth, bTokens, bTokenHash, bUsers}
)

// BoltStore implements Store in buckets of a bbolt database the caller owns
// (the daemon's state.db), every value led by its format byte:
//
//	auth        "admin-hash" -> bytes: PHC Argon2id string (the single
//	            administrator of earlier versions; moved into users by MigrateAdmin)
//	users       lower-case user name -> json: User plus its hash
//	tokens      token id -> json: Token plus its hash
//	token-hash  hex SHA-256 of the secret -> bytes: token id
type BoltStore struct{ db *bolt.DB }

// NewBoltStore creates the buckets if needed (state.Open has created them
// in the daemon's state.db; a bare bbolt file gets them here).
func NewBoltStore(db *bolt.DB) (*BoltStore, error) {
	err := db.Update(func(tx *bolt.Tx) error {
		for _, b := range authBuckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("auth store: %w", err)
	}
	return &BoltStore{db: db}, nil
}

type tokenRecord struct {
	Token
	Hash string `json:"hash"`
}

// AdminHash returns the single administrator hash of earlier versions ("" once migrated).
func (s *BoltStore) AdminHash(ctx context.Context) (string, error) {
	var h string
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bAuth).Get(kAdminHash)
		if v == nil {
			return nil
		}
		p, err := schema.DecodeBytes(v)
		if err != nil {
			return fmt.Errorf("decode administrator hash: %w", err)
		}
		h = string(p)
		return nil
	})
	return h, err
}

// SetAdminHash writes the single administrator hash as earlier versions
// did (tests of the migration use it).
func (s *BoltStore) SetAdminHash(ctx context.Context, hash string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bAuth).Put(kAdminHash, schema.EncodeBytes([]byte(hash))) })
}

// PutToken implements Store.
func (s *BoltStore) PutToken(ctx context.Context, t Token) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b, err := schema.Encode(tokenRecord{Token: t, Hash: t.Hash})
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bTokens).Put([]byte(t.ID), b); err != nil {
			return err
		}
		return tx.Bucket(bTokenHash).Put([]byte(t.Hash), schema.EncodeBytes([]byte(t.ID)))
	})
}

func decodeToken(v []byte) (Token, error) {
	var r tokenRecord
	if err := schema.Decode(v, &r); err != nil {
		return Token{}, fmt.Errorf("decode token: %w", err)
	}
	r.Token.Hash = r.Hash
	return r.Token, nil
}

// TokenByHash implements Store.
func (s *BoltStore) TokenByHash(ctx context.Context, hash string) (Token, error) {
	var t Token
	err := s.db.View(func(tx *bolt.Tx) error {
		ref := tx.Bucket(bTokenHash).Get([]byte(hash))
		if ref == nil {
			return ErrNotFound
		}
		id, err := schema.DecodeBytes(ref)
		if err != nil {
			return fmt.Errorf("decode token reference: %w", err)
		}
		v := tx.Bucket(bTokens).Get(id)
		if v == nil {
			return ErrNotFound
		}
		t, err = decodeToken(v)
		return err
	})
	return t, err
}

// Tokens implements Store.
func (s *BoltStore) Tokens(ctx context.Context) ([]Token, error) {
	var out []Token
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bTokens).ForEach(func(k, v []byte) error {
			t, err := decodeToken(v)
			if err != nil {
				return err
			}
			out = append(out, t)
			return nil
		})
	})
	return out, err
}

// DeleteToken implements Store.
func (s *BoltStore) DeleteToken(ctx context.Context, id string) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		v := tx.Bucket(bTokens).Get([]byte(id))
		if v == nil {
			return fmt.Errorf("token %s: %w", id, ErrNotFound)
		}
		t, err := decodeToken(v)
		if err != nil {
			return err
		}
		if err := tx.Bucket(bTokenHash).Delete([]byte(t.Hash)); err != nil {
			return err
		}
		return tx.Bucket(bTokens).Delete([]byte(id))
	})
}

type userRecord struct {
	User
	Hash string `json:"hash"`
}

func userKey(name string) []byte { return []byte(strings.ToLower(name)) }

func decodeUser(v []byte) (User, error) {
	var r userRecord
	if err := schema.Decode(v, &r); err != nil {
		return User{}, fmt.Errorf("decode user: %w", err)
	}
	r.User.Hash = r.Hash
	return r.User, nil
}

// Users implements Store.
func (s *BoltStore) Users(ctx context.Context) ([]User, error) {
	var out []User
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bUsers).ForEach(func(k, v []byte) error {
			u, err := decodeUser(v)
			if err != nil {
				return fmt.Errorf("user %s: %w", k, err)
			}
			out = append(out, u)
			return nil
		})
	})
	return out, err
}

// User implements Store.
func (s *BoltStore) User(ctx context.Context, name string) (User, error) {
	var u User
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bUsers).Get(userKey(name))
		if v == nil {
			return fmt.Errorf("user %q: %w", name, ErrNotFound)
		}
		var err error
		u, err = decodeUser(v)
		return err
	})
	return u, err
}

// PutUser implements Store.
func (s *BoltStore) PutUser(ctx context.Context, u User) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b, err := schema.Encode(userRecord{User: u, Hash: u.Hash})
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bUsers).Put(userKey(u.Username), b) })
}

// DeleteUser implements Store.
func (s *BoltStore) DeleteUser(ctx context.Context, name string) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bUsers)
		if b.Get(userKey(name)) == nil {
			return fmt.Errorf("user %q: %w", name, ErrNotFound)
		}
		return b.Delete(userKey(name))
	})
}

// MigrateAdmin implements Store: in one transaction, the single
// administrator hash of earlier versions becomes the user name with the
// administrator role, and the old key is removed so a later deletion of
// that user is not undone at the next start.
func (s *BoltStore) MigrateAdmin(ctx context.Context, name string, created time.Time) (bool, error) {
	migrated := false
	err := s.db.Update(func(tx *bolt.Tx) error {
		v := tx.Bucket(bAuth).Get(kAdminHash)
		if v == nil {
			return nil
		}
		h, err := schema.DecodeBytes(v)
		if err != nil {
			return fmt.Errorf("decode administrator hash: %w", err)
		}
		users := tx.Bucket(bUsers)
		if users.Get(userKey(name)) == nil {
			b, err := schema.Encode(userRecord{User: User{Username: name, Role: RoleAdministrator, Source: SourceLocal, Created: created}, Hash: string(h)})
			if err != nil {
				return err
			}
			if err := users.Put(userKey(name), b); err != nil {
				return err
			}
			migrated = true
		}
		return tx.Bucket(bAuth).Delete(kAdminHash)
	})
	if err != nil {
		return false, fmt.Errorf("migrate administrator: %w", err)
	}
	return migrated, nil
}
