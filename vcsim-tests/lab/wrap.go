package lab

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// handler runs before every SOAP call: it puts the lab's wrappers into the
// caller's session registry (VSPHERE.md §4.7).
func (l *Lab) handler(sctx *simulator.Context, meth *simulator.Method) (mo.Reference, types.BaseMethodFault) {
	if sctx.Session == nil {
		return nil, nil
	}
	reg := sctx.Session.Registry
	switch meth.This.Type {
	case "VirtualMachine":
		real, ok := sctx.Map.Get(meth.This).(*simulator.VirtualMachine)
		if !ok {
			if reg.Get(meth.This) != nil {
				reg.Remove(sctx, meth.This)
			}
			return nil, nil
		}
		if w, ok := reg.Get(meth.This).(*labVM); !ok || w.VirtualMachine != real {
			reg.Put(&labVM{VirtualMachine: real, lab: l})
		}
	case "ResourcePool":
		if real, ok := sctx.Map.Get(meth.This).(*simulator.ResourcePool); ok {
			if w, ok := reg.Get(meth.This).(*labPool); !ok || w.ResourcePool != real {
				reg.Put(&labPool{ResourcePool: real, lab: l})
			}
		}
	case "HostDatastoreSystem":
		if real, ok := sctx.Map.Get(meth.This).(*simulator.HostDatastoreSystem); ok {
			if w, ok := reg.Get(meth.This).(*labDSS); !ok || w.HostDatastoreSystem != real {
				reg.Put(&labDSS{HostDatastoreSystem: real, lab: l})
			}
		}
	case "VirtualMachineSnapshot":
		real, ok := sctx.Map.Get(meth.This).(*simulator.VirtualMachineSnapshot)
		if !ok {
			if reg.Get(meth.This) != nil {
				reg.Remove(sctx, meth.This)
			}
			return nil, nil
		}
		if w, ok := reg.Get(meth.This).(*labSnapshot); !ok || w.VirtualMachineSnapshot != real {
			reg.Put(&labSnapshot{VirtualMachineSnapshot: real, lab: l})
		}
	}
	return nil, nil
}

// labVM adds CBT, quiesce checks, snapshot faults and overlay bookkeeping
// to a simulator VM. It lives only in session registries.
type labVM struct {
	*simulator.VirtualMachine
	lab *Lab
}

func failedTask(ctx *simulator.Context, vm *simulator.VirtualMachine, name string, f types.BaseMethodFault) types.ManagedObjectReference {
	return simulator.CreateTask(vm, name, func(*simulator.Task) (types.AnyType, types.BaseMethodFault) {
		return nil, f
	}).Run(ctx)
}

// CreateSnapshotTask is overridden too: vcsim's calls the embedded Ex
// method directly, which would bypass the wrapper.
func (w *labVM) CreateSnapshotTask(ctx *simulator.Context, req *types.CreateSnapshot_Task) soap.HasFault {
	r := &types.CreateSnapshotEx_Task{This: req.This, Name: req.Name, Description: req.Description, Memory: req.Memory}
	if req.Quiesce {
		r.QuiesceSpec = &types.VirtualMachineGuestQuiesceSpec{}
	}
	res := w.CreateSnapshotExTask(ctx, r)
	body := &methods.CreateSnapshot_TaskBody{}
	if res.Fault() != nil {
		body.Fault_ = res.Fault()
	} else {
		body.Res = &types.CreateSnapshot_TaskResponse{Returnval: res.(*methods.CreateSnapshotEx_TaskBody).Res.Returnval}
	}
	return body
}

func (w *labVM) CreateSnapshotExTask(ctx *simulator.Context, req *types.CreateSnapshotEx_Task) soap.HasFault {
	if f := w.lab.beforeSnapshot(w.VirtualMachine, req.Name, req.QuiesceSpec); f != nil {
		return &methods.CreateSnapshotEx_TaskBody{Res: &types.CreateSnapshotEx_TaskResponse{
			Returnval: failedTask(ctx, w.VirtualMachine, "createSnapshotEx", f),
		}}
	}
	res := w.VirtualMachine.CreateSnapshotExTask(ctx, req)
	if w.lab.takeLostReply(w.VirtualMachine) && res.Fault() == nil {
		// The snapshot is made, but the caller never learns it.
		return &methods.CreateSnapshotEx_TaskBody{Fault_: simulator.Fault("lab: reply lost", &types.SystemError{Reason: "connection reset"})}
	}
	return res
}

func (w *labVM) RevertToCurrentSnapshotTask(ctx *simulator.Context, req *types.RevertToCurrentSnapshot_Task) soap.HasFault {
	if w.Snapshot != nil && w.Snapshot.CurrentSnapshot != nil {
		w.lab.reverted(w.VirtualMachine)
	}
	return w.VirtualMachine.RevertToCurrentSnapshotTask(ctx, req)
}

