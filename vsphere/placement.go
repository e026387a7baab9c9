package vsphere

import (
	"context"
	"fmt"
	"net/url"
	"sort"

	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/vapi/tags"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// Container kinds in a Placement.
const (
	KindDatacenter   = "datacenter"
	KindFolder       = "folder"
	KindCluster      = "cluster"
	KindHost         = "host"
	KindResourcePool = "resourcepool"
)

// Container is one inventory container above a VM.
type Container struct {
	Kind  string `json:"kind"`
	MoRef string `json:"moref"`
	Name  string `json:"name"`
}

// Tag is a vSphere tag attached to a VM.
type Tag struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Category string `json:"category"`
}

// Placement is a VM with every container above it (datacenter, folders,
// cluster, host, resource pools) and its tags: what job selection matches.
type Placement struct {
	VMRef
	Containers []Container `json:"containers"`
	Tags       []Tag       `json:"tags,omitempty"`
}

// Placements lists every VM with its containers (one ContainerView and one
// property retrieve) and, when withTags, its tags (a vAPI login, one batch
// query for all VMs, one tag list, one call per category, logout).
func (c *Client) Placements(ctx context.Context, withTags bool) ([]Placement, error) {
	props := map[string][]string{
		"Datacenter":      {"name", "parent"},
		"Folder":          {"name", "parent"},
		"ComputeResource": {"name", "parent"},
		"HostSystem":      {"name", "parent"},
		"ResourcePool":    {"name", "parent"},
		"VirtualMachine":  {"name", "parent", "resourcePool", "runtime.host", "config.instanceUuid"},
	}
	ocs, err := c.retrieveViews(ctx, []types.ManagedObjectReference{c.vim.ServiceContent.RootFolder}, props)
	if err != nil {
		return nil, fmt.Errorf("placements: %w", err)
	}
	ix := &entityIndex{name: map[types.ManagedObjectReference]string{}, parent: map[types.ManagedObjectReference]types.ManagedObjectReference{}}
	var vms []mo.VirtualMachine
	for _, oc := range ocs {
		o, err := mo.ObjectContentToType(oc)
		if err != nil {
			return nil, fmt.Errorf("placements: decode %s: %w", oc.Obj, err)
		}
		if me, ok := managedEntity(o); ok {
			ix.name[oc.Obj] = me.Name
			if me.Parent != nil {
				ix.parent[oc.Obj] = *me.Parent
			}
		}
		if v, ok := o.(mo.VirtualMachine); ok {
			vms = append(vms, v)
		}
	}
	out := make([]Placement, 0, len(vms))
	for _, v := range vms {
		p := Placement{VMRef: VMRef{MoRef: v.Self.Value, Name: v.Name}}
		if v.Config != nil {
			p.InstanceUUID = v.Config.InstanceUuid
		}
		seen := map[types.ManagedObjectReference]bool{}
		add := func(start types.ManagedObjectReference) {
			for ref, ok := start, true; ok && !seen[ref]; ref, ok = ix.parent[ref] {
				if _, known := ix.name[ref]; !known {
					return
				}
				seen[ref] = true
				if k := kindOf(ref); k != "" {
					p.Containers = append(p.Containers, Container{Kind: k, MoRef: ref.Value, Name: ix.name[ref]})
				}
			}
		}
		if v.Parent != nil {
			add(*v.Parent)
		}
		if v.ResourcePool != nil {
			add(*v.ResourcePool)
		}
		if v.Runtime.Host != nil {
			add(*v.Runtime.Host)
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].MoRef < out[j].MoRef })
	if withTags && len(out) > 0 {
		if err := c.attachTags(ctx, out); err != nil {
			return nil, fmt.Errorf("placements: %w", err)
		}
	}
	return out, nil
}

func kindOf(ref types.ManagedObjectReference) string {
	switch ref.Type {
	case "Datacenter":
		return KindDatacenter
	case "Folder":
		return KindFolder
	case "ClusterComputeResource":
		return KindCluster
	case "HostSystem":
		return KindHost
	case "ResourcePool":
		return KindResourcePool
	}
	return "" // a standalone host's ComputeResource is represented by its host
}

func (c *Client) attachTags(ctx context.Context, ps []Placement) error {
	m, logout, err := c.tagManager(ctx)
	if err != nil {
		return err
	}
	defer logout()
	objs := make([]mo.Reference, len(ps))
	for i, p := range ps {
		objs[i] = vmMoRef(p.VMRef)
	}
	attached, err := m.ListAttachedTagsOnObjects(ctx, objs)
	if err != nil {
		return fmt.Errorf("attached tags: %w", err)
	}
	all, err := m.GetTags(ctx)
	if err != nil {
		return fmt.Errorf("list tags: %w", err)
	}
	byID := map[string]tags.Tag{}
	for _, t := range all {
		byID[t.ID] = t
	}
	cats := map[string]string{}
	idx := map[string]int{}
	for i, p := range ps {
		idx[p.MoRef] = i
	}
	for _, a := range attached {
		i, ok := idx[a.ObjectID.Reference().Value]
		if !ok {
			continue
		}
		for _, id := range a.TagIDs {
			t := byID[id]
			cn, ok := cats[t.CategoryID]
			if !ok && t.CategoryID != "" {
				cat, err := m.GetCategory(ctx, t.CategoryID)
				if err != nil {
					return fmt.Errorf("category %s: %w", t.CategoryID, err)
				}
				cn = cat.Name
				cats[t.CategoryID] = cn
			}
			ps[i].Tags = append(ps[i].Tags, Tag{ID: id, Name: t.Name, Category: cn})
		}
		sort.Slice(ps[i].Tags, func(a, b int) bool { return ps[i].Tags[a].ID < ps[i].Tags[b].ID })
	}
	return nil
}

// AllTags lists every tag vCenter knows, attached or not, with its
// category's name: an administrator tags a policy ("Backup/Gold") before
// tagging any VM with it, and a job must be able to select it then.
func (c *Client) AllTags(ctx context.Context) ([]Tag, error) {
	m, logout, err := c.tagManager(ctx)
	if err != nil {
		return nil, err
	}
	defer logout()
	all, err := m.GetTags(ctx)
	if err != nil {
		return nil, fmt.Errorf("list tags: %w", err)
	}
	cats, err := m.GetCategories(ctx)
	if err != nil {
		return nil, fmt.Errorf("list tag categories: %w", err)
	}
	catName := make(map[string]string, len(cats))
	for _, cat := range cats {
		catName[cat.ID] = cat.Name
	}
	out := make([]Tag, 0, len(all))
	for _, t := range all {
		out = append(out, Tag{ID: t.ID, Name: t.Name, Category: catName[t.CategoryID]})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out, nil
}

// tagManager logs in to the vAPI tagging service (a session of its own,
// beside the SOAP one) and returns its manager and the logout to defer.
func (c *Client) tagManager(ctx context.Context) (*tags.Manager, func(), error) {
	rc := rest.NewClient(c.vim)
	if err := rc.Login(ctx, url.UserPassword(c.cfg.Username, c.cfg.Password)); err != nil {
		return nil, nil, fmt.Errorf("vAPI login: %w", err)
	}
	logout := func() {
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), defaultCallTimeout)
		defer cancel()
		_ = rc.Logout(lctx)
	}
	return tags.NewManager(rc), logout, nil
}
