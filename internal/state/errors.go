package state

import "errors"

var (
	// ErrNotFound is returned when a job or run id does not exist.
	ErrNotFound = errors.New("not found")
	// ErrSchemaTooNew is returned by Open for a database written by a newer vmvault.
	ErrSchemaTooNew = errors.New("state database schema is newer than this program")
	// ErrCorrupt is returned when a stored record cannot be decoded.
	ErrCorrupt = errors.New("state database record corrupt")
)
