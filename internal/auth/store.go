package auth

import (
	"context"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

var (
	bAuth       = []byte("auth")
	bTokens     = []byte("tokens")
	bTokenHash  = []byte("token-hash")
	kAdminHash  = []byte("admin-hash")
	authBuckets = [][]byte{bAuth, bTokens, bTokenHash}
)

// BoltStore implements Store in buckets of a bbolt database the caller owns
// (the daemon's state.db):
//
//	auth        "admin-hash" -> PHC Argon2id string
//	tokens      token id -> JSON of Token plus its hash
//	token-hash  hex SHA-256 of the secret -> token id
type BoltStore struct{ db *bolt.DB }

// NewBoltStore creates the buckets if needed.
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

// AdminHash implements Store.
func (s *BoltStore) AdminHash(ctx context.Context) (string, error) {
	var h string
	err := s.db.View(func(tx *bolt.Tx) error {
		h = string(tx.Bucket(bAuth).Get(kAdminHash))
		return nil
	})
	return h, err
}

// SetAdminHash implements Store.
func (s *BoltStore) SetAdminHash(ctx context.Context, hash string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bAuth).Put(kAdminHash, []byte(hash)) })
}

// PutToken implements Store.
func (s *BoltStore) PutToken(ctx context.Context, t Token) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b, err := json.Marshal(tokenRecord{Token: t, Hash: t.Hash})
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bTokens).Put([]byte(t.ID), b); err != nil {
			return err
		}
		return tx.Bucket(bTokenHash).Put([]byte(t.Hash), []byte(t.ID))
	})
}

func decodeToken(v []byte) (Token, error) {
	var r tokenRecord
	if err := json.Unmarshal(v, &r); err != nil {
		return Token{}, fmt.Errorf("decode token: %w", err)
	}
	r.Token.Hash = r.Hash
	return r.Token, nil
}

// TokenByHash implements Store.
func (s *BoltStore) TokenByHash(ctx context.Context, hash string) (Token, error) {
	var t Token
	err := s.db.View(func(tx *bolt.Tx) error {
		id := tx.Bucket(bTokenHash).Get([]byte(hash))
		if id == nil {
			return ErrNotFound
		}
		v := tx.Bucket(bTokens).Get(id)
		if v == nil {
			return ErrNotFound
		}
		var err error
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
