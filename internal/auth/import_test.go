package auth

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// A user recreated from a saved configuration has its role and no
// password: no password typed (none, the old one, any) signs it in; failed
// attempts for it count against the limits like wrong passwords; every
// failed login of the appliance (not only its) says that an administrator
// must set imported users' passwords, so the hint names nobody; it does not
// count as an administrator who could take over; once an administrator
// sets its password it signs in with its role, and the hint goes away with
// the last such user.
func TestImportedUserPasswordNotSet(t *testing.T) {
	m, _ := newManager(t, func(c *Config) { c.UserBurst = 4; c.IPBurst = 100 })
	ctx := context.Background()
	if _, err := m.EnsureAdmin(ctx, "admin-password"); err != nil {
		t.Fatal(err)
	}
	u, err := m.ImportUser(ctx, "alice", RoleOperator, SourceLocal)
	if err != nil || !u.PasswordNotSet || u.Hash != "" || u.Role != RoleOperator || u.Source != SourceLocal || u.Created.IsZero() {
		t.Fatalf("import alice: %+v %v", u, err)
	}
	stored, err := m.cfg.Store.User(ctx, "ALICE")
	if err != nil || !stored.PasswordNotSet || stored.Hash != "" {
		t.Fatalf("stored alice: %+v %v", stored, err)
	}
	us, _ := m.Users(ctx)
	listed := map[string]User{}
	for _, u := range us {
		listed[u.Username] = u
	}
	if !listed["alice"].PasswordNotSet || listed["admin"].PasswordNotSet {
		t.Fatalf("listed %+v", us)
	}

	// Whatever is typed, alice does not sign in; each attempt is a failure.
	for i, pw := range []string{"", "alice-password-1", "x", strings.Repeat("a", 1024)} {
		_, err := m.Login(ctx, "192.0.2.1", "alice", pw)
		if !errors.Is(err, ErrBadCredentials) || !errors.Is(err, ErrPasswordNotSet) {
			t.Fatalf("login %d of alice without a password: %v", i, err)
		}
	}
	if _, err := m.Login(ctx, "192.0.2.1", "alice", "x"); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("the fifth failure from one address: %v, want rate limited", err)
	}
	// The same answer for a name that does not exist and for a wrong
	// password: the hint tells nobody which names exist.
	_, errAlice := m.Login(ctx, "192.0.2.2", "alice", "guess-1")
	_, errNobody := m.Login(ctx, "192.0.2.2", "nobody", "guess-1")
	_, errAdmin := m.Login(ctx, "192.0.2.2", "admin", "guess-1")
	if errAlice == nil || errNobody == nil || errAdmin == nil || errAlice.Error() != errNobody.Error() || errAlice.Error() != errAdmin.Error() {
		t.Fatalf("answers differ: alice %v, nobody %v, admin %v", errAlice, errNobody, errAdmin)
	}

	// Import is idempotent: an existing name (without case) is left alone.
	if _, err := m.ImportUser(ctx, "ADMIN", RoleRestoreOnly, SourceLocal); !errors.Is(err, ErrUserExists) {
		t.Fatalf("import over admin: %v", err)
	}
	if s, err := m.Login(ctx, "192.0.2.3", "admin", "admin-password"); err != nil || s.Role != RoleAdministrator {
		t.Fatalf("admin after an import of its name: %+v %v", s, err)
	}
	if _, err := m.ImportUser(ctx, "alice", RoleAdministrator, SourceLocal); !errors.Is(err, ErrUserExists) {
		t.Fatalf("import alice twice: %v", err)
	}
	// Bad names, roles and sources are refused and store nothing.
	for _, bad := range []struct {
		name, source string
		role         Role
		err          error
	}{
		{"ca/rol", SourceLocal, RoleOperator, ErrBadUser},
		{" carol", SourceLocal, RoleOperator, ErrBadUser},
		{strings.Repeat("c", 129), SourceLocal, RoleOperator, ErrBadUser},
		{"carol", SourceLocal, "root", ErrBadRole},
		{"carol", "ldap", RoleOperator, ErrBadUser},
		{"", SourceVCenter, RoleOperator, ErrBadUser},
		{"VSPHERE.LOCAL\\ca\nrol", SourceVCenter, RoleOperator, ErrBadUser},
	} {
		if _, err := m.ImportUser(ctx, bad.name, bad.role, bad.source); !errors.Is(err, bad.err) {
			t.Fatalf("import %q (%s, %s): %v, want %v", bad.name, bad.role, bad.source, err, bad.err)
		}
	}
	if us, _ := m.Users(ctx); len(us) != 2 {
		t.Fatalf("refused imports stored users: %+v", us)
	}
	// A name the saved appliance had that CreateUser would refuse (its
	// configured administrator's, say) is recreated as it was.
	if u, err := m.ImportUser(ctx, "Jean Dupont", RoleRestoreOnly, SourceLocal); err != nil || !u.PasswordNotSet {
		t.Fatalf("import a configured administrator's name: %+v %v", u, err)
	}
	if err := m.DeleteUser(ctx, "jean dupont"); err != nil {
		t.Fatal(err)
	}

	// An imported administrator without a password cannot take over: the
	// only one who can sign in stays the last administrator.
	if _, err := m.ImportUser(ctx, "bob", RoleAdministrator, SourceLocal); err != nil {
		t.Fatal(err)
	}
	if _, err := m.UpdateUser(ctx, "admin", UserChange{Role: ptr(RoleOperator)}, ""); !errors.Is(err, ErrLastAdministrator) {
		t.Fatalf("demote admin while bob has no password: %v", err)
	}
	if err := m.DeleteUser(ctx, "admin"); !errors.Is(err, ErrLastAdministrator) {
		t.Fatalf("delete admin while bob has no password: %v", err)
	}

	// A role change keeps the state; a password ends it.
	if u, err := m.UpdateUser(ctx, "alice", UserChange{Role: ptr(RoleRestoreOnly)}, ""); err != nil || !u.PasswordNotSet {
		t.Fatalf("role change of alice: %+v %v", u, err)
	}
	if _, err := m.Login(ctx, "192.0.2.4", "alice", "alice-password-1"); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("alice after a role change: %v", err)
	}
	if u, err := m.UpdateUser(ctx, "alice", UserChange{Role: ptr(RoleOperator), Password: ptr("alice-new-password")}, ""); err != nil || u.PasswordNotSet || u.Hash != "" {
		t.Fatalf("set alice's password: %+v %v", u, err)
	}
	s, err := m.Login(ctx, "192.0.2.4", "alice", "alice-new-password")
	if err != nil || s.Role != RoleOperator || s.User != "alice" || s.Source != SourceLocal {
		t.Fatalf("alice with her password: %+v %v", s, err)
	}
	if _, err := m.Login(ctx, "192.0.2.4", "alice", ""); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("alice with an empty password: %v", err)
	}
	// bob still waits: the hint stays until the last one has a password.
	if _, err := m.Login(ctx, "192.0.2.5", "nobody", "guess"); !errors.Is(err, ErrPasswordNotSet) {
		t.Fatalf("hint while bob waits: %v", err)
	}
	if _, err := m.UpdateUser(ctx, "bob", UserChange{Password: ptr("bob-password-1")}, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Login(ctx, "192.0.2.5", "nobody", "guess"); !errors.Is(err, ErrBadCredentials) || errors.Is(err, ErrPasswordNotSet) {
		t.Fatalf("no user waits, the hint stays: %v", err)
	}
	// bob can sign in now, so admin may step down.
	if _, err := m.UpdateUser(ctx, "admin", UserChange{Role: ptr(RoleOperator)}, ""); err != nil {
		t.Fatalf("demote admin once bob has a password: %v", err)
	}
}

