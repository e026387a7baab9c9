package web

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/vmvault/vmvault/internal/auth"
)

// Whatever the body, the write endpoints answer with a status below 500
// (or 501 for unwired engines) and, on error, the one error shape.
func FuzzWriteBodies(f *testing.F) {
	f.Add(uint8(0), []byte(`{"id":"a","name":"A","repository":"main","retention":{"last":1},"selection":{"vms":["x"]}}`))
	f.Add(uint8(1), []byte(`{"timeZone":"UTC","eventRetentionDays":1}`))
	f.Add(uint8(2), []byte(`{"username":"admin","password":"x"}`))
	f.Add(uint8(3), []byte(`{"vms":["a"],"repository":"main"}`))
	f.Add(uint8(4), []byte(`{"point":"0000000000","mode":"new","name":"n"}`))
	f.Add(uint8(0), []byte(`{"window":{"location":"Nowhere/X","days":{"xday":["25:00-99:00"]}}}`))
	fx := newFixture(f, nil)
	targets := []struct{ method, path string }{
		{"POST", "/api/v1/jobs"}, {"PUT", "/api/v1/settings"}, {"POST", "/api/v1/auth/login"},
		{"POST", "/api/v1/backups"}, {"POST", "/api/v1/restores"}, {"POST", "/api/v1/restores/disk"},
		{"POST", "/api/v1/auth/tokens"}, {"POST", "/api/v1/repositories/main/check"},
	}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		tg := targets[int(which)%len(targets)]
		req := httptest.NewRequest(tg.method, tg.path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+fx.tokens[auth.RoleAdministrator])
		rec := httptest.NewRecorder()
		fx.srv.Handler().ServeHTTP(rec, req)
		if rec.Code >= 500 && rec.Code != http.StatusNotImplemented && rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("%s %s %q: %d %s", tg.method, tg.path, body, rec.Code, rec.Body.Bytes())
		}
		if rec.Code >= 400 {
			resp{status: rec.Code, body: rec.Body.Bytes()}.errBody(t)
		}
	})
}

// The console's write endpoints: whatever the body, a status below 500
// and, on error, the one error shape.
func FuzzConsoleBodies(f *testing.F) {
	f.Add(uint8(0), []byte(`{"username":"u1","password":"long-password","role":"operator"}`))
	f.Add(uint8(1), []byte(`{"role":"restore-only"}`))
	f.Add(uint8(1), []byte(`{"password":"another-password"}`))
	f.Add(uint8(2), []byte(`{"repository":"main","retention":{"last":1,"weekly":2},"vm":"x"}`))
	f.Add(uint8(3), []byte(`{"to":"ops@example.com"}`))
	f.Add(uint8(3), []byte(`{"to":"\"a b\"@[127.0.0.1]"}`))
	f.Add(uint8(4), []byte(`{"url":"https://vc/sdk","username":"u","password":"p","thumbprint":"AA:BB"}`))
	fx := newFixture(f, func(c *Config) { c.Mailer = &recordingMailer{}; c.VCenter = staticVCenter{} })
	targets := []struct{ method, path string }{
		{"POST", "/api/v1/users"}, {"PUT", "/api/v1/users/u1"}, {"POST", "/api/v1/retention-preview"},
		{"POST", "/api/v1/settings/smtp/test"}, {"POST", "/api/v1/settings/vcenter/test"},
	}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		tg := targets[int(which)%len(targets)]
		req := httptest.NewRequest(tg.method, tg.path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+fx.tokens[auth.RoleAdministrator])
		rec := httptest.NewRecorder()
		fx.srv.Handler().ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %s %q: %d %s", tg.method, tg.path, body, rec.Code, rec.Body.Bytes())
		}
		if rec.Code >= 400 {
			resp{status: rec.Code, body: rec.Body.Bytes()}.errBody(t)
		}
	})
}
