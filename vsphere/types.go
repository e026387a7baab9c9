package vsphere

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// VMRef identifies a VM. MoRef is the managed object id ("vm-42"), stable
// for the VM's life in one vCenter; InstanceUUID survives re-registration.
type VMRef struct {
	MoRef        string `json:"moref"`
	InstanceUUID string `json:"instanceUuid,omitempty"`
	Name         string `json:"name"`
}

// VM is a VM's inventory record.
type VM struct {
	VMRef
	Path         string `json:"path"` // inventory path, "/DC0/vm/web01"
	BIOSUUID     string `json:"biosUuid,omitempty"`
	Datacenter   string `json:"datacenter"`
	Host         string `json:"host,omitempty"`
	Cluster      string `json:"cluster,omitempty"`
	ResourcePool string `json:"resourcePool,omitempty"` // inventory path
	PowerState   string `json:"powerState"`             // poweredOn, poweredOff, suspended
	GuestID      string `json:"guestId,omitempty"`
	GuestFamily  string `json:"guestFamily,omitempty"` // windowsGuest, linuxGuest, …
	ToolsRunning bool   `json:"toolsRunning"`
	ToolsStatus  string `json:"toolsStatus,omitempty"`
	// ToolsVersion is guest.toolsVersion, VMware's encoded number
	// (ToolsVersionString decodes it); ToolsVersionStatus is
	// guest.toolsVersionStatus2 (guestToolsCurrent, guestToolsTooOld, …).
	ToolsVersion       string   `json:"toolsVersion,omitempty"`
	ToolsVersionStatus string   `json:"toolsVersionStatus,omitempty"`
	CBTEnabled         bool     `json:"cbtEnabled"`
	NumCPU             int32    `json:"numCpu"`
	MemoryMB           int32    `json:"memoryMb"`
	Template           bool     `json:"template,omitempty"`
	Encrypted          bool     `json:"encrypted,omitempty"`
	HasSnapshots       bool     `json:"hasSnapshots,omitempty"`
	Datastores         []string `json:"datastores,omitempty"`
	Disks              []Disk   `json:"disks"`
	NICs               []NIC    `json:"nics,omitempty"`
}

// ToolsVersionString decodes guest.toolsVersion (major<<10 | minor<<5 |
// build: "12352" is "12.2.0"); the input as it is when it is not a number,
// "" for "" and "0" (no Tools).
func ToolsVersionString(v string) string {
	n, err := strconv.ParseInt(v, 10, 64)
	switch {
	case v == "" || (err == nil && n == 0):
		return ""
	case err != nil || n < 0:
		return v
	}
	return fmt.Sprintf("%d.%d.%d", n>>10, (n>>5)&0x1f, n&0x1f)
}

// Disk is a virtual disk of a VM or of a snapshot.
type Disk struct {
	Key            int32  `json:"key"`
	Label          string `json:"label,omitempty"`
	CapacityBytes  int64  `json:"capacityBytes"`
	ControllerKey  int32  `json:"controllerKey"`
	ControllerType string `json:"controllerType,omitempty"` // scsi, sata, nvme, ide
	Bus            int32  `json:"bus"`
	Unit           int32  `json:"unit"`
	FileName       string `json:"fileName"`               // "[ds] vm/vm.vmdk" (the live delta once snapshotted)
	BaseFileName   string `json:"baseFileName,omitempty"` // bottom of the backing chain
	ChainDepth     int    `json:"chainDepth,omitempty"`   // number of parents below FileName
	// FrozenFileName is the top of the chain a snapshot froze: FileName's
	// parent once snapshotted (the live delta sits on it), FileName when the
	// disk has no parent (vcsim makes no deltas). HotAdd attaches it.
	FrozenFileName string `json:"frozenFileName,omitempty"`
	Datastore      string `json:"datastore,omitempty"`
	Mode           string `json:"mode,omitempty"` // persistent, independent_persistent, …
	Thin           bool   `json:"thin"`
	RDM            string `json:"rdm,omitempty"` // "", "virtualMode", "physicalMode"
	Independent    bool   `json:"independent,omitempty"`
	Encrypted      bool   `json:"encrypted,omitempty"`
	Sharing        string `json:"sharing,omitempty"`
	ChangeID       string `json:"changeId,omitempty"`
	UUID           string `json:"uuid,omitempty"`
	// Unsupported is why this disk cannot be backed up; empty when it can.
	Unsupported string `json:"unsupported,omitempty"`
}

