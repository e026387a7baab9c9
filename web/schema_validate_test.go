package web

import (
	"strings"
	"sync"
	"testing"

	"github.com/vmvault/vmvault/web/openapitest"
)

var (
	docOnce      sync.Once
	docValidator *openapitest.Validator
	docErr       error
)

// validateResponse checks one response the test suite received against
// the published document (see openapitest.Validator.Response).
func validateResponse(t testing.TB, method, path string, r resp) {
	t.Helper()
	docOnce.Do(func() { docValidator, docErr = openapitest.New(OpenAPI()) })
	if docErr != nil {
		t.Errorf("openapi.json: %v", docErr)
		return
	}
	if errs := docValidator.Response(method, path, r.status, r.header, r.body); len(errs) > 0 {
		t.Error(strings.Join(errs, "\n"))
	}
}
