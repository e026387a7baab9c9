package web

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/vmvault/vmvault/web/api"
)

// A service's own sentinel marked with one of api's kinds maps to the
// kind's status and code, with the service's message.
func TestMapErrorKinds(t *testing.T) {
	engine := errors.New("engine says so")
	for _, tc := range []struct {
		kind   error
		status int
		code   string
	}{
		{api.ErrNotFound, http.StatusNotFound, "not_found"},
		{api.ErrAmbiguous, http.StatusBadRequest, "ambiguous_id"},
		{api.ErrPointLocked, http.StatusConflict, "point_locked"},
		{api.ErrBusy, http.StatusConflict, "busy"},
		{api.ErrConflict, http.StatusConflict, "conflict"},
		{api.ErrUnavailable, http.StatusServiceUnavailable, "unavailable"},
		{api.ErrNotImplemented, http.StatusNotImplemented, "not_implemented"},
	} {
		err := fmt.Errorf("point ab12: %w", api.Kind(engine, tc.kind))
		status, det, _ := mapError(err)
		if status != tc.status || det.Code != tc.code || det.Message != "point ab12: engine says so" {
			t.Errorf("%v: %d %+v, want %d %s", tc.kind, status, det, tc.status, tc.code)
		}
	}
	if status, det, _ := mapError(engine); status != http.StatusInternalServerError || det.Code != "internal" {
		t.Errorf("an unmarked service error: %d %+v", status, det)
	}
}
