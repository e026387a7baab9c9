// Package webtest holds what the tests of the daemon and of the command
// share to drive a running appliance over HTTP: a client that checks every
// answer against the published API document, and a cookie login as the
// console does it. Test support only: only tests import it
// (internal/archtest).
package webtest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"sync"
	"testing"
	"time"

	"github.com/vmvault/vmvault/web"
	"github.com/vmvault/vmvault/web/openapitest"
)

// Client calls one appliance's API.
type Client struct {
	T    *testing.T
	Base string // "http://127.0.0.1:PORT"
	HC   *http.Client
}

// Call sends one request (body as JSON when not nil) and checks the answer
// against web/openapi.json: a mismatch fails the test.
func (a *Client) Call(method, path string, body any, hdr map[string]string) (int, []byte) {
	a.T.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, a.Base+path, rd)
	if err != nil {
		a.T.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := a.HC.Do(req)
	if err != nil {
		a.T.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	for _, e := range Published(a.T).Response(method, path, res.StatusCode, res.Header, b) {
		a.T.Error(e)
	}
	return res.StatusCode, b
}

var (
	docOnce sync.Once
	doc     *openapitest.Validator
	docErr  error
)

// Published is the validator of web/openapi.json.
func Published(t *testing.T) *openapitest.Validator {
	t.Helper()
	docOnce.Do(func() { doc, docErr = openapitest.New(web.OpenAPI()) })
	if docErr != nil {
		t.Fatal(docErr)
	}
	return doc
}

// NewJar returns a cookie jar for one session.
func NewJar(t *testing.T) http.CookieJar {
	t.Helper()
	j, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// CookieLogin logs the administrator in at addr with a cookie session, as
// the console does, and returns the client and the CSRF header every
// change needs.
func CookieLogin(t *testing.T, addr, password string) (*Client, map[string]string) {
	t.Helper()
	api := &Client{T: t, Base: "http://" + addr, HC: &http.Client{Jar: NewJar(t), Timeout: 60 * time.Second}}
	code, body := api.Call("POST", "/api/v1/auth/login", map[string]string{"username": "admin", "password": password}, nil)
	if code != 200 {
		t.Fatalf("login: %d %s", code, body)
	}
	var login struct{ CSRFToken string }
	_ = json.Unmarshal(body, &login)
	return api, map[string]string{"X-CSRF-Token": login.CSRFToken}
}
