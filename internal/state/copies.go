package state

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/vmvault/vmvault/internal/clock"
)

// Rolling copies. state.db cannot be rebuilt from anything else, so the
// daemon keeps copies of it next to it (CopiesDir): state.db.backups/
// state-YYYYMMDDTHHMMSSZ.db, the UTC time it was taken. A copy is written
// from one read transaction (bbolt's Tx.WriteTo), so it is consistent while
// the daemon keeps writing; it is written to a temporary file, fsynced,
// verified (read-only open, every page read, tx.Check) and only then
// renamed into place, and only a verified copy lets older ones be pruned.

const (
	copyPrefix = "state-"
	copySuffix = ".db"
	copyLayout = "20060102T150405Z"
	tmpPrefix  = ".state-"
	tmpSuffix  = ".tmp"

	// DefaultKeep is how many verified copies PruneCopies keeps by default.
	DefaultKeep = 7
	// DefaultEvery is the default interval between copies.
	DefaultEvery = 24 * time.Hour
)

// ErrInUse is returned by InstallCopy when another process has the database open.
var ErrInUse = errors.New("state database in use")

// CopiesDir returns the directory of the copies of the database at dbPath.
func CopiesDir(dbPath string) string { return dbPath + ".backups" }

// Copy is one copy of the state database.
type Copy struct {
	Path string
	Time time.Time // when it was taken (from its name)
	Size int64
	// Err is the result of Verify when the copy was listed with verify;
	// nil means it verifies.
	Err error
}

func copyName(t time.Time) string { return copyPrefix + t.UTC().Format(copyLayout) + copySuffix }

// schemaCopyName names the copy Open takes before it migrates a file of
// schema version v: state-YYYYMMDDTHHMMSSZ-vN.db, so that the copy the
// daemon takes right after Open, in the same second, does not replace it.
func schemaCopyName(t time.Time, v uint32) string {
	return fmt.Sprintf("%s%s-v%d%s", copyPrefix, t.UTC().Format(copyLayout), v, copySuffix)
}

// copyTime parses the time of a copy's name (with or without -vN).
func copyTime(name string) (time.Time, bool) {
	rest, ok := strings.CutPrefix(name, copyPrefix)
	if !ok {
		return time.Time{}, false
	}
	if rest, ok = strings.CutSuffix(rest, copySuffix); !ok || len(rest) < len(copyLayout) {
		return time.Time{}, false
	}
	if v := rest[len(copyLayout):]; v != "" {
		n, ok := strings.CutPrefix(v, "-v")
		if !ok || n == "" || strings.Trim(n, "0123456789") != "" {
			return time.Time{}, false
		}
	}
	t, err := time.Parse(copyLayout, rest[:len(copyLayout)])
	return t, err == nil
}

// ListCopies returns the copies in dir, newest first, each verified if
// verify is set. A missing dir has no copies.
func ListCopies(dir string, verify bool) ([]Copy, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list state copies: %w", err)
	}
	var out []Copy
	for _, e := range ents {
		name := e.Name()
		if !e.Type().IsRegular() {
			continue
		}
		t, ok := copyTime(name)
		if !ok {
			continue
		}
		c := Copy{Path: filepath.Join(dir, name), Time: t}
		if fi, err := e.Info(); err == nil {
			c.Size = fi.Size()
		}
		if verify {
			c.Err = Verify(c.Path)
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Time.After(out[j].Time) })
	return out, nil
}

// NewestGoodCopy returns the newest copy in dir that verifies.
func NewestGoodCopy(dir string) (Copy, bool, error) {
	copies, err := ListCopies(dir, false)
	if err != nil {
		return Copy{}, false, err
	}
	for _, c := range copies {
		if c.Err = Verify(c.Path); c.Err == nil {
			return c, true, nil
		}
	}
	return Copy{}, false, nil
}

// WriteCopy writes a copy of the database as it is now into dir, named by
// now, and returns it once it is durable and verified. Writers are not held
// up: the copy comes from one read transaction.
func (d *DB) WriteCopy(dir string, now time.Time) (Copy, error) {
	return d.writeCopy(dir, now, copyName(now))
}

func (d *DB) writeCopy(dir string, now time.Time, name string) (Copy, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Copy{}, fmt.Errorf("state copies directory: %w", err)
	}
	// Leftovers of a copy interrupted by a crash.
	if old, _ := filepath.Glob(filepath.Join(dir, tmpPrefix+"*"+tmpSuffix)); len(old) > 0 {
		for _, p := range old {
			_ = os.Remove(p)
		}
	}
	f, err := os.CreateTemp(dir, tmpPrefix+"*"+tmpSuffix)
	if err != nil {
		return Copy{}, fmt.Errorf("state copy: %w", err)
	}
	tmp := f.Name()
	fail := func(err error) (Copy, error) {
		_ = f.Close()
		_ = os.Remove(tmp)
		return Copy{}, fmt.Errorf("state copy %s: %w", filepath.Join(dir, name), err)
	}
	var size int64
	if err := d.guarded(func() error {
		return d.db.View(func(tx *bolt.Tx) error {
			n, err := tx.WriteTo(f)
			size = n
			return err
		})
	}); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		return fail(err)
	}
	if err := Verify(tmp); err != nil {
		_ = os.Remove(tmp)
		return Copy{}, fmt.Errorf("state copy does not verify: %w", err)
	}
	c := Copy{Path: filepath.Join(dir, name), Time: now.UTC().Truncate(time.Second), Size: size}
	if err := os.Rename(tmp, c.Path); err != nil {
		_ = os.Remove(tmp)
		return Copy{}, fmt.Errorf("state copy: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return Copy{}, fmt.Errorf("state copy %s: %w", c.Path, err)
	}
	return c, nil
}

