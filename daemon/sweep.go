package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/vsphere"
)

// snapshotSweeper is the part of the vSphere client the start-up sweep needs.
type snapshotSweeper interface {
	Inventory(ctx context.Context) (*vsphere.Inventory, error)
	RemoveStaleSnapshots(ctx context.Context, vm vsphere.VMRef, before time.Time) ([]vsphere.SnapshotEntry, error)
}

// sweepStaleSnapshots removes this appliance's snapshots created before the
// daemon started, on every VM that has snapshots at all. The backup engine
// sweeps a VM before backing it up, but a VM whose backup was killed and
// whose window then closed would keep a snapshot (and a growing delta file
// on its datastore) until its next window: the start-up sweep closes that gap.
// Only snapshots carrying this appliance's marker are touched. Errors are
// reported per VM as warning events (emit stamps their time); the sweep
// never stops the daemon.
func sweepStaleSnapshots(ctx context.Context, vs snapshotSweeper, before time.Time, log *slog.Logger, emit func(policy.Event)) (removed int, err error) {
	inv, err := vs.Inventory(ctx)
	if err != nil {
		return 0, fmt.Errorf("sweep stale snapshots: %w", err)
	}
	for _, vm := range inv.VMs {
		if !vm.HasSnapshots || vm.Template {
			continue
		}
		if ctx.Err() != nil {
			return removed, ctx.Err()
		}
		gone, err := vs.RemoveStaleSnapshots(ctx, vm.VMRef, before)
		for _, s := range gone {
			removed++
			log.Info("removed stale snapshot left by an earlier run", "vm", vm.Name, "snapshot", s.Name, "created", s.Created)
			emit(policy.Event{Severity: policy.SeverityWarning, Kind: "snapshot.stale-removed", Subject: vm.Name,
				VM: vm.InstanceUUID, Message: fmt.Sprintf("removed snapshot %s created %s by an earlier run of this appliance", s.Name, s.Created.UTC().Format(time.RFC3339))})
		}
		if err != nil {
			log.Warn("stale snapshot sweep failed", "vm", vm.Name, "err", err)
			emit(policy.Event{Severity: policy.SeverityWarning, Kind: "snapshot.sweep-failed", Subject: vm.Name,
				VM: vm.InstanceUUID, Message: fmt.Sprintf("could not remove a stale snapshot: %v (the VM's next backup tries again)", err)})
		}
	}
	return removed, nil
}
