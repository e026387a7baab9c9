package vmconfig

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Version is the version of the VMConfig JSON. Decode refuses versions it
// does not know.
const Version = 1

// ErrInvalid marks a Config blob that cannot be used (bad JSON, unknown
// version, missing or impossible fields).
var ErrInvalid = errors.New("invalid VM configuration")

// VMConfig is the VM configuration captured at backup time: everything a
// restore needs to recreate the VM.
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
	// ExtraConfig holds the selected advanced settings worth restoring.
	ExtraConfig map[string]string `json:"extra_config,omitempty"`
	// HostDevices lists devices tied to the source host (USB, serial and
	// parallel ports, PCI passthrough, floppy): not restored, but named in
	// the restore's warnings. Absent in points made before it existed.
	HostDevices []HostDeviceConfig `json:"host_devices,omitempty"`
}

// ControllerConfig is a disk controller, derived from the disks attached to it.
type ControllerConfig struct {
	Key  int32  `json:"key"`
	Type string `json:"type"` // scsi, sata, nvme, ide, other
	Bus  int32  `json:"bus"`
	// Model is the exact controller model when the backup recorded it
	// ("pvscsi", "lsilogic", "lsilogic-sas", "buslogic", "ahci", "nvme", …;
	// vsphere.VMDetails.ControllerModels). Empty in configurations written
	// before it existed: restore then picks a SCSI model and warns.
	Model string `json:"model,omitempty"`
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

// Encode returns the JSON stored in the Config blob.
func Encode(c VMConfig) ([]byte, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode VM configuration: %w", err)
	}
	return b, nil
}

// Decode parses a Config blob written by Encode (or backup.EncodeVMConfig).
// Errors wrap ErrInvalid.
func Decode(b []byte) (VMConfig, error) {
	var c VMConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("decode VM configuration: %w: %v", ErrInvalid, err)
	}
	if c.Version != Version {
		return c, fmt.Errorf("decode VM configuration: %w: version %d, this build reads version %d", ErrInvalid, c.Version, Version)
	}
	if c.Name == "" {
		return c, fmt.Errorf("decode VM configuration: %w: no VM name", ErrInvalid)
	}
	for i, d := range c.Disks {
		if d.CapacityBytes < 0 {
			return c, fmt.Errorf("decode VM configuration: %w: disk %d has negative capacity %d", ErrInvalid, i, d.CapacityBytes)
		}
	}
	return c, nil
}

// HostDeviceConfig is a device a restore does not recreate.
type HostDeviceConfig struct {
	Kind  string `json:"kind"`
	Label string `json:"label"`
}
