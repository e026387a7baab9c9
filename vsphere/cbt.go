package vsphere

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vmvault/vmvault/internal/extent"
)

// AllocatedAreas is the change id that asks for every allocated area of a
// disk (a first, full backup of a thin disk skips its holes).
const AllocatedAreas = "*"

// EnableCBT turns changed block tracking on. Real ESXi only starts tracking
// after a stun/unstun, so a powered-on VM gets a short snapshot created and
// removed. Enabling it when already on does nothing.
func (c *Client) EnableCBT(ctx context.Context, vm VMRef) error {
	var v mo.VirtualMachine
	if err := c.retrieveOne(ctx, vmMoRef(vm), []string{"config.changeTrackingEnabled", "runtime.powerState"}, &v); err != nil {
		return fmt.Errorf("enable CBT on %s: %w", vm.Name, err)
	}
	if v.Config != nil && v.Config.ChangeTrackingEnabled != nil && *v.Config.ChangeTrackingEnabled {
		return nil
	}
	res, err := methods.ReconfigVM_Task(ctx, c.vim, &types.ReconfigVM_Task{
		This: vmMoRef(vm), Spec: types.VirtualMachineConfigSpec{ChangeTrackingEnabled: types.NewBool(true)},
	})
	if err != nil {
		return mapFault("enable CBT on "+vm.Name, err)
	}
	if _, err := c.waitTask(ctx, res.Returnval, nil); err != nil {
		return mapFault("enable CBT on "+vm.Name, err)
	}
	if v.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOn {
		return nil
	}
	s, err := c.CreateSnapshot(ctx, vm, SnapshotOptions{Name: "cbt-stun"})
	if err != nil {
		return fmt.Errorf("enable CBT on %s: stun snapshot: %w", vm.Name, err)
	}
	if err := c.RemoveSnapshot(ctx, vm, s.MoRef); err != nil {
		return fmt.Errorf("enable CBT on %s: remove stun snapshot: %w", vm.Name, err)
	}
	return nil
}

// ChangedAreas returns the areas of the snapshot's disk that changed since
// prevChangeID (the change id stored with the previous restore point), or
// the allocated areas for AllocatedAreas. Paging over the disk is handled
// here. ErrCBTReset means prevChangeID is no longer valid and the caller
// must read the whole disk; ErrCBTDisabled that the snapshot has no change
// id at all.
func (c *Client) ChangedAreas(ctx context.Context, snap *Snapshot, diskKey int32, prevChangeID string) ([]Extent, error) {
	d, ok := snap.Disk(diskKey)
	if !ok {
		return nil, fmt.Errorf("changed areas of %s disk %d: %w", snap.VM.Name, diskKey, ErrNotFound)
	}
	op := fmt.Sprintf("changed areas of %s disk %d since %q", snap.VM.Name, diskKey, prevChangeID)
	if d.ChangeID == "" {
		return nil, fmt.Errorf("%s: %w", op, ErrCBTDisabled)
	}
	if prevChangeID == "" {
		return nil, fmt.Errorf("%s: empty change id (use %q for a full read)", op, AllocatedAreas)
	}
	if prevChangeID != AllocatedAreas {
		if changeIDEpoch(prevChangeID) != changeIDEpoch(d.ChangeID) {
			return nil, fmt.Errorf("%s: snapshot's change id is %q: %w", op, d.ChangeID, ErrCBTReset)
		}
		if seqOf(prevChangeID) > seqOf(d.ChangeID) {
			return nil, fmt.Errorf("%s: newer than the snapshot's %q: %w", op, d.ChangeID, ErrCBTReset)
		}
	}
	sref := types.ManagedObjectReference{Type: "VirtualMachineSnapshot", Value: snap.MoRef}
	var out []Extent
	for off := int64(0); off < d.CapacityBytes; {
		res, err := methods.QueryChangedDiskAreas(ctx, c.vim, &types.QueryChangedDiskAreas{
			This: vmMoRef(snap.VM), Snapshot: &sref, DeviceKey: diskKey, StartOffset: off, ChangeId: prevChangeID,
		})
		if err != nil {
			if isFault(err, &types.FileFault{}) || isFault(err, &types.InvalidArgument{}) || isFault(err, &types.FileNotFound{}) {
				return nil, fmt.Errorf("%s: %w: %v", op, ErrCBTReset, err)
			}
			return nil, mapFault(op, err)
		}
		info := res.Returnval
		for _, a := range info.ChangedArea {
			out = append(out, Extent{Offset: a.Start, Length: a.Length})
		}
		next := info.StartOffset + info.Length
		if next <= off {
			return nil, fmt.Errorf("%s: server returned an empty page at offset %d", op, off)
		}
		off = next
	}
	return extent.Normalize(out, d.CapacityBytes), nil
}

func seqOf(id string) int64 {
	i := strings.LastIndexByte(id, '/')
	if i < 0 {
		return 0
	}
	n, _ := strconv.ParseInt(id[i+1:], 10, 64)
	return n
}