func (w *labVM) RemoveAllSnapshotsTask(ctx *simulator.Context, req *types.RemoveAllSnapshots_Task) soap.HasFault {
	w.lab.snapshotsRemoved(w.VirtualMachine, -1, -1)
	return w.VirtualMachine.RemoveAllSnapshotsTask(ctx, req)
}

func (w *labVM) ReconfigVMTask(ctx *simulator.Context, req *types.ReconfigVM_Task) soap.HasFault {
	w.lab.reconfigured(w.VirtualMachine, &req.Spec)
	return w.VirtualMachine.ReconfigVMTask(ctx, req)
}

// ConsolidateVMDisksTask is missing from vcsim; the lab's clears
// runtime.consolidationNeeded (see SetConsolidationNeeded).
func (w *labVM) ConsolidateVMDisksTask(ctx *simulator.Context, req *types.ConsolidateVMDisks_Task) soap.HasFault {
	vm := w.VirtualMachine
	task := simulator.CreateTask(vm, "consolidateVMDisks", func(*simulator.Task) (types.AnyType, types.BaseMethodFault) {
		ctx.Update(vm, []types.PropertyChange{{Name: "runtime.consolidationNeeded", Val: false}})
		return nil, nil
	})
	return &methods.ConsolidateVMDisks_TaskBody{Res: &types.ConsolidateVMDisks_TaskResponse{Returnval: task.Run(ctx)}}
}

func (w *labVM) QueryChangedDiskAreas(ctx *simulator.Context, req *types.QueryChangedDiskAreas) soap.HasFault {
	body := &methods.QueryChangedDiskAreasBody{}
	info, f := w.lab.queryChanged(ctx, w.VirtualMachine, req)
	if f != nil {
		body.Fault_ = simulator.Fault(fmt.Sprintf("QueryChangedDiskAreas: %T", f), f)
		return body
	}
	body.Res = &types.QueryChangedDiskAreasResponse{Returnval: *info}
	return body
}

// labSnapshot tracks removal and revert for the overlay and CBT.
type labSnapshot struct {
	*simulator.VirtualMachineSnapshot
	lab *Lab
}

func (s *labSnapshot) RemoveSnapshotTask(ctx *simulator.Context, req *types.RemoveSnapshot_Task) soap.HasFault {
	if vm, ok := ctx.Map.Get(s.Vm).(*simulator.VirtualMachine); ok {
		n := 1
		ctx.WithLock(vm, func() {
			depth := -1
			if vm.Snapshot != nil {
				if req.RemoveChildren {
					if t := findTree(vm.Snapshot.RootSnapshotList, s.Self); t != nil {
						n += countTree(t.ChildSnapshotList)
					}
				} else {
					depth = depthOf(vm.Snapshot.RootSnapshotList, s.Self, 0)
				}
			}
			s.lab.snapshotsRemoved(vm, n, depth)
		})
	}
	return s.VirtualMachineSnapshot.RemoveSnapshotTask(ctx, req)
}

func (s *labSnapshot) RevertToSnapshotTask(ctx *simulator.Context, req *types.RevertToSnapshot_Task) soap.HasFault {
	if vm, ok := ctx.Map.Get(s.Vm).(*simulator.VirtualMachine); ok {
		ctx.WithLock(vm, func() { s.lab.reverted(vm) })
	}
	return s.VirtualMachineSnapshot.RevertToSnapshotTask(ctx, req)
}

func findTree(l []types.VirtualMachineSnapshotTree, ref types.ManagedObjectReference) *types.VirtualMachineSnapshotTree {
	for i := range l {
		if l[i].Snapshot == ref {
			return &l[i]
		}
		if t := findTree(l[i].ChildSnapshotList, ref); t != nil {
			return t
		}
	}
	return nil
}

// depthOf is the depth of ref in a (linear) snapshot chain, -1 if absent.
func depthOf(l []types.VirtualMachineSnapshotTree, ref types.ManagedObjectReference, depth int) int {
	for i := range l {
		if l[i].Snapshot == ref {
			return depth
		}
		if d := depthOf(l[i].ChildSnapshotList, ref, depth+1); d >= 0 {
			return d
		}
	}
	return -1
}

func countTree(l []types.VirtualMachineSnapshotTree) int {
	n := len(l)
	for _, t := range l {
		n += countTree(t.ChildSnapshotList)
	}
	return n
}

// vmDisks lists (key, flat path, capacity, backing) of a VM's disks; the
// caller holds the VM's lock.
type vmDisk struct {
	vd      *types.VirtualDisk
	flat    string
	backing *types.VirtualDiskFlatVer2BackingInfo
}

