package vsphere

import (
	"context"
	"crypto/tls"
	"errors"
	"net/url"
	"reflect"
	"testing"

	"github.com/vmware/govmomi"
	_ "github.com/vmware/govmomi/lookup/simulator" // lookup service: where SSO lives
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/ssoadmin"
	_ "github.com/vmware/govmomi/ssoadmin/simulator" // SSO users, groups, group check
	ssotypes "github.com/vmware/govmomi/ssoadmin/types"
	"github.com/vmware/govmomi/sts"
	_ "github.com/vmware/govmomi/sts/simulator" // SAML tokens
	"github.com/vmware/govmomi/vim25/soap"
)

// ssoLab is vcsim with its SSO endpoints: person users with passwords
// (vCenter logins are checked against them) and groups.
type ssoLab struct {
	url        *url.URL
	thumbprint string
}

func startSSOLab(t *testing.T) ssoLab {
	t.Helper()
	m := simulator.VPX()
	if err := m.Create(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Remove)
	m.Service.TLS = new(tls.Config)
	m.Service.RegisterEndpoints = true
	m.Service.Listen = &url.URL{Host: "127.0.0.1:0", User: url.UserPassword("svc-vmvault", "svc-pass")}
	s := m.Service.NewServer()
	t.Cleanup(s.Close)
	ctx := context.Background()
	au := *s.URL
	au.User = url.UserPassword("svc-vmvault", "svc-pass")
	c, err := govmomi.NewClient(ctx, &au, true)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := ssoadmin.NewClient(ctx, c.Client)
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := sts.NewClient(ctx, c.Client)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := tokens.Issue(ctx, sts.TokenRequest{Userinfo: au.User})
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.Login(admin.WithHeader(ctx, soap.Header{Security: signer})); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"alice", "bob", "carol", "dave"} {
		if err := admin.CreatePersonUser(ctx, u, ssotypes.AdminPersonDetails{}, u+"-pass"); err != nil {
			t.Fatal(err)
		}
	}
	for g, members := range map[string][]string{"BackupAdmins": {"alice"}, "Operators": {"bob", "carol"}} {
		if err := admin.CreateGroup(ctx, g, ssotypes.AdminGroupDetails{}); err != nil {
			t.Fatal(err)
		}
		for _, u := range members {
			if err := admin.AddUsersToGroup(ctx, g, ssotypes.PrincipalId{Name: u, Domain: "vsphere.local"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	u := *s.URL
	u.User = nil
	return ssoLab{url: &u, thumbprint: s.CertificateInfo().ThumbprintSHA256}
}

// Login against vcsim's SSO: the user's name as vCenter names it, its
// groups from the SSO group check service (read with the user's own token,
// and only when asked for), refused credentials as ErrLogin, and the
// certificate pin honoured.
func TestLogin(t *testing.T) {
	lab := startSSOLab(t)
	ctx := context.Background()
	cfg := Config{URL: lab.url.String(), Thumbprint: lab.thumbprint}
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
	if got := pinFormat("ab cd-ef"); got != "AB:CD:EF" {
		t.Errorf("pinFormat %q", got)
	}
}
