package backup

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/vmvault/vmvault/vsphere"
)

// ConfigVersion is the version of the VMConfig JSON stored in every restore
// point's Config blob. Restore refuses versions it does not know.
const ConfigVersion = 1

// VMConfig is the VM configuration captured at backup time: everything a
// restore needs to recreate the VM. It is stored as JSON in the restore
// point's Config blob (repository.Point.ConfigID); DecodeVMConfig reads it.
type VMConfig struct {
	Version      int    `json:"version"`
	Name         string `json:"name"`
	MoRef        string `json:"moref,omitempty"`
	InstanceUUID string `json:"instance_uuid,omitempty"`
	BIOSUUID     string `json:"bios_uuid,omitempty"`
	Path         string `json:"path,omitempty"`
	Datacenter   string `json:"datacenter,omitempty"`
	Cluster      string `json:"cluster,omitempty"`
	Host         string `json:"host,omitempty"`
	ResourcePool string `json:"resource_pool,omitempty"`
	PowerState   string `json:"power_state,omitempty"`
	GuestID      string `json:"guest_id,omitempty"`
	GuestFamily  string `json:"guest_family,omitempty"`
	// Firmware is "bios" or "efi"; empty when the source did not say.
	Firmware       string `json:"firmware,omitempty"`
	NumCPU         int32  `json:"num_cpu"`
	CoresPerSocket int32  `json:"cores_per_socket,omitempty"`
	MemoryMB       int32  `json:"memory_mb"`
	Annotation     string `json:"annotation,omitempty"`
	// Datastores the VM's files live on.
	Datastores  []string           `json:"datastores,omitempty"`
	Controllers []ControllerConfig `json:"controllers,omitempty"`
	Disks       []DiskConfig       `json:"disks"`
	NICs        []NICConfig        `json:"nics,omitempty"`
	// ExtraConfig holds the selected advanced settings worth restoring
	// (see SelectExtraConfig).
	ExtraConfig map[string]string `json:"extra_config,omitempty"`
}

// ControllerConfig is a disk controller, derived from the disks attached to it.
type ControllerConfig struct {
	Key  int32  `json:"key"`
	Type string `json:"type"` // scsi, sata, nvme, ide, other
	Bus  int32  `json:"bus"`
}

// DiskConfig is one virtual disk. Index is its position in the restore
// point's Disks (-1 when it was not backed up: Skipped says why).
type DiskConfig struct {
	Key            int32  `json:"key"`
	Index          int    `json:"index"`
	Label          string `json:"label,omitempty"`
	CapacityBytes  int64  `json:"capacity_bytes"`
	ControllerKey  int32  `json:"controller_key"`
	ControllerType string `json:"controller_type,omitempty"`
	Bus            int32  `json:"bus"`
	Unit           int32  `json:"unit"`
	Thin           bool   `json:"thin"`
	Mode           string `json:"mode,omitempty"`
	Datastore      string `json:"datastore,omitempty"`
	FileName       string `json:"file_name,omitempty"`
	UUID           string `json:"uuid,omitempty"`
	Skipped        string `json:"skipped,omitempty"`
}

// NICConfig is one network adapter.
type NICConfig struct {
	Key       int32  `json:"key"`
	Label     string `json:"label,omitempty"`
	Type      string `json:"type"`
	MAC       string `json:"mac,omitempty"`
	Network   string `json:"network,omitempty"`
	Connected bool   `json:"connected"`
}

// ConfigDetails are the parts of a VM's configuration that vsphere.VM does
// not carry. A VMSource that also implements DetailSource provides them.
type ConfigDetails struct {
	Firmware       string
	CoresPerSocket int32
	Annotation     string
	ExtraConfig    map[string]string
}

// extraConfigKeys are the advanced settings a restore needs (the rest are
// host-specific or regenerated).
var extraConfigKeys = map[string]bool{
	"disk.EnableUUID": true, "svga.present": true, "tools.syncTime": true,
	"uefi.secureBoot.enabled": true, "vhv.enable": true, "numa.vcpu.preferHT": true,
	"isolation.tools.copy.disable": true, "isolation.tools.paste.disable": true,
}

// SelectExtraConfig keeps the advanced settings worth restoring.
func SelectExtraConfig(all map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range all {
		if extraConfigKeys[k] {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// captureConfig builds the VMConfig from the VM record and the snapshot's
// view of the disks (capacity and backing as frozen).
func captureConfig(vm vsphere.VM, snapDisks []vsphere.Disk, det ConfigDetails, index map[int32]int, skipped map[int32]string) VMConfig {
	c := VMConfig{
		Version: ConfigVersion, Name: vm.Name, MoRef: vm.MoRef, InstanceUUID: vm.InstanceUUID, BIOSUUID: vm.BIOSUUID,
		Path: vm.Path, Datacenter: vm.Datacenter, Cluster: vm.Cluster, Host: vm.Host, ResourcePool: vm.ResourcePool,
		PowerState: vm.PowerState, GuestID: vm.GuestID, GuestFamily: vm.GuestFamily,
		Firmware: det.Firmware, NumCPU: vm.NumCPU, CoresPerSocket: det.CoresPerSocket, MemoryMB: vm.MemoryMB,
		Annotation: det.Annotation, Datastores: vm.Datastores, ExtraConfig: SelectExtraConfig(det.ExtraConfig),
		Disks: []DiskConfig{},
	}
	ctls := map[int32]ControllerConfig{}
	for _, d := range snapDisks {
		idx, ok := index[d.Key]
		if !ok {
			idx = -1
		}
		c.Disks = append(c.Disks, DiskConfig{
			Key: d.Key, Index: idx, Label: d.Label, CapacityBytes: d.CapacityBytes, ControllerKey: d.ControllerKey,
			ControllerType: d.ControllerType, Bus: d.Bus, Unit: d.Unit, Thin: d.Thin, Mode: d.Mode,
			Datastore: d.Datastore, FileName: d.BaseFileName, UUID: d.UUID, Skipped: skipped[d.Key],
		})
		if d.ControllerType != "" {
			ctls[d.ControllerKey] = ControllerConfig{Key: d.ControllerKey, Type: d.ControllerType, Bus: d.Bus}
		}
	}
	for _, ct := range ctls {
		c.Controllers = append(c.Controllers, ct)
	}
	sort.Slice(c.Controllers, func(i, j int) bool { return c.Controllers[i].Key < c.Controllers[j].Key })
	for _, n := range vm.NICs {
		c.NICs = append(c.NICs, NICConfig{Key: n.Key, Label: n.Label, Type: n.Type, MAC: n.MAC, Network: n.Network, Connected: n.Connected})
	}
	return c
}

// EncodeVMConfig returns the JSON stored in the Config blob.
func EncodeVMConfig(c VMConfig) ([]byte, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode VM configuration: %w", err)
	}
	return b, nil
}

// DecodeVMConfig parses a Config blob written by EncodeVMConfig.
func DecodeVMConfig(b []byte) (VMConfig, error) {
	var c VMConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("decode VM configuration: %w", err)
	}
	if c.Version != ConfigVersion {
		return c, fmt.Errorf("decode VM configuration: version %d, this build reads version %d", c.Version, ConfigVersion)
	}
	if c.Name == "" {
		return c, fmt.Errorf("decode VM configuration: no VM name")
	}
	for i, d := range c.Disks {
		if d.CapacityBytes < 0 {
			return c, fmt.Errorf("decode VM configuration: disk %d has negative capacity %d", i, d.CapacityBytes)
		}
	}
	return c, nil
}
