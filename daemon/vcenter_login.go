package daemon

import (
	"context"
	"errors"
	"fmt"

	"github.com/vmvault/vmvault/internal/auth"
	"github.com/vmvault/vmvault/vsphere"
)

// vcenterAuth fills the vCenter part of the auth configuration from the
// vcenter section: the default role (none unless vcenter.role says), the
// user and group rules of vcenter.roles, and the login check, which asks
// vCenter for the user's name and, when a rule names a group, its groups.
func vcenterAuth(acfg *auth.Config, vc *VCenterConfig, vcfg vsphere.Config) {
	acfg.VCenterRole = vc.authRole()
	acfg.VCenterRules = vc.authRules()
	acfg.VCenterLogin = func(ctx context.Context, user, password string, wantGroups bool) (auth.VCenterUser, error) {
		return vcenterLogin(ctx, vcfg, user, password, wantGroups)
	}
}

// vcenterLogin is vsphere.Login in auth's terms: credentials vCenter
// refuses are auth.ErrBadCredentials (any other error is a vCenter that
// could not answer).
func vcenterLogin(ctx context.Context, vcfg vsphere.Config, user, password string, wantGroups bool) (auth.VCenterUser, error) {
	vu, err := vsphere.Login(ctx, vcfg, user, password, wantGroups)
	if errors.Is(err, vsphere.ErrLogin) {
		return auth.VCenterUser{}, fmt.Errorf("vCenter refused %s: %w", user, auth.ErrBadCredentials)
	}
	if err != nil {
		return auth.VCenterUser{}, err
	}
	return auth.VCenterUser{Name: vu.Name, Groups: vu.Groups, GroupsErr: vu.GroupsErr}, nil
}
