package repository

import (
	"encoding/hex"
	"fmt"
)

// ID identifies a blob: SHA-256 of its plaintext, or HMAC-SHA-256 keyed with
// the repository's id key when the repository is encrypted.
type ID [32]byte

// String returns the lowercase hex form.
func (id ID) String() string { return hex.EncodeToString(id[:]) }

// IsZero reports whether id is the zero value (used for holes).
func (id ID) IsZero() bool { return id == ID{} }

// MarshalText encodes the id as hex (JSON friendly).
func (id ID) MarshalText() ([]byte, error) {
	if id.IsZero() {
		return []byte{}, nil
	}
	return []byte(id.String()), nil
}

// UnmarshalText decodes hex ("" is the zero id).
func (id *ID) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*id = ID{}
		return nil
	}
	v, err := ParseID(string(b))
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// ParseID parses a 64-character hex id.
func ParseID(s string) (ID, error) {
	var id ID
	if len(s) != 64 {
		return id, fmt.Errorf("parse id %q: want 64 hex characters, got %d", s, len(s))
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return id, fmt.Errorf("parse id %q: %w", s, err)
	}
	return id, nil
}

// packID names a pack file: 16 random bytes, hex encoded in file names.
type packID [16]byte

func (p packID) String() string { return hex.EncodeToString(p[:]) }

func parsePackID(s string) (packID, error) {
	var p packID
	if len(s) != 32 {
		return p, fmt.Errorf("parse pack id %q: want 32 hex characters", s)
	}
	if _, err := hex.Decode(p[:], []byte(s)); err != nil {
		return p, fmt.Errorf("parse pack id %q: %w", s, err)
	}
	return p, nil
}
