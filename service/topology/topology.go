package topology

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/vmvault/vmvault/internal/cache"
	"github.com/vmvault/vmvault/vsphere"
	"github.com/vmvault/vmvault/web/api"
)

// inventoryTTL is how long one vCenter inventory read serves the console:
// many tabs polling the tree cost one PropertyCollector read per interval.
const inventoryTTL = 5 * time.Second

// InventoryReader is the one vsphere call the topology needs; *vsphere.Client has it.
type InventoryReader interface {
	Inventory(ctx context.Context) (*vsphere.Inventory, error)
}

// Topology implements web.Topology over the daemon's vCenter
// session. Reads within inventoryTTL share one inventory; concurrent
// misses share one read; a failed read is not cached.
type Topology struct {
	cache *cache.TTL[struct{}, *vsphere.Inventory]
}

// New returns the topology over src; opts go to its cache
// (cache.WithClock in tests).
func New(src InventoryReader, opts ...cache.Option) *Topology {
	load := func(ctx context.Context, _ struct{}) (*vsphere.Inventory, error) { return src.Inventory(ctx) }
	return &Topology{cache: cache.New(inventoryTTL, load, opts...)}
}

func (t *Topology) inventory(ctx context.Context) (*vsphere.Inventory, error) {
	return t.cache.Get(ctx, struct{}{})
}

// Nodes implements web.Topology.
func (t *Topology) Nodes(ctx context.Context) ([]api.InventoryNode, error) {
	inv, err := t.inventory(ctx)
	if err != nil {
		return nil, err
	}
	return inventoryNodes(inv), nil
}

// Targets implements web.Topology.
func (t *Topology) Targets(ctx context.Context) (api.RestoreTargets, error) {
	inv, err := t.inventory(ctx)
	if err != nil {
		return api.RestoreTargets{}, err
	}
	return restoreTargets(inv), nil
}

// parentPath returns the inventory path one level up ("" above the top).
func parentPath(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return ""
	}
	return p[:i]
}

// inventoryNodes flattens the inventory. vsphere names every object by its
// inventory path (vCenter escapes '/' inside names), so an object's parent
// is the nearest listed object up its path: a standalone host's compute
// resource, which is not listed, is skipped over to the host folder.
func inventoryNodes(inv *vsphere.Inventory) []api.InventoryNode {
	var nodes []api.InventoryNode
	add := func(id, typ, name, path string) *api.InventoryNode {
		nodes = append(nodes, api.InventoryNode{ID: id, Type: typ, Name: name, Path: path})
		return &nodes[len(nodes)-1]
	}
	for _, d := range inv.Datacenters {
		add(d.MoRef, api.NodeDatacenter, d.Name, d.Path)
	}
	for _, f := range inv.Folders {
		add(f.MoRef, api.NodeFolder, f.Name, f.Path)
	}
	for _, c := range inv.Clusters {
		add(c.MoRef, api.NodeCluster, c.Name, c.Path)
	}
	for _, h := range inv.Hosts {
		add(h.MoRef, api.NodeHost, h.Name, h.Path)
	}
	for _, p := range inv.ResourcePools {
		add(p.MoRef, api.NodeResourcePool, p.Name, p.Path)
	}
	for _, v := range inv.VMs {
		n := add(v.MoRef, api.NodeVM, v.Name, v.Path)
		n.InstanceUUID, n.PowerState, n.Template = v.InstanceUUID, v.PowerState, v.Template
	}
	byPath := make(map[string]string, len(nodes))
	for _, n := range nodes {
		if _, dup := byPath[n.Path]; !dup {
			byPath[n.Path] = n.ID
		}
	}
	for i := range nodes {
		for p := parentPath(nodes[i].Path); p != ""; p = parentPath(p) {
			if id, ok := byPath[p]; ok && id != nodes[i].ID {
				nodes[i].Parent = id
				break
			}
		}
	}
	return nodes
}

// under reports whether path lies strictly inside dir.
func under(path, dir string) bool { return strings.HasPrefix(path, dir+"/") }

