package web

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/internal/auth"
)

// Users an import recreated without a password, through the API: GET
// /users says so (passwordNotSet), their login is a 401 whatever is typed,
// the same answer an unknown name gets, with the hint that an administrator
// must set imported users' passwords; a role change keeps the state, PUT
// with a password ends it (the user then signs in with its role), and the
// hint goes with the last such user. A vCenter user's password cannot be
// set here (422).
func TestUsersImportedWithoutPassword(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	am := f.srv.cfg.Auth
	if _, err := am.ImportUser(ctx, "alice", auth.RoleOperator, auth.SourceLocal); err != nil {
		t.Fatal(err)
	}
	if _, err := am.ImportUser(ctx, `VSPHERE.LOCAL\ops`, auth.RoleRestoreOnly, auth.SourceVCenter); err != nil {
		t.Fatal(err)
	}
	notSet := func() map[string]bool {
		t.Helper()
		var us []map[string]any
		f.admin("GET", "/api/v1/users", nil).json(t, &us)
		out := map[string]bool{}
		for _, u := range us {
			b, ok := u["passwordNotSet"].(bool)
			if !ok {
				t.Fatalf("user without passwordNotSet: %v", u)
			}
			out[u["username"].(string)] = b
		}
		return out
	}
	if got := notSet(); len(got) != 3 || !got["alice"] || got["admin"] || got[`VSPHERE.LOCAL\ops`] {
		t.Fatalf("users: %v", got)
	}
	login := func(user, pw string) resp {
		t.Helper()
		return f.do("POST", "/api/v1/auth/login", map[string]string{"username": user, "password": pw})
	}
	unknown := login("nobody", "some-password")
	if unknown.status != 401 || unknown.errBody(t).Code != "bad_credentials" || !strings.Contains(unknown.errBody(t).Message, "until an administrator sets their password") {
		t.Fatalf("unknown name while a user waits: %d %s", unknown.status, unknown.body)
	}
	for _, pw := range []string{"some-password", "", "x"} {
		r := login("alice", pw)
		if r.status != 401 || !bytes.Equal(r.body, unknown.body) {
			t.Fatalf("alice with %q: %d %s (an unknown name: %s)", pw, r.status, r.body, unknown.body)
		}
	}
	if r := f.admin("PUT", `/api/v1/users/VSPHERE.LOCAL%5Cops`, map[string]any{"password": "a-local-password"}); r.status != 422 || !strings.Contains(string(r.body), "vCenter checks its password") {
		t.Fatalf("password of a vCenter user: %d %s", r.status, r.body)
	}
	if r := f.admin("PUT", "/api/v1/users/alice", map[string]any{"role": "restore-only"}); r.status != 200 || !strings.Contains(string(r.body), `"passwordNotSet":true`) {
		t.Fatalf("role of alice: %d %s", r.status, r.body)
	}
	if r := f.admin("PUT", "/api/v1/users/alice", map[string]any{"password": "alice-password-2", "role": "operator"}); r.status != 200 || !strings.Contains(string(r.body), `"passwordNotSet":false`) {
		t.Fatalf("password of alice: %d %s", r.status, r.body)
	}
	if got := notSet(); got["alice"] {
		t.Fatalf("alice after her password was set: %v", got)
	}
	_, lr := f.login(t, "alice", "alice-password-2")
	if lr.Role != auth.RoleOperator || lr.User != "alice" {
		t.Fatalf("alice's login: %+v", lr)
	}
	if r := login("nobody", "some-password"); r.status != 401 || strings.Contains(string(r.body), "sets their password") {
		t.Fatalf("the hint once no user waits: %d %s", r.status, r.body)
	}
}
