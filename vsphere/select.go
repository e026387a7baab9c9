package vsphere

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

var refProps = []string{"name", "config.instanceUuid"}

// resolveContainer turns "/DC0/host/DC0_C0" (inventory path) or
// "ClusterComputeResource:domain-c7" (type:id) into a reference.
func (c *Client) resolveContainer(ctx context.Context, s string) (types.ManagedObjectReference, error) {
	if strings.HasPrefix(s, "/") {
		res, err := methods.FindByInventoryPath(ctx, c.vim, &types.FindByInventoryPath{This: *c.vim.ServiceContent.SearchIndex, InventoryPath: strings.TrimPrefix(s, "/")})
		if err != nil {
			return types.ManagedObjectReference{}, mapFault("find "+s, err)
		}
		if res.Returnval == nil {
			return types.ManagedObjectReference{}, fmt.Errorf("container %s: %w", s, ErrNotFound)
		}
		return *res.Returnval, nil
	}
	var ref types.ManagedObjectReference
	if !ref.FromString(s) {
		return ref, fmt.Errorf("container %q: want an inventory path (/DC/host/cluster) or Type:id", s)
	}
	return ref, nil
}

func refsFrom(ocs []types.ObjectContent) ([]VMRef, error) {
	seen := map[string]bool{}
	var out []VMRef
	for _, oc := range ocs {
		if oc.Obj.Type != "VirtualMachine" || seen[oc.Obj.Value] {
			continue
		}
		seen[oc.Obj.Value] = true
		var v mo.VirtualMachine
		if err := mo.LoadObjectContent([]types.ObjectContent{oc}, &v); err != nil {
			return nil, fmt.Errorf("decode %s: %w", oc.Obj, err)
		}
		r := VMRef{MoRef: oc.Obj.Value, Name: v.Name}
		if v.Config != nil {
			r.InstanceUUID = v.Config.InstanceUuid
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Name < out[j].Name || out[i].Name == out[j].Name && out[i].MoRef < out[j].MoRef
	})
	return out, nil
}

// VMsIn returns the VMs under any of the containers (datacenters, folders,
// clusters, hosts, resource pools), each given as an inventory path or as
// "Type:id". One view per container, one batched property retrieve.
func (c *Client) VMsIn(ctx context.Context, containers ...string) ([]VMRef, error) {
	if len(containers) == 0 {
		return nil, nil
	}
	refs := make([]types.ManagedObjectReference, 0, len(containers))
	for _, s := range containers {
		r, err := c.resolveContainer(ctx, s)
		if err != nil {
			return nil, err
		}
		refs = append(refs, r)
	}
	ocs, err := c.retrieveViews(ctx, refs, map[string][]string{"VirtualMachine": refProps})
	if err != nil {
		return nil, fmt.Errorf("VMs in %v: %w", containers, err)
	}
	return refsFrom(ocs)
}

// VMsWithTags returns the VMs carrying any of the tags, each given as "name"
// or "category/name" (vAPI tagging service).
func (c *Client) VMsWithTags(ctx context.Context, tagNames ...string) ([]VMRef, error) {
	if len(tagNames) == 0 {
		return nil, nil
	}
	m, logout, err := c.tagManager(ctx)
	if err != nil {
		return nil, fmt.Errorf("tags: %w", err)
	}
	defer logout()
	all, err := m.GetTags(ctx)
	if err != nil {
		return nil, fmt.Errorf("tags: list: %w", err)
	}
	cats := map[string]string{}
	var ids []string
	for _, want := range tagNames {
		cat, name, hasCat := strings.Cut(want, "/")
		if !hasCat {
			name, cat = cat, ""
		}
		found := false
		for _, t := range all {
			if t.Name != name {
				continue
			}
			if cat != "" {
				cn, ok := cats[t.CategoryID]
				if !ok {
					cc, err := m.GetCategory(ctx, t.CategoryID)
					if err != nil {
						return nil, fmt.Errorf("tags: category %s: %w", t.CategoryID, err)
					}
					cn = cc.Name
					cats[t.CategoryID] = cn
				}
				if cn != cat {
					continue
				}
			}
			ids = append(ids, t.ID)
			found = true
		}
		if !found {
			return nil, fmt.Errorf("tag %q: %w", want, ErrNotFound)
		}
	}
	attached, err := m.GetAttachedObjectsOnTags(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("tags: attached objects: %w", err)
	}
	var vms []types.ManagedObjectReference
	seen := map[string]bool{}
	for _, a := range attached {
		for _, o := range a.ObjectIDs {
			r := o.Reference()
			if r.Type == "VirtualMachine" && !seen[r.Value] {
				seen[r.Value] = true
				vms = append(vms, r)
			}
		}
	}
	if len(vms) == 0 {
		return nil, nil
	}
	spec := types.PropertyFilterSpec{PropSet: []types.PropertySpec{{Type: "VirtualMachine", PathSet: refProps}}}
	for _, r := range vms {
		spec.ObjectSet = append(spec.ObjectSet, types.ObjectSpec{Obj: r})
	}
	ocs, err := c.retrieve(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("tags: VM details: %w", err)
	}
	return refsFrom(ocs)
}

