package web

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vmvault/vmvault/internal/auth"
)

var docParam = regexp.MustCompile(`\{[^}]+\}`)

// openAPIOp is what the role matrix reads from the OpenAPI document.
type openAPIOp struct {
	Role  string `json:"x-role"`
	Rules []struct {
		When map[string]any `json:"when"`
		Role string         `json:"role"`
	} `json:"x-role-rules"`
}

type openAPIRoles struct {
	Paths      map[string]map[string]openAPIOp `json:"paths"`
	Components struct {
		Schemas map[string]struct {
			Properties map[string]struct {
				Enum []string `json:"enum"`
			} `json:"properties"`
		} `json:"schemas"`
	} `json:"components"`
}

func loadOpenAPIRoles(t *testing.T) openAPIRoles {
	t.Helper()
	var doc openAPIRoles
	if err := json.Unmarshal(OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// neededRole is the role the document declares for a request: the
// route's x-role, raised by every x-role-rule whose when the body matches.
func (op openAPIOp) neededRole(t *testing.T, body map[string]any) auth.Role {
	t.Helper()
	need := auth.Role(op.Role)
	for _, r := range op.Rules {
		match := len(r.When) > 0
		for k, v := range r.When {
			if !reflect.DeepEqual(body[k], v) {
				match = false
			}
		}
		if !match {
			continue
		}
		rr, err := auth.ParseRole(r.Role)
		if err != nil {
			t.Fatalf("x-role-rules: %v", err)
		}
		if !need.Allows(rr) {
			need = rr
		}
	}
	return need
}

// callers are the four kinds of caller of the matrix: nobody and one
// token of each role.
func callers(f *fixture) []struct {
	name string
	role auth.Role // "" = no credentials
	opt  reqOpt
} {
	out := []struct {
		name string
		role auth.Role
		opt  reqOpt
	}{{"no auth", "", func(*http.Request) {}}}
	for _, r := range []auth.Role{auth.RoleAdministrator, auth.RoleOperator, auth.RoleRestoreOnly} {
		out = append(out, struct {
			name string
			role auth.Role
			opt  reqOpt
		}{string(r), r, bearer(f.tokens[r])})
	}
	return out
}

// statusOf sends a request and returns its status without waiting for the
// body (GET /stream never ends).
func (f *fixture) statusOf(t *testing.T, method, path string, body []byte, opt reqOpt) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, f.http.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	opt(req)
	res, err := f.http.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	var b []byte
	if !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		b, _ = io.ReadAll(res.Body)
	}
	return res.StatusCode, b
}

