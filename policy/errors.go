package policy

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalid is matched (errors.Is) by every *ValidationError: callers map it to "bad request".
	ErrInvalid = errors.New("invalid")
	// ErrUnknownPreset is returned for a retention preset name that does not exist.
	ErrUnknownPreset = errors.New("unknown retention preset")
	// ErrKeepsNothing is returned when a retention policy has every count at zero.
	ErrKeepsNothing = errors.New("retention keeps nothing")
	// ErrUnknownRepository is returned when a job names a repository the appliance does not know.
	ErrUnknownRepository = errors.New("unknown repository")
	// ErrJobNotFound is returned by the scheduler for an unknown job id.
	ErrJobNotFound = errors.New("job not found")
	// ErrJobDisabled is returned by RunNow for a disabled job.
	ErrJobDisabled = errors.New("job disabled")
	// ErrSchedulerStopped is returned by scheduler calls after Run has returned.
	ErrSchedulerStopped = errors.New("scheduler stopped")
)

// ValidationError says which field of a job is wrong and why. It matches
// ErrInvalid and, when set, Err (errors.Is).
type ValidationError struct {
	Field string // dotted path, e.g. "window", "retention.daily", "selection.exclude.names[2]"
	Msg   string
	Err   error // optional sentinel, e.g. ErrKeepsNothing
}

func (e *ValidationError) Error() string { return fmt.Sprintf("%s: %s", e.Field, e.Msg) }

// Is makes every ValidationError match ErrInvalid.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

// Unwrap returns the optional sentinel.
func (e *ValidationError) Unwrap() error { return e.Err }

// FieldErrors returns every *ValidationError inside err (which may be an
// errors.Join of several), so an API can report all bad fields at once.
func FieldErrors(err error) []*ValidationError {
	var out []*ValidationError
	var walk func(error)
	walk = func(e error) {
		if e == nil {
			return
		}
		if ve, ok := e.(*ValidationError); ok {
			out = append(out, ve)
			return
		}
		switch u := e.(type) {
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				walk(x)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	walk(err)
	return out
}
