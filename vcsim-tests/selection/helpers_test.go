package selection

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/vapi/tags"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/service/inventory"
	"github.com/vmvault/vmvault/vcsim-tests/lab"
	"github.com/vmvault/vmvault/vcsim-tests/lab/labtest"
	"github.com/vmvault/vmvault/vsphere"
)

// The default lab: datacenter DC0 with cluster DC0_C0 (3 hosts) and the
// standalone host DC0_H0, two VMs on each.
const (
	hostVM0    = "DC0_H0_VM0"
	hostVM1    = "DC0_H0_VM1"
	clusterVM0 = "DC0_C0_RP0_VM0"
	clusterVM1 = "DC0_C0_RP0_VM1"
)

var allVMs = []string{clusterVM0, clusterVM1, hostVM0, hostVM1}

// env is one lab, a vsphere client logged in to it, the adapter under test
// and govmomi helpers (the lab's admin session) to rearrange the inventory.
type env struct {
	t   *testing.T
	ctx context.Context
	lab *lab.Lab
	c   *vsphere.Client
	inv *inventory.Inventory
}

func newEnv(t *testing.T, opts lab.Options) *env {
	t.Helper()
	l := labtest.Start(t, opts)
	c := labtest.Connect(t, labtest.Config(l, "selection-test", func(c *vsphere.Config) {
		c.Retry = vsphere.RetryPolicy{Attempts: 3, Base: 10 * time.Millisecond, Max: 50 * time.Millisecond}
	}))
	return &env{t: t, ctx: context.Background(), lab: l, c: c, inv: inventory.New(c)}
}

// find returns the one managed object of type kind named name (a container
// view over the whole inventory: independent of the code under test).
func (e *env) find(kind, name string) types.ManagedObjectReference {
	e.t.Helper()
	refs := e.findAll(kind, name)
	if len(refs) != 1 {
		e.t.Fatalf("%s %q: found %d", kind, name, len(refs))
	}
	return refs[0]
}

func (e *env) findAll(kind, name string) []types.ManagedObjectReference {
	e.t.Helper()
	c := e.lab.Admin().Client
	v, err := view.NewManager(c).CreateContainerView(e.ctx, c.ServiceContent.RootFolder, []string{kind}, true)
	if err != nil {
		e.t.Fatalf("container view: %v", err)
	}
	defer func() { _ = v.Destroy(e.ctx) }()
	var ents []mo.ManagedEntity
	if err := v.Retrieve(e.ctx, []string{kind}, []string{"name"}, &ents); err != nil {
		e.t.Fatalf("retrieve %s: %v", kind, err)
	}
	var out []types.ManagedObjectReference
	for _, me := range ents {
		if me.Name == name {
			out = append(out, me.Self)
		}
	}
	return out
}

// vmProps reads a VM's instance UUID, host and pool straight from the lab.
func (e *env) vmProps(name string) mo.VirtualMachine {
	e.t.Helper()
	var v mo.VirtualMachine
	pc := property.DefaultCollector(e.lab.Admin().Client)
	if err := pc.RetrieveOne(e.ctx, e.find("VirtualMachine", name), []string{"config.instanceUuid", "runtime.host", "resourcePool", "parent"}, &v); err != nil {
		e.t.Fatalf("VM %s: %v", name, err)
	}
	return v
}

func (e *env) uuid(name string) string {
	e.t.Helper()
	return e.vmProps(name).Config.InstanceUuid
}

// clusterRootPool is DC0_C0's "Resources" (the standalone host has one too).
func (e *env) clusterRootPool() types.ManagedObjectReference {
	e.t.Helper()
	var cl mo.ClusterComputeResource
	if err := property.DefaultCollector(e.lab.Admin().Client).RetrieveOne(e.ctx, e.find("ClusterComputeResource", "DC0_C0"), []string{"resourcePool"}, &cl); err != nil {
		e.t.Fatalf("cluster pool: %v", err)
	}
	return *cl.ResourcePool
}

func (e *env) wait(what string, task *object.Task, err error) {
	e.t.Helper()
	if err == nil {
		err = task.Wait(e.ctx)
	}
	if err != nil {
		e.t.Fatalf("%s: %v", what, err)
	}
}

