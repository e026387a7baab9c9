package lab

import (
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
)

// Quiescing: the lab records the quiesce spec of every snapshot request
// (tests assert the exact VSS spec that reached vCenter), models VMware
// Tools' version state, and fails quiesces the way ESXi does (a task error
// carrying the guest's message in faultMessage).

// DefaultQuiesceFaultMessage is what ESXi says when the guest's quiesce
// fails and it has nothing more specific.
const DefaultQuiesceFaultMessage = "An error occurred while quiescing the virtual machine. See the virtual machine's event log for details."

// SnapshotRequest is one CreateSnapshot(Ex)_Task the lab received for a VM.
type SnapshotRequest struct {
	Name string
	// Quiesce is a copy of the spec sent: nil for a crash-consistent
	// snapshot, *types.VirtualMachineGuestQuiesceSpec or
	// *types.VirtualMachineWindowsQuiesceSpec.
	Quiesce types.BaseVirtualMachineGuestQuiesceSpec
	// Fault is the fault the lab failed it with (nil: it succeeded, or it
	// failed in vcsim itself).
	Fault types.BaseMethodFault
}

// quiesceFault is a queued quiesce failure.
type quiesceFault struct {
	msg string
	// writersOnly fails only VSS with writers (ctx_backup), as when an
	// application's VSS writer is broken but the file systems freeze.
	writersOnly bool
}

// SnapshotRequests returns the snapshot requests vm received, oldest first.
func (l *Lab) SnapshotRequests(vm string) ([]SnapshotRequest, error) {
	v, err := l.findVM(vm)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]SnapshotRequest(nil), l.state(v.Self.Value).requests...), nil
}

// ResetSnapshotRequests forgets vm's recorded snapshot requests.
func (l *Lab) ResetSnapshotRequests(vm string) error {
	v, err := l.findVM(vm)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.state(v.Self.Value).requests = nil
	return nil
}

// FailNextQuiesceWith makes the next n quiesced snapshots of vm fail with
// an ApplicationQuiesceFault whose faultMessage is msg (the guest's VSS or
// sync-driver error as ESXi relays it). writersOnly fails only VSS with
// writers (ctx_backup): a quiesce without writers, or a non-Windows
// quiesce, succeeds and does not use up the failure.
func (l *Lab) FailNextQuiesceWith(vm string, n int, msg string, writersOnly bool) error {
	v, err := l.findVM(vm)
	if err != nil {
		return err
	}
	if msg == "" {
		msg = DefaultQuiesceFaultMessage
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.state(v.Self.Value)
	for range n {
		st.failQuiesce = append(st.failQuiesce, quiesceFault{msg: msg, writersOnly: writersOnly})
	}
	return nil
}

// SetToolsVersion sets guest.toolsVersion (VMware's encoded number, e.g.
// 12352 for 12.2.0) and guest.toolsVersionStatus2 (guestToolsCurrent,
// guestToolsTooOld, guestToolsBlacklisted, guestToolsUnmanaged, …).
func (l *Lab) SetToolsVersion(vm string, version, status string) error {
	return l.withVM(vm, func(v *simulator.VirtualMachine) error {
		l.model.Map().Update(l.lctx, v, []types.PropertyChange{
			{Name: "guest.toolsVersion", Val: version},
			{Name: "guest.toolsVersionStatus2", Val: status},
		})
		return nil
	})
}

// copySpec copies a quiesce spec so that the record cannot change under
// the test.
func copySpec(s types.BaseVirtualMachineGuestQuiesceSpec) types.BaseVirtualMachineGuestQuiesceSpec {
	switch v := s.(type) {
	case nil:
		return nil
	case *types.VirtualMachineWindowsQuiesceSpec:
		c := *v
		if v.VssBootableSystemState != nil {
			c.VssBootableSystemState = types.NewBool(*v.VssBootableSystemState)
		}
		if v.VssPartialFileSupport != nil {
			c.VssPartialFileSupport = types.NewBool(*v.VssPartialFileSupport)
		}
		return &c
	case *types.VirtualMachineGuestQuiesceSpec:
		c := *v
		return &c
	}
	return s
}

// withWriters reports whether a spec asks VSS to involve its writers.
// ctx_auto lets Tools choose ctx_backup, so it counts.
func withWriters(s types.BaseVirtualMachineGuestQuiesceSpec) bool {
	w, ok := s.(*types.VirtualMachineWindowsQuiesceSpec)
	return ok && w.VssBackupContext != string(types.VirtualMachineWindowsQuiesceSpecVssBackupContextCtx_file_share_backup)
}

// takeQuiesceFault pops the quiesce failure that applies to spec, if any;
// l.mu is held.
func (st *vmState) takeQuiesceFault(spec types.BaseVirtualMachineGuestQuiesceSpec) types.BaseMethodFault {
	for i, f := range st.failQuiesce {
		if f.writersOnly && !withWriters(spec) {
			continue
		}
		st.failQuiesce = append(st.failQuiesce[:i:i], st.failQuiesce[i+1:]...)
		return &types.ApplicationQuiesceFault{SnapshotFault: types.SnapshotFault{VimFault: types.VimFault{MethodFault: types.MethodFault{
			FaultMessage: []types.LocalizableMessage{{Key: "msg.snapshot.quiesce.vmerr", Message: f.msg}},
		}}}}
	}
	return nil
}

// ClearQuiesceFaults drops vm's queued quiesce failures (FailNextQuiesce,
// FailNextQuiesceWith) that no snapshot used up.
func (l *Lab) ClearQuiesceFaults(vm string) error {
	v, err := l.findVM(vm)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.state(v.Self.Value).failQuiesce = nil
	return nil
}
