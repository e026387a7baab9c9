package inventory

import (
	"context"
	"fmt"
	"sort"

	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/vsphere"
)

// placer is the one vsphere call the adapter needs; *vsphere.Client has it.
type placer interface {
	Placements(ctx context.Context, withTags bool) ([]vsphere.Placement, error)
}

// Inventory is a policy.Inventory backed by a vCenter. It is safe for
// concurrent use (the vsphere client is) and keeps no state between calls:
// every VMs call reads the inventory as it is now, which is what lets a VM
// moved into a protected folder be picked up by the next window.
type Inventory struct {
	src  placer
	tags bool
}

var _ policy.Inventory = (*Inventory)(nil)

// New returns an inventory that lists the VMs of c with their containers and
// tags.
func New(c *vsphere.Client) *Inventory { return &Inventory{src: c, tags: true} }

// WithoutTags returns a copy that does not ask the vAPI tagging service (ESXi
// without vCenter has none). Every VM then has no tags, so a selection or
// exclusion by tag matches nothing: use it only when no job names tags.
func (i *Inventory) WithoutTags() *Inventory { return &Inventory{src: i.src, tags: false} }

// VMs lists every VM vCenter reports with its containers and tags, sorted by
// managed object id.
func (i *Inventory) VMs(ctx context.Context) ([]policy.VM, error) {
	ps, err := i.src.Placements(ctx, i.tags)
	if err != nil {
		return nil, fmt.Errorf("inventory: %w", err)
	}
	return FromPlacements(ps), nil
}

// FromPlacements converts vsphere placements to policy VMs: containers become
// ContainerRefs keyed by moref, tags become tag ids. VMs without an instance
// UUID are left out (see the package comment); containers of a kind policy
// does not know are dropped rather than guessed.
func FromPlacements(ps []vsphere.Placement) []policy.VM {
	out := make([]policy.VM, 0, len(ps))
	for _, p := range ps {
		if p.InstanceUUID == "" {
			continue
		}
		vm := policy.VM{InstanceUUID: p.InstanceUUID, Name: p.Name, MoRef: p.MoRef}
		for _, c := range p.Containers {
			k, ok := kind(c.Kind)
			if !ok || c.MoRef == "" {
				continue
			}
			vm.Containers = append(vm.Containers, policy.ContainerRef{Kind: k, ID: c.MoRef, Name: c.Name})
		}
		for _, t := range p.Tags {
			if t.ID != "" {
				vm.Tags = append(vm.Tags, t.ID)
			}
		}
		out = append(out, vm)
	}
	return out
}

// kind maps vsphere's container kinds to policy's. Spelled out, not cast,
// so a kind added on one side cannot silently match the wrong thing.
func kind(k string) (policy.ContainerKind, bool) {
	switch k {
	case vsphere.KindDatacenter:
		return policy.KindDatacenter, true
	case vsphere.KindFolder:
		return policy.KindFolder, true
	case vsphere.KindCluster:
		return policy.KindCluster, true
	case vsphere.KindHost:
		return policy.KindHost, true
	case vsphere.KindResourcePool:
		return policy.KindResourcePool, true
	}
	return "", false
}

// Tag is a vSphere tag as the console shows it: the id jobs store, the name
// and the name of its category.
type Tag struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Category string `json:"category"`
}

// Tags lists the tags attached to at least one VM, by category then name,
// from the same vAPI pass as VMs (no listing of its own: the tagging code
// stays in vsphere). A tag attached to no VM is not listed; selecting by it
// would match nothing now anyway. Without tags (WithoutTags) it returns none.
func (i *Inventory) Tags(ctx context.Context) ([]Tag, error) {
	tags, _, err := i.TagListing(ctx)
	return tags, err
}

// TagListing is Tags with, from the same reading, each VM's tag ids by the
// VM's managed object id (VMs without tags are left out).
func (i *Inventory) TagListing(ctx context.Context) (tags []Tag, byVM map[string][]string, err error) {
	if !i.tags {
		return []Tag{}, map[string][]string{}, nil
	}
	ps, err := i.src.Placements(ctx, true)
	if err != nil {
		return nil, nil, fmt.Errorf("inventory tags: %w", err)
	}
	byVM = map[string][]string{}
	for _, vm := range FromPlacements(ps) {
		if len(vm.Tags) > 0 && vm.MoRef != "" {
			byVM[vm.MoRef] = vm.Tags
		}
	}
	tags = TagsOf(ps)
	if all, ok := i.src.(allTagser); ok {
		// Tags no VM carries yet: a job may select them before any VM has one.
		every, err := all.AllTags(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("inventory tags: %w", err)
		}
		tags = mergeTags(tags, every)
	}
	return tags, byVM, nil
}

// allTagser is the optional source of every tag, attached or not
// (*vsphere.Client has it).
type allTagser interface {
	AllTags(ctx context.Context) ([]vsphere.Tag, error)
}

// mergeTags adds the tags of every that have lacks, in TagsOf's order.
func mergeTags(have []Tag, every []vsphere.Tag) []Tag {
	seen := make(map[string]bool, len(have))
	for _, t := range have {
		seen[t.ID] = true
	}
	out := have
	for _, t := range every {
		if t.ID != "" && !seen[t.ID] {
			seen[t.ID] = true
			out = append(out, Tag{ID: t.ID, Name: t.Name, Category: t.Category})
		}
	}
	sortTags(out)
	return out
}

// TagsOf returns the distinct tags of the placements, by category, name and
// id. Tags without an id are left out, as FromPlacements leaves them out.
func TagsOf(ps []vsphere.Placement) []Tag {
	seen := map[string]bool{}
	out := []Tag{}
	for _, p := range ps {
		for _, t := range p.Tags {
			if t.ID == "" || seen[t.ID] {
				continue
			}
			seen[t.ID] = true
			out = append(out, Tag{ID: t.ID, Name: t.Name, Category: t.Category})
		}
	}
	sortTags(out)
	return out
}

// sortTags orders tags by category, name and id.
func sortTags(ts []Tag) {
	sort.Slice(ts, func(a, b int) bool {
		x, y := ts[a], ts[b]
		if x.Category != y.Category {
			return x.Category < y.Category
		}
		if x.Name != y.Name {
			return x.Name < y.Name
		}
		return x.ID < y.ID
	})
}