func (l *Lab) vmDisks(devs []types.BaseVirtualDevice) []vmDisk {
	var out []vmDisk
	for _, d := range object.VirtualDeviceList(devs).SelectByType((*types.VirtualDisk)(nil)) {
		vd := d.(*types.VirtualDisk)
		flat, err := l.flatPath(vd)
		if err != nil {
			continue
		}
		b, _ := vd.Backing.(*types.VirtualDiskFlatVer2BackingInfo)
		out = append(out, vmDisk{vd: vd, flat: flat, backing: b})
	}
	return out
}

func capacityOf(vd *types.VirtualDisk) int64 {
	if vd.CapacityInBytes > 0 {
		return vd.CapacityInBytes
	}
	return vd.CapacityInKB * 1024
}

// beforeSnapshot decides whether a snapshot fails and, when it succeeds,
// stamps the disks' change ids (copied into the snapshot's config by vcsim)
// and starts the overlay. The VM is locked by the caller.
func (l *Lab) beforeSnapshot(vm *simulator.VirtualMachine, name string, spec types.BaseVirtualMachineGuestQuiesceSpec) (fault types.BaseMethodFault) {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.state(vm.Self.Value)
	st.requests = append(st.requests, SnapshotRequest{Name: name, Quiesce: copySpec(spec)})
	defer func() { st.requests[len(st.requests)-1].Fault = fault }()
	if len(st.failSnapshot) > 0 {
		f := st.failSnapshot[0]
		st.failSnapshot = st.failSnapshot[1:]
		return f
	}
	if spec != nil {
		if vm.Guest == nil || vm.Guest.ToolsRunningStatus != string(types.VirtualMachineToolsRunningStatusGuestToolsRunning) {
			return &types.ToolsUnavailable{}
		}
		if f := st.takeQuiesceFault(spec); f != nil {
			return f
		}
	}
	cbt := vm.Config.ChangeTrackingEnabled != nil && *vm.Config.ChangeTrackingEnabled
	for _, d := range l.vmDisks(vm.Config.Hardware.Device) {
		ds := l.diskFor(d.flat, vm.Self.Value, capacityOf(d.vd))
		if st.snapshots > 0 {
			ds.freeze() // a snapshot on top of another: a new delta
		}
		if d.backing == nil {
			continue
		}
		if cbt {
			d.backing.ChangeId = ds.changeID()
			ds.seq++
		} else {
			d.backing.ChangeId = ""
		}
	}
	st.snapshots++
	return nil
}

// snapshotsRemoved merges the overlays when the VM's last snapshot goes
// (n < 0: all of them); removing one snapshot of a chain (at depth) merges
// its delta into the one below.
func (l *Lab) snapshotsRemoved(vm *simulator.VirtualMachine, n, depth int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.state(vm.Self.Value)
	if n < 0 || n >= st.snapshots {
		st.snapshots = 0
	} else {
		st.snapshots -= n
	}
	if st.snapshots > 0 {
		if n == 1 && depth >= 0 {
			for _, d := range l.disks {
				if d.vm == vm.Self.Value {
					_ = d.removeLevel(depth)
				}
			}
		}
		return
	}
	for _, d := range l.disks {
		if d.vm == vm.Self.Value {
			_ = d.merge() // a failed merge leaves the overlay; ReadDisk still sees it
		}
	}
}

// reverted discards the overlays (the disk goes back to the base, which is
// the first snapshot's content) and resets CBT.
func (l *Lab) reverted(vm *simulator.VirtualMachine) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, d := range l.disks {
		if d.vm == vm.Self.Value {
			d.overlay = nil
			d.reset()
		}
	}
}

// reconfigured resets CBT when tracking is switched on or a disk's size changes.
func (l *Lab) reconfigured(vm *simulator.VirtualMachine, spec *types.VirtualMachineConfigSpec) {
	was := vm.Config.ChangeTrackingEnabled != nil && *vm.Config.ChangeTrackingEnabled
	enable := spec.ChangeTrackingEnabled != nil && *spec.ChangeTrackingEnabled && !was
	resized := map[int32]bool{}
	for _, dc := range spec.DeviceChange {
		s := dc.GetVirtualDeviceConfigSpec()
		if vd, ok := s.Device.(*types.VirtualDisk); ok && s.Operation == types.VirtualDeviceConfigSpecOperationEdit {
			for _, d := range l.vmDisks(vm.Config.Hardware.Device) {
				if d.vd.Key == vd.Key && capacityOf(vd) != capacityOf(d.vd) {
					resized[vd.Key] = true
				}
			}
		}
	}
	if !enable && len(resized) == 0 {
		return
	}
	disks := l.vmDisks(vm.Config.Hardware.Device)
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, d := range disks {
		if enable || resized[d.vd.Key] {
			l.diskFor(d.flat, vm.Self.Value, capacityOf(d.vd)).reset()
		}
	}
}

