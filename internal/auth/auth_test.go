package auth

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/vmvault/vmvault/internal/clock"
)

var cheap = HashParams{Time: 1, MemoryKiB: 64, Threads: 1}

func newManager(t *testing.T, mod func(*Config)) (*Manager, *clock.Fake) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "web.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	st, err := NewBoltStore(db)
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := Config{Clock: clk, Store: st, Hash: cheap}
	if mod != nil {
		mod(&cfg)
	}
	m, err := NewManager(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m, clk
}

func TestPasswordHash(t *testing.T) {
	h, err := HashPassword("correct horse", cheap)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := CheckPassword(h, "correct horse"); !ok || err != nil {
		t.Fatalf("right password: %v %v", ok, err)
	}
	if ok, _ := CheckPassword(h, "wrong"); ok {
		t.Fatal("wrong password accepted")
	}
	for _, bad := range []string{"", "$argon2id$", "$argon2id$v=19$m=99999999,t=1,p=1$AAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAA", "$bcrypt$v=19$m=64,t=1,p=1$c2FsdHNhbHQ$a2V5a2V5a2V5a2V5a2V5a2V5"} {
		if _, err := CheckPassword(bad, "x"); err == nil {
			t.Errorf("malformed hash %q accepted", bad)
		}
	}
}

func FuzzCheckPassword(f *testing.F) {
	h, _ := HashPassword("pw", cheap)
	f.Add(h, "pw")
	f.Add("$argon2id$v=19$m=64,t=1,p=1$$", "")
	f.Fuzz(func(t *testing.T, hash, pw string) {
		_, _ = CheckPassword(hash, pw) // must not panic or allocate unbounded memory
	})
}

func TestLoginAdminAndVCenter(t *testing.T) {
	m, _ := newManager(t, func(c *Config) {
		c.VerifyVCenter = func(ctx context.Context, user, pw string) error {
			switch {
			case user == "vsphere.local\\bob" && pw == "vc-pass":
				return nil
			case user == "down":
				return errors.New("vcenter unreachable")
			}
			return fmt.Errorf("vcenter: %w", ErrBadCredentials)
		}
		c.VCenterRole = RoleOperator
		c.UserBurst = 100
		c.IPBurst = 100
	})
	ctx := context.Background()
	gen, err := m.EnsureAdmin(ctx, "")
	if err != nil || len(gen) < 16 {
		t.Fatalf("generated %q %v", gen, err)
	}
	if again, _ := m.EnsureAdmin(ctx, "other-password"); again != "" {
		t.Fatal("EnsureAdmin must not replace an existing password")
	}
	tests := []struct {
		user, pw string
		role     Role
		err      error
	}{
		{"admin", gen, RoleAdministrator, nil},
		{"admin", "nope-nope", "", ErrBadCredentials},
		{"vsphere.local\\bob", "vc-pass", RoleOperator, nil},
		{"vsphere.local\\bob", "bad", "", ErrBadCredentials},
		{"", "", "", ErrBadCredentials},
	}
	for _, tc := range tests {
		s, err := m.Login(ctx, "10.0.0.1", tc.user, tc.pw)
		if !errors.Is(err, tc.err) || (tc.err == nil && err != nil) {
			t.Fatalf("%s: err %v want %v", tc.user, err, tc.err)
		}
		if tc.err == nil {
			p, err := m.Session(s.ID)
			if err != nil || p.Role != tc.role || p.CSRF == "" {
				t.Fatalf("%s: session %+v %v", tc.user, p, err)
			}
		}
	}
	if _, err := m.Login(ctx, "10.0.0.1", "down", "x"); !errors.Is(err, ErrVCenterUnavailable) || errors.Is(err, ErrBadCredentials) {
		t.Fatalf("vCenter down must be a distinct error: %v", err)
	}
}

func TestTokens(t *testing.T) {
	m, clk := newManager(t, nil)
	ctx := context.Background()
	admin := Principal{User: "admin", Role: RoleAdministrator}
	secret, tok, err := m.CreateToken(ctx, admin, "ci", RoleRestoreOnly, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	p, err := m.AuthenticateToken(ctx, secret)
	if err != nil || p.Role != RoleRestoreOnly || p.TokenID != tok.ID {
		t.Fatalf("auth: %+v %v", p, err)
	}
	if _, err := m.AuthenticateToken(ctx, secret+"x"); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("wrong secret: %v", err)
	}
	// Stored hashed only.
	all, _ := m.Tokens(ctx)
	if len(all) != 1 || all[0].Hash == secret || all[0].Hash == "" {
		t.Fatalf("stored %+v", all)
	}
	// No escalation.
	if _, _, err := m.CreateToken(ctx, p, "x", RoleAdministrator, 0); !errors.Is(err, ErrForbidden) {
		t.Fatalf("escalation: %v", err)
	}
	if _, _, err := m.CreateToken(ctx, admin, "x", "root", 0); !errors.Is(err, ErrBadRole) {
		t.Fatalf("bad role: %v", err)
	}
	clk.Advance(time.Hour)
	if _, err := m.AuthenticateToken(ctx, secret); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("expired token: %v", err)
	}
	if err := m.DeleteToken(ctx, tok.ID); err != nil {
		t.Fatal(err)
	}
	if err := m.DeleteToken(ctx, tok.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
}

func TestSessionExpiry(t *testing.T) {
	m, clk := newManager(t, func(c *Config) { c.SessionTTL = time.Minute })
	ctx := context.Background()
	_, _ = m.EnsureAdmin(ctx, "a-good-password")
	s, err := m.Login(ctx, "ip", "admin", "a-good-password")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Session(s.ID); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	if _, err := m.Session(s.ID); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("expired: %v", err)
	}
	s2, _ := m.Login(ctx, "ip", "admin", "a-good-password")
	m.Logout(s2.ID)
	if _, err := m.Session(s2.ID); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("after logout: %v", err)
	}
}

func TestRoles(t *testing.T) {
	tests := []struct {
		r, need Role
		ok      bool
	}{
		{RoleAdministrator, RoleOperator, true},
		{RoleOperator, RoleAdministrator, false},
		{RoleRestoreOnly, RoleRestoreOnly, true},
		{RoleRestoreOnly, RoleOperator, false},
		{"", RoleRestoreOnly, false},
	}
	for _, tc := range tests {
		if got := tc.r.Allows(tc.need); got != tc.ok {
			t.Errorf("%q allows %q = %v", tc.r, tc.need, got)
		}
	}
}

// A lifetime past MaxTokenTTL (or negative) is refused, never wrapped
// round into a token that does not expire.
func TestTokenTTLBound(t *testing.T) {
	m, clk := newManager(t, nil)
	ctx := context.Background()
	admin := Principal{User: "admin", Role: RoleAdministrator}
	for _, ttl := range []time.Duration{-time.Second, MaxTokenTTL + time.Nanosecond, time.Duration(1<<63 - 1)} {
		if _, _, err := m.CreateToken(ctx, admin, "x", RoleOperator, ttl); !errors.Is(err, ErrBadTTL) {
			t.Errorf("ttl %v: %v, want ErrBadTTL", ttl, err)
		}
	}
	_, tok, err := m.CreateToken(ctx, admin, "x", RoleOperator, MaxTokenTTL)
	if err != nil || !tok.Expires.Equal(clk.Now().Add(MaxTokenTTL)) {
		t.Fatalf("10 years: %+v %v", tok, err)
	}
	if all, _ := m.Tokens(ctx); len(all) != 1 {
		t.Fatalf("refused lifetimes stored tokens: %d", len(all))
	}
}
