package api

import "errors"

// The error kinds web maps to status codes. A service returns an error
// matching one of them (errors.Is), usually by wrapping its own sentinel
// with Kind so that callers that check the engine's sentinel still can.
var (
	// ErrNotFound is an unknown id (404 not_found).
	ErrNotFound = errors.New("not found")
	// ErrNotImplemented is a service not wired into this daemon (501).
	ErrNotImplemented = errors.New("not implemented")
	// ErrConflict is a request that contradicts current state (409 conflict).
	ErrConflict = errors.New("conflict")
	// ErrUnavailable is a dependency (vCenter, the scheduler) that cannot answer now (503).
	ErrUnavailable = errors.New("service unavailable")
	// ErrAmbiguous is an id prefix that matches more than one object (400 ambiguous_id).
	ErrAmbiguous = errors.New("ambiguous id")
	// ErrPointLocked is a change refused because the restore point is locked (409 point_locked).
	ErrPointLocked = errors.New("restore point is locked")
	// ErrBusy is a resource held by another operation (409 busy).
	ErrBusy = errors.New("busy")
)

// ErrSMTPNotConfigured is the Mailer's answer while no SMTP is configured (409).
var ErrSMTPNotConfigured = errors.New("SMTP is not configured on this appliance")

// Kind returns err marked as kind: its message is err's, and errors.Is
// matches both kind and everything err matches. A nil err stays nil.
func Kind(err, kind error) error {
	if err == nil {
		return nil
	}
	return kindError{err: err, kind: kind}
}

type kindError struct{ err, kind error }

func (e kindError) Error() string   { return e.err.Error() }
func (e kindError) Unwrap() []error { return []error{e.err, e.kind} }
