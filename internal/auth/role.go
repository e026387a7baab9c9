package auth

import "fmt"

// Role is what a principal may do. Roles are ordered: an administrator may
// do everything an operator may, an operator everything restore-only may.
type Role string

// Roles.
const (
	RoleRestoreOnly   Role = "restore-only"  // browse, restore
	RoleOperator      Role = "operator"      // plus run jobs and backups, lock points, run checks
	RoleAdministrator Role = "administrator" // plus change jobs, settings, tokens, delete points
)

func (r Role) rank() int {
	switch r {
	case RoleRestoreOnly:
		return 1
	case RoleOperator:
		return 2
	case RoleAdministrator:
		return 3
	}
	return 0
}

// Allows reports whether r may do what needs requires.
func (r Role) Allows(needs Role) bool { return r.rank() > 0 && r.rank() >= needs.rank() }

// ParseRole checks a role name.
func ParseRole(s string) (Role, error) {
	r := Role(s)
	if r.rank() == 0 {
		return "", fmt.Errorf("%w %q (administrator, operator, restore-only)", ErrBadRole, s)
	}
	return r, nil
}
