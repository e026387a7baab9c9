package state

import (
	"errors"
	"fmt"
	"time"

	"github.com/vmvault/vmvault/internal/state/schema"
)

var (
	// ErrNotFound is returned when a job or run id does not exist.
	ErrNotFound = errors.New("not found")
	// ErrSchemaTooNew is returned by Open for a database written by a newer vmvault.
	ErrSchemaTooNew = schema.ErrTooNew
	// ErrCorrupt is returned when a stored record cannot be decoded.
	ErrCorrupt = errors.New("state database record corrupt")
)

// ErrHeld is returned by Open when another process (a daemon, a command)
// holds the database.
var ErrHeld = errors.New("state database in use by another process")

// ErrMissing is returned by Open when state.db is missing or empty although
// copies of it exist: starting with an empty database would silently drop
// every user, token and job.
var ErrMissing = errors.New("state database missing")

// CorruptError is Open's answer for a state database it cannot trust. The
// file is not rebuildable, so the error names the newest copy that verifies
// (see WriteCopy) for the operator to start from.
type CorruptError struct {
	Path   string // the damaged (or missing) database
	Err    error  // what is wrong with it
	Dir    string // where its copies live
	Newest *Copy  // newest copy that verifies; nil if none does
}

func newCorruptError(path string, err error) *CorruptError {
	e := &CorruptError{Path: path, Err: err, Dir: CopiesDir(path)}
	if c, ok, _ := NewestGoodCopy(e.Dir); ok {
		e.Newest = &c
	}
	return e
}

func (e *CorruptError) Error() string {
	what := "is damaged"
	if errors.Is(e.Err, ErrMissing) {
		what = "is missing"
	}
	msg := fmt.Sprintf("state database %s %s (%v); it cannot be rebuilt", e.Path, what, e.Err)
	if e.Newest == nil {
		return msg + fmt.Sprintf("; no good copy in %s", e.Dir)
	}
	return msg + fmt.Sprintf("; newest good copy: %s (taken %s)", e.Newest.Path, e.Newest.Time.Format(time.RFC3339))
}

// Unwrap lets errors.Is see ErrCorrupt (or ErrMissing) and the cause.
func (e *CorruptError) Unwrap() []error {
	if errors.Is(e.Err, ErrMissing) {
		return []error{e.Err}
	}
	return []error{ErrCorrupt, e.Err}
}