// queryChanged answers QueryChangedDiskAreas for one page.
func (l *Lab) queryChanged(ctx *simulator.Context, vm *simulator.VirtualMachine, req *types.QueryChangedDiskAreas) (*types.DiskChangeInfo, types.BaseMethodFault) {
	if vm.Config.ChangeTrackingEnabled == nil || !*vm.Config.ChangeTrackingEnabled {
		return nil, &types.NotSupported{}
	}
	devs := vm.Config.Hardware.Device
	if req.Snapshot != nil {
		s, ok := ctx.Map.Get(*req.Snapshot).(*simulator.VirtualMachineSnapshot)
		if !ok || s.Vm != vm.Self {
			return nil, &types.ManagedObjectNotFound{Obj: *req.Snapshot}
		}
		devs = s.Config.Hardware.Device
	}
	var target *vmDisk
	for _, d := range l.vmDisks(devs) {
		if d.vd.Key == req.DeviceKey {
			target = &d
			break
		}
	}
	if target == nil || target.backing == nil {
		return nil, &types.InvalidArgument{InvalidProperty: "deviceKey"}
	}
	capacity := capacityOf(target.vd)
	if req.StartOffset < 0 || req.StartOffset >= capacity {
		return nil, &types.InvalidArgument{InvalidProperty: "startOffset"}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.diskFor(target.flat, vm.Self.Value, 0)
	ctk := strings.TrimSuffix(target.backing.FileName, ".vmdk") + "-ctk.vmdk"
	snapID := target.backing.ChangeId
	if req.Snapshot == nil {
		snapID = d.changeID()
	}
	snapEpoch, snapSeq, ok := parseChangeID(snapID)
	if !ok || snapEpoch != d.epoch {
		return nil, &types.FileFault{File: ctk}
	}
	start := req.StartOffset
	end := min(capacity, start+l.opts.CBTPageSize)
	info := &types.DiskChangeInfo{StartOffset: start, Length: end - start}
	if req.ChangeId == "*" {
		ext, err := allocated(d.flat, start, end, l.opts.CBTBlockSize)
		if err != nil {
			return nil, &types.FileFault{File: target.backing.FileName}
		}
		// A chain's deltas are allocated too: the blocks the snapshot sees
		// on top of the flat file (the live VM sees every delta).
		layers := append(append([]map[int64][]byte{}, d.frozen...), d.overlay)
		if req.Snapshot != nil {
			depth := 0
			if vm.Snapshot != nil {
				depth = max(0, depthOf(vm.Snapshot.RootSnapshotList, *req.Snapshot, 0))
			}
			layers = d.frozen[:min(depth, len(d.frozen))]
		}
		bs := l.opts.CBTBlockSize
		for _, m := range layers {
			for bi := range m {
				s, e := bi*overlayBlock/bs*bs, ((bi+1)*overlayBlock+bs-1)/bs*bs
				s, e = max(s, start), min(e, end)
				if s < e {
					ext = append(ext, types.DiskChangeExtent{Start: s, Length: e - s})
				}
			}
		}
		info.ChangedArea = mergeAreas(ext)
		return info, nil
	}
	epoch, seq, ok := parseChangeID(req.ChangeId)
	if !ok {
		return nil, &types.InvalidArgument{InvalidProperty: "changeId"}
	}
	if epoch != d.epoch {
		return nil, &types.FileFault{File: ctk}
	}
	if seq > snapSeq {
		return nil, &types.InvalidArgument{InvalidProperty: "changeId"}
	}
	bs := l.opts.CBTBlockSize
	var ext []types.DiskChangeExtent
	for _, w := range d.writes {
		if w.seq <= seq || w.seq > snapSeq {
			continue
		}
		s, e := w.off/bs*bs, (w.end+bs-1)/bs*bs
		s, e = max(s, start), min(e, end)
		if s < e {
			ext = append(ext, types.DiskChangeExtent{Start: s, Length: e - s})
		}
	}
	info.ChangedArea = d.hide(mergeAreas(ext))
	return info, nil
}

func parseChangeID(id string) (epoch string, seq int64, ok bool) {
	i := strings.LastIndexByte(id, '/')
	if i < 0 {
		return "", 0, false
	}
	n, err := strconv.ParseInt(id[i+1:], 10, 64)
	if err != nil {
		return "", 0, false
	}
	return id[:i], n, true
}

func mergeAreas(in []types.DiskChangeExtent) []types.DiskChangeExtent {
	if len(in) == 0 {
		return nil
	}
	sortAreas(in)
	out := []types.DiskChangeExtent{in[0]}
	for _, e := range in[1:] {
		last := &out[len(out)-1]
		if e.Start <= last.Start+last.Length {
			last.Length = max(last.Length, e.Start+e.Length-last.Start)
			continue
		}
		out = append(out, e)
	}
	return out
}
