package auth

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNoRole is returned by Login when vCenter accepted the credentials but
// no rule of the configuration gives that user (or its groups) a role.
var ErrNoRole = errors.New("no role on this appliance")

// VCenterRule gives a role to one vCenter user or to the members of one
// vCenter (SSO) group. Names are "DOMAIN\name" or "name@domain", compared
// without case; a name without a domain matches that name in every
// identity source.
type VCenterRule struct {
	User  string
	Group string
	Role  Role
}

// VCenterUser is what vCenter says about a user who logged in.
type VCenterUser struct {
	// Name is the user as vCenter names it ("VSPHERE.LOCAL\alice"); ""
	// keeps the name typed.
	Name string
	// Groups are the user's groups, "DOMAIN\group" or "group@domain",
	// read only when asked for (wantGroups); GroupsErr says why they
	// could not be.
	Groups    []string
	GroupsErr error
}

func (m *Manager) hasGroupRules() bool {
	for _, r := range m.cfg.VCenterRules {
		if r.Group != "" {
			return true
		}
	}
	return false
}

// principalName splits "DOMAIN\name" and "name@domain" into lower-case
// domain and name; a bare name has domain "".
func principalName(s string) (domain, name string) {
	s = strings.ToLower(strings.TrimSpace(s))
	if d, n, ok := strings.Cut(s, `\`); ok {
		return d, n
	}
	if i := strings.LastIndex(s, "@"); i >= 0 {
		return s[i+1:], s[:i]
	}
	return "", s
}

// principalMatches reports whether a rule's name names who. A rule with a
// domain needs the same domain; a rule without one matches any domain.
func principalMatches(rule, who string) bool {
	rd, rn := principalName(rule)
	wd, wn := principalName(who)
	return rn != "" && rn == wn && (rd == "" || rd == wd)
}

// vcenterRole picks the role of a vCenter user: the first rule naming the
// user (by vCenter's name or the name typed), else the highest role among
// the rules naming its groups, else the configured default, else
// ErrNoRole.
func (m *Manager) vcenterRole(vu VCenterUser, typed string) (Role, error) {
	for _, r := range m.cfg.VCenterRules {
		if r.User != "" && (principalMatches(r.User, vu.Name) || principalMatches(r.User, typed)) {
			return r.Role, nil
		}
	}
	var best Role
	if m.hasGroupRules() {
		if vu.GroupsErr != nil {
			return "", fmt.Errorf("%w: read the vCenter groups of %s: %v", ErrVCenterUnavailable, vu.Name, vu.GroupsErr)
		}
		for _, r := range m.cfg.VCenterRules {
			if r.Group == "" || best.Allows(r.Role) {
				continue
			}
			for _, g := range vu.Groups {
				if principalMatches(r.Group, g) {
					best = r.Role
					break
				}
			}
		}
	}
	if best != "" {
		return best, nil
	}
	if m.cfg.VCenterRole != "" {
		return m.cfg.VCenterRole, nil
	}
	return "", fmt.Errorf("%w: vCenter accepted %s, but vcenter.roles of the appliance configuration maps neither the user nor its groups to a role (and vcenter.role gives vCenter users none); ask an administrator to add it", ErrNoRole, vu.Name)
}