// NIC is a virtual network adapter.
type NIC struct {
	Key       int32  `json:"key"`
	Label     string `json:"label,omitempty"`
	Type      string `json:"type"` // vmxnet3, e1000, …
	MAC       string `json:"mac,omitempty"`
	Network   string `json:"network,omitempty"` // network / port group name
	Connected bool   `json:"connected"`
}

// Datacenter, Folder, Cluster, Host, ResourcePool, Datastore and Network are
// inventory containers and resources; MoRef is the managed object id and Path
// the inventory path.
type Datacenter struct {
	MoRef string `json:"moref"`
	Name  string `json:"name"`
	Path  string `json:"path"`
}

// Folder is an inventory folder.
type Folder struct {
	MoRef string `json:"moref"`
	Name  string `json:"name"`
	Path  string `json:"path"`
}

// Cluster is a compute cluster.
type Cluster struct {
	MoRef string   `json:"moref"`
	Name  string   `json:"name"`
	Path  string   `json:"path"`
	Hosts []string `json:"hosts,omitempty"`
}

// Host is an ESXi host.
type Host struct {
	MoRef           string `json:"moref"`
	Name            string `json:"name"`
	Path            string `json:"path"`
	Cluster         string `json:"cluster,omitempty"`
	ConnectionState string `json:"connectionState,omitempty"`
}

// ResourcePool is a resource pool (including a cluster's root pool "Resources").
type ResourcePool struct {
	MoRef string `json:"moref"`
	Name  string `json:"name"`
	Path  string `json:"path"`
}

// Datastore is a datastore with its type (VMFS, NFS, vsan, VVOL) and space.
type Datastore struct {
	MoRef         string `json:"moref"`
	Name          string `json:"name"`
	Path          string `json:"path"`
	Type          string `json:"type"`
	CapacityBytes int64  `json:"capacityBytes"`
	FreeBytes     int64  `json:"freeBytes"`
	Accessible    bool   `json:"accessible"`
}

// Network is a standard network, a distributed port group or an opaque network.
type Network struct {
	MoRef string `json:"moref"`
	Name  string `json:"name"`
	Path  string `json:"path"`
	Type  string `json:"type"` // Network, DistributedVirtualPortgroup, OpaqueNetwork
}

// Inventory is everything vmvault shows of one vCenter.
type Inventory struct {
	Datacenters   []Datacenter   `json:"datacenters"`
	Folders       []Folder       `json:"folders"`
	Clusters      []Cluster      `json:"clusters"`
	Hosts         []Host         `json:"hosts"`
	ResourcePools []ResourcePool `json:"resourcePools"`
	Datastores    []Datastore    `json:"datastores"`
	Networks      []Network      `json:"networks"`
	VMs           []VM           `json:"vms"`
}

// Snapshot is a VM snapshot with the disks as the snapshot sees them (their
// change ids are what the next incremental passes back to ChangedAreas).
type Snapshot struct {
	MoRef       string    `json:"moref"`
	VM          VMRef     `json:"vm"`
	Name        string    `json:"name"`
	Description string    `json:"description"`
	Created     time.Time `json:"created"`
	Quiesced    bool      `json:"quiesced"`
	// Quiesce is the quiesce spec CreateSnapshot sent for this snapshot
	// (zero for one it did not create or did not quiesce).
	Quiesce QuiesceSent `json:"quiesce,omitzero"`
	// Parent is the snapshot this one was taken on top of ("" for a root).
	Parent string `json:"parent,omitempty"`
	Disks  []Disk `json:"disks,omitempty"`
}

// Disk returns the snapshot's disk with the given device key.
func (s *Snapshot) Disk(key int32) (Disk, bool) {
	for _, d := range s.Disks {
		if d.Key == key {
			return d, true
		}
	}
	return Disk{}, false
}

// Extent is a byte range of a disk.
type Extent struct {
	Offset int64 `json:"offset"`
	Length int64 `json:"length"`
}

// End is Offset+Length.
func (e Extent) End() int64 { return e.Offset + e.Length }

// changeIDEpoch is the part of a change id before the sequence ("52 ab …/17"
// -> "52 ab …"): it changes when CBT is reset.
func changeIDEpoch(id string) string {
	if i := strings.LastIndexByte(id, '/'); i >= 0 {
		return id[:i]
	}
	return id
}
