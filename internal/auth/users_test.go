package auth

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/internal/state/schema"
)

func ptr[T any](v T) *T { return &v }

func TestUsers(t *testing.T) {
	m, _ := newManager(t, func(c *Config) { c.UserBurst = 100; c.IPBurst = 100 })
	ctx := context.Background()
	if _, err := m.EnsureAdmin(ctx, "admin-password"); err != nil {
		t.Fatal(err)
	}
	// Create: validation, duplicates (without case), roles.
	create := []struct {
		name, pw string
		role     Role
		err      error
	}{
		{"alice", "alice-password", RoleOperator, nil},
		{"bob", "bob-password", RoleRestoreOnly, nil},
		{"ALICE", "alice-password", RoleOperator, ErrUserExists},
		{"", "whatever-pw", RoleOperator, ErrBadUser},
		{"vsphere.local\\carol", "whatever-pw", RoleOperator, ErrBadUser},
		{"-dash", "whatever-pw", RoleOperator, ErrBadUser},
		{"carol", "short", RoleOperator, ErrBadUser},
		{"carol", "carol-password", "root", ErrBadRole},
	}
	for _, tc := range create {
		_, err := m.CreateUser(ctx, tc.name, tc.pw, tc.role)
		if !errors.Is(err, tc.err) || (tc.err == nil && err != nil) {
			t.Fatalf("create %q: %v, want %v", tc.name, err, tc.err)
		}
	}
	us, err := m.Users(ctx)
	if err != nil || len(us) != 3 {
		t.Fatalf("users %+v %v", us, err)
	}
	for _, u := range us {
		if u.Hash != "" || u.Source != SourceLocal || u.Created.IsZero() {
			t.Fatalf("listed %+v", u)
		}
	}
	// Login works for each, the role comes from the user.
	s, err := m.Login(ctx, "ip", "alice", "alice-password")
	if err != nil || s.Role != RoleOperator || s.Source != SourceLocal {
		t.Fatalf("alice login %+v %v", s, err)
	}
	if _, err := m.Login(ctx, "ip", "bob", "alice-password"); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("wrong password: %v", err)
	}
	// Role change reaches the live session.
	if _, err := m.UpdateUser(ctx, "alice", UserChange{Role: ptr(RoleAdministrator)}, ""); err != nil {
		t.Fatal(err)
	}
	if p, err := m.Session(s.ID); err != nil || p.Role != RoleAdministrator {
		t.Fatalf("session after promotion: %+v %v", p, err)
	}
	// Last administrator: two admins now; demote one, then the other is last.
	if _, err := m.UpdateUser(ctx, "admin", UserChange{Role: ptr(RoleOperator)}, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := m.UpdateUser(ctx, "alice", UserChange{Role: ptr(RoleRestoreOnly)}, ""); !errors.Is(err, ErrLastAdministrator) {
		t.Fatalf("demote last admin: %v", err)
	}
	if err := m.DeleteUser(ctx, "alice"); !errors.Is(err, ErrLastAdministrator) {
		t.Fatalf("delete last admin: %v", err)
	}
	if u, _ := m.cfg.Store.User(ctx, "alice"); u.Role != RoleAdministrator {
		t.Fatalf("refused demotion changed the role: %+v", u)
	}
	// A new password ends the user's other sessions, not the kept one.
	s1, _ := m.Login(ctx, "ip", "bob", "bob-password")
	s2, _ := m.Login(ctx, "ip", "bob", "bob-password")
	if _, err := m.UpdateUser(ctx, "bob", UserChange{Password: ptr("bob-new-password")}, s2.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Session(s1.ID); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("old session after password change: %v", err)
	}
	if _, err := m.Session(s2.ID); err != nil {
		t.Fatalf("kept session: %v", err)
	}
	if _, err := m.Login(ctx, "ip", "bob", "bob-new-password"); err != nil {
		t.Fatal(err)
	}
	// Deleting a user ends its sessions and revokes its tokens.
	secret, _, err := m.CreateToken(ctx, Principal{User: "bob", Role: RoleRestoreOnly}, "bob-ci", RoleRestoreOnly, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.DeleteUser(ctx, "BOB"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Session(s2.ID); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("session of a deleted user: %v", err)
	}
	if _, err := m.AuthenticateToken(ctx, secret); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("token of a deleted user: %v", err)
	}
	if _, err := m.Login(ctx, "ip", "bob", "bob-new-password"); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("deleted user logs in: %v", err)
	}
	if err := m.DeleteUser(ctx, "bob"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
	// A demoted user's tokens are demoted with it.
	sec, _, err := m.CreateToken(ctx, Principal{User: "admin", Role: RoleOperator}, "op", RoleOperator, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.UpdateUser(ctx, "admin", UserChange{Role: ptr(RoleRestoreOnly)}, ""); err != nil {
		t.Fatal(err)
	}
	if p, err := m.AuthenticateToken(ctx, sec); err != nil || p.Role != RoleRestoreOnly {
		t.Fatalf("token of a demoted owner: %+v %v", p, err)
	}
}

// The state database of the single-administrator version (committed as
// testdata/single-admin-v1.db: buckets auth/admin-hash, tokens, token-hash;
// password "legacy-password") opens, upgraded to the current schema as
// state.Open does (schema.Upgrade), its administrator becomes user "admin"
// and logs in, and the old key is gone so deleting the user sticks.
func TestMigrateSingleAdmin(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	src, err := os.Open("testdata/single-admin-v1.db")
	if err != nil {
		t.Fatal(err)
	}
	dst, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	src.Close()
	dst.Close()
	open := func() (*Manager, *bolt.DB) {
		db, err := bolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Update(schema.Upgrade); err != nil {
			t.Fatal(err)
		}
		st, err := NewBoltStore(db)
		if err != nil {
			t.Fatal(err)
		}
		m, err := NewManager(Config{Clock: clock.Real(), Store: st, Hash: cheap})
		if err != nil {
			t.Fatal(err)
		}
		return m, db
	}
	ctx := context.Background()
	m, db := open()
	if gen, err := m.EnsureAdmin(ctx, "other-password"); gen != "" || err != nil {
		t.Fatalf("EnsureAdmin after migration: %q %v", gen, err)
	}
	s, err := m.Login(ctx, "ip", "admin", "legacy-password")
	if err != nil || s.Role != RoleAdministrator {
		t.Fatalf("migrated admin login: %+v %v", s, err)
	}
	us, _ := m.Users(ctx)
	if len(us) != 1 || us[0].Username != "admin" || us[0].Role != RoleAdministrator {
		t.Fatalf("users after migration %+v", us)
	}
	st, _ := NewBoltStore(db)
	if h, _ := st.AdminHash(ctx); h != "" {
		t.Fatal("the old admin-hash key survived the migration")
	}
	if _, err := m.CreateUser(ctx, "root2", "root2-password", RoleAdministrator); err != nil {
		t.Fatal(err)
	}
	if err := m.DeleteUser(ctx, "admin"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	m, db = open()
	defer db.Close()
	if _, err := m.Login(ctx, "ip", "admin", "legacy-password"); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("deleted admin came back after restart: %v", err)
	}
}

// A user record read back from the database never panics, whatever its bytes.
func FuzzDecodeUser(f *testing.F) {
	f.Add([]byte(`{"username":"admin","role":"administrator","source":"local","created":"2026-01-01T00:00:00Z","hash":"$argon2id$v=19$m=64,t=1,p=1$c2FsdHNhbHQ$a2V5a2V5a2V5a2V5a2V5a2V5"}`))
	f.Add([]byte(`{"username":1}`))
	f.Add([]byte(`nul`))
	f.Fuzz(func(t *testing.T, b []byte) {
		u, err := decodeUser(b)
		if err == nil && u.Hash != "" {
			_, _ = CheckPassword(u.Hash, "x")
		}
	})
}
