package repository

import (
	"errors"
	"fmt"
)

// Sentinel errors callers branch on (use errors.Is).
var (
	// ErrLocked: the repository is opened by another process (or another Open in this process).
	ErrLocked = errors.New("repository is locked by another process")
	// ErrWrongPassword: the passphrase does not unwrap the master key.
	ErrWrongPassword = errors.New("wrong passphrase")
	// ErrNewerFormat: the repository was written by a newer major format version.
	ErrNewerFormat = errors.New("repository format is newer than this vmvault supports")
	// ErrNotFound: no such restore point, blob or disk.
	ErrNotFound = errors.New("not found")
	// ErrAmbiguous: a restore point id prefix matches more than one point.
	ErrAmbiguous = errors.New("ambiguous restore point id prefix")
	// ErrPointLocked: the restore point is locked and cannot be deleted.
	ErrPointLocked = errors.New("restore point is locked")
	// ErrCorrupt: stored data failed verification (see CorruptBlobError).
	ErrCorrupt = errors.New("repository data is corrupt")
	// ErrCondemned: a session referenced a blob that reclaim has deleted.
	ErrCondemned = errors.New("blob was removed by reclaim")
	// ErrSessionClosed: the session was already committed or aborted.
	ErrSessionClosed = errors.New("session is closed")
	// ErrNotEmpty: Init on a directory that already has content.
	ErrNotEmpty = errors.New("directory is not empty")
	// ErrClosed: the repository was closed (or is closing) before the call started.
	ErrClosed = errors.New("repository is closed")
	// ErrBusy: the operation needs no open sessions (Recatalog).
	ErrBusy = errors.New("repository has open backup sessions")
)

// CorruptBlobError names a blob that failed verification and the pack holding it.
type CorruptBlobError struct {
	Blob ID
	Pack string
	Err  error
}

func (e *CorruptBlobError) Error() string {
	return fmt.Sprintf("corrupt blob %s in pack %s: %v", e.Blob, e.Pack, e.Err)
}

func (e *CorruptBlobError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptBlobError) Is(target error) bool { return target == ErrCorrupt }

// FormatError is a decoding failure of one of the on-disk structures.
type FormatError struct {
	What string
	Msg  string
}

func (e *FormatError) Error() string { return fmt.Sprintf("decode %s: %s", e.What, e.Msg) }

// Is makes errors.Is(err, ErrCorrupt) true for malformed structures.
func (e *FormatError) Is(target error) bool { return target == ErrCorrupt }

func formatErr(what, format string, args ...any) error {
	return &FormatError{What: what, Msg: fmt.Sprintf(format, args...)}
}
