package schema

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/vmvault/vmvault/internal/failpoint"
)

// ErrTooNew is returned for a file of a schema newer than Version: it may
// hold formats this code cannot read, so it is refused and never rewritten.
var ErrTooNew = errors.New("state database schema is newer than this program")

// Migrations. internal/state.Open runs Upgrade in the one bbolt
// transaction that creates the buckets and records the version, so a
// migration commits whole or not at all: a crash or an error half-way
// leaves the file as it was (bbolt's commit is atomic), and the next Open
// migrates it again from the start. The failpoint "state.migrate" is hit
// before each bucket a migration rewrites.

// FileVersion returns the schema of the file tx reads: meta/schema;
// without it, 1 if any declared bucket holds data (a file of version 1
// whose other stores wrote before internal/state created meta), else
// Version (a new file).
func FileVersion(tx *bolt.Tx) (uint32, error) {
	if m := tx.Bucket(BucketMeta); m != nil {
		if v := m.Get(KeySchema); v != nil {
			if len(v) != 4 {
				return 0, fmt.Errorf("schema version of %d bytes: %w", len(v), ErrFormat)
			}
			n := binary.BigEndian.Uint32(v)
			if n == 0 {
				return 0, fmt.Errorf("schema version 0: %w", ErrFormat)
			}
			return n, nil
		}
	}
	for _, b := range Buckets {
		if bk := tx.Bucket(b.Name); bk != nil {
			if k, _ := bk.Cursor().First(); k != nil {
				return 1, nil
			}
		}
	}
	return Version, nil
}

// Upgrade creates every declared bucket and brings the file to Version, in
// tx: it runs the migrations from the file's version one at a time and
// records the new version. A file of a newer version is ErrTooNew; a value
// the file's version could not have written is ErrFormat, naming it.
func Upgrade(tx *bolt.Tx) error {
	v, err := FileVersion(tx)
	if err != nil {
		return err
	}
	if v > Version {
		return fmt.Errorf("state db schema %d, this program knows %d: %w", v, Version, ErrTooNew)
	}
	for _, b := range Buckets {
		if _, err := tx.CreateBucketIfNotExists(b.Name); err != nil {
			return fmt.Errorf("create bucket %s: %w", b.Name, err)
		}
	}
	stored := tx.Bucket(BucketMeta).Get(KeySchema)
	for ; v < Version; v++ {
		m, ok := migrations[v]
		if !ok {
			return fmt.Errorf("no migration from schema %d: %w", v, ErrFormat)
		}
		if err := m(tx); err != nil {
			return fmt.Errorf("migrate state db schema %d to %d: %w", v, v+1, err)
		}
	}
	if stored == nil || binary.BigEndian.Uint32(stored) != Version {
		return tx.Bucket(BucketMeta).Put(KeySchema, binary.BigEndian.AppendUint32(nil, Version))
	}
	return nil
}

// migrations[v] rewrites a file of schema v into v+1 in tx.
var migrations = map[uint32]func(*bolt.Tx) error{
	1: migrateV1,
	2: migrateV2,
}

// migrateV2 brings a file of schema 2 to 3: nothing to rewrite. Schema 3
// adds the optional "scope" of users and tokens (auth.Scope); a record
// without one is unscoped, as every record of schema 2 was. The new
// version is what matters: a program of schema 2 refuses the file rather
// than read the users and silently drop their scopes.
func migrateV2(tx *bolt.Tx) error { return nil }

// v1Value turns one value of schema 1 into its schema 2 form; nil means
// unchanged.
type v1Value func(k, v []byte) ([]byte, error)

// v1Records are the buckets whose values schema 1 already wrote as
// schema 2 does (a FormatJSON byte and JSON): internal/state's records.
var v1Records = map[string]bool{"jobs": true, "runs": true, "vmstate": true, "maintenance": true, "events": true}

func v1Empty(k, v []byte) ([]byte, error) {
	if len(v) != 0 {
		return nil, fmt.Errorf("index entry of %d bytes, want none", len(v))
	}
	return EncodeEmpty(), nil
}

