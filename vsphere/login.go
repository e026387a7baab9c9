package vsphere

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/ssoadmin"
	ssotypes "github.com/vmware/govmomi/ssoadmin/types"
	"github.com/vmware/govmomi/sts"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// The console's vCenter sign-in: a user's own credentials checked against
// vCenter, and the user's SSO groups. The daemon turns the answer into the
// auth package's vCenter login hook.

// LoginTimeout bounds one login check (and its group lookup): a vCenter
// that hangs must not hold a login request for ever.
const LoginTimeout = 30 * time.Second

// LoginUser is what a login check found out about a vCenter user.
type LoginUser struct {
	// Name is vCenter's canonical DOMAIN\name for the session's user.
	Name string
	// Groups are the SSO groups that contain the user directly, as
	// DOMAIN\group; read only when asked for.
	Groups []string
	// GroupsErr says why Groups could not be read (the login itself
	// succeeded).
	GroupsErr error
}

// Login logs in to vCenter as the user (the certificate checked as for the
// daemon's own session: CA, ca_file, thumbprint pin or insecure), reads the
// session's user name (vCenter's canonical DOMAIN\name) and, with
// wantGroups, the user's SSO groups, and logs out. Credentials vCenter
// refuses are an error wrapping ErrLogin.
//
// Groups come from the SSO group check service (ssoadmin
// FindAllParentGroups), reached with a SAML token the STS issues for the
// user's own credentials, so the daemon's service account needs no SSO
// rights. vCenter lists the groups that contain the user directly; a rule
// for a group that only nests another is not matched.
func Login(ctx context.Context, vcfg Config, user, password string, wantGroups bool) (LoginUser, error) {
	ctx, cancel := context.WithTimeout(ctx, LoginTimeout)
	defer cancel()
	u, err := soap.ParseURL(vcfg.URL)
	if err != nil || u == nil {
		return LoginUser{}, fmt.Errorf("vCenter URL %q: %v", vcfg.URL, err)
	}
	u.User = nil
	sc := soap.NewClient(u, vcfg.Insecure)
	if vcfg.Thumbprint != "" {
		sc.SetThumbprint(u.Host, normalizeThumbprint(vcfg.Thumbprint))
	}
	if vcfg.CAFile != "" {
		if err := sc.SetRootCAs(vcfg.CAFile); err != nil {
			return LoginUser{}, fmt.Errorf("vCenter CA file %s: %w", vcfg.CAFile, err)
		}
	}
	defer sc.CloseIdleConnections()
	vc, err := vim25.NewClient(ctx, sc)
	if err != nil {
		return LoginUser{}, fmt.Errorf("connect to vCenter %s: %w", u.Host, err)
	}
	sm := session.NewManager(vc)
	if err := sm.Login(ctx, url.UserPassword(user, password)); err != nil {
		if fault.Is(err, &types.InvalidLogin{}) {
			return LoginUser{}, fmt.Errorf("vCenter refused %s: %w", user, ErrLogin)
		}
		return LoginUser{}, fmt.Errorf("log in to vCenter %s: %w", u.Host, err)
	}
	defer func() { _ = sm.Logout(context.WithoutCancel(ctx)) }()
	vu := LoginUser{Name: user}
	if us, err := sm.UserSession(ctx); err == nil && us != nil && us.UserName != "" {
		vu.Name = us.UserName
	}
	if wantGroups {
		var id ssotypes.PrincipalId
		id, vu.Groups, vu.GroupsErr = ssoGroups(ctx, vc, user, password)
		// vCenter names its session users DOMAIN\name; one that does not
		// (vcsim) is named by the SSO principal the groups belong to.
		if vu.GroupsErr == nil && !strings.ContainsAny(vu.Name, `\@`) {
			vu.Name = id.Domain + `\` + id.Name
		}
	}
	return vu, nil
}

// ssoGroups returns the SSO principal of user and the groups that contain
// it, as DOMAIN\group.
func ssoGroups(ctx context.Context, vc *vim25.Client, user, password string) (ssotypes.PrincipalId, []string, error) {
	var id ssotypes.PrincipalId
	admin, err := ssoadmin.NewClient(ctx, vc)
	if err != nil {
		return id, nil, fmt.Errorf("SSO admin service: %w", err)
	}
	tokens, err := sts.NewClient(ctx, vc)
	if err != nil {
		return id, nil, fmt.Errorf("SSO token service: %w", err)
	}
	signer, err := tokens.Issue(ctx, sts.TokenRequest{Userinfo: url.UserPassword(user, password)})
	if err != nil {
		return id, nil, fmt.Errorf("SSO token for %s: %w", user, err)
	}
	if err := admin.Login(admin.WithHeader(ctx, soap.Header{Security: signer})); err != nil {
		return id, nil, fmt.Errorf("SSO login as %s: %w", user, err)
	}
	defer func() { _ = admin.Logout(context.WithoutCancel(ctx)) }()
	id = ssoPrincipal(user, admin.Domain)
	ids, err := admin.FindParentGroups(ctx, id)
	if err != nil {
		return id, nil, fmt.Errorf("SSO groups of %s: %w", user, err)
	}
	out := make([]string, 0, len(ids))
	for _, g := range ids {
		out = append(out, g.Domain+`\`+g.Name)
	}
	return id, out, nil
}

// ssoPrincipal is the SSO id of a login name: DOMAIN\name, name@domain,
// or a bare name in the SSO system domain (vCenter's default domain).
func ssoPrincipal(user, systemDomain string) ssotypes.PrincipalId {
	if d, n, ok := strings.Cut(user, `\`); ok {
		return ssotypes.PrincipalId{Name: n, Domain: d}
	}
	if i := strings.LastIndex(user, "@"); i >= 0 {
		return ssotypes.PrincipalId{Name: user[:i], Domain: user[i+1:]}
	}
	return ssotypes.PrincipalId{Name: user, Domain: systemDomain}
}
