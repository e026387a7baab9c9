package web

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/internal/auth"
)

// login opens a session and returns options that send its cookie and CSRF header.
func (f *fixture) login(t *testing.T, user, pw string) (reqOpt, loginResponse) {
	t.Helper()
	r := f.do("POST", "/api/v1/auth/login", map[string]string{"username": user, "password": pw})
	if r.status != 200 {
		t.Fatalf("login %s: %d %s", user, r.status, r.body)
	}
	var lr loginResponse
	r.json(t, &lr)
	var session string
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if c.Name == sessionCookie {
			session = c.Value
		}
	}
	return func(r *http.Request) {
		r.AddCookie(&http.Cookie{Name: sessionCookie, Value: session})
		r.Header.Set(csrfHeader, lr.CSRFToken)
	}, lr
}

func (f *fixture) users(t *testing.T) []auth.User {
	t.Helper()
	var us []auth.User
	r := f.admin("GET", "/api/v1/users", nil)
	if r.status != 200 {
		t.Fatalf("users: %d %s", r.status, r.body)
	}
	r.json(t, &us)
	return us
}

func TestUsersAPI(t *testing.T) {
	f := newFixture(t, nil)
	us := f.users(t)
	if len(us) != 1 || us[0].Username != "admin" || us[0].Role != auth.RoleAdministrator || us[0].Source != "local" || us[0].Created.IsZero() {
		t.Fatalf("initial users %+v", us)
	}
	// Bad input changes nothing.
	bad := []struct {
		name, method, path, body string
		status                   int
		field                    string
	}{
		{"unknown field", "POST", "/api/v1/users", `{"username":"u1","password":"long-password","role":"operator","admin":true}`, 400, "admin"},
		{"wrong type", "POST", "/api/v1/users", `{"username":"u1","password":12345678,"role":"operator"}`, 400, "password"},
		{"no username", "POST", "/api/v1/users", `{"password":"long-password","role":"operator"}`, 422, "username"},
		{"bad username", "POST", "/api/v1/users", `{"username":"a b","password":"long-password","role":"operator"}`, 422, "username"},
		{"vCenter-style name", "POST", "/api/v1/users", `{"username":"vsphere.local\\bob","password":"long-password","role":"operator"}`, 422, "username"},
		{"short password", "POST", "/api/v1/users", `{"username":"u1","password":"short","role":"operator"}`, 422, "password"},
		{"bad role", "POST", "/api/v1/users", `{"username":"u1","password":"long-password","role":"root"}`, 422, "role"},
		{"no role", "POST", "/api/v1/users", `{"username":"u1","password":"long-password"}`, 422, "role"},
		{"duplicate", "POST", "/api/v1/users", `{"username":"ADMIN","password":"long-password","role":"operator"}`, 409, ""},
		{"huge", "POST", "/api/v1/users", `{"username":"` + strings.Repeat("u", MaxBodyBytes) + `"}`, 413, ""},
		{"update nothing", "PUT", "/api/v1/users/admin", `{}`, 422, "role"},
		{"update bad role", "PUT", "/api/v1/users/admin", `{"role":"root"}`, 422, "role"},
		{"update short password", "PUT", "/api/v1/users/admin", `{"password":"x"}`, 422, "password"},
		{"update unknown field", "PUT", "/api/v1/users/admin", `{"name":"x"}`, 400, "name"},
		{"update unknown user", "PUT", "/api/v1/users/nobody", `{"role":"operator"}`, 404, ""},
		{"demote last admin", "PUT", "/api/v1/users/admin", `{"role":"operator"}`, 409, ""},
		{"delete last admin", "DELETE", "/api/v1/users/admin", ``, 409, ""},
		{"delete unknown", "DELETE", "/api/v1/users/nobody", ``, 404, ""},
	}
	for _, tc := range bad {
		r := f.admin(tc.method, tc.path, tc.body)
		if r.status != tc.status {
			t.Errorf("%s: %d %s", tc.name, r.status, truncate(string(r.body), 200))
			continue
		}
		if tc.field != "" {
			r.fieldNamed(t, tc.field)
		} else if d := r.errBody(t); tc.status == 409 && strings.Contains(tc.name, "last admin") && d.Code != "last_administrator" {
			t.Errorf("%s: code %q", tc.name, d.Code)
		}
	}
	if got := f.users(t); len(got) != 1 || got[0].Role != auth.RoleAdministrator {
		t.Fatalf("bad input changed users: %+v", got)
	}
	if _, err := f.srv.cfg.Auth.Login(context.Background(), "x", "admin", testAdminPassword); err != nil {
		t.Fatalf("bad input changed the admin password: %v", err)
	}

	// Create an operator; it logs in, gets its role, and is held to it.
	r := f.admin("POST", "/api/v1/users", map[string]string{"username": "op1", "password": "op1-password", "role": "operator"})
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	var u auth.User
	r.json(t, &u)
	if u.Username != "op1" || u.Role != auth.RoleOperator || strings.Contains(string(r.body), "argon2") {
		t.Fatalf("created %s", r.body)
	}
	opSess, lr := f.login(t, "op1", "op1-password")
	if lr.Role != auth.RoleOperator {
		t.Fatalf("login role %s", lr.Role)
	}
	var me meResponse
	f.do("GET", "/api/v1/auth/me", nil, opSess).json(t, &me)
	if me.Username != "op1" || me.Role != auth.RoleOperator || me.CSRFToken != lr.CSRFToken || me.Source != "local" {
		t.Fatalf("me %+v", me)
	}
	if r := f.do("GET", "/api/v1/users", nil, opSess); r.status != 403 {
		t.Fatalf("operator lists users: %d", r.status)
	}
	if r := f.do("POST", "/api/v1/repositories/main/check", nil, opSess); r.status != 202 {
		t.Fatalf("operator runs a check: %d %s", r.status, r.body)
	}
	// Promote: the live session gets the role.
	if r := f.admin("PUT", "/api/v1/users/op1", map[string]string{"role": "administrator"}); r.status != 200 {
		t.Fatalf("promote: %d %s", r.status, r.body)
	}
	if r := f.do("GET", "/api/v1/users", nil, opSess); r.status != 200 {
		t.Fatalf("promoted session lists users: %d", r.status)
	}
	// Two administrators now: admin can be demoted, then op1 is the last one.
	if r := f.admin("PUT", "/api/v1/users/admin", map[string]string{"role": "restore-only"}); r.status != 200 {
		t.Fatalf("demote admin: %d %s", r.status, r.body)
	}
	if r := f.do("DELETE", "/api/v1/users/op1", nil, opSess); r.status != 409 || r.errBody(t).Code != "last_administrator" {
		t.Fatalf("delete the last admin: %d %s", r.status, r.body)
	}
	if r := f.do("PUT", "/api/v1/users/admin", map[string]string{"role": "administrator"}, opSess); r.status != 200 {
		t.Fatalf("re-promote admin: %d %s", r.status, r.body)
	}
	// Deleting a user ends its sessions.
	if r := f.admin("DELETE", "/api/v1/users/op1", nil); r.status != 204 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	if r := f.do("GET", "/api/v1/auth/me", nil, opSess); r.status != 401 {
		t.Fatalf("deleted user's session: %d", r.status)
	}
	if r := f.do("POST", "/api/v1/auth/login", map[string]string{"username": "op1", "password": "op1-password"}); r.status != 401 {
		t.Fatalf("deleted user logs in: %d", r.status)
	}
	// A password change through the API works for login; the caller's session survives.
	adminSess, _ := f.login(t, "admin", testAdminPassword)
	if r := f.do("PUT", "/api/v1/users/admin", map[string]string{"password": "new-admin-password"}, adminSess); r.status != 200 {
		t.Fatalf("change password: %d %s", r.status, r.body)
	}
	if r := f.do("GET", "/api/v1/auth/me", nil, adminSess); r.status != 200 {
		t.Fatalf("own session after password change: %d", r.status)
	}
	if r := f.do("POST", "/api/v1/auth/login", map[string]string{"username": "admin", "password": "new-admin-password"}); r.status != 200 {
		t.Fatalf("login with the new password: %d", r.status)
	}
}

// Login of local users is rate limited like the administrator's.
func TestUsersLoginRateLimited(t *testing.T) {
	f := newFixture(t, nil)
	am, _ := auth.NewManager(auth.Config{Clock: f.clk, Store: mustAuthStore(t, f), UserBurst: 2, IPBurst: 100, Hash: auth.HashParams{Time: 1, MemoryKiB: 64, Threads: 1}})
	f.srv.cfg.Auth = am
	if _, err := am.CreateUser(context.Background(), "op1", "op1-password", auth.RoleOperator); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		f.do("POST", "/api/v1/auth/login", map[string]string{"username": "op1", "password": "wrong-one"})
	}
	r := f.do("POST", "/api/v1/auth/login", map[string]string{"username": "op1", "password": "op1-password"})
	if r.status != 429 || r.errBody(t).Code != "rate_limited" {
		t.Fatalf("third attempt: %d %s", r.status, r.body)
	}
}
