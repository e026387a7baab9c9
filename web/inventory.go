package web

import (
	"context"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"
)

// vSphere's side: /inventory, /tags and /restore-targets.

// InventoryNode is one object of the vSphere tree (GET /inventory): a flat
// list the console turns into a tree through Parent.
type InventoryNode struct {
	ID           string `json:"id"`     // managed object id, e.g. "datacenter-2", "vm-42"
	Type         string `json:"type"`   // datacenter, folder, cluster, host, resource-pool, vm
	Name         string `json:"name"`   // as vCenter shows it
	Parent       string `json:"parent"` // id of the nearest listed ancestor; "" at the top
	Path         string `json:"path"`   // inventory path, "/DC0/vm/web01"
	InstanceUUID string `json:"instanceUuid,omitempty"`
	PowerState   string `json:"powerState,omitempty"` // VMs: poweredOn, poweredOff, suspended
	Template     bool   `json:"template,omitempty"`
	// Tags are a VM's tag ids (GET /tags names them); absent when it has
	// none or the tagging service could not be read.
	Tags []string `json:"tags,omitempty"`
}

// Inventory node types.
const (
	NodeDatacenter   = "datacenter"
	NodeFolder       = "folder"
	NodeCluster      = "cluster"
	NodeHost         = "host"
	NodeResourcePool = "resource-pool"
	NodeVM           = "vm"
)

// RestoreTargets are the places a restore can go (GET /restore-targets).
type RestoreTargets struct {
	Datacenters []TargetDatacenter `json:"datacenters"`
}

// TargetDatacenter is one datacenter's restore targets.
type TargetDatacenter struct {
	Name       string            `json:"name"`
	Path       string            `json:"path"`
	Folders    []string          `json:"folders"` // VM folder inventory paths
	Compute    []TargetCompute   `json:"compute"`
	Datastores []TargetDatastore `json:"datastores"`
	Networks   []TargetNetwork   `json:"networks"`
}

// TargetCompute is a cluster or a host a restored VM can run on.
type TargetCompute struct {
	Name string `json:"name"`
	Type string `json:"type"` // "cluster" or "host"
	Path string `json:"path"`
}

// TargetDatastore is a datastore with its space (bytes) from vCenter's summary.
type TargetDatastore struct {
	Name       string `json:"name"`
	Capacity   int64  `json:"capacity"`
	Free       int64  `json:"free"`
	Type       string `json:"type,omitempty"`
	Accessible bool   `json:"accessible"`
}

// TargetNetwork is a network or port group. ID is its managed object id: a
// backup records a distributed port group's NIC by it (PointNIC.Network).
type TargetNetwork struct {
	ID   string `json:"id,omitempty"`
	Name string `json:"name"`
	Type string `json:"type,omitempty"`
}

// Topology reads vCenter's tree and restore targets; the daemon implements
// it over vsphere (with a short cache). A nil Topology means no vCenter is
// configured: the routes answer 503.
type Topology interface {
	Nodes(ctx context.Context) ([]InventoryNode, error)
	Targets(ctx context.Context) (RestoreTargets, error)
}

// Tag is a vSphere tag (GET /tags). Jobs select and exclude VMs by ID: a
// renamed tag still selects, and two categories may hold the same name.
type Tag struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Category string `json:"category"`
}

// TagSource lists vSphere's tags with their names and categories; the
// daemon implements it over the inventory's vAPI reading, with a short
// cache. A nil TagSource means no vCenter is configured: GET /tags answers 503.
type TagSource interface {
	Tags(ctx context.Context) ([]Tag, error)
}

// VMTagSource is what a TagSource may also offer: each VM's tag ids by
// managed object id, from the same cached reading. GET /inventory uses it
// for its VM nodes; without it, it reads the policy inventory.
type VMTagSource interface {
	VMTags(ctx context.Context) (map[string][]string, error)
}