// The role matrix: every documented route x every caller (administrator,
// operator, restore-only, no credentials) x, for the restore routes,
// every restore mode with and without powerOff. The expected answer comes
// from the OpenAPI document (x-role and x-role-rules), so document and
// code cannot drift; and the document itself must say what the product
// promises: overwriting or powering off an existing VM needs an operator,
// restoring to a new VM, a rehearsal or a new disk only restore-only.
func TestRoleMatrix(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Restores = fakeEngine{} })
	doc := loadOpenAPIRoles(t)
	public := map[string]bool{"GET /healthz": true, "POST /api/v1/auth/login": true, "GET /api/v1/openapi.json": true}

	// 1. Every route x caller: no credentials 401, a role below x-role 403,
	// enough role neither (whatever the empty body then earns).
	var keys []string
	for p, ops := range doc.Paths {
		for m := range ops {
			keys = append(keys, strings.ToUpper(m)+" "+p)
		}
	}
	sort.Strings(keys)
	// The logout and token routes change the callers' own credentials; they
	// go last so the rest of the matrix runs with working tokens.
	sort.SliceStable(keys, func(i, j int) bool {
		return !strings.Contains(keys[i], "/auth/") && strings.Contains(keys[j], "/auth/")
	})
	for _, k := range keys {
		method, p, _ := strings.Cut(k, " ")
		op := doc.Paths[p][strings.ToLower(method)]
		path := docParam.ReplaceAllString(p, "zz-none")
		for _, c := range callers(f) {
			status, body := f.statusOf(t, method, path, []byte(`{}`), c.opt)
			switch {
			case op.Role == "public":
				if !public[k] {
					t.Errorf("%s is documented public", k)
				}
				// Login answers 401 bad_credentials to an empty body: the
				// credentials it was given are wrong, not missing.
				if status == 403 || status == 401 && !bytes.Contains(body, []byte(`"bad_credentials"`)) {
					t.Errorf("%s (public) as %s: %d %s", k, c.name, status, body)
				}
			case c.role == "":
				if status != 401 {
					t.Errorf("%s without credentials: %d, want 401", k, status)
				}
			case !c.role.Allows(auth.Role(op.Role)):
				if status != 403 {
					t.Errorf("%s as %s: %d, want 403 (needs %s)", k, c.name, status, op.Role)
				}
			default:
				if status == 401 || status == 403 {
					t.Errorf("%s as %s: %d %s, the document lets %s in", k, c.name, status, body, op.Role)
				}
			}
		}
	}

	// 2. The document's promise, per action.
	restores := doc.Paths["/api/v1/restores"]["post"]
	modes := doc.Components.Schemas["RestoreRequest"].Properties["mode"].Enum
	if len(modes) < 3 {
		t.Fatalf("RestoreRequest.mode enum %v", modes)
	}
	for _, m := range modes {
		for _, powerOff := range []bool{false, true} {
			body := map[string]any{"mode": m, "powerOff": powerOff}
			want := auth.RoleRestoreOnly
			if m == "original" || powerOff {
				want = auth.RoleOperator
			}
			if got := restores.neededRole(t, body); got != want {
				t.Errorf("the document gives mode %s powerOff %v to %s; overwriting or powering off an existing VM needs operator, anything else restore-only: want %s", m, powerOff, got, want)
			}
		}
	}
	if r := doc.Paths["/api/v1/restores/disk"]["post"].neededRole(t, nil); r != auth.RoleRestoreOnly {
		t.Errorf("a disk restore (a new disk) is documented for %s, want restore-only", r)
	}

	// 3. Every restore mode x powerOff x caller against the code.
	for _, m := range modes {
		for _, powerOff := range []bool{false, true} {
			body := map[string]any{"point": f.points[0].ID, "mode": m, "powerOff": powerOff}
			need := restores.neededRole(t, body)
			b, _ := json.Marshal(body)
			for _, c := range callers(f) {
				status, rb := f.statusOf(t, "POST", "/api/v1/restores", b, c.opt)
				want := http.StatusAccepted
				switch {
				case c.role == "":
					want = http.StatusUnauthorized
				case !c.role.Allows(need):
					want = http.StatusForbidden
				case powerOff && m != "original":
					want = http.StatusUnprocessableEntity // powerOff means nothing there
				}
				if status != want {
					t.Errorf("restore mode %s powerOff %v as %s: %d %s, want %d (document: needs %s)", m, powerOff, c.name, status, rb, want, need)
				}
			}
		}
	}
	disk, _ := json.Marshal(map[string]any{"point": f.points[0].ID, "disk": 2000, "targetVm": testVM.InstanceUUID})
	for _, c := range callers(f) {
		status, rb := f.statusOf(t, "POST", "/api/v1/restores/disk", disk, c.opt)
		want := http.StatusAccepted
		if c.role == "" {
			want = http.StatusUnauthorized
		}
		if status != want {
			t.Errorf("disk restore as %s: %d %s, want %d", c.name, status, rb, want)
		}
	}
}

