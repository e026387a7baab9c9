package auth

import "errors"

var (
	// ErrBadCredentials is returned by Login for an unknown user or a wrong password.
	ErrBadCredentials = errors.New("invalid username or password")
	// ErrRateLimited is returned by Login when the client or the username has
	// tried too often; wrap in *RateLimitError carries the wait.
	ErrRateLimited = errors.New("too many login attempts")
	// ErrUnauthenticated is returned for a missing, unknown or expired session or token.
	ErrUnauthenticated = errors.New("authentication required")
	// ErrForbidden is returned when a principal's role does not allow an action.
	ErrForbidden = errors.New("forbidden")
	// ErrBadRole is returned for a role name that does not exist.
	ErrBadRole = errors.New("unknown role")
	// ErrVCenterUnavailable is returned by Login when vCenter could not check
	// the credentials (unreachable, timed out).
	ErrVCenterUnavailable = errors.New("vCenter cannot check credentials now")
	// ErrNotFound is returned for an unknown token id.
	ErrNotFound = errors.New("not found")
)
