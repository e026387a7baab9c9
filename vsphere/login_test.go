package vsphere

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/vmvault/vmvault/vsphere/vspheretest"
)

// Login against vcsim's SSO: the user's name as vCenter names it, its
// groups from the SSO group check service (read with the user's own token,
// and only when asked for), refused credentials as ErrLogin, and the
// certificate pin honoured.
func TestLogin(t *testing.T) {
	lab := vspheretest.StartSSOLab(t)
	ctx := context.Background()
	cfg := Config{URL: lab.URL.String(), Thumbprint: lab.Thumbprint}
	tests := []struct {
		user, pw   string
		wantGroups bool
		want       LoginUser
	}{
		{"alice", "alice-pass", true, LoginUser{Name: `vsphere.local\alice`, Groups: []string{`vsphere.local\BackupAdmins`}}},
		{"alice@vsphere.local", "alice-pass", true, LoginUser{Name: "alice@vsphere.local", Groups: []string{`vsphere.local\BackupAdmins`}}}, // a name with its domain is kept
		{"bob", "bob-pass", true, LoginUser{Name: `vsphere.local\bob`, Groups: []string{`vsphere.local\Operators`}}},
		{"dave", "dave-pass", true, LoginUser{Name: `vsphere.local\dave`, Groups: []string{}}},
		{"alice", "alice-pass", false, LoginUser{Name: "alice"}}, // no groups asked for: the session's name
	}
	for _, tc := range tests {
		got, err := Login(ctx, cfg, tc.user, tc.pw, tc.wantGroups)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s (groups %v): %+v %v, want %+v", tc.user, tc.wantGroups, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ user, pw string }{
		{"alice", "bob-pass"}, // vCenter refuses
		{"nobody", "x-pass"},  // unknown to SSO
	} {
		if _, err := Login(ctx, cfg, tc.user, tc.pw, true); !errors.Is(err, ErrLogin) {
			t.Errorf("%s: %v, want ErrLogin", tc.user, err)
		}
	}

	// A pin that does not match is a vCenter that cannot be trusted, not a
	// wrong password.
	bad := cfg
	bad.Thumbprint = "00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF:00:11:22:33"
	if _, err := Login(ctx, bad, "alice", "alice-pass", true); err == nil || errors.Is(err, ErrLogin) {
		t.Errorf("wrong pin: %v", err)
	}
}

func TestSSOPrincipal(t *testing.T) {
	tests := []struct{ in, name, domain string }{
		{`VSPHERE.LOCAL\alice`, "alice", "VSPHERE.LOCAL"},
		{"alice@example.com", "alice", "example.com"},
		{"alice", "alice", "vsphere.local"},
	}
	for _, tc := range tests {
		if id := ssoPrincipal(tc.in, "vsphere.local"); id.Name != tc.name || id.Domain != tc.domain {
			t.Errorf("%q: %+v", tc.in, id)
		}
	}
	if got := normalizeThumbprint("ab cd-ef"); got != "AB:CD:EF" {
		t.Errorf("normalizeThumbprint %q", got)
	}
}
