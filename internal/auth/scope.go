package auth

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"unicode"
)

// ErrBadScope is returned for a scope that does not meet the rules.
var ErrBadScope = errors.New("invalid scope")

// Scope limits what restore points, VMs and repositories a user or an API
// token sees and acts on. The zero Scope limits nothing (every user and
// token of earlier versions). A non-empty scope allows a restore point
// when both
//
//   - its repository is one of Repositories (none listed: any), and
//   - its VM matches one of Folders, Tags or VMs (none of the three
//     listed: any VM): a VM matches a folder when its inventory path is
//     the folder or lies below it, a tag when it carries it, a pattern
//     when its name matches it (path.Match).
//
// Folders and tags can only be judged for a VM vCenter knows now (the
// inventory): a point whose VM is gone is matched by the VM name the point
// recorded against VMs, and otherwise denied (points record no folder or
// tag). See ScopeVM.
//
// Only restore-only and operator principals may be scoped: an
// administrator can change every scope, its own included, so a scope
// could not bind it.
type Scope struct {
	// Folders are inventory paths of VM folders, e.g. "/DC0/vm/finance"
	// (the datacenter, then its folders: what govc shows).
	Folders []string `json:"folders,omitempty"`
	// Tags are vSphere tags as "category:tag", a tag's name alone (in any
	// category), or a tag id ("urn:vmomi:InventoryServiceTag:...").
	Tags []string `json:"tags,omitempty"`
	// VMs are VM name patterns in path.Match syntax ("fin-*", "db01").
	VMs []string `json:"vms,omitempty"`
	// Repositories are repository names.
	Repositories []string `json:"repositories,omitempty"`
}

// MaxScopeEntries bounds each list of a scope.
const MaxScopeEntries = 256

// Empty reports whether s limits nothing.
func (s Scope) Empty() bool {
	return len(s.Folders) == 0 && len(s.Tags) == 0 && len(s.VMs) == 0 && len(s.Repositories) == 0
}

func (s Scope) limitsVMs() bool { return len(s.Folders) > 0 || len(s.Tags) > 0 || len(s.VMs) > 0 }

// Normalize checks s and returns it cleaned: folders without a trailing
// slash, entries trimmed of spaces, duplicates and empty lists dropped.
// Errors wrap ErrBadScope and name the field.
func (s Scope) Normalize() (Scope, error) {
	var out Scope
	clean := func(field string, in []string, check func(string) (string, error)) ([]string, error) {
		if len(in) > MaxScopeEntries {
			return nil, fmt.Errorf("%w: %s: at most %d entries", ErrBadScope, field, MaxScopeEntries)
		}
		var res []string
		for _, v := range in {
			v = strings.TrimSpace(v)
			if v == "" || len(v) > 512 || strings.ContainsFunc(v, unicode.IsControl) {
				return nil, fmt.Errorf("%w: %s: %q is empty, longer than 512 bytes or holds a control character", ErrBadScope, field, v)
			}
			v, err := check(v)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: %v", ErrBadScope, field, err)
			}
			if !slices.Contains(res, v) {
				res = append(res, v)
			}
		}
		return res, nil
	}
	var err error
	if out.Folders, err = clean("folders", s.Folders, func(v string) (string, error) {
		if !strings.HasPrefix(v, "/") || strings.Contains(v, "//") {
			return "", fmt.Errorf("%q is not an inventory path like /DC0/vm/finance", v)
		}
		v = strings.TrimRight(v, "/")
		if v == "" {
			return "", errors.New(`"/" is every VM: leave folders empty instead`)
		}
		return v, nil
	}); err != nil {
		return Scope{}, err
	}
	if out.Tags, err = clean("tags", s.Tags, func(v string) (string, error) { return v, nil }); err != nil {
		return Scope{}, err
	}
	if out.VMs, err = clean("vms", s.VMs, func(v string) (string, error) {
		if _, err := path.Match(v, ""); err != nil {
			return "", fmt.Errorf("%q is not a name pattern (path.Match)", v)
		}
		return v, nil
	}); err != nil {
		return Scope{}, err
	}
	if out.Repositories, err = clean("repositories", s.Repositories, func(v string) (string, error) { return v, nil }); err != nil {
		return Scope{}, err
	}
	return out, nil
}