// restoreTargets groups the inventory's targets by datacenter: its VM
// folders (the "vm" folder and below), clusters and hosts, datastores with
// capacity and free space from vCenter's summary, and networks.
func restoreTargets(inv *vsphere.Inventory) api.RestoreTargets {
	rt := api.RestoreTargets{Datacenters: []api.TargetDatacenter{}}
	for _, d := range inv.Datacenters {
		td := api.TargetDatacenter{Name: d.Name, Path: d.Path, Folders: []string{}, Compute: []api.TargetCompute{},
			Datastores: []api.TargetDatastore{}, Networks: []api.TargetNetwork{}}
		vmRoot := d.Path + "/vm"
		for _, f := range inv.Folders {
			if f.Path == vmRoot || under(f.Path, vmRoot) {
				td.Folders = append(td.Folders, f.Path)
			}
		}
		for _, c := range inv.Clusters {
			if under(c.Path, d.Path) {
				td.Compute = append(td.Compute, api.TargetCompute{Name: c.Name, Type: "cluster", Path: c.Path})
			}
		}
		for _, h := range inv.Hosts {
			if under(h.Path, d.Path) {
				td.Compute = append(td.Compute, api.TargetCompute{Name: h.Name, Type: "host", Path: h.Path})
			}
		}
		for _, s := range inv.Datastores {
			if under(s.Path, d.Path) {
				td.Datastores = append(td.Datastores, api.TargetDatastore{Name: s.Name, Capacity: s.CapacityBytes, Free: s.FreeBytes, Type: s.Type, Accessible: s.Accessible})
			}
		}
		for _, n := range inv.Networks {
			if under(n.Path, d.Path) {
				td.Networks = append(td.Networks, api.TargetNetwork{ID: n.MoRef, Name: n.Name, Type: n.Type})
			}
		}
		rt.Datacenters = append(rt.Datacenters, td)
	}
	return rt
}

// VCenterTester implements web.VCenterTester with vsphere.Connect. The zero
// value has no vCenter configured.
type VCenterTester struct {
	mu         sync.Mutex
	configured *vsphere.Config // nil: no vCenter in the configuration
	connect    func(ctx context.Context, cfg vsphere.Config) (*vsphere.Client, error)
}

// SetConfigured replaces the connection that empty fields come from (the
// console saved a new one).
func (t *VCenterTester) SetConfigured(c *vsphere.Config) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.configured = c
}

func (t *VCenterTester) current() *vsphere.Config {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.configured
}

func sameURL(a, b string) bool {
	norm := func(s string) string {
		s = strings.TrimRight(strings.ToLower(strings.TrimSpace(s)), "/")
		return strings.TrimSuffix(s, "/sdk")
	}
	return norm(a) == norm(b)
}

// TestVCenter implements web.VCenterTester. Fields left empty come from
// the configured connection, but the configured password is only ever sent
// to the configured vCenter: another URL needs its own credentials.
func (t *VCenterTester) TestVCenter(ctx context.Context, req api.VCenterTest) (api.VCenterTestResult, error) {
	var cfg vsphere.Config
	configured := t.current()
	switch {
	case req.URL != "" && (configured == nil || !sameURL(req.URL, configured.URL)):
		if req.Username == "" {
			return api.VCenterTestResult{}, api.Invalid("username", "required to test a vCenter other than the configured one")
		}
		if req.Password == "" {
			return api.VCenterTestResult{}, api.Invalid("password", "required to test a vCenter other than the configured one")
		}
		cfg = vsphere.Config{URL: req.URL}
	case configured == nil:
		return api.VCenterTestResult{}, api.Invalid("url", "no vCenter is configured: give url, username and password")
	default:
		cfg = *configured
	}
	if req.Username != "" {
		cfg.Username = req.Username
	}
	if req.Password != "" {
		cfg.Password = req.Password
	}
	if req.Thumbprint != "" {
		cfg.Thumbprint, cfg.Insecure = req.Thumbprint, false
	}
	if req.Insecure {
		cfg.Insecure, cfg.Thumbprint = true, ""
	}
	cfg.KeepAlive = -1
	// One try: the person clicking "test" wants the answer, not retries.
	cfg.Retry = vsphere.RetryPolicy{Attempts: 1}
	connect := t.connect
	if connect == nil {
		connect = vsphere.Connect
	}
	c, err := connect(ctx, cfg)
	if err != nil {
		msg := err.Error()
		switch {
		case errors.Is(err, vsphere.ErrLogin):
			msg = "vCenter refused the user name or password: " + msg
		case strings.Contains(msg, "certificate"):
			msg += " (give the certificate's thumbprint, or its CA in the configuration)"
		}
		return api.VCenterTestResult{OK: false, Message: msg}, nil
	}
	version := c.About()
	host := c.Host()
	if err := c.Close(context.WithoutCancel(ctx)); err != nil {
		return api.VCenterTestResult{OK: true, Version: version, Message: fmt.Sprintf("connected to %s as %s; logging out failed: %v", host, cfg.Username, err)}, nil
	}
	return api.VCenterTestResult{OK: true, Version: version, Message: fmt.Sprintf("connected to %s as %s", host, cfg.Username)}, nil
}
