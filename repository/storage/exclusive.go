package storage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ErrExists is returned (wrapped) by PutExclusive when the name is taken.
var ErrExists = errors.New("object already exists")

// Exclusive is a backend that can create an object only if its name is
// free, atomically with respect to every other writer (FORMAT.md §12a:
// If-None-Match on S3, link(2) on a local directory).
type Exclusive interface {
	PutExclusive(ctx context.Context, name string, b []byte) error
}

// PutExclusive writes b to a unique temp file, fsyncs it and links it to
// name: link(2) fails with EEXIST when name exists, so of several
// processes creating one name exactly one succeeds, and the object
// appears complete or not at all.
func (l *Local) PutExclusive(ctx context.Context, name string, b []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p := l.path(name)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := p + "." + hex.EncodeToString(rnd[:]) + tmpSuffix
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	defer os.Remove(tmp)
	_, err = f.Write(b)
	if err == nil && !l.noSync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	if err := os.Link(tmp, p); err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("create %s: %w", name, ErrExists)
		}
		return fmt.Errorf("create %s: %w", name, err)
	}
	if !l.noSync {
		return SyncDir(filepath.Dir(p))
	}
	return nil
}
