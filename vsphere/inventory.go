package vsphere

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// vmProps are the VM properties one inventory retrieve asks for.
var vmProps = []string{
	"name", "parent", "resourcePool", "datastore", "network", "snapshot",
	"config.instanceUuid", "config.uuid", "config.guestId", "config.template", "config.changeTrackingEnabled",
	"config.hardware.numCPU", "config.hardware.memoryMB", "config.hardware.device", "config.keyId",
	"runtime.powerState", "runtime.host", "guest.guestFamily", "guest.toolsRunningStatus", "guest.toolsStatus",
	"guest.toolsVersion", "guest.toolsVersionStatus2",
}

var entityProps = map[string][]string{
	"Datacenter":      {"name", "parent"},
	"Folder":          {"name", "parent"},
	"ComputeResource": {"name", "parent", "host"},
	"HostSystem":      {"name", "parent", "runtime.connectionState"},
	"ResourcePool":    {"name", "parent"},
	"Datastore":       {"name", "parent", "summary"},
	"Network":         {"name", "parent"},
	"VirtualMachine":  vmProps,
}

// retrieveViews creates one recursive ContainerView per container and reads
// the given properties of every object of the given kinds under all of them
// in one RetrievePropertiesEx (plus continuation pages): a handful of round
// trips whatever the number of objects.
func (c *Client) retrieveViews(ctx context.Context, containers []types.ManagedObjectReference, props map[string][]string) ([]types.ObjectContent, error) {
	kinds := make([]string, 0, len(props))
	for k := range props {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	vm := c.vim.ServiceContent.ViewManager
	var views []types.ManagedObjectReference
	defer func() {
		// A fresh context: views must be destroyed even when ctx was cancelled.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), defaultCallTimeout)
		defer cancel()
		for _, v := range views {
			_, _ = methods.DestroyView(dctx, c.vim, &types.DestroyView{This: v})
		}
	}()
	spec := types.PropertyFilterSpec{}
	for _, ct := range containers {
		res, err := methods.CreateContainerView(ctx, c.vim, &types.CreateContainerView{This: *vm, Container: ct, Type: kinds, Recursive: true})
		if err != nil {
			return nil, mapFault("create container view on "+ct.String(), err)
		}
		views = append(views, res.Returnval)
		spec.ObjectSet = append(spec.ObjectSet, types.ObjectSpec{
			Obj:  res.Returnval,
			Skip: types.NewBool(true),
			SelectSet: []types.BaseSelectionSpec{&types.TraversalSpec{
				Type: "ContainerView", Path: "view",
			}},
		})
	}
	for _, k := range kinds {
		spec.PropSet = append(spec.PropSet, types.PropertySpec{Type: k, PathSet: props[k]})
	}
	return c.retrieve(ctx, spec)
}

// retrieve runs RetrievePropertiesEx and follows continuation tokens.
func (c *Client) retrieve(ctx context.Context, spec types.PropertyFilterSpec) ([]types.ObjectContent, error) {
	pc := c.vim.ServiceContent.PropertyCollector
	res, err := methods.RetrievePropertiesEx(ctx, c.vim, &types.RetrievePropertiesEx{This: pc, SpecSet: []types.PropertyFilterSpec{spec}})
	if err != nil {
		return nil, mapFault("retrieve properties", err)
	}
	if res.Returnval == nil {
		return nil, nil
	}
	out := res.Returnval.Objects
	for tok := res.Returnval.Token; tok != ""; {
		cres, err := methods.ContinueRetrievePropertiesEx(ctx, c.vim, &types.ContinueRetrievePropertiesEx{This: pc, Token: tok})
		if err != nil {
			return nil, mapFault("continue retrieve properties", err)
		}
		out = append(out, cres.Returnval.Objects...)
		tok = cres.Returnval.Token
	}
	return out, nil
}

// entityIndex knows every retrieved entity's name and parent, to build
// inventory paths without a round trip per object.
type entityIndex struct {
	name   map[types.ManagedObjectReference]string
	parent map[types.ManagedObjectReference]types.ManagedObjectReference
}

func (ix *entityIndex) path(ref types.ManagedObjectReference) string {
	var parts []string
	for i := 0; i < 64; i++ {
		n, ok := ix.name[ref]
		if !ok {
			break
		}
		parts = append(parts, n)
		p, ok := ix.parent[ref]
		if !ok {
			break
		}
		ref = p
	}
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return "/" + strings.Join(parts, "/")
}

func (ix *entityIndex) ancestor(ref types.ManagedObjectReference, kind string) (types.ManagedObjectReference, bool) {
	for i := 0; i < 64; i++ {
		p, ok := ix.parent[ref]
		if !ok {
			return types.ManagedObjectReference{}, false
		}
		if p.Type == kind {
			return p, true
		}
		ref = p
	}
	return types.ManagedObjectReference{}, false
}

// Inventory reads the whole inventory under the root folder with one
// ContainerView and one property retrieve.
func (c *Client) Inventory(ctx context.Context) (*Inventory, error) {
	ocs, err := c.retrieveViews(ctx, []types.ManagedObjectReference{c.vim.ServiceContent.RootFolder}, entityProps)
	if err != nil {
		return nil, fmt.Errorf("inventory: %w", err)
	}
	ix := &entityIndex{name: map[types.ManagedObjectReference]string{}, parent: map[types.ManagedObjectReference]types.ManagedObjectReference{}}
	objs := make([]any, 0, len(ocs))
	for _, oc := range ocs {
		o, err := mo.ObjectContentToType(oc)
		if err != nil {
			return nil, fmt.Errorf("inventory: decode %s: %w", oc.Obj, err)
		}
		objs = append(objs, o)
		if me, ok := managedEntity(o); ok {
			ix.name[oc.Obj] = me.Name
			if me.Parent != nil {
				ix.parent[oc.Obj] = *me.Parent
			}
		}
	}
	inv := &Inventory{}
	netNames := map[string]string{}
	hostInfo := map[types.ManagedObjectReference]Host{}
	for _, o := range objs {
		switch v := o.(type) {
		case mo.Network:
			netNames[v.Self.Value] = v.Name
		case mo.DistributedVirtualPortgroup:
			netNames[v.Self.Value] = v.Name
		case mo.OpaqueNetwork:
			netNames[v.Self.Value] = v.Name
		}
	}
	for _, o := range objs {
		switch v := o.(type) {
		case mo.Datacenter:
			inv.Datacenters = append(inv.Datacenters, Datacenter{MoRef: v.Self.Value, Name: v.Name, Path: ix.path(v.Self)})
		case mo.Folder:
			inv.Folders = append(inv.Folders, Folder{MoRef: v.Self.Value, Name: v.Name, Path: ix.path(v.Self)})
		case mo.ClusterComputeResource:
			cl := Cluster{MoRef: v.Self.Value, Name: v.Name, Path: ix.path(v.Self)}
			for _, h := range v.Host {
				cl.Hosts = append(cl.Hosts, ix.name[h])
			}
			inv.Clusters = append(inv.Clusters, cl)
		case mo.HostSystem:
			h := Host{MoRef: v.Self.Value, Name: v.Name, Path: ix.path(v.Self), ConnectionState: string(v.Runtime.ConnectionState)}
			if v.Parent != nil && v.Parent.Type == "ClusterComputeResource" {
				h.Cluster = ix.name[*v.Parent]
			}
			hostInfo[v.Self] = h
			inv.Hosts = append(inv.Hosts, h)
		case mo.ResourcePool:
			inv.ResourcePools = append(inv.ResourcePools, ResourcePool{MoRef: v.Self.Value, Name: v.Name, Path: ix.path(v.Self)})
		case mo.Datastore:
			inv.Datastores = append(inv.Datastores, Datastore{
				MoRef: v.Self.Value, Name: v.Name, Path: ix.path(v.Self), Type: v.Summary.Type,
				CapacityBytes: v.Summary.Capacity, FreeBytes: v.Summary.FreeSpace, Accessible: v.Summary.Accessible,
			})
		case mo.Network:
			inv.Networks = append(inv.Networks, Network{MoRef: v.Self.Value, Name: v.Name, Path: ix.path(v.Self), Type: "Network"})
		case mo.DistributedVirtualPortgroup:
			inv.Networks = append(inv.Networks, Network{MoRef: v.Self.Value, Name: v.Name, Path: ix.path(v.Self), Type: "DistributedVirtualPortgroup"})
		case mo.OpaqueNetwork:
			inv.Networks = append(inv.Networks, Network{MoRef: v.Self.Value, Name: v.Name, Path: ix.path(v.Self), Type: "OpaqueNetwork"})
		}
	}
	for _, o := range objs {
		if v, ok := o.(mo.VirtualMachine); ok {
			vm := vmFromMo(v, netNames)
			vm.Path = ix.path(v.Self)
			if dc, ok := ix.ancestor(v.Self, "Datacenter"); ok {
				vm.Datacenter = ix.name[dc]
			}
			if v.ResourcePool != nil {
				vm.ResourcePool = ix.path(*v.ResourcePool)
			}
			if v.Runtime.Host != nil {
				h := hostInfo[*v.Runtime.Host]
				vm.Host, vm.Cluster = h.Name, h.Cluster
			}
			for _, ds := range v.Datastore {
				vm.Datastores = append(vm.Datastores, ix.name[ds])
			}
			inv.VMs = append(inv.VMs, vm)
		}
	}
	sort.Slice(inv.VMs, func(i, j int) bool { return inv.VMs[i].Path < inv.VMs[j].Path })
	sort.Slice(inv.Datacenters, func(i, j int) bool { return inv.Datacenters[i].Path < inv.Datacenters[j].Path })
	sort.Slice(inv.Folders, func(i, j int) bool { return inv.Folders[i].Path < inv.Folders[j].Path })
	sort.Slice(inv.Clusters, func(i, j int) bool { return inv.Clusters[i].Path < inv.Clusters[j].Path })
	sort.Slice(inv.Hosts, func(i, j int) bool { return inv.Hosts[i].Path < inv.Hosts[j].Path })
	sort.Slice(inv.ResourcePools, func(i, j int) bool { return inv.ResourcePools[i].Path < inv.ResourcePools[j].Path })
	sort.Slice(inv.Datastores, func(i, j int) bool { return inv.Datastores[i].Path < inv.Datastores[j].Path })
	sort.Slice(inv.Networks, func(i, j int) bool { return inv.Networks[i].Path < inv.Networks[j].Path })
	return inv, nil
}

func managedEntity(o any) (mo.ManagedEntity, bool) {
	switch v := o.(type) {
	case mo.Datacenter:
		return v.ManagedEntity, true
	case mo.Folder:
		return v.ManagedEntity, true
	case mo.ComputeResource:
		return v.ManagedEntity, true
	case mo.ClusterComputeResource:
		return v.ManagedEntity, true
	case mo.HostSystem:
		return v.ManagedEntity, true
	case mo.ResourcePool:
		return v.ManagedEntity, true
	case mo.VirtualApp:
		return v.ManagedEntity, true
	case mo.Datastore:
		return v.ManagedEntity, true
	case mo.Network:
		// mo.Network shadows ManagedEntity.Name with its own Name field.
		me := v.ManagedEntity
		me.Name = v.Name
		return me, true
	case mo.DistributedVirtualPortgroup:
		me := v.ManagedEntity
		me.Name = v.Name
		return me, true
	case mo.OpaqueNetwork:
		me := v.ManagedEntity
		me.Name = v.Name
		return me, true
	case mo.VirtualMachine:
		return v.ManagedEntity, true
	}
	return mo.ManagedEntity{}, false
}

func vmFromMo(v mo.VirtualMachine, netNames map[string]string) VM {
	vm := VM{VMRef: VMRef{MoRef: v.Self.Value, Name: v.Name}, PowerState: string(v.Runtime.PowerState)}
	vm.HasSnapshots = v.Snapshot != nil && len(v.Snapshot.RootSnapshotList) > 0
	if g := v.Guest; g != nil {
		vm.GuestFamily = g.GuestFamily
		vm.ToolsRunning = g.ToolsRunningStatus == string(types.VirtualMachineToolsRunningStatusGuestToolsRunning)
		vm.ToolsStatus = string(g.ToolsStatus)
		vm.ToolsVersion = g.ToolsVersion
		vm.ToolsVersionStatus = g.ToolsVersionStatus2
	}
	if cfg := v.Config; cfg != nil {
		vm.InstanceUUID = cfg.InstanceUuid
		vm.BIOSUUID = cfg.Uuid
		vm.GuestID = cfg.GuestId
		vm.Template = cfg.Template
		vm.CBTEnabled = cfg.ChangeTrackingEnabled != nil && *cfg.ChangeTrackingEnabled
		vm.NumCPU = cfg.Hardware.NumCPU
		vm.MemoryMB = cfg.Hardware.MemoryMB
		vm.Encrypted = cfg.KeyId != nil
		vm.Disks = disksFrom(cfg.Hardware.Device, vm.Encrypted)
		vm.NICs = nicsFrom(cfg.Hardware.Device, netNames)
	}
	return vm
}

// disksFrom turns a device list into Disks, flagging what cannot be backed up.
func disksFrom(devs []types.BaseVirtualDevice, vmEncrypted bool) []Disk {
	list := object.VirtualDeviceList(devs)
	var out []Disk
	for _, d := range list.SelectByType((*types.VirtualDisk)(nil)) {
		vd := d.(*types.VirtualDisk)
		disk := Disk{Key: vd.Key, CapacityBytes: vd.CapacityInBytes, ControllerKey: vd.ControllerKey, Encrypted: vmEncrypted}
		if disk.CapacityBytes == 0 {
			disk.CapacityBytes = vd.CapacityInKB * 1024
		}
		if vd.DeviceInfo != nil {
			disk.Label = vd.DeviceInfo.GetDescription().Label
		}
		if vd.UnitNumber != nil {
			disk.Unit = *vd.UnitNumber
		}
		if ctl := list.FindByKey(vd.ControllerKey); ctl != nil {
			switch c := ctl.(type) {
			case types.BaseVirtualSCSIController:
				disk.ControllerType, disk.Bus = "scsi", c.GetVirtualSCSIController().BusNumber
			case types.BaseVirtualSATAController:
				disk.ControllerType, disk.Bus = "sata", c.GetVirtualSATAController().BusNumber
			case *types.VirtualNVMEController:
				disk.ControllerType, disk.Bus = "nvme", c.BusNumber
			case *types.VirtualIDEController:
				disk.ControllerType, disk.Bus = "ide", c.BusNumber
			case types.BaseVirtualController:
				disk.ControllerType, disk.Bus = "other", c.GetVirtualController().BusNumber
			}
		}
		var parent types.BaseVirtualDeviceFileBackingInfo
		switch b := vd.Backing.(type) {
		case *types.VirtualDiskFlatVer2BackingInfo:
			disk.FileName, disk.Mode, disk.ChangeID, disk.UUID, disk.Sharing = b.FileName, b.DiskMode, b.ChangeId, b.Uuid, b.Sharing
			disk.Thin = b.ThinProvisioned != nil && *b.ThinProvisioned
			disk.Encrypted = disk.Encrypted || b.KeyId != nil
			if b.Parent != nil {
				parent = b.Parent
			}
		case *types.VirtualDiskSeSparseBackingInfo:
			disk.FileName, disk.Mode, disk.ChangeID, disk.UUID, disk.Thin = b.FileName, b.DiskMode, b.ChangeId, b.Uuid, true
			disk.Encrypted = disk.Encrypted || b.KeyId != nil
			if b.Parent != nil {
				parent = b.Parent
			}
		case *types.VirtualDiskSparseVer2BackingInfo:
			disk.FileName, disk.Mode, disk.ChangeID, disk.UUID, disk.Thin = b.FileName, b.DiskMode, b.ChangeId, b.Uuid, true
			disk.Encrypted = disk.Encrypted || b.KeyId != nil
			if b.Parent != nil {
				parent = b.Parent
			}
		case *types.VirtualDiskRawDiskMappingVer1BackingInfo:
			disk.FileName, disk.Mode, disk.ChangeID, disk.UUID, disk.RDM, disk.Sharing = b.FileName, b.DiskMode, b.ChangeId, b.Uuid, b.CompatibilityMode, b.Sharing
			if b.Parent != nil {
				parent = b.Parent
			}
		default:
			disk.Unsupported = fmt.Sprintf("backing %T is not supported", vd.Backing)
			if fb, ok := vd.Backing.(types.BaseVirtualDeviceFileBackingInfo); ok {
				disk.FileName = fb.GetVirtualDeviceFileBackingInfo().FileName
			}
		}
		disk.BaseFileName = disk.FileName
		disk.FrozenFileName = disk.FileName
		if parent != nil {
			disk.FrozenFileName = parent.GetVirtualDeviceFileBackingInfo().FileName
		}
		for p := parent; p != nil; {
			fb := p.GetVirtualDeviceFileBackingInfo()
			disk.BaseFileName = fb.FileName
			disk.ChainDepth++
			p = backingParent(p)
		}
		var dp object.DatastorePath
		if dp.FromString(disk.FileName) {
			disk.Datastore = dp.Datastore
		}
		disk.Independent = strings.HasPrefix(disk.Mode, "independent")
		if disk.Unsupported == "" {
			disk.Unsupported = unsupportedReason(disk)
		}
		out = append(out, disk)
	}
	return out
}

func backingParent(b types.BaseVirtualDeviceFileBackingInfo) types.BaseVirtualDeviceFileBackingInfo {
	switch v := b.(type) {
	case *types.VirtualDiskFlatVer2BackingInfo:
		if v.Parent != nil {
			return v.Parent
		}
	case *types.VirtualDiskSeSparseBackingInfo:
		if v.Parent != nil {
			return v.Parent
		}
	case *types.VirtualDiskSparseVer2BackingInfo:
		if v.Parent != nil {
			return v.Parent
		}
	case *types.VirtualDiskRawDiskMappingVer1BackingInfo:
		if v.Parent != nil {
			return v.Parent
		}
	}
	return nil
}

func unsupportedReason(d Disk) string {
	switch {
	case d.RDM == string(types.VirtualDiskCompatibilityModePhysicalMode):
		// Checked first: a physical RDM is usually also independent, and
		// this is the reason an administrator can act on.
		return "physical-mode RDM cannot be snapshotted or tracked"
	case d.Independent:
		return "independent disks are excluded from snapshots (mode " + d.Mode + ")"
	case d.Encrypted:
		return "encrypted disk: the datastore file service returns ciphertext"
	case d.Sharing == string(types.VirtualDiskSharingSharingMultiWriter):
		return "multi-writer disks cannot be snapshotted"
	}
	return ""
}

func nicsFrom(devs []types.BaseVirtualDevice, netNames map[string]string) []NIC {
	list := object.VirtualDeviceList(devs)
	var out []NIC
	for _, d := range list {
		ec, ok := d.(types.BaseVirtualEthernetCard)
		if !ok {
			continue
		}
		card := ec.GetVirtualEthernetCard()
		n := NIC{Key: card.Key, Type: nicModel(d), MAC: card.MacAddress}
		if card.DeviceInfo != nil {
			n.Label = card.DeviceInfo.GetDescription().Label
		}
		if card.Connectable != nil {
			n.Connected = card.Connectable.Connected
		}
		switch b := card.Backing.(type) {
		case *types.VirtualEthernetCardNetworkBackingInfo:
			n.Network = b.DeviceName
		case *types.VirtualEthernetCardDistributedVirtualPortBackingInfo:
			n.Network = netNames[b.Port.PortgroupKey]
			if n.Network == "" {
				n.Network = b.Port.PortgroupKey
			}
		case *types.VirtualEthernetCardOpaqueNetworkBackingInfo:
			n.Network = b.OpaqueNetworkId
		}
		out = append(out, n)
	}
	return out
}

// nicModel is the adapter model ("vmxnet3", "e1000e", …), the name
// CreateEthernetCard takes; VirtualDeviceList.Type only says "ethernet".
func nicModel(d types.BaseVirtualDevice) string {
	switch d.(type) {
	case *types.VirtualVmxnet3:
		return "vmxnet3"
	case *types.VirtualVmxnet3Vrdma:
		return "vmxnet3vrdma"
	case *types.VirtualVmxnet2:
		return "vmxnet2"
	case *types.VirtualVmxnet:
		return "vmxnet"
	case *types.VirtualE1000e:
		return "e1000e"
	case *types.VirtualE1000:
		return "e1000"
	case *types.VirtualPCNet32:
		return "pcnet32"
	case *types.VirtualSriovEthernetCard:
		return "sriov"
	}
	return "ethernet"
}
