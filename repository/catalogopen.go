package repository

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// keepCorruptCatalogs is how many moved-aside catalogs are kept for
// inspection (a disk that keeps corrupting them must not fill up).
const keepCorruptCatalogs = 3

// loadCatalog opens index.db and reconciles it with the files. The catalog
// is a cache: whatever is wrong with it (bbolt refusing it, a page that
// fails verification, a panic inside bbolt, an entry that does not decode)
// moves it aside as index.db.corrupt-<time>, says so once, and rebuilds it
// from the packs and commit records.
func (r *Repository) loadCatalog(ctx context.Context) error {
	if err := r.openCatalog(); err != nil {
		return err
	}
	err := catalogGuard(func() error { return r.reconcile(ctx, nil) })
	if !isCatalogDamage(err) {
		return err
	}
	r.db.Close()
	r.db = nil
	if merr := r.moveCatalogAside(filepath.Join(r.dir, "index.db"), err); merr != nil {
		return merr
	}
	if err := r.openCatalog(); err != nil {
		return err
	}
	return catalogGuard(func() error { return r.reconcile(ctx, nil) })
}

// errCatalogPanic wraps a panic raised while reading the catalog.
type errCatalogPanic struct{ v any }

func (e *errCatalogPanic) Error() string { return fmt.Sprintf("catalog read panicked: %v", e.v) }

// catalogGuard runs fn and turns a panic (bbolt on a damaged page) into an
// error.
func catalogGuard(fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &errCatalogPanic{p}
		}
	}()
	return fn()
}

// isCatalogDamage reports whether err says the catalog itself is bad (as
// opposed to a pack, the disk or a cancelled context).
func isCatalogDamage(err error) bool {
	var cp *errCatalogPanic
	var fe *FormatError
	return errors.As(err, &cp) || (errors.As(err, &fe) && len(fe.What) >= 7 && fe.What[:7] == "catalog")
}

// openCatalog opens index.db, replacing an unusable one by a fresh (empty)
// catalog that reconcile then rebuilds.
func (r *Repository) openCatalog() error {
	path := filepath.Join(r.dir, "index.db")
	db, err := r.tryOpenCatalog(path)
	if errors.Is(err, ErrLocked) {
		return err
	}
	if err != nil {
		if merr := r.moveCatalogAside(path, err); merr != nil {
			return merr
		}
		if db, err = r.tryOpenCatalog(path); err != nil {
			return fmt.Errorf("catalog: create %s: %w", path, err)
		}
	}
	r.db = db
	return nil
}

func (r *Repository) tryOpenCatalog(path string) (db *bolt.DB, err error) {
	if err := verifyCatalogFile(path); err != nil {
		return nil, err
	}
	defer func() {
		if p := recover(); p != nil {
			db, err = nil, &errCatalogPanic{p}
		}
	}()
	db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second, NoSync: r.opts.NoFsync, NoFreelistSync: true})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("catalog %s is locked: %w", path, ErrLocked)
	}
	if err != nil {
		return nil, err
	}
	if _, err := initCatalog(db, r.cfg.ID); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// moveCatalogAside renames a bad index.db to index.db.corrupt-<time> (kept
// for inspection; the oldest beyond keepCorruptCatalogs are removed) and
// warns once.
func (r *Repository) moveCatalogAside(path string, cause error) error {
	stamp := time.Now().UTC().Format("20060102T150405.000Z")
	aside := path + ".corrupt-" + stamp
	for i := 2; ; i++ {
		if _, err := os.Lstat(aside); errors.Is(err, os.ErrNotExist) {
			break
		}
		aside = fmt.Sprintf("%s.corrupt-%s-%d", path, stamp, i)
	}
	if err := os.Rename(path, aside); err != nil {
		return fmt.Errorf("catalog %s is unusable (%v) and cannot be moved aside: %w", path, cause, err)
	}
	if !r.opts.NoFsync {
		if err := syncDir(filepath.Dir(path)); err != nil {
			return err
		}
	}
	if old, err := filepath.Glob(path + ".corrupt-*"); err == nil && len(old) > keepCorruptCatalogs {
		sort.Strings(old) // the time stamps sort chronologically
		for _, f := range old[:len(old)-keepCorruptCatalogs] {
			os.Remove(f)
		}
	}
	r.warn(fmt.Sprintf("catalog %s is unusable (%v): moved it aside to %s and rebuilding it from the packs and commit records", path, cause, filepath.Base(aside)))
	return nil
}

// warn logs a warning and keeps it for Warnings.
func (r *Repository) warn(msg string) {
	r.warnMu.Lock()
	r.warnings = append(r.warnings, msg)
	r.warnMu.Unlock()
	r.log.Warn(msg, "repository", r.dir)
}

// Warnings returns what the repository warned about since Open (a catalog
// rebuilt after corruption, restore points whose commit record is missing).
func (r *Repository) Warnings() []string {
	r.warnMu.Lock()
	defer r.warnMu.Unlock()
	return append([]string(nil), r.warnings...)
}
