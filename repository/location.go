package repository

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/vmvault/vmvault/repository/s3store"
	"github.com/vmvault/vmvault/repository/storage"
)

// ErrUnknownScheme is returned for a location that looks like "scheme:…"
// with a scheme vmvault does not know (a local directory whose name holds
// a colon is written "./name:…" or as an absolute path).
var ErrUnknownScheme = errors.New("unknown repository location scheme")

// schemeRE matches what restic and vmvault treat as a scheme: letters,
// digits, "+.-", at least two characters (so no drive letter), before the
// first colon and before any slash.
var schemeRE = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]+):`)

// Location is a parsed repository location: a local directory, or an S3
// bucket (restic's form s3:http(s)://HOST[:PORT]/BUCKET[/PREFIX]).
type Location struct {
	Raw   string
	Local string          // local directory ("" for a remote one)
	S3    *s3store.Target // set for s3:
}

// ParseLocation parses a repository location. Anything that looks like a
// scheme other than s3: is refused with ErrUnknownScheme, so that a typo
// or an unsupported backend never silently becomes a local directory.
func ParseLocation(s string) (Location, error) {
	if s == "" {
		return Location{}, errors.New("empty repository location")
	}
	m := schemeRE.FindStringSubmatch(s)
	if m == nil {
		return Location{Raw: s, Local: s}, nil
	}
	switch strings.ToLower(m[1]) {
	case "s3":
		t, err := s3store.ParseTarget(strings.TrimPrefix(s, m[0]))
		if err != nil {
			return Location{}, fmt.Errorf("repository location %q: %w", s, err)
		}
		return Location{Raw: s, S3: &t}, nil
	default:
		return Location{}, fmt.Errorf("repository location %q: %w %q (supported: a local directory, s3:http(s)://HOST[:PORT]/BUCKET[/PREFIX]; write ./%s for a local directory whose name holds a colon)", s, ErrUnknownScheme, m[1]+":", s)
	}
}

// String is the location without credentials (there are none in it).
func (l Location) String() string { return l.Raw }

// cacheDir is where a remote repository keeps its catalog (index.db) and
// its local lock: dir if given, else $VMVAULT_CACHE_DIR, else the user's
// cache directory, under vmvault/repos/<sha256 of the location>[:16].
func cacheDir(dir string, loc Location) (string, error) {
	if dir != "" {
		return dir, nil
	}
	base := os.Getenv("VMVAULT_CACHE_DIR")
	if base == "" {
		c, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("no cache directory for the catalog of %s (set VMVAULT_CACHE_DIR): %w", loc, err)
		}
		base = filepath.Join(c, "vmvault")
	}
	h := sha256.Sum256([]byte(loc.Raw))
	return filepath.Join(base, "repos", hex.EncodeToString(h[:8])), nil
}

// openReadOnlyStore is openStore for OpenOptions.ReadOnly: the catalog
// cache is never the owner's (for a local repository, not the repository
// directory), so that the owner's catalog and lock are left alone.
func openReadOnlyStore(ctx context.Context, loc Location, cache string) (storage.Storage, string, error) {
	dir := cache
	if dir == "" {
		d, err := cacheDir("", loc)
		if err != nil {
			return nil, "", err
		}
		dir = d + "-ro"
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, "", fmt.Errorf("catalog cache %s: %w", dir, err)
	}
	if loc.S3 == nil {
		if fi, err := os.Stat(loc.Local); err != nil || !fi.IsDir() {
			return nil, "", fmt.Errorf("repository %s: not a directory: %w", loc.Local, ErrNotFound)
		}
		return storage.NewLocal(loc.Local, true), dir, nil
	}
	st, err := s3store.New(ctx, *loc.S3, s3store.Options{StageDir: filepath.Join(dir, "stage")})
	if err != nil {
		return nil, "", err
	}
	return st, dir, nil
}

// openStore returns the backend for loc and the local directory of the
// catalog and the process lock (the repository directory itself when
// local).
func openStore(ctx context.Context, loc Location, cache string, noSync, create bool) (storage.Storage, string, error) {
	return openStoreLock(ctx, loc, cache, noSync, create, false)
}

// openStoreLock is openStore; objectLock makes Init create (or require) a
// bucket with Object Lock enabled.
func openStoreLock(ctx context.Context, loc Location, cache string, noSync, create, objectLock bool) (storage.Storage, string, error) {
	if loc.S3 == nil {
		return storage.NewLocal(loc.Local, noSync), loc.Local, nil
	}
	dir, err := cacheDir(cache, loc)
	if err != nil {
		return nil, "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, "", fmt.Errorf("catalog cache %s: %w", dir, err)
	}
	st, err := s3store.New(ctx, *loc.S3, s3store.Options{StageDir: filepath.Join(dir, "stage"), CreateBucket: create, ObjectLocking: objectLock})
	if err != nil {
		return nil, "", err
	}
	return st, dir, nil
}

// ErrNoBucket: Init's S3 bucket does not exist and InitOptions.CreateBucket
// was not set.
var ErrNoBucket = errors.New("bucket does not exist")

// openInitStore is openStoreLock for Init: it creates a missing bucket only
// with opts.CreateBucket, and says how to when it does not.
func openInitStore(ctx context.Context, loc Location, opts InitOptions) (storage.Storage, error) {
	st, _, err := openStoreLock(ctx, loc, "", false, opts.CreateBucket, opts.ObjectLock != nil)
	if err != nil && loc.S3 != nil && !opts.CreateBucket && errors.Is(err, storage.ErrNotExist) {
		return nil, noBucketError{loc.S3.Bucket, opts.ObjectLock != nil}
	}
	return st, err
}

type noBucketError struct {
	bucket string
	lock   bool
}

func (e noBucketError) Error() string {
	lock := ""
	if e.lock {
		lock = ", with Object Lock"
	}
	return fmt.Sprintf("bucket %s does not exist (add --create-bucket to create it%s)", e.bucket, lock)
}

func (e noBucketError) Is(target error) bool { return target == ErrNoBucket }

// objectPath names an object in messages: a path for a local repository,
// location + name for a remote one.
func (r *Repository) objectPath(name string) string {
	if l, ok := storage.As[*storage.Local](r.store); ok {
		return filepath.Join(l.Dir(), filepath.FromSlash(name))
	}
	return r.store.Location() + "/" + name
}

// storeDir is the local directory of the backend ("" if remote).
func (r *Repository) storeDir() string {
	if l, ok := storage.As[*storage.Local](r.store); ok {
		return l.Dir()
	}
	return ""
}

// Location returns the repository's location as given to Open.
func (r *Repository) Location() string { return r.store.Location() }