// A restore-only token cannot overwrite and power off a production VM
// (the audit's reproduction), and the refusal says why.
func TestRestoreOnlyCannotOverwrite(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Restores = fakeEngine{} })
	body := map[string]any{"point": f.points[0].ID, "mode": "original", "powerOff": true}
	r := f.do("POST", "/api/v1/restores", body, bearer(f.tokens[auth.RoleRestoreOnly]))
	if r.status != http.StatusForbidden {
		t.Fatalf("restore-only overwrite: %d %s", r.status, r.body)
	}
	if d := r.errBody(t); d.Code != "forbidden" || !strings.Contains(d.Message, "original") || !strings.Contains(d.Message, "operator") {
		t.Fatalf("refusal %+v", d)
	}
	var tasks []any
	f.admin("GET", "/api/v1/tasks", nil).json(t, &tasks)
	if len(tasks) != 0 {
		t.Fatalf("a refused restore started a task: %v", tasks)
	}
	if r := f.do("POST", "/api/v1/restores", body, bearer(f.tokens[auth.RoleOperator])); r.status != http.StatusAccepted {
		t.Fatalf("operator overwrite: %d %s", r.status, r.body)
	}
}

// Token lifetimes are bounded at 10 years; beyond (and the int64 maximum,
// which used to wrap round into "never expires") is a 400 that creates
// nothing.
func TestTokenTTLBounds(t *testing.T) {
	f := newFixture(t, nil)
	max := int64(auth.MaxTokenTTL / time.Second)
	tests := []struct {
		ttl    string
		status int
		expiry time.Duration // 0: never
	}{
		{"9223372036854775807", 400, 0},
		{"9223372036854775", 400, 0},
		{fmt.Sprint(max + 1), 400, 0},
		{"-1", 400, 0},
		{"-9223372036854775808", 400, 0},
		{"1e30", 400, 0},
		{"18446744073709551616", 400, 0},
		{fmt.Sprint(max), 201, auth.MaxTokenTTL},
		{"3600", 201, time.Hour},
		{"0", 201, 0},
	}
	before, _ := f.srv.cfg.Auth.Tokens(context.Background())
	created := 0
	for _, tc := range tests {
		r := f.admin("POST", "/api/v1/auth/tokens", `{"name":"ttl","role":"operator","ttlSeconds":`+tc.ttl+`}`)
		if r.status != tc.status {
			t.Errorf("ttlSeconds %s: %d %s, want %d", tc.ttl, r.status, r.body, tc.status)
			continue
		}
		if tc.status != 201 {
			r.fieldNamed(t, "ttlSeconds")
			continue
		}
		created++
		var tr tokenResponse
		r.json(t, &tr)
		switch {
		case tc.expiry == 0 && !tr.Detail.Expires.IsZero():
			t.Errorf("ttlSeconds %s: expires %v, want never", tc.ttl, tr.Detail.Expires)
		case tc.expiry != 0 && !tr.Detail.Expires.Equal(f.clk.Now().Add(tc.expiry)):
			t.Errorf("ttlSeconds %s: expires %v, want %v", tc.ttl, tr.Detail.Expires, f.clk.Now().Add(tc.expiry))
		}
	}
	after, _ := f.srv.cfg.Auth.Tokens(context.Background())
	if len(after) != len(before)+created {
		t.Fatalf("%d tokens before, %d after, %d created", len(before), len(after), created)
	}
}

// HSTS is sent over TLS, on API answers, errors and console files alike,
// and never over plain HTTP (where browsers ignore it and the daemon only
// listens on loopback behind a proxy).
func TestHSTSOnlyOverTLS(t *testing.T) {
	f := newFixture(t, nil)
	ts := httptest.NewTLSServer(f.srv.Handler())
	t.Cleanup(ts.Close)
	tc := ts.Client()
	tc.Transport.(*http.Transport).TLSClientConfig = &tls.Config{InsecureSkipVerify: true}
	for _, p := range []string{"/healthz", "/api/v1/openapi.json", "/api/v1/jobs", "/api/v1/nope", "/"} {
		res, err := tc.Get(ts.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if got := res.Header.Get("Strict-Transport-Security"); got != HSTS {
			t.Errorf("TLS %s (%d): Strict-Transport-Security %q, want %q", p, res.StatusCode, got, HSTS)
		}
		r := f.do("GET", p, nil)
		if got := r.header.Get("Strict-Transport-Security"); got != "" {
			t.Errorf("plain HTTP %s: Strict-Transport-Security %q", p, got)
		}
		if r.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("plain HTTP %s lost the other security headers", p)
		}
	}
}

