package web

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/internal/auth"
)

var ginParam = regexp.MustCompile(`:([A-Za-z]+)`)

// Every route gin registered, except the public ones, answers 401 with the
// error shape without credentials, with a wrong token and with a forged
// cookie; and every route that needs more than restore-only (or operator)
// answers 403 to a token of that role, before reading any body.
func TestEveryRouteRequiresAuth(t *testing.T) {
	f := newFixture(t, nil)
	public := map[string]bool{"GET /healthz": true, "POST /api/v1/auth/login": true, "GET /api/v1/openapi.json": true}
	roles := map[string]auth.Role{}
	for _, r := range f.srv.Routes() {
		roles[r.Method+" "+r.Path] = r.Role
	}
	gr := f.srv.engine.Routes()
	if len(gr) != len(roles) {
		t.Fatalf("gin has %d routes, the table %d", len(gr), len(roles))
	}
	seenPublic := 0
	for _, r := range gr {
		key := r.Method + " " + r.Path
		role, ok := roles[key]
		if !ok {
			t.Fatalf("route %s is registered outside the route table", key)
		}
		path := ginParam.ReplaceAllString(r.Path, "x")
		if public[key] {
			seenPublic++
			if role != "" {
				t.Errorf("%s should be public", key)
			}
			continue
		}
		if role == "" {
			t.Errorf("%s is public but must not be", key)
			continue
		}
		for name, opt := range map[string]reqOpt{
			"none":          func(*http.Request) {},
			"bad token":     bearer("vmv_not-a-token"),
			"not bearer":    func(r *http.Request) { r.Header.Set("Authorization", "Basic YWRtaW46eA==") },
			"forged cookie": func(r *http.Request) { r.AddCookie(&http.Cookie{Name: sessionCookie, Value: "forged"}) },
		} {
			res := f.do(r.Method, path, `{}`, opt)
			if res.status != http.StatusUnauthorized {
				t.Errorf("%s with %s: status %d, want 401", key, name, res.status)
				continue
			}
			res.errBody(t)
		}
		for _, have := range []auth.Role{auth.RoleRestoreOnly, auth.RoleOperator} {
			if have.Allows(role) {
				continue
			}
			res := f.do(r.Method, path, `{}`, bearer(f.tokens[have]))
			if res.status != http.StatusForbidden {
				t.Errorf("%s with a %s token: status %d, want 403", key, have, res.status)
				continue
			}
			if d := res.errBody(t); d.Code != "forbidden" {
				t.Errorf("%s: code %q", key, d.Code)
			}
		}
	}
	if seenPublic != len(public) {
		t.Fatalf("saw %d of %d public routes", seenPublic, len(public))
	}
}

// The OpenAPI document lists exactly the registered routes, each with the
// role the route table enforces, and its request examples behave as
// documented: the valid one is accepted, the invalid one rejected with 4xx.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	mailer := &recordingMailer{}
	app := &fakeAppliance{}
	f := newFixture(t, func(c *Config) {
		c.Mailer = mailer
		c.VCenter = staticVCenter{}
		c.Appliance = app
		c.AddRepository = app
	})
	res := f.do("GET", "/api/v1/openapi.json", nil)
	if res.status != 200 {
		t.Fatalf("openapi: %d", res.status)
	}
	var doc struct {
		OpenAPI string `json:"openapi"`
		Paths   map[string]map[string]struct {
			Role        string `json:"x-role"`
			RequestBody *struct {
				Content map[string]struct {
					Examples map[string]struct {
						Value json.RawMessage `json:"value"`
					} `json:"examples"`
				} `json:"content"`
			} `json:"requestBody"`
		} `json:"paths"`
	}
	res.json(t, &doc)
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi version %q", doc.OpenAPI)
	}
	documented := map[string]string{}
	for p, ops := range doc.Paths {
		for m, op := range ops {
			documented[strings.ToUpper(m)+" "+p] = op.Role
		}
	}
	registered := map[string]string{}
	for _, r := range f.srv.Routes() {
		role := string(r.Role)
		if role == "" {
			role = "public"
		}
		registered[r.Method+" "+ginParam.ReplaceAllString(r.Path, "{$1}")] = role
	}
	for k, role := range registered {
		got, ok := documented[k]
		if !ok {
			t.Errorf("route %s is not documented", k)
		} else if got != role {
			t.Errorf("%s: documented role %q, enforced %q", k, got, role)
		}
	}
	for k := range documented {
		if _, ok := registered[k]; !ok {
			t.Errorf("documented %s is not registered", k)
		}
	}

	// Request examples, in an order where the valid ones can succeed.
	_, tok, err := f.srv.cfg.Auth.CreateToken(context.Background(), auth.Principal{User: "admin", Role: auth.RoleAdministrator}, "examples", auth.RoleRestoreOnly, 0)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{
		"/api/v1/jobs/{id}":               "/api/v1/jobs/nightly",
		"/api/v1/auth/tokens/{id}":        "/api/v1/auth/tokens/" + tok.ID,
		"/api/v1/repositories/{id}":       "/api/v1/repositories/main",
		"/api/v1/users/{name}":            "/api/v1/users/operator1", // made by the POST /users example
		"/api/v1/restore-points/{id}":     "/api/v1/restore-points/" + f.points[0].ID,
		"/api/v1/copy-jobs/{id}":          "/api/v1/copy-jobs/offsite",              // made by the POST /copy-jobs example
		"/api/v1/verification-jobs/{id}":  "/api/v1/verification-jobs/weekend-boot", // made by the POST /verification-jobs example
		"/api/v1/instant-recoveries/{id}": "/api/v1/instant-recoveries/" + memInstantID,
	}
	subst := func(p string) string {
		for k, v := range ids {
			if rest, ok := strings.CutPrefix(p, k); ok {
				return v + rest
			}
		}
		return p
	}
	var keys []string
	for k := range documented {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { // POST /jobs before PUT /jobs/{id}
		return strings.HasPrefix(keys[i], "POST") && !strings.HasPrefix(keys[j], "POST") || keys[i] < keys[j] && strings.HasPrefix(keys[i], "POST") == strings.HasPrefix(keys[j], "POST")
	})
	tested := 0
	for _, k := range keys {
		method, p, _ := strings.Cut(k, " ")
		op := doc.Paths[p][strings.ToLower(method)]
		if op.RequestBody == nil {
			continue
		}
		ex := op.RequestBody.Content["application/json"].Examples
		valid, invalidEx := ex["valid"].Value, ex["invalid"].Value
		if valid == nil || invalidEx == nil {
			t.Errorf("%s: request body without valid and invalid examples", k)
			continue
		}
		// Restore examples name a point id: use a real one.
		body := strings.ReplaceAll(string(valid), "0123456789abcdef", f.points[0].ID)
		badBody := strings.ReplaceAll(string(invalidEx), "0123456789abcdef", f.points[0].ID)
		path := subst(p)
		bad := f.admin(method, path, badBody)
		if bad.status != 400 && bad.status != 422 {
			t.Errorf("%s invalid example: status %d %s", k, bad.status, bad.body)
		} else {
			bad.errBody(t)
		}
		good := f.admin(method, path, body)
		switch {
		case good.status == http.StatusNotImplemented && (strings.Contains(p, "backups") || strings.Contains(p, "restores")):
		case good.status >= 200 && good.status < 300:
		default:
			t.Errorf("%s valid example: status %d %s", k, good.status, good.body)
		}
		tested++
	}
	if tested < 8 {
		t.Fatalf("only %d request bodies exercised", tested)
	}
}
