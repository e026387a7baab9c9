package auth

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// vCenter users get the role of the rule naming them, else the highest
// role of the rules naming their groups, else vcenter.role, else none: a
// vCenter user nobody mapped cannot log in, and is told why.
func TestVCenterRoleMapping(t *testing.T) {
	groups := map[string][]string{
		"VSPHERE.LOCAL\\alice": {"VSPHERE.LOCAL\\BackupAdmins"},
		"VSPHERE.LOCAL\\bob":   {"VSPHERE.LOCAL\\Operators", "EXAMPLE.COM\\BackupAdmins"},
		"VSPHERE.LOCAL\\carol": {"VSPHERE.LOCAL\\Everyone"},
		"VSPHERE.LOCAL\\dave":  {"OTHER\\Operators"},
	}
	login := func(asked *[]bool) func(ctx context.Context, user, pw string, wantGroups bool) (VCenterUser, error) {
		return func(ctx context.Context, user, pw string, wantGroups bool) (VCenterUser, error) {
			if pw != "vc-pass" {
				return VCenterUser{}, ErrBadCredentials
			}
			*asked = append(*asked, wantGroups)
			_, n := principalName(user)
			name := "VSPHERE.LOCAL\\" + n
			vu := VCenterUser{Name: name}
			if wantGroups {
				if n == "erin" {
					vu.GroupsErr = errors.New("SSO unreachable")
				}
				vu.Groups = groups[name]
			}
			return vu, nil
		}
	}
	rules := []VCenterRule{
		{User: "VSPHERE.LOCAL\\alice", Role: RoleOperator},      // wins over her administrator group
		{Group: "BackupAdmins", Role: RoleAdministrator},        // any domain
		{Group: "vsphere.local\\operators", Role: RoleOperator}, // this domain only
		{User: "frank@vsphere.local", Role: RoleRestoreOnly},
	}
	tests := []struct {
		name     string
		fallback Role
		rules    []VCenterRule
		user     string
		role     Role
		err      error
	}{
		{"user rule beats groups", "", rules, "alice", RoleOperator, nil},
		{"user rule, typed with domain", "", rules, "alice@VSPHERE.LOCAL", RoleOperator, nil},
		{"highest group", "", rules, "bob", RoleAdministrator, nil},
		{"user rule in the other notation", "", rules, "VSPHERE.LOCAL\\frank", RoleRestoreOnly, nil},
		{"unmapped, no default", "", rules, "carol", "", ErrNoRole},
		{"group of another domain", "", rules, "dave", "", ErrNoRole},
		{"unmapped, default", RoleRestoreOnly, rules, "carol", RoleRestoreOnly, nil},
		{"no rules, no default", "", nil, "carol", "", ErrNoRole},
		{"groups unreadable", RoleAdministrator, rules, "erin", "", ErrVCenterUnavailable},
		{"groups unreadable, user rule decides", "", []VCenterRule{{User: "erin", Role: RoleOperator}, {Group: "X", Role: RoleAdministrator}}, "erin", RoleOperator, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var asked []bool
			m, _ := newManager(t, func(c *Config) {
				c.VCenterLogin = login(&asked)
				c.VCenterRules = tc.rules
				c.VCenterRole = tc.fallback
			})
			s, err := m.Login(context.Background(), "10.0.0.1", tc.user, "vc-pass")
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err %v, want %v", err, tc.err)
				}
				if errors.Is(err, ErrNoRole) && !strings.Contains(err.Error(), "vcenter.roles") {
					t.Fatalf("the refusal does not say what to configure: %v", err)
				}
				return
			}
			if err != nil || s.Role != tc.role || s.Source != SourceVCenter || !strings.HasPrefix(s.User, "VSPHERE.LOCAL\\") {
				t.Fatalf("session %+v %v, want role %s", s, err, tc.role)
			}
			wantGroups := false
			for _, r := range tc.rules {
				wantGroups = wantGroups || r.Group != ""
			}
			if len(asked) != 1 || asked[0] != wantGroups {
				t.Fatalf("asked for groups %v, want %v", asked, wantGroups)
			}
		})
	}
	// Wrong vCenter passwords stay wrong passwords.
	m, _ := newManager(t, func(c *Config) { var a []bool; c.VCenterLogin = login(&a); c.VCenterRules = rules })
	if _, err := m.Login(context.Background(), "10.0.0.1", "alice", "nope"); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("wrong password: %v", err)
	}
}

// The old default gave every vCenter user the administrator role; now a
// manager without a vCenter role or rules lets none in.
func TestVCenterDefaultNoAccess(t *testing.T) {
	m, _ := newManager(t, func(c *Config) {
		c.VerifyVCenter = func(ctx context.Context, user, pw string) error { return nil }
	})
	if _, err := m.Login(context.Background(), "10.0.0.1", "vsphere.local\\anyone", "pw"); !errors.Is(err, ErrNoRole) {
		t.Fatalf("unmapped vCenter user: %v", err)
	}
	if _, err := NewManager(Config{Clock: m.cfg.Clock, Store: m.cfg.Store, VCenterRules: []VCenterRule{{User: "a", Group: "b", Role: RoleOperator}}}); err == nil {
		t.Fatal("a rule naming a user and a group was accepted")
	}
	if _, err := NewManager(Config{Clock: m.cfg.Clock, Store: m.cfg.Store, VCenterRole: "god"}); !errors.Is(err, ErrBadRole) {
		t.Fatalf("bad vCenter role: %v", err)
	}
}

func TestPrincipalMatches(t *testing.T) {
	tests := []struct {
		rule, who string
		ok        bool
	}{
		{"VSPHERE.LOCAL\\alice", "alice@vsphere.local", true},
		{"alice", "EXAMPLE\\Alice", true},
		{"VSPHERE.LOCAL\\alice", "EXAMPLE\\alice", false},
		{"VSPHERE.LOCAL\\alice", "alice", false},
		{"alice", "alicia", false},
		{"", "", false},
		{"a@b@c", "a@b@C", true},
	}
	for _, tc := range tests {
		if got := principalMatches(tc.rule, tc.who); got != tc.ok {
			t.Errorf("%q ~ %q = %v", tc.rule, tc.who, got)
		}
	}
}
