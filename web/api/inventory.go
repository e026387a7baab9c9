package api

// vSphere's side of the API: the inventory tree (GET /inventory), the
// restore targets (GET /restore-targets), the tags (GET /tags) and the
// vCenter connection test (POST /settings/vcenter/test).

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

// Tag is a vSphere tag (GET /tags). Jobs select and exclude VMs by ID: a
// renamed tag still selects, and two categories may hold the same name.
type Tag struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Category string `json:"category"`
}

// VCenterTest is the body of POST /settings/vcenter/test; empty fields mean
// the configured connection's.
type VCenterTest struct {
	URL        string `json:"url,omitempty"`
	Username   string `json:"username,omitempty"`
	Password   string `json:"password,omitempty"`
	Thumbprint string `json:"thumbprint,omitempty"`
	Insecure   bool   `json:"insecure,omitempty"`
}

// VCenterTestResult is what a connection test found.
type VCenterTestResult struct {
	OK      bool   `json:"ok"`
	Version string `json:"version,omitempty"` // vCenter's full name and build
	Message string `json:"message"`
}
