package s3store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
)

// Object Lock. A repository created immutable writes its packs, commit
// records and time locks with a retention period (governance or
// compliance mode): the server then refuses to delete or overwrite them
// before the date (in a versioned bucket a DELETE only adds a delete
// marker; the locked version stays). The repository never relies on that
// alone: it refuses by itself to delete anything whose lock has not
// expired (repository/objectlock.go), with LockInfo's dates.

// lockedPrefixes are the objects written with a retention period. The
// config, the lease and the appliance configuration (whose older versions
// are pruned) are not locked.
var lockedPrefixes = []string{"packs/", "points/", "holds/"}

func lockedName(name string) bool {
	for _, p := range lockedPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// SetRetention makes every later write of a pack, commit record or time
// lock carry a retention of d in mode ("governance" or "compliance").
//
// Packs are retained packExtra longer: a point's commit record, written
// at the end of its backup, must not outlive the packs written at its
// start, and the extra covers a backup that long without a second request
// per pack (the repository extends the packs of a longer one).
func (s *Store) SetRetention(mode string, d, packExtra time.Duration) error {
	m := minio.RetentionMode(strings.ToUpper(mode))
	if !m.IsValid() || d <= 0 || packExtra < 0 {
		return fmt.Errorf("%s: object lock mode %q for %v: want governance or compliance and a positive period", s.t.URL(), mode, d)
	}
	s.lockMode, s.lockFor, s.packExtra = m, d, packExtra
	return nil
}

// retention fills the retention of a write of name.
func (s *Store) retention(opts *minio.PutObjectOptions, name string) {
	if s.lockFor <= 0 || !lockedName(name) {
		return
	}
	opts.Mode = s.lockMode
	d := s.lockFor
	if strings.HasPrefix(name, "packs/") {
		d += s.packExtra
	}
	opts.RetainUntilDate = time.Now().Add(d).UTC().Truncate(time.Second).Add(time.Second)
	// A time lock (holds/<point>-<until seconds>) is retained at least
	// until its own date: the server then refuses to remove it early too.
	if _, secs, ok := strings.Cut(strings.TrimPrefix(name, "holds/"), "-"); ok && strings.HasPrefix(name, "holds/") {
		if n, err := strconv.ParseInt(secs, 10, 64); err == nil {
			if t := time.Unix(n, 0).UTC(); t.After(opts.RetainUntilDate) {
				opts.RetainUntilDate = t
			}
		}
	}
}

// LockInfo returns when name was written (the server's clock) and the
// retain-until date the server reports for it (zero when none).
func (s *Store) LockInfo(ctx context.Context, name string) (modified, retainUntil time.Time, err error) {
	info, err := s.c.StatObject(ctx, s.t.Bucket, s.key(name), minio.StatObjectOptions{})
	if err != nil {
		return time.Time{}, time.Time{}, s.mapErr("stat", name, err)
	}
	if v := info.Metadata.Get("X-Amz-Object-Lock-Retain-Until-Date"); v != "" {
		if t, err := time.Parse(time.RFC3339, v); err == nil {
			retainUntil = t
		}
	}
	return info.LastModified, retainUntil, nil
}

// checkObjectLock verifies that the bucket has Object Lock enabled.
func (s *Store) checkObjectLock(ctx context.Context) error {
	enabled, _, _, _, err := s.c.GetObjectLockConfig(ctx, s.t.Bucket)
	if err != nil {
		return fmt.Errorf("%s: bucket %s has no Object Lock configuration (create it with object lock enabled): %w", s.t.URL(), s.t.Bucket, err)
	}
	if enabled != "Enabled" {
		return fmt.Errorf("%s: bucket %s: Object Lock is %q, not Enabled", s.t.URL(), s.t.Bucket, enabled)
	}
	return nil
}

// ExtendRetention makes name's retention last at least until (never
// shorter: S3 refuses to shorten a compliance retention, and the caller
// only ever asks for a later date). A repository without retention does
// nothing.
func (s *Store) ExtendRetention(ctx context.Context, name string, until time.Time) error {
	if s.lockFor <= 0 {
		return nil
	}
	_, cur, err := s.LockInfo(ctx, name)
	if err != nil {
		return err
	}
	if !cur.Before(until) {
		return nil
	}
	mode := s.lockMode
	until = until.UTC()
	if err := s.c.PutObjectRetention(ctx, s.t.Bucket, s.key(name), minio.PutObjectRetentionOptions{Mode: &mode, RetainUntilDate: &until}); err != nil {
		return s.mapErr("extend retention of", name, err)
	}
	return nil
}
