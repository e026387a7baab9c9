package auth

import (
	"context"
	"errors"
	"reflect"
	"testing"
)

func TestScopeNormalize(t *testing.T) {
	got, err := Scope{Folders: []string{" /DC0/vm/finance/ ", "/DC0/vm/finance"}, VMs: []string{"fin-*"}, Tags: []string{"env:prod"}, Repositories: []string{"main"}}.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	want := Scope{Folders: []string{"/DC0/vm/finance"}, VMs: []string{"fin-*"}, Tags: []string{"env:prod"}, Repositories: []string{"main"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("normalized %+v, want %+v", got, want)
	}
	for _, bad := range []Scope{
		{Folders: []string{"DC0/vm"}},
		{Folders: []string{"/"}},
		{Folders: []string{"/DC0//vm"}},
		{VMs: []string{"fin-["}},
		{Tags: []string{""}},
		{Repositories: []string{"a\x00b"}},
		{VMs: make([]string, MaxScopeEntries+1)},
	} {
		if _, err := bad.Normalize(); !errors.Is(err, ErrBadScope) {
			t.Errorf("normalize %+v: %v, want ErrBadScope", bad, err)
		}
	}
	if s, err := (Scope{}).Normalize(); err != nil || !s.Empty() {
		t.Fatalf("empty scope normalizes to %+v %v", s, err)
	}
}

func TestScopeAllows(t *testing.T) {
	inFinance := ScopeVM{Names: []string{"fin-db"}, InInventory: true, Folder: "/DC0/vm/finance/db", Tags: []string{"urn:t1", "prod", "env:prod"}}
	elsewhere := ScopeVM{Names: []string{"web01"}, InInventory: true, Folder: "/DC0/vm/web", Tags: []string{"urn:t2", "dev", "env:dev"}}
	// Gone from vCenter: only the name the point recorded is known.
	goneFin := ScopeVM{Names: []string{"fin-old"}}
	goneOther := ScopeVM{Names: []string{"old"}}
	cases := []struct {
		name  string
		scope Scope
		repo  string
		vm    ScopeVM
		want  bool
	}{
		{"empty scope allows all", Scope{}, "any", elsewhere, true},
		{"folder prefix", Scope{Folders: []string{"/DC0/vm/finance"}}, "r", inFinance, true},
		{"folder is not a string prefix", Scope{Folders: []string{"/DC0/vm/fin"}}, "r", inFinance, false},
		{"folder outside", Scope{Folders: []string{"/DC0/vm/finance"}}, "r", elsewhere, false},
		{"folder, VM gone", Scope{Folders: []string{"/DC0/vm/finance"}}, "r", goneFin, false},
		{"tag category:name", Scope{Tags: []string{"env:prod"}}, "r", inFinance, true},
		{"tag name", Scope{Tags: []string{"prod"}}, "r", inFinance, true},
		{"tag id", Scope{Tags: []string{"urn:t1"}}, "r", inFinance, true},
		{"tag outside", Scope{Tags: []string{"env:prod"}}, "r", elsewhere, false},
		{"tag, VM gone", Scope{Tags: []string{"prod"}}, "r", goneFin, false},
		{"name pattern", Scope{VMs: []string{"fin-*"}}, "r", inFinance, true},
		{"name pattern, VM gone: recorded name", Scope{VMs: []string{"fin-*"}}, "r", goneFin, true},
		{"name pattern outside, VM gone", Scope{VMs: []string{"fin-*"}}, "r", goneOther, false},
		{"criteria are a union", Scope{VMs: []string{"nothing"}, Folders: []string{"/DC0/vm/web"}}, "r", elsewhere, true},
		{"repository in", Scope{Repositories: []string{"r"}}, "r", elsewhere, true},
		{"repository out", Scope{Repositories: []string{"r"}}, "s", elsewhere, false},
		{"repository and VM both needed", Scope{Repositories: []string{"r"}, VMs: []string{"fin-*"}}, "s", inFinance, false},
	}
	for _, tc := range cases {
		if got := tc.scope.Allows(tc.repo, tc.vm); got != tc.want {
			t.Errorf("%s: allows %v, want %v", tc.name, got, tc.want)
		}
	}
	// A principal's scopes must all allow (a token's and its owner's).
	p := Principal{Scopes: []Scope{{VMs: []string{"fin-*"}}, {Repositories: []string{"r"}}}}
	if !p.Allows("r", inFinance) || p.Allows("s", inFinance) || p.Allows("r", elsewhere) || !p.Scoped() {
		t.Fatal("principal scopes do not intersect")
	}
	if (Principal{}).Scoped() || !(Principal{}).Allows("x", goneOther) {
		t.Fatal("an unscoped principal is limited")
	}
}

func TestScopedUsersAndTokens(t *testing.T) {
	m, _ := newManager(t, func(c *Config) { c.UserBurst = 100; c.IPBurst = 100 })
	ctx := context.Background()
	if _, err := m.EnsureAdmin(ctx, "admin-password"); err != nil {
		t.Fatal(err)
	}
	fin := Scope{VMs: []string{"fin-*"}}
	if _, err := m.CreateScopedUser(ctx, "boss", "boss-password", RoleAdministrator, fin); !errors.Is(err, ErrBadScope) {
		t.Fatalf("scoped administrator: %v", err)
	}
	u, err := m.CreateScopedUser(ctx, "fin", "fin-password", RoleRestoreOnly, Scope{VMs: []string{" fin-* "}})
	if err != nil || !reflect.DeepEqual(u.Scope, fin) {
		t.Fatalf("create scoped %+v %v", u, err)
	}
	// Stored: the record keeps it.
	if got, err := m.cfg.Store.User(ctx, "fin"); err != nil || !reflect.DeepEqual(got.Scope, fin) {
		t.Fatalf("stored %+v %v", got, err)
	}
	s, err := m.Login(ctx, "ip", "fin", "fin-password")
	if err != nil {
		t.Fatal(err)
	}
	p, err := m.Session(s.ID)
	if err != nil || !reflect.DeepEqual(p.Scopes, []Scope{fin}) {
		t.Fatalf("session principal %+v %v", p, err)
	}
	// Promoting a scoped user to administrator is refused; with the scope
	// removed in the same change it is allowed.
	if _, err := m.UpdateUser(ctx, "fin", UserChange{Role: ptr(RoleAdministrator)}, ""); !errors.Is(err, ErrBadScope) {
		t.Fatalf("promote scoped: %v", err)
	}
	// A new scope reaches the live session at once.
	repo := Scope{Repositories: []string{"main"}}
	if _, err := m.UpdateUser(ctx, "fin", UserChange{Scope: &repo}, ""); err != nil {
		t.Fatal(err)
	}
	if p, _ := m.Session(s.ID); !reflect.DeepEqual(p.Scopes, []Scope{repo}) {
		t.Fatalf("session after the change %+v", p.Scopes)
	}
	if _, err := m.UpdateUser(ctx, "fin", UserChange{Scope: &Scope{}}, ""); err != nil {
		t.Fatal(err)
	}
	if p, _ := m.Session(s.ID); p.Scoped() {
		t.Fatalf("session still scoped %+v", p.Scopes)
	}

	// Tokens: their own scope, plus their owner's.
	admin := Principal{User: "admin", Role: RoleAdministrator}
	if _, _, err := m.CreateScopedToken(ctx, admin, "x", RoleAdministrator, 0, fin); !errors.Is(err, ErrBadScope) {
		t.Fatalf("scoped administrator token: %v", err)
	}
	sec, tok, err := m.CreateScopedToken(ctx, admin, "ci", RoleRestoreOnly, 0, fin)
	if err != nil || !reflect.DeepEqual(tok.Scope, fin) {
		t.Fatal(tok, err)
	}
	tp, err := m.AuthenticateToken(ctx, sec)
	if err != nil || !reflect.DeepEqual(tp.Scopes, []Scope{fin}) {
		t.Fatalf("token principal %+v %v", tp, err)
	}
	if _, err := m.SetTokenScope(ctx, tok.ID, repo); err != nil {
		t.Fatal(err)
	}
	if tp, _ := m.AuthenticateToken(ctx, sec); !reflect.DeepEqual(tp.Scopes, []Scope{repo}) {
		t.Fatalf("token after SetTokenScope %+v", tp.Scopes)
	}
	if _, err := m.SetTokenScope(ctx, "nope", repo); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown token: %v", err)
	}
	// A token of a scoped owner carries the owner's scope as well.
	if _, err := m.UpdateUser(ctx, "fin", UserChange{Scope: &fin}, ""); err != nil {
		t.Fatal(err)
	}
	sec2, _, err := m.CreateToken(ctx, Principal{User: "fin", Role: RoleRestoreOnly}, "fin-ci", RoleRestoreOnly, 0)
	if err != nil {
		t.Fatal(err)
	}
	if tp, _ := m.AuthenticateToken(ctx, sec2); !reflect.DeepEqual(tp.Scopes, []Scope{fin}) {
		t.Fatalf("token of a scoped owner %+v", tp.Scopes)
	}
}