func (s *Server) topology() (Topology, error) {
	if s.cfg.Topology == nil {
		return nil, &apiError{status: http.StatusServiceUnavailable, code: "vcenter_not_configured", msg: "no vCenter is configured on this appliance"}
	}
	return s.cfg.Topology, nil
}

// InventoryResponse is GET /inventory.
type InventoryResponse struct {
	Nodes []InventoryNode `json:"nodes"`
}

func (s *Server) inventoryTree(c *gin.Context) (any, error) {
	t, err := s.topology()
	if err != nil {
		return nil, err
	}
	nodes, err := t.Nodes(c.Request.Context())
	if err != nil {
		return nil, fmt.Errorf("read the vCenter inventory: %v: %w", err, ErrUnavailable)
	}
	if nodes == nil {
		nodes = []InventoryNode{}
	}
	s.tagNodes(c.Request.Context(), nodes)
	return InventoryResponse{Nodes: nodes}, nil
}

// tagNodes sets the tags of the VM nodes: from the tag source's cached
// reading when it offers VM tags (VMTagSource), else from the policy
// inventory (the reading the scheduler selects from). The tree matters
// more than its tags: when they cannot be read the nodes go without, and
// GET /tags says why.
func (s *Server) tagNodes(ctx context.Context, nodes []InventoryNode) {
	byRef := map[string][]string{}
	byUUID := map[string][]string{}
	if vt, ok := s.cfg.Tags.(VMTagSource); ok && vt != nil {
		m, err := vt.VMTags(ctx)
		if err != nil {
			s.cfg.Logger.Warn("inventory tree without tags", "err", err)
			return
		}
		byRef = m
	} else {
		if s.cfg.Inventory == nil {
			return
		}
		vms, err := s.cfg.Inventory.VMs(ctx)
		if err != nil {
			s.cfg.Logger.Warn("inventory tree without tags", "err", err)
			return
		}
		for _, v := range vms {
			if len(v.Tags) == 0 {
				continue
			}
			if v.MoRef != "" {
				byRef[v.MoRef] = v.Tags
			}
			byUUID[v.InstanceUUID] = v.Tags
		}
	}
	for i := range nodes {
		n := &nodes[i]
		if n.Type != NodeVM {
			continue
		}
		t, ok := byRef[n.ID]
		if !ok && n.InstanceUUID != "" {
			t = byUUID[n.InstanceUUID]
		}
		if len(t) > 0 {
			n.Tags = append([]string(nil), t...)
		}
	}
}

// listTags is GET /tags: vSphere's tags with their names and categories.
func (s *Server) listTags(c *gin.Context) (any, error) {
	if s.cfg.Tags == nil {
		return nil, &apiError{status: http.StatusServiceUnavailable, code: "vcenter_not_configured", msg: "no vCenter is configured on this appliance"}
	}
	tags, err := s.cfg.Tags.Tags(c.Request.Context())
	if err != nil {
		return nil, fmt.Errorf("read the vSphere tags: %v: %w", err, ErrUnavailable)
	}
	if tags == nil {
		tags = []Tag{}
	}
	return tags, nil
}

func (s *Server) restoreTargets(c *gin.Context) (any, error) {
	t, err := s.topology()
	if err != nil {
		return nil, err
	}
	rt, err := t.Targets(c.Request.Context())
	if err != nil {
		return nil, fmt.Errorf("read the vCenter restore targets: %v: %w", err, ErrUnavailable)
	}
	if rt.Datacenters == nil {
		rt.Datacenters = []TargetDatacenter{}
	}
	for i := range rt.Datacenters {
		d := &rt.Datacenters[i]
		if d.Folders == nil {
			d.Folders = []string{}
		}
		if d.Compute == nil {
			d.Compute = []TargetCompute{}
		}
		if d.Datastores == nil {
			d.Datastores = []TargetDatastore{}
		}
		if d.Networks == nil {
			d.Networks = []TargetNetwork{}
		}
	}
	return rt, nil
}