// Over HTTP, with the default limits: wrong passwords for the
// administrator from one address lock that address out for that user
// (429 with Retry-After), not the administrator from another address;
// the lockout is an event (GET /events, once per episode) and a metric.
func TestLoginLockoutOverHTTP(t *testing.T) {
	var am *auth.Manager
	f := newFixture(t, func(c *Config) {
		var err error
		am, err = auth.NewManager(auth.Config{Clock: c.Clock, Store: mustAuthStore(t, nil), Hash: auth.HashParams{Time: 1, MemoryKiB: 64, Threads: 1},
			Sleep: func(context.Context, time.Duration) error { return nil }})
		if err != nil {
			t.Fatal(err)
		}
		c.Auth = am
		c.TrustProxy = true
	})
	tok, _, err := am.CreateToken(context.Background(), auth.Principal{User: "admin", Role: auth.RoleAdministrator}, "m", auth.RoleAdministrator, 0)
	if err != nil {
		t.Fatal(err)
	}
	from := func(ip string) reqOpt { return func(r *http.Request) { r.Header.Set("X-Forwarded-For", ip) } }
	login := func(ip, pw string) resp {
		return f.do("POST", "/api/v1/auth/login", map[string]string{"username": "admin", "password": pw}, from(ip))
	}
	for i := range 30 {
		r := login("198.51.100.1", "wrong-password")
		want := 401
		if i >= 5 {
			want = 429
		}
		if r.status != want {
			t.Fatalf("attempt %d: %d %s, want %d", i, r.status, r.body, want)
		}
		if want == 429 && r.header.Get("Retry-After") == "" {
			t.Fatal("429 without Retry-After")
		}
	}
	if r := login("203.0.113.5", testAdminPassword); r.status != 200 {
		t.Fatalf("right password from another address: %d %s", r.status, r.body)
	}
	if r := login("198.51.100.1", testAdminPassword); r.status != 429 {
		t.Fatalf("right password from the failing address: %d", r.status)
	}
	m := f.do("GET", "/metrics", nil, bearer(tok))
	for _, want := range []string{`vmvault_login_lockouts_total{scope="user-address"} 1`, `vmvault_login_lockouts_total{scope="address"} 0`, `vmvault_login_lockouts_total{scope="user"} 0`} {
		if !strings.Contains(string(m.body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	ev := f.do("GET", "/api/v1/events", nil, bearer(tok))
	if ev.status != 200 || strings.Count(string(ev.body), EventLoginLockout) != 1 || !strings.Contains(string(ev.body), "198.51.100.1") {
		t.Fatalf("events: %d %s", ev.status, ev.body)
	}
	if strings.Contains(string(ev.body), "wrong-password") || strings.Contains(string(m.body), "wrong-password") {
		t.Fatal("a password reached the events or metrics")
	}
}

// A vCenter user whom the configuration gives no role is refused with a
// 403 no_role saying what to configure, not logged in as administrator.
func TestLoginVCenterNoRole(t *testing.T) {
	var am *auth.Manager
	f := newFixture(t, func(c *Config) {
		var err error
		am, err = auth.NewManager(auth.Config{Clock: c.Clock, Store: mustAuthStore(t, nil), Hash: auth.HashParams{Time: 1, MemoryKiB: 64, Threads: 1},
			VerifyVCenter: func(ctx context.Context, user, pw string) error { return nil }})
		if err != nil {
			t.Fatal(err)
		}
		c.Auth = am
	})
	r := f.do("POST", "/api/v1/auth/login", map[string]string{"username": "VSPHERE.LOCAL\\mallory", "password": "vc-pass"})
	if r.status != http.StatusForbidden {
		t.Fatalf("unmapped vCenter user: %d %s", r.status, r.body)
	}
	if d := r.errBody(t); d.Code != "no_role" || !strings.Contains(d.Message, "vcenter.roles") {
		t.Fatalf("refusal %+v", d)
	}
	if len(r.header.Values("Set-Cookie")) != 0 {
		t.Fatal("a refused login set cookies")
	}
}