// A vCenter user's scope comes from the stored record of its name; its
// live sessions take a new scope at once; rules that make it an
// administrator while its record is scoped refuse its sign-in.
func TestScopedVCenterUser(t *testing.T) {
	role := RoleRestoreOnly
	m, _ := newManager(t, func(c *Config) {
		c.VCenterLogin = func(ctx context.Context, user, password string, wantGroups bool) (VCenterUser, error) {
			if password == "vc-password" {
				return VCenterUser{Name: user}, nil
			}
			return VCenterUser{}, ErrBadCredentials
		}
		c.VCenterRules = []VCenterRule{{User: "VSPHERE.LOCAL\\fin", Role: RoleRestoreOnly}, {User: "VSPHERE.LOCAL\\boss", Role: RoleAdministrator}}
		c.VCenterRole = role
	})
	ctx := context.Background()
	fin := Scope{VMs: []string{"fin-*"}}
	if _, err := m.ImportScopedUser(ctx, "VSPHERE.LOCAL\\fin", RoleRestoreOnly, SourceVCenter, fin); err != nil {
		t.Fatal(err)
	}
	s, err := m.Login(ctx, "ip", "VSPHERE.LOCAL\\fin", "vc-password")
	if err != nil || !reflect.DeepEqual(s.Scope, fin) {
		t.Fatalf("vCenter login %+v %v", s, err)
	}
	repo := Scope{Repositories: []string{"main"}}
	if _, err := m.UpdateUser(ctx, "VSPHERE.LOCAL\\fin", UserChange{Scope: &repo}, ""); err != nil {
		t.Fatal(err)
	}
	if p, _ := m.Session(s.ID); !reflect.DeepEqual(p.Scopes, []Scope{repo}) {
		t.Fatalf("vCenter session after the change %+v", p.Scopes)
	}
	// Unscoped without a record.
	if s, err := m.Login(ctx, "ip", "VSPHERE.LOCAL\\other", "vc-password"); err != nil || !s.Scope.Empty() {
		t.Fatalf("vCenter user without a record %+v %v", s, err)
	}
	if _, err := m.ImportScopedUser(ctx, "VSPHERE.LOCAL\\boss", RoleRestoreOnly, SourceVCenter, fin); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Login(ctx, "ip", "VSPHERE.LOCAL\\boss", "vc-password"); !errors.Is(err, ErrForbidden) {
		t.Fatalf("scoped record, administrator by the rules: %v", err)
	}
}

func TestAllowsFolder(t *testing.T) {
	p := Principal{Scopes: []Scope{{Folders: []string{"/DC0/vm/finance"}}, {VMs: []string{"x"}}}}
	for path, want := range map[string]bool{"/DC0/vm/finance": true, "/DC0/vm/finance/db": true, "/DC0/vm/fin": false, "": false, "/DC0/vm": false} {
		if got := p.AllowsFolder(path); got != want {
			t.Errorf("AllowsFolder(%q) = %v, want %v", path, got, want)
		}
	}
	if !(Principal{Scopes: []Scope{{VMs: []string{"x"}}}}).AllowsFolder("") || !(Principal{}).AllowsFolder("") {
		t.Error("a scope without folders limits where VMs go")
	}
}