func (e *env) mkFolder(parent types.ManagedObjectReference, name string) types.ManagedObjectReference {
	e.t.Helper()
	f, err := object.NewFolder(e.lab.Admin().Client, parent).CreateFolder(e.ctx, name)
	if err != nil {
		e.t.Fatalf("create folder %s: %v", name, err)
	}
	return f.Reference()
}

// moveIntoFolder is vCenter's drag-and-drop of VMs into a folder.
func (e *env) moveIntoFolder(folder types.ManagedObjectReference, vms ...string) {
	e.t.Helper()
	var refs []types.ManagedObjectReference
	for _, vm := range vms {
		refs = append(refs, e.find("VirtualMachine", vm))
	}
	task, err := object.NewFolder(e.lab.Admin().Client, folder).MoveInto(e.ctx, refs)
	e.wait(fmt.Sprintf("move %v into %s", vms, folder), task, err)
}

func (e *env) mkPool(parent types.ManagedObjectReference, name string) types.ManagedObjectReference {
	e.t.Helper()
	p, err := object.NewResourcePool(e.lab.Admin().Client, parent).Create(e.ctx, name, types.DefaultResourceConfigSpec())
	if err != nil {
		e.t.Fatalf("create pool %s: %v", name, err)
	}
	return p.Reference()
}

func (e *env) moveIntoPool(pool types.ManagedObjectReference, vm string) {
	e.t.Helper()
	v := object.NewVirtualMachine(e.lab.Admin().Client, e.find("VirtualMachine", vm))
	task, err := v.Relocate(e.ctx, types.VirtualMachineRelocateSpec{Pool: &pool}, types.VirtualMachineMovePriorityDefaultPriority)
	e.wait("relocate "+vm, task, err)
}

func (e *env) rename(ref types.ManagedObjectReference, name string) {
	e.t.Helper()
	task, err := object.NewCommon(e.lab.Admin().Client, ref).Rename(e.ctx, name)
	e.wait("rename "+ref.String(), task, err)
}

// tagID tags the VMs (creating category and tag when missing) and returns
// the tag's id as the tagging service reports it.
func (e *env) tagID(category, tag string, vms ...string) string {
	e.t.Helper()
	if err := e.lab.TagVMs(e.ctx, category, tag, vms...); err != nil {
		e.t.Fatalf("tag: %v", err)
	}
	rc := rest.NewClient(e.lab.Admin().Client)
	if err := rc.Login(e.ctx, url.UserPassword(e.lab.Username(), e.lab.Password())); err != nil {
		e.t.Fatalf("vAPI login: %v", err)
	}
	defer func() { _ = rc.Logout(e.ctx) }()
	m := tags.NewManager(rc)
	cat, err := m.GetCategory(e.ctx, category)
	if err != nil {
		e.t.Fatalf("category %s: %v", category, err)
	}
	tg, err := m.GetTagForCategory(e.ctx, tag, cat.ID)
	if err != nil {
		e.t.Fatalf("tag %s: %v", tag, err)
	}
	return tg.ID
}

func (e *env) resolve(sel policy.Selection, previous []string) policy.Resolution {
	e.t.Helper()
	if err := sel.Validate(); err != nil {
		e.t.Fatalf("selection %+v: %v", sel, err)
	}
	res, err := sel.Resolve(e.ctx, e.inv, previous)
	if err != nil {
		e.t.Fatalf("resolve: %v", err)
	}
	return res
}

func ref(kind policy.ContainerKind, r types.ManagedObjectReference) policy.ContainerRef {
	return policy.ContainerRef{Kind: kind, ID: r.Value}
}

func names(vms []policy.VM) []string {
	out := []string{}
	for _, v := range vms {
		out = append(out, v.Name)
	}
	slices.Sort(out)
	return out
}

func uuids(vms []policy.VM) []string {
	var out []string
	for _, v := range vms {
		out = append(out, v.InstanceUUID)
	}
	return out
}

func sorted(s ...string) []string {
	out := append([]string{}, s...)
	slices.Sort(out)
	return out
}
