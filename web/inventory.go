package web

import (
	"context"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/vmvault/vmvault/web/api"
)

// vSphere's side: /inventory, /tags and /restore-targets.

// InventoryNode is one object of the vSphere tree (GET /inventory).
type InventoryNode = api.InventoryNode

// Inventory node types.
const (
	NodeDatacenter   = api.NodeDatacenter
	NodeFolder       = api.NodeFolder
	NodeCluster      = api.NodeCluster
	NodeHost         = api.NodeHost
	NodeResourcePool = api.NodeResourcePool
	NodeVM           = api.NodeVM
)

// The restore targets (GET /restore-targets).
type (
	RestoreTargets   = api.RestoreTargets
	TargetDatacenter = api.TargetDatacenter
	TargetCompute    = api.TargetCompute
	TargetDatastore  = api.TargetDatastore
	TargetNetwork    = api.TargetNetwork
)

// Topology reads vCenter's tree and restore targets; service/topology
// implements it over vsphere (with a short cache) and the daemon wires it. A nil Topology means no vCenter is
// configured: the routes answer 503.
type Topology interface {
	Nodes(ctx context.Context) ([]InventoryNode, error)
	Targets(ctx context.Context) (RestoreTargets, error)
}

// Tag is a vSphere tag (GET /tags).
type Tag = api.Tag

// TagSource lists vSphere's tags with their names and categories;
// service/topology implements it over the inventory's vAPI reading, with a
// short cache. A nil TagSource means no vCenter is configured: GET /tags answers 503.
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