// checkScopeRole refuses a scope on an administrator.
func checkScopeRole(role Role, s Scope) error {
	if role == RoleAdministrator && !s.Empty() {
		return fmt.Errorf("%w: an administrator cannot be scoped (it can change every scope); give the role operator or restore-only", ErrBadScope)
	}
	return nil
}

// ScopeVM is what is known of the VM of a restore point (or of a VM of the
// inventory) when a scope judges it.
type ScopeVM struct {
	// Names are the VM's names: the one the point recorded and, when the
	// VM is in the inventory, its current one.
	Names []string
	// InInventory says vCenter knows the VM now: Folder and Tags are
	// filled. Without it a scope of folders or tags cannot allow the VM.
	InInventory bool
	// Folder is the inventory path of the VM's folder ("/DC0/vm/finance").
	Folder string
	// Tags are the VM's tags, each as its id, its name and "category:name".
	Tags []string
}

// AllowsRepository reports whether s allows the repository named name.
func (s Scope) AllowsRepository(name string) bool {
	return len(s.Repositories) == 0 || slices.Contains(s.Repositories, name)
}

// AllowsVM reports whether s allows the VM v (repositories aside).
func (s Scope) AllowsVM(v ScopeVM) bool {
	if !s.limitsVMs() {
		return true
	}
	for _, p := range s.VMs {
		for _, n := range v.Names {
			if ok, _ := path.Match(p, n); ok && n != "" {
				return true
			}
		}
	}
	if !v.InInventory {
		return false
	}
	for _, f := range s.Folders {
		if v.Folder == f || strings.HasPrefix(v.Folder, f+"/") {
			return true
		}
	}
	for _, t := range s.Tags {
		if slices.Contains(v.Tags, t) {
			return true
		}
	}
	return false
}

// Allows reports whether s allows a restore point of VM v in repository repo.
func (s Scope) Allows(repo string, v ScopeVM) bool { return s.AllowsRepository(repo) && s.AllowsVM(v) }

// Scoped reports whether p is limited by a scope.
func (p Principal) Scoped() bool {
	for _, s := range p.Scopes {
		if !s.Empty() {
			return true
		}
	}
	return false
}

// NeedsInventory reports whether judging a VM for p needs its folder or tags.
func (p Principal) NeedsInventory() bool {
	for _, s := range p.Scopes {
		if len(s.Folders) > 0 || len(s.Tags) > 0 {
			return true
		}
	}
	return false
}

// AllowsRepository reports whether every scope of p allows the repository.
func (p Principal) AllowsRepository(name string) bool {
	for _, s := range p.Scopes {
		if !s.AllowsRepository(name) {
			return false
		}
	}
	return true
}

// AllowsVM reports whether every scope of p allows the VM.
func (p Principal) AllowsVM(v ScopeVM) bool {
	for _, s := range p.Scopes {
		if !s.AllowsVM(v) {
			return false
		}
	}
	return true
}

// AllowsFolder reports whether a VM created in the folder at path (a
// restore to a new VM) stays inside p's scopes: each scope that lists
// folders must hold it. "" (vCenter's default) is in none.
func (p Principal) AllowsFolder(path string) bool {
	for _, s := range p.Scopes {
		if len(s.Folders) == 0 {
			continue
		}
		if !slices.ContainsFunc(s.Folders, func(f string) bool { return path == f || strings.HasPrefix(path, f+"/") }) {
			return false
		}
	}
	return true
}

// Allows reports whether every scope of p allows a point of VM v in repo.
func (p Principal) Allows(repo string, v ScopeVM) bool {
	return p.AllowsRepository(repo) && p.AllowsVM(v)
}

func scopes(ss ...Scope) []Scope {
	var out []Scope
	for _, s := range ss {
		if !s.Empty() {
			out = append(out, s)
		}
	}
	return out
}