// PruneCopies keeps the newest keep copies in dir that verify and removes
// every copy older than the oldest of them; it returns what it removed.
// With fewer than keep good copies nothing is removed, so a run of damaged
// copies never costs the last good one.
func PruneCopies(dir string, keep int) ([]string, error) {
	if keep < 1 {
		keep = 1
	}
	copies, err := ListCopies(dir, false)
	if err != nil {
		return nil, err
	}
	good := 0
	var removed []string
	for _, c := range copies {
		if good >= keep {
			if err := os.Remove(c.Path); err != nil {
				return removed, fmt.Errorf("prune state copy: %w", err)
			}
			removed = append(removed, c.Path)
			continue
		}
		if Verify(c.Path) == nil {
			good++
		}
	}
	if len(removed) > 0 {
		if err := syncDir(dir); err != nil {
			return removed, err
		}
	}
	return removed, nil
}

// RotateCopy writes a copy (WriteCopy) and, once it verified, prunes to keep.
func (d *DB) RotateCopy(dir string, now time.Time, keep int) (Copy, []string, error) {
	c, err := d.WriteCopy(dir, now)
	if err != nil {
		return Copy{}, nil, err
	}
	removed, err := PruneCopies(dir, keep)
	return c, removed, err
}

// CopyOptions configures KeepCopies.
type CopyOptions struct {
	Dir   string        // default CopiesDir of the database
	Keep  int           // verified copies kept; default DefaultKeep
	Every time.Duration // default DefaultEvery
	Clock clock.Clock   // default the real clock
	// Done, if set, is called after each attempt (the copy, what was pruned, the error).
	Done func(c Copy, removed []string, err error)
}

// KeepCopies takes a copy every o.Every, the first one o.Every from now,
// until ctx ends (the daemon takes one at start itself, with RotateCopy).
func (d *DB) KeepCopies(ctx context.Context, o CopyOptions) {
	if o.Dir == "" {
		o.Dir = CopiesDir(d.path)
	}
	if o.Keep <= 0 {
		o.Keep = DefaultKeep
	}
	if o.Every <= 0 {
		o.Every = DefaultEvery
	}
	if o.Clock == nil {
		o.Clock = clock.Real()
	}
	for {
		t := o.Clock.NewTimer(o.Every)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		c, removed, err := d.RotateCopy(o.Dir, o.Clock.Now(), o.Keep)
		if o.Done != nil {
			o.Done(c, removed, err)
		}
	}
}

// InstallCopy makes the copy at copyPath the database at dbPath: the copy
// is verified, copied beside dbPath, and renamed over it; the file it
// replaces is kept (hard-linked) as dbPath.replaced-TIME, never deleted.
// dbPath always names a whole database, the old or the new one, whatever
// moment a crash strikes. It returns the kept file's path ("" if there was
// none). The database must not be open: ErrInUse otherwise.
func InstallCopy(dbPath, copyPath string, now time.Time) (string, error) {
	if err := Verify(copyPath); err != nil {
		return "", fmt.Errorf("install state copy: %w", err)
	}
	old, err := os.OpenFile(dbPath, os.O_RDWR, 0)
	switch {
	case errors.Is(err, os.ErrNotExist):
		old = nil
	case err != nil:
		return "", fmt.Errorf("install state copy: %w", err)
	default:
		defer old.Close()
		// The lock bbolt takes (flock): held means a daemon has it open.
		if err := syscall.Flock(int(old.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			return "", fmt.Errorf("install state copy: %s: %w (is a daemon running on it?)", dbPath, ErrInUse)
		}
	}
	dir := filepath.Dir(dbPath)
	tmp := dbPath + ".restore" + tmpSuffix
	if err := copyFile(copyPath, tmp); err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("install state copy: %w", err)
	}
	aside := ""
	if old != nil {
		aside = dbPath + ".replaced-" + now.UTC().Format(copyLayout)
		for i := 2; ; i++ {
			if _, err := os.Lstat(aside); errors.Is(err, os.ErrNotExist) {
				break
			}
			aside = fmt.Sprintf("%s.replaced-%s-%d", dbPath, now.UTC().Format(copyLayout), i)
		}
		if err := os.Link(dbPath, aside); err != nil {
			if err := copyFile(dbPath, aside); err != nil {
				_ = os.Remove(tmp)
				return "", fmt.Errorf("install state copy: keep %s: %w", dbPath, err)
			}
		}
	}
	if err := os.Rename(tmp, dbPath); err != nil {
		_ = os.Remove(tmp)
		return aside, fmt.Errorf("install state copy: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return aside, fmt.Errorf("install state copy: %w", err)
	}
	return aside, nil
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	if err := dst.Sync(); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
