package backup

import (
	"sort"

	"github.com/vmvault/vmvault/vmconfig"
	"github.com/vmvault/vmvault/vsphere"
)

// The VM configuration stored in every restore point's Config blob is
// vmconfig's (the contract with restore); these aliases keep backup's API.
type (
	VMConfig         = vmconfig.VMConfig
	ControllerConfig = vmconfig.ControllerConfig
	DiskConfig       = vmconfig.DiskConfig
	NICConfig        = vmconfig.NICConfig
)

// ConfigVersion is the version of the VMConfig JSON.
const ConfigVersion = vmconfig.Version

// ConfigDetails are the parts of a VM's configuration that vsphere.VM does
// not carry. A VMSource that also implements DetailSource provides them.
type ConfigDetails struct {
	Firmware       string
	CoresPerSocket int32
	Annotation     string
	ExtraConfig    map[string]string
	// ControllerModels maps a controller key to its exact model ("pvscsi",
	// "lsilogic", …), so a restore recreates the controller the guest's
	// drivers expect.
	ControllerModels map[int32]string
	// HostDevices are devices a restore cannot recreate (USB, serial…).
	HostDevices []vmconfig.HostDeviceConfig
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
		HostDevices: det.HostDevices,
		Disks:       []DiskConfig{},
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
			ctls[d.ControllerKey] = ControllerConfig{Key: d.ControllerKey, Type: d.ControllerType, Bus: d.Bus, Model: det.ControllerModels[d.ControllerKey]}
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
func EncodeVMConfig(c VMConfig) ([]byte, error) { return vmconfig.Encode(c) }

// DecodeVMConfig parses a Config blob (errors wrap vmconfig.ErrInvalid).
func DecodeVMConfig(b []byte) (VMConfig, error) { return vmconfig.Decode(b) }
