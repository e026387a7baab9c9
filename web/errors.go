package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/internal/task"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/web/api"
)

// The error kinds services return (api's, re-exported for the services
// wired by cmd). The service packages mark their engines' sentinels with
// them (api.Kind), so this mapping needs no engine import.
var (
	// ErrNotFound is returned by services for an unknown id.
	ErrNotFound = api.ErrNotFound
	// ErrNotImplemented is returned when a service is not wired into this daemon.
	ErrNotImplemented = api.ErrNotImplemented
	// ErrConflict is returned when a request contradicts current state (an existing id).
	ErrConflict = api.ErrConflict
	// ErrUnavailable is returned when a dependency (vCenter, the scheduler) cannot answer now.
	ErrUnavailable = api.ErrUnavailable
	// ErrAmbiguous is returned for an id prefix that matches several objects.
	ErrAmbiguous = api.ErrAmbiguous
	// ErrPointLocked is returned when a locked restore point refuses a change.
	ErrPointLocked = api.ErrPointLocked
	// ErrBusy is returned when another operation holds the resource.
	ErrBusy = api.ErrBusy
)

// ErrorBody is the one error shape of the API.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail describes an error. Details is a list of FieldError for
// validation errors and absent otherwise.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Details any    `json:"details,omitempty"`
}

// FieldError names a bad field of a request.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// apiError carries a status and code chosen by a handler.
type apiError struct {
	status  int
	code    string
	msg     string
	details any
	header  map[string]string
}

func (e *apiError) Error() string { return e.msg }

func badRequest(field, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	var det any
	if field != "" {
		det = []FieldError{{Field: field, Message: msg}}
	}
	return &apiError{status: http.StatusBadRequest, code: "bad_request", msg: msg, details: det}
}

// forbidden is the 403 of a principal whose role is below need; why says
// what in the request needs it ("" for the route itself).
func forbidden(need, have auth.Role, why string) error {
	msg := "this needs the " + string(need) + " role; you have " + string(have)
	if why != "" {
		msg = why + ": " + msg
	}
	return &apiError{status: http.StatusForbidden, code: "forbidden", msg: msg}
}

func invalid(field, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	return &apiError{status: http.StatusUnprocessableEntity, code: "validation", msg: field + ": " + msg, details: []FieldError{{Field: field, Message: msg}}}
}

// mapError is the single mapping of errors to status, code and message.
// Anything not recognised is a 500 whose message does not leak internals.
func mapError(err error) (int, ErrorDetail, map[string]string) {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.status, ErrorDetail{Code: ae.code, Message: ae.msg, Details: ae.details}, ae.header
	}
	if fp := api.AsInvalid(err); len(fp) > 0 {
		det := make([]FieldError, len(fp))
		for i, f := range fp {
			det[i] = FieldError{Field: f.Field, Message: f.Message}
		}
		return http.StatusUnprocessableEntity, ErrorDetail{Code: "validation", Message: err.Error(), Details: det}, nil
	}
	if fe := policy.FieldErrors(err); len(fe) > 0 {
		det := make([]FieldError, len(fe))
		msgs := make([]string, len(fe))
		for i, f := range fe {
			det[i] = FieldError{Field: f.Field, Message: f.Msg}
			msgs[i] = f.Error()
		}
		return http.StatusUnprocessableEntity, ErrorDetail{Code: "validation", Message: strings.Join(msgs, "; "), Details: det}, nil
	}
	var rl *auth.RateLimitError
	if errors.As(err, &rl) {
		secs := int(rl.RetryAfter.Seconds() + 0.999)
		return http.StatusTooManyRequests, ErrorDetail{Code: "rate_limited", Message: rl.Error()}, map[string]string{"Retry-After": strconv.Itoa(max(secs, 1))}
	}
	type rule struct {
		targets []error
		status  int
		code    string
	}
	rules := []rule{
		{[]error{auth.ErrBadCredentials}, http.StatusUnauthorized, "bad_credentials"},
		{[]error{auth.ErrLastAdministrator}, http.StatusConflict, "last_administrator"},
		{[]error{auth.ErrUserExists}, http.StatusConflict, "conflict"},
		{[]error{auth.ErrBadUser, auth.ErrBadScope}, http.StatusUnprocessableEntity, "validation"},
		{[]error{auth.ErrUnauthenticated}, http.StatusUnauthorized, "unauthenticated"},
		{[]error{auth.ErrForbidden}, http.StatusForbidden, "forbidden"},
		{[]error{auth.ErrNoRole}, http.StatusForbidden, "no_role"},
		{[]error{auth.ErrBadRole}, http.StatusUnprocessableEntity, "validation"},
		{[]error{auth.ErrBadTTL}, http.StatusBadRequest, "bad_request"},
		{[]error{ErrNotFound, task.ErrNotFound, policy.ErrJobNotFound, auth.ErrNotFound}, http.StatusNotFound, "not_found"},
		{[]error{ErrAmbiguous}, http.StatusBadRequest, "ambiguous_id"},
		{[]error{ErrPointLocked}, http.StatusConflict, "point_locked"},
		{[]error{task.ErrFinished, ErrConflict, policy.ErrJobDisabled}, http.StatusConflict, "conflict"},
		{[]error{ErrBusy}, http.StatusConflict, "busy"},
		{[]error{task.ErrBusy, task.ErrClosed, policy.ErrSchedulerStopped, ErrUnavailable, auth.ErrVCenterUnavailable}, http.StatusServiceUnavailable, "unavailable"},
		{[]error{ErrNotImplemented}, http.StatusNotImplemented, "not_implemented"},
		{[]error{context.DeadlineExceeded}, http.StatusGatewayTimeout, "timeout"},
	}
	for _, r := range rules {
		for _, t := range r.targets {
			if errors.Is(err, t) {
				return r.status, ErrorDetail{Code: r.code, Message: err.Error()}, nil
			}
		}
	}
	return http.StatusInternalServerError, ErrorDetail{Code: "internal", Message: "internal error; see the appliance log"}, nil
}

// decodeError turns a json decoding failure into a 400 naming the field.
func decodeError(err error) error {
	var mbe *http.MaxBytesError
	var ute *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &mbe):
		return &apiError{status: http.StatusRequestEntityTooLarge, code: "too_large", msg: fmt.Sprintf("request body larger than %d bytes", mbe.Limit)}
	case errors.As(err, &ute):
		field := ute.Field
		if field == "" {
			field = "(body)"
		}
		return badRequest(field, "wrong type: got JSON %s, want %s", ute.Value, ute.Type)
	case errors.As(err, &se):
		return badRequest("", "malformed JSON at byte %d: %v", se.Offset, se)
	case errors.Is(err, errEmptyBody):
		return badRequest("", "request body is empty")
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		f = strings.Trim(f, `"`)
		return badRequest(f, "unknown field %q", f)
	}
	// policy.Window decodes itself; its errors name the window, not a JSON path.
	if strings.Contains(msg, "window") {
		return badRequest("window", "%v", err)
	}
	return badRequest("", "bad request body: %v", err)
}