func v1JSON(k, v []byte) ([]byte, error) {
	if len(v) == 0 || v[0] != '{' || !json.Valid(v) {
		return nil, fmt.Errorf("not a JSON object")
	}
	return append([]byte{FormatJSON}, v...), nil
}

func v1Bytes(k, v []byte) ([]byte, error) {
	if len(v) == 0 {
		return nil, fmt.Errorf("empty value")
	}
	return EncodeBytes(v), nil
}

// only restricts a bucket of fixed keys to them.
func only(key []byte, f v1Value) v1Value {
	return func(k, v []byte) ([]byte, error) {
		if string(k) != string(key) {
			return nil, fmt.Errorf("unexpected key")
		}
		return f(k, v)
	}
}

// v1Values is how schema 1 stored the values of the other buckets. Every
// declared bucket but meta is here or in v1Records
// (TestMigrationCoversEveryBucket).
var v1Values = map[string]v1Value{
	"runs-by-job": v1Empty,
	"runs-open":   v1Empty,
	// 8 bytes, the same time bits FormatTime carries.
	"scheduler": only(KeyCheckpoint, func(k, v []byte) ([]byte, error) {
		if len(v) != 8 {
			return nil, fmt.Errorf("checkpoint of %d bytes, want 8", len(v))
		}
		return append([]byte{FormatTime}, v...), nil
	}),
	// RFC 3339 text, kept as text (web and the daemon read it raw through Value).
	"notify": only(KeyLastDailyReport, func(k, v []byte) ([]byte, error) {
		if _, err := time.Parse(time.RFC3339Nano, string(v)); err != nil {
			return nil, fmt.Errorf("not an RFC 3339 time: %q", v)
		}
		return EncodeBytes(v), nil
	}),
	"auth":       only(KeyAdminHash, v1Bytes),
	"users":      v1JSON,
	"tokens":     v1JSON,
	"token-hash": v1Bytes,
	"tasks":      v1JSON,
	"settings":   only(KeySettings, v1JSON),
}

// migrateV1 puts a format byte before every value that lacked one. A value
// schema 1 could not have written fails the migration, naming it, and
// nothing is rewritten. Buckets schema does not declare are left alone.
func migrateV1(tx *bolt.Tx) error {
	for _, b := range Buckets {
		conv := v1Values[string(b.Name)]
		if conv == nil {
			continue
		}
		if err := failpoint.Hit("state.migrate"); err != nil {
			return err
		}
		bk := tx.Bucket(b.Name)
		type kv struct{ k, v []byte }
		var puts []kv
		// bbolt forbids writes while a cursor walks the bucket: collect, then put.
		err := bk.ForEach(func(k, v []byte) error {
			if v == nil {
				return fmt.Errorf("bucket %s: key %q is a nested bucket: %w", b.Name, k, ErrFormat)
			}
			nv, err := conv(k, v)
			if err != nil {
				return fmt.Errorf("bucket %s: value %q: %v: %w", b.Name, k, err, ErrFormat)
			}
			if nv != nil {
				puts = append(puts, kv{append([]byte(nil), k...), nv})
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, p := range puts {
			if err := bk.Put(p.k, p.v); err != nil {
				return fmt.Errorf("bucket %s: %w", b.Name, err)
			}
		}
	}
	return nil
}

// ValueRule returns the check a verifier applies to the values of the
// top-level bucket name in a file of schema version: nil checks nothing
// (meta, undeclared buckets, and every bucket of a version newer than this
// code, which it cannot judge).
func ValueRule(version uint32, name string) func(v []byte) error {
	if version > Version {
		return nil
	}
	if version == 1 {
		// Schema 1: only this package's records had a format byte.
		if v1Records[name] {
			return func(v []byte) error { return Check(FormatJSON, v) }
		}
		return nil
	}
	b, ok := Lookup([]byte(name))
	if !ok || b.Format == FormatRaw {
		return nil
	}
	if b.RawWriter != "" {
		// Its writer does not prefix yet: check only what carries our format byte.
		return func(v []byte) error {
			if len(v) > 0 && v[0] == b.Format {
				return Check(b.Format, v)
			}
			return nil
		}
	}
	return func(v []byte) error { return Check(b.Format, v) }
}
