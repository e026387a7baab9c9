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
	// ErrNotFound is returned for an unknown token id or user name.
	ErrNotFound = errors.New("not found")
	// ErrUserExists is returned by CreateUser for a name already taken
	// (names are compared without case).
	ErrUserExists = errors.New("user exists")
	// ErrLastAdministrator is returned when deleting or demoting the last
	// local administrator: nobody could manage the appliance afterwards.
	ErrLastAdministrator = errors.New("the last administrator cannot be removed or demoted")
	// ErrBadTTL is returned by CreateToken for a negative lifetime or one
	// longer than MaxTokenTTL.
	ErrBadTTL = errors.New("invalid token lifetime")
	// ErrBadUser is returned for a user name or password that does not meet the rules.
	ErrBadUser = errors.New("invalid user")
	// ErrPasswordNotSet is joined to ErrBadCredentials by Login while some
	// local user waits for an administrator to set its password (users
	// recreated by an import of a saved configuration, which never holds a
	// password). It is said for every failed login of the appliance, not
	// only for those users, so that it tells nobody which names exist.
	ErrPasswordNotSet = errors.New("users recreated from a saved configuration cannot sign in until an administrator sets their password")
)
