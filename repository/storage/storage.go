// Package storage is the repository's file seam: every byte the repository
// keeps outside its local catalog cache goes through a Storage (put, ranged
// get, stat, list, delete, staged create + commit). Names are slash
// separated and relative to the repository root ("config",
// "packs/ab/ab12…", "points/<id>").
//
// The contract every backend keeps, because FORMAT.md's crash-safety rules
// rest on it: a Put or a Staged.Commit that returned nil is durable and
// complete; one that failed or was interrupted leaves either nothing or the
// previous complete object under the name, never a torn one. Local is the
// first implementation (temp file, fsync, rename, fsync dir); the S3 backend
// lives in repository/s3store; Faulty wraps any backend for tests.
//
// This package imports only internal/failpoint: the crash tests' hooks stay
// on the same steps of a durable write whatever the backend.
package storage

import (
	"context"
	"errors"
	"io"
)

// ErrNotExist is returned (wrapped) for a name that holds no object.
// os.ErrNotExist is the same value, so errors.Is works with either.
var ErrNotExist = errNotExist

// Steps names the failpoints of one durable write (write, fsync, rename,
// fsync dir). Backends hit them at the matching moment of their protocol;
// empty names are not hit.
type Steps struct{ Write, Fsync, Rename, Dirsync string }

// Storage is one repository's object space.
type Storage interface {
	// Location is the repository's location as the user gave it (no
	// credentials).
	Location() string
	// Put stores size bytes from r under name: atomic-or-nothing.
	Put(ctx context.Context, name string, r io.Reader, size int64, steps Steps) error
	// Create starts an object written sequentially; nothing is visible
	// under name until Commit returns nil.
	Create(ctx context.Context, name string) (Staged, error)
	// Open returns a handle for ranged reads of name.
	Open(ctx context.Context, name string) (Object, error)
	// GetRange returns length bytes of name from off.
	GetRange(ctx context.Context, name string, off, length int64) ([]byte, error)
	// Stat returns the size of name.
	Stat(ctx context.Context, name string) (int64, error)
	// List calls fn for every committed object whose name starts with
	// prefix (staging leftovers excluded), in no particular order.
	List(ctx context.Context, prefix string, fn func(name string, size int64) error) error
	// Delete removes name; a missing name is not an error.
	Delete(ctx context.Context, name string) error
	// SyncDeletes makes the deletions under prefix durable (local: fsync
	// the directory; object stores: nothing).
	SyncDeletes(ctx context.Context, prefix string) error
	// Clean removes staging leftovers of a crash (only the lock holder
	// calls it).
	Clean(ctx context.Context) error
	// Close releases the backend's resources.
	Close() error
}

// Staged is an object being written.
type Staged interface {
	io.Writer
	// Commit makes the object durable and visible under its name.
	Commit(ctx context.Context, steps Steps) error
	// Abort discards it (after a failed write or instead of Commit).
	Abort()
}

// Object is an open object for ranged reads. A local file stays readable
// after Delete; an object store's may not (readers retry via the catalog).
type Object interface {
	io.ReaderAt
	Size() int64
	Close() error
}

// IsNotExist reports whether err means the object does not exist.
func IsNotExist(err error) bool { return errors.Is(err, ErrNotExist) }
