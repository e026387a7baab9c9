package daemon

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/internal/clock"
	"github.com/vmvault/vmvault/vsphere"
	"github.com/vmvault/vmvault/vsphere/vspheretest"
)

// managerFromConfig builds the auth manager the way the daemon does, from
// the YAML vcenter section.
func managerFromConfig(t *testing.T, lab vspheretest.SSOLab, vcenterYAML string) *auth.Manager {
	t.Helper()
	cfg, err := ParseConfig([]byte(minimalConfig + fmt.Sprintf("vcenter: {url: %q, username: svc-vmvault, password_env: VC_PASS, thumbprint: %q, %s}\n", lab.URL.String(), lab.Thumbprint, vcenterYAML)))
	if err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	st, err := auth.NewBoltStore(db)
	if err != nil {
		t.Fatal(err)
	}
	acfg := auth.Config{Clock: clock.Real(), Store: st, Hash: auth.HashParams{Time: 1, MemoryKiB: 64, Threads: 1}, IPBurst: 1000, UserBurst: 1000}
	vc := cfg.VCenter
	vcenterAuth(&acfg, vc, vsphere.Config{URL: vc.URL, Username: vc.Username, Password: "svc-pass", Thumbprint: vc.Thumbprint, CAFile: vc.CAFile, Insecure: vc.Insecure})
	m, err := auth.NewManager(acfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// vCenter logins against vcsim's SSO: users and groups of vcenter.roles
// get their roles (groups read from the SSO group check service with the
// user's own token), unmapped users get none unless vcenter.role says,
// wrong passwords stay wrong, and the certificate pin is honoured.
func TestVCenterLoginRoles(t *testing.T) {
	lab := vspheretest.StartSSOLab(t)
	ctx := context.Background()
	m := managerFromConfig(t, lab, `roles: [{user: "carol@vsphere.local", role: restore-only}, {group: BackupAdmins, role: administrator}, {group: "VSPHERE.LOCAL\\Operators", role: operator}]`)
	tests := []struct {
		user, pw string
		role     auth.Role
		err      error
	}{
		{"alice", "alice-pass", auth.RoleAdministrator, nil},               // group BackupAdmins
		{"alice@vsphere.local", "alice-pass", auth.RoleAdministrator, nil}, // the same, with its domain
		{"bob", "bob-pass", auth.RoleOperator, nil},                        // group vsphere.local\Operators
		{"carol", "carol-pass", auth.RoleRestoreOnly, nil},                 // her user rule beats Operators
		{"dave", "dave-pass", "", auth.ErrNoRole},                          // in no mapped group
		{"alice", "bob-pass", "", auth.ErrBadCredentials},                  // vCenter refuses
		{"nobody", "x-pass", "", auth.ErrBadCredentials},                   // unknown to SSO
	}
	for _, tc := range tests {
		s, err := m.Login(ctx, "10.0.0.1", tc.user, tc.pw)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("%s: %v, want %v", tc.user, err, tc.err)
			}
			continue
		}
		if err != nil || s.Role != tc.role || s.Source != auth.SourceVCenter {
			t.Errorf("%s: %+v %v, want %s", tc.user, s, err, tc.role)
		}
	}

	// Without rules (the default configuration) nobody from vCenter gets in;
	// vcenter.role gives every vCenter user a role explicitly.
	if _, err := managerFromConfig(t, lab, `role: none`).Login(ctx, "10.0.0.1", "alice", "alice-pass"); !errors.Is(err, auth.ErrNoRole) {
		t.Errorf("role none: %v", err)
	}
	if _, err := managerFromConfig(t, lab, `insecure: false`).Login(ctx, "10.0.0.1", "alice", "alice-pass"); !errors.Is(err, auth.ErrNoRole) {
		t.Errorf("default configuration: %v", err)
	}
	if s, err := managerFromConfig(t, lab, `role: restore-only`).Login(ctx, "10.0.0.1", "dave", "dave-pass"); err != nil || s.Role != auth.RoleRestoreOnly {
		t.Errorf("role restore-only: %+v %v", s, err)
	}

	// A pin that does not match is a vCenter that cannot be trusted, not a
	// wrong password.
	bad := lab
	bad.Thumbprint = "00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF:00:11:22:33"
	if _, err := managerFromConfig(t, bad, `role: operator`).Login(ctx, "10.0.0.1", "alice", "alice-pass"); !errors.Is(err, auth.ErrVCenterUnavailable) {
		t.Errorf("wrong pin: %v", err)
	}
}