// FindVM finds one VM by managed object id ("vm-42"), inventory path
// ("/DC0/vm/web01") or unique name.
func (c *Client) FindVM(ctx context.Context, id string) (VM, error) {
	switch {
	case strings.HasPrefix(id, "/"):
		ref, err := c.resolveContainer(ctx, id)
		if err != nil {
			return VM{}, err
		}
		if ref.Type != "VirtualMachine" {
			return VM{}, fmt.Errorf("find VM %s: is a %s: %w", id, ref.Type, ErrNotFound)
		}
		return c.VM(ctx, VMRef{MoRef: ref.Value})
	case strings.HasPrefix(id, "vm-"):
		return c.VM(ctx, VMRef{MoRef: id})
	}
	ocs, err := c.retrieveViews(ctx, []types.ManagedObjectReference{c.vim.ServiceContent.RootFolder}, map[string][]string{"VirtualMachine": {"name"}})
	if err != nil {
		return VM{}, fmt.Errorf("find VM %s: %w", id, err)
	}
	var hit []types.ManagedObjectReference
	for _, oc := range ocs {
		for _, p := range oc.PropSet {
			if p.Name == "name" && p.Val == id {
				hit = append(hit, oc.Obj)
			}
		}
	}
	switch len(hit) {
	case 0:
		return VM{}, fmt.Errorf("find VM %q: %w", id, ErrNotFound)
	case 1:
		return c.VM(ctx, VMRef{MoRef: hit[0].Value})
	}
	return VM{}, fmt.Errorf("find VM %q: %d VMs have that name; use the path or id", id, len(hit))
}

// VM reads one VM's current record (two round trips: properties, ancestors).
func (c *Client) VM(ctx context.Context, ref VMRef) (VM, error) {
	mref := vmMoRef(ref)
	ocs, err := c.retrieve(ctx, types.PropertyFilterSpec{
		ObjectSet: []types.ObjectSpec{{Obj: mref}},
		PropSet:   []types.PropertySpec{{Type: "VirtualMachine", PathSet: vmProps}},
	})
	if err != nil {
		return VM{}, fmt.Errorf("VM %s: %w", ref.MoRef, err)
	}
	if len(ocs) == 0 {
		return VM{}, fmt.Errorf("VM %s: %w", ref.MoRef, ErrNotFound)
	}
	var v mo.VirtualMachine
	if err := mo.LoadObjectContent(ocs, &v); err != nil {
		return VM{}, fmt.Errorf("VM %s: decode: %w", ref.MoRef, err)
	}
	vm := vmFromMo(v, nil)
	anc, err := mo.Ancestors(ctx, c.vim, c.vim.ServiceContent.PropertyCollector, mref)
	if err != nil {
		return VM{}, mapFault("VM "+ref.MoRef+": ancestors", err)
	}
	var parts []string
	for _, a := range anc {
		if a.Self == c.vim.ServiceContent.RootFolder {
			continue
		}
		parts = append(parts, a.Name)
		if a.Self.Type == "Datacenter" {
			vm.Datacenter = a.Name
		}
	}
	vm.Path = "/" + strings.Join(parts, "/")
	return vm, nil
}

func vmMoRef(r VMRef) types.ManagedObjectReference {
	return types.ManagedObjectReference{Type: "VirtualMachine", Value: r.MoRef}
}