// No stored form of "no password" is accepted by a login: the flag with a
// real hash (a record edited by hand), a local record with an empty hash
// and no flag, a record of an unknown source. They are wrong credentials
// (401), never an internal error that gives the attempt back.
func TestLoginRefusesUserWithoutPassword(t *testing.T) {
	m, _ := newManager(t, func(c *Config) { c.UserBurst = 100; c.IPBurst = 100 })
	ctx := context.Background()
	h, err := HashPassword("real-password", cheap)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []User{
		{Username: "flagged", Role: RoleAdministrator, Source: SourceLocal, PasswordNotSet: true, Hash: h},
		{Username: "nohash", Role: RoleAdministrator, Source: SourceLocal},
		{Username: "nosource", Role: RoleAdministrator},
		{Username: "ldap", Role: RoleAdministrator, Source: "ldap", Hash: h},
	} {
		if err := m.cfg.Store.PutUser(ctx, u); err != nil {
			t.Fatal(err)
		}
		for _, pw := range []string{"", "real-password", "x"} {
			_, err := m.Login(ctx, "ip", u.Username, pw)
			if !errors.Is(err, ErrBadCredentials) {
				t.Fatalf("%s with %q: %v, want bad credentials", u.Username, pw, err)
			}
		}
	}
}

// A vCenter user recreated by an import is kept as it was (no password of
// the appliance's: none can be set) and signs in through vCenter, with the
// role the rules give; the stored record does not shadow vCenter (before,
// its empty hash made every login of that name an internal error).
func TestImportedVCenterUser(t *testing.T) {
	asked := 0
	m, _ := newManager(t, func(c *Config) {
		c.VCenterLogin = func(ctx context.Context, user, password string, wantGroups bool) (VCenterUser, error) {
			asked++
			if user == "VSPHERE.LOCAL\\ops" && password == "vc-password" {
				return VCenterUser{Name: "VSPHERE.LOCAL\\ops"}, nil
			}
			return VCenterUser{}, ErrBadCredentials
		}
		c.VCenterRules = []VCenterRule{{User: "VSPHERE.LOCAL\\ops", Role: RoleRestoreOnly}}
	})
	ctx := context.Background()
	u, err := m.ImportUser(ctx, "VSPHERE.LOCAL\\ops", RoleRestoreOnly, SourceVCenter)
	if err != nil || u.PasswordNotSet || u.Source != SourceVCenter {
		t.Fatalf("import: %+v %v", u, err)
	}
	if _, err := m.UpdateUser(ctx, "vsphere.local\\ops", UserChange{Password: ptr("local-password")}, ""); !errors.Is(err, ErrBadUser) {
		t.Fatalf("a password for a vCenter user: %v", err)
	}
	if _, err := m.Login(ctx, "ip", "VSPHERE.LOCAL\\ops", "wrong"); !errors.Is(err, ErrBadCredentials) || asked != 1 {
		t.Fatalf("wrong vCenter password: %v (vCenter asked %d times)", err, asked)
	}
	s, err := m.Login(ctx, "ip", "VSPHERE.LOCAL\\ops", "vc-password")
	if err != nil || s.Source != SourceVCenter || s.Role != RoleRestoreOnly {
		t.Fatalf("vCenter login: %+v %v", s, err)
	}
	// No local user waits for a password: no hint.
	if _, err := m.Login(ctx, "ip", "nobody", "x"); errors.Is(err, ErrPasswordNotSet) {
		t.Fatalf("hint without a local user waiting: %v", err)
	}
}
