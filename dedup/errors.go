package dedup

import "errors"

var (
	// ErrInvalidParams reports chunker parameters that cannot be used.
	ErrInvalidParams = errors.New("invalid chunker parameters")
	// ErrSizeChanged reports a Rechunk whose parent chunk list covers a different size than the new disk.
	ErrSizeChanged = errors.New("disk size changed since the parent")
	// ErrBadExtent reports an allocated or changed extent that is negative or lies beyond the disk.
	ErrBadExtent = errors.New("bad extent")
	// ErrParentMismatch reports a parent chunk list that cannot have been produced with these parameters
	// (gaps, overlaps, or chunk lengths outside the parameters' bounds).
	ErrParentMismatch = errors.New("parent chunk list does not match the chunker")
)
