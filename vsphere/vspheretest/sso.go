// Package vspheretest is test support for the code that signs in to
// vCenter: vcsim with its SSO endpoints (lookup, STS, SSO admin) and a
// fixed set of users and groups. It imports govmomi and nothing of ours,
// so that vsphere's own tests and the daemon's can share one lab.
package vspheretest

import (
	"context"
	"crypto/tls"
	"net/url"
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

// SSOLab is vcsim with its SSO endpoints: person users with passwords
// (vCenter logins are checked against them) and groups.
type SSOLab struct {
	URL        *url.URL // without credentials
	Thumbprint string   // SHA-256 pin of its certificate
}

// StartSSOLab starts an SSO lab for the test: the service account
// svc-vmvault/svc-pass; person users alice, bob, carol and dave, each with
// the password NAME-pass; groups BackupAdmins (alice) and Operators (bob,
// carol) in vsphere.local.
func StartSSOLab(t testing.TB) SSOLab {
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
	return SSOLab{URL: &u, Thumbprint: s.CertificateInfo().ThumbprintSHA256}
}
