package vsphere

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/progress"
	"github.com/vmware/govmomi/vim25/types"
)

// SnapshotPrefix starts the name of every snapshot vmvault creates. A
// snapshot is vmvault's only if it also carries the description marker
// "vmvault:<applianceID>:<unix seconds>" of this appliance.
const SnapshotPrefix = "vmvault-"

const markerPrefix = "vmvault:"

// VSS backup types (VSS_BACKUP_TYPE) for Windows application quiescing.
// COPY leaves the applications' backup history alone (no log truncation),
// so it is safe next to another backup product; FULL tells SQL Server,
// Exchange and the other writers that a full backup was taken, which lets
// them truncate their logs (for when vmvault is the system of record).
const (
	VSSFull int32 = 1
	VSSCopy int32 = 5
)

// VSS snapshot contexts (VirtualMachineWindowsQuiesceSpec.vssBackupContext).
const (
	// VSSContextBackup is VSS_CTX_BACKUP: the VSS writers (SQL Server,
	// Exchange, Active Directory, …) flush and freeze their data.
	VSSContextBackup = "ctx_backup"
	// VSSContextFileShare is VSS_CTX_FILE_SHARE_BACKUP: a shadow copy
	// without any writer, the file systems only.
	VSSContextFileShare = "ctx_file_share_backup"
)

// SnapshotOptions controls CreateSnapshot.
type SnapshotOptions struct {
	// Name is appended to SnapshotPrefix ("job42-run7").
	Name string
	// Quiesce asks the guest to quiesce through VMware Tools: VSS for
	// Windows guests, the sync driver / fsfreeze (with the Tools
	// pre-freeze and post-thaw scripts) otherwise. Failures come back as
	// ErrToolsUnavailable or ErrQuiesceFailed; the caller decides whether to
	// retry less ambitiously.
	Quiesce bool
	// Writers asks a Windows guest for VSS with its writers (ctx_backup,
	// application-consistent); without it VSS runs without writers
	// (ctx_file_share_backup, file systems only). Other guests have a
	// single level, the plain quiesce spec, either way.
	Writers bool
	// QuiesceTimeout is clamped to vSphere's 5–240 minutes (default 15).
	QuiesceTimeout time.Duration
	// VSSBackupType is VSSCopy (default: another tool may own log
	// truncation) or VSSFull; it applies with Writers only (without
	// writers there are no logs to truncate and COPY is sent).
	VSSBackupType int32
	// Progress, if set, receives the task's percent complete.
	Progress func(percent int32)
}

// QuiesceSent is the quiesce spec a CreateSnapshotEx_Task carried.
type QuiesceSent struct {
	// Windows: a VirtualMachineWindowsQuiesceSpec (VSS); false: the plain
	// VirtualMachineGuestQuiesceSpec.
	Windows        bool   `json:"windows,omitempty"`
	TimeoutMinutes int32  `json:"timeoutMinutes,omitempty"`
	VSSContext     string `json:"vssContext,omitempty"`
	VSSBackupType  int32  `json:"vssBackupType,omitempty"`
	// BootableSystemState asks VSS to include the system state (with
	// writers only).
	BootableSystemState bool `json:"bootableSystemState,omitempty"`
}

// quiesceSpec builds the spec for a guest of family; nil without quiesce.
func quiesceSpec(opts SnapshotOptions, family string) (types.BaseVirtualMachineGuestQuiesceSpec, QuiesceSent) {
	if !opts.Quiesce {
		return nil, QuiesceSent{}
	}
	mins := int32(opts.QuiesceTimeout / time.Minute)
	if mins == 0 {
		mins = 15
	}
	mins = max(5, min(240, mins))
	if family != string(types.VirtualMachineGuestOsFamilyWindowsGuest) {
		return &types.VirtualMachineGuestQuiesceSpec{Timeout: mins}, QuiesceSent{TimeoutMinutes: mins}
	}
	sent := QuiesceSent{Windows: true, TimeoutMinutes: mins, VSSContext: VSSContextFileShare, VSSBackupType: VSSCopy}
	if opts.Writers {
		sent.VSSContext, sent.BootableSystemState = VSSContextBackup, true
		if opts.VSSBackupType == VSSFull {
			sent.VSSBackupType = VSSFull
		}
	}
	return &types.VirtualMachineWindowsQuiesceSpec{
		VirtualMachineGuestQuiesceSpec: types.VirtualMachineGuestQuiesceSpec{Timeout: mins},
		VssBackupType:                  sent.VSSBackupType,
		VssBootableSystemState:         types.NewBool(sent.BootableSystemState),
		VssPartialFileSupport:          types.NewBool(false),
		VssBackupContext:               sent.VSSContext,
	}, sent
}

// CreateSnapshot takes a snapshot (never with memory) and returns it with the
// disks as the snapshot sees them.
func (c *Client) CreateSnapshot(ctx context.Context, vm VMRef, opts SnapshotOptions) (*Snapshot, error) {
	name := SnapshotPrefix + opts.Name
	desc := fmt.Sprintf("%s%s:%d", markerPrefix, c.cfg.ApplianceID, time.Now().Unix())
	var family string
	if opts.Quiesce {
		var v mo.VirtualMachine
		if err := c.retrieveOne(ctx, vmMoRef(vm), []string{"guest.guestFamily"}, &v); err != nil {
			return nil, fmt.Errorf("snapshot %s: %w", vm.Name, err)
		}
		if v.Guest != nil {
			family = v.Guest.GuestFamily
		}
	}
	qs, sent := quiesceSpec(opts, family)
	res, err := methods.CreateSnapshotEx_Task(ctx, c.vim, &types.CreateSnapshotEx_Task{
		This: vmMoRef(vm), Name: name, Description: desc, Memory: false, QuiesceSpec: qs,
	})
	if err != nil {
		return nil, snapshotError(vm, err)
	}
	info, err := c.waitTask(ctx, res.Returnval, opts.Progress)
	if err != nil {
		if ctx.Err() != nil {
			// vCenter goes on with the task after we stop waiting: the
			// snapshot would appear with nobody left to remove it.
			c.discardSnapshotTask(vm, res.Returnval)
		}
		return nil, snapshotError(vm, err)
	}
	ref, ok := info.Result.(types.ManagedObjectReference)
	if !ok {
		return nil, fmt.Errorf("snapshot %s: task returned %T, not a snapshot: %w", vm.Name, info.Result, ErrSnapshotFailed)
	}
	snap, err := c.Snapshot(ctx, vm, ref.Value)
	if err != nil {
		// The caller never learns this snapshot: remove it here.
		c.discardSnapshot(vm, ref.Value)
		return nil, err
	}
	snap.Quiesce = sent
	return snap, nil
}

// abandonTimeout bounds the clean-up of a snapshot whose creation was
// cancelled. A daemon shutting down waits for it only up to its own grace;
// whatever is still left then is removed by the next start's sweep.
const abandonTimeout = 2 * time.Minute

// discardSnapshotTask waits (detached from the cancelled context) for a
// snapshot task we stopped waiting for and removes the snapshot it made.
func (c *Client) discardSnapshotTask(vm VMRef, task types.ManagedObjectReference) {
	ctx, cancel := context.WithTimeout(context.Background(), abandonTimeout)
	defer cancel()
	info, err := c.waitTask(ctx, task, nil)
	if err != nil {
		return // the task failed: no snapshot, or the sweep finds it
	}
	if ref, ok := info.Result.(types.ManagedObjectReference); ok {
		_ = c.RemoveSnapshot(ctx, vm, ref.Value)
	}
}

func (c *Client) discardSnapshot(vm VMRef, moref string) {
	ctx, cancel := context.WithTimeout(context.Background(), abandonTimeout)
	defer cancel()
	_ = c.RemoveSnapshot(ctx, vm, moref)
}

func snapshotError(vm VMRef, err error) error {
	m := mapFault("snapshot "+vm.Name, err)
	if m != nil && !isSentinel(m) {
		return fmt.Errorf("%w: %w", ErrSnapshotFailed, m)
	}
	return m
}

func isSentinel(err error) bool {
	for _, s := range []error{ErrToolsUnavailable, ErrQuiesceFailed, ErrNotFound, ErrLogin} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// waitTask waits for a task and returns its info; a task error keeps its
// vSphere fault so mapFault can classify it.
func (c *Client) waitTask(ctx context.Context, ref types.ManagedObjectReference, onProgress func(int32)) (*types.TaskInfo, error) {
	t := object.NewTask(c.vim, ref)
	if onProgress != nil {
		return t.WaitForResult(ctx, &progressSink{fn: onProgress})
	}
	return t.WaitForResult(ctx)
}

// Snapshot reads one snapshot of a VM: its tree entry and its disks.
func (c *Client) Snapshot(ctx context.Context, vm VMRef, moref string) (*Snapshot, error) {
	sref := types.ManagedObjectReference{Type: "VirtualMachineSnapshot", Value: moref}
	var v mo.VirtualMachine
	if err := c.retrieveOne(ctx, vmMoRef(vm), []string{"name", "config.instanceUuid", "snapshot"}, &v); err != nil {
		return nil, fmt.Errorf("snapshot %s of %s: %w", moref, vm.MoRef, err)
	}
	if vm.Name == "" {
		vm.Name = v.Name
	}
	if vm.InstanceUUID == "" && v.Config != nil {
		vm.InstanceUUID = v.Config.InstanceUuid
	}
	var tree, parent *types.VirtualMachineSnapshotTree
	if v.Snapshot != nil {
		tree, parent = findTree(v.Snapshot.RootSnapshotList, sref, nil)
	}
	if tree == nil {
		return nil, fmt.Errorf("snapshot %s of %s: %w", moref, vm.Name, ErrNotFound)
	}
	var s mo.VirtualMachineSnapshot
	if err := c.retrieveOne(ctx, sref, []string{"config.hardware.device", "config.keyId"}, &s); err != nil {
		return nil, fmt.Errorf("snapshot %s of %s: %w", moref, vm.Name, err)
	}
	snap := &Snapshot{MoRef: moref, VM: vm, Name: tree.Name, Description: tree.Description, Created: tree.CreateTime, Quiesced: tree.Quiesced}
	if parent != nil {
		snap.Parent = parent.Snapshot.Value
	}
	snap.Disks = disksFrom(s.Config.Hardware.Device, s.Config.KeyId != nil)
	return snap, nil
}

// findTree returns the tree entry of ref and of its parent (nil for a root).
func findTree(list []types.VirtualMachineSnapshotTree, ref types.ManagedObjectReference, parent *types.VirtualMachineSnapshotTree) (*types.VirtualMachineSnapshotTree, *types.VirtualMachineSnapshotTree) {
	for i := range list {
		if list[i].Snapshot == ref {
			return &list[i], parent
		}
		if t, p := findTree(list[i].ChildSnapshotList, ref, &list[i]); t != nil {
			return t, p
		}
	}
	return nil, nil
}

// RemoveSnapshot removes one snapshot (never its children), asks vSphere to
// consolidate, and runs a consolidation when the VM still needs one.
func (c *Client) RemoveSnapshot(ctx context.Context, vm VMRef, moref string) error {
	consolidate := true
	res, err := methods.RemoveSnapshot_Task(ctx, c.vim, &types.RemoveSnapshot_Task{
		This: types.ManagedObjectReference{Type: "VirtualMachineSnapshot", Value: moref}, RemoveChildren: false, Consolidate: &consolidate,
	})
	if err != nil {
		return mapFault(fmt.Sprintf("remove snapshot %s of %s", moref, vm.Name), err)
	}
	if _, err := c.waitTask(ctx, res.Returnval, nil); err != nil {
		return mapFault(fmt.Sprintf("remove snapshot %s of %s", moref, vm.Name), err)
	}
	var v mo.VirtualMachine
	if err := c.retrieveOne(ctx, vmMoRef(vm), []string{"runtime.consolidationNeeded"}, &v); err != nil {
		return fmt.Errorf("remove snapshot %s of %s: consolidation check: %w", moref, vm.Name, err)
	}
	if v.Runtime.ConsolidationNeeded {
		cres, err := methods.ConsolidateVMDisks_Task(ctx, c.vim, &types.ConsolidateVMDisks_Task{This: vmMoRef(vm)})
		if err == nil {
			_, err = c.waitTask(ctx, cres.Returnval, nil)
		}
		if err != nil {
			return fmt.Errorf("remove snapshot %s of %s: %w: %v", moref, vm.Name, ErrConsolidation, err)
		}
	}
	return nil
}

// SnapshotEntry is a snapshot as listed in a VM's snapshot tree.
type SnapshotEntry struct {
	MoRef       string    `json:"moref"`
	Name        string    `json:"name"`
	Description string    `json:"description"`
	Created     time.Time `json:"created"`
	Quiesced    bool      `json:"quiesced"`
	Ours        bool      `json:"ours"` // created by this appliance
}

// Snapshots lists a VM's snapshots, depth first.
func (c *Client) Snapshots(ctx context.Context, vm VMRef) ([]SnapshotEntry, error) {
	var v mo.VirtualMachine
	if err := c.retrieveOne(ctx, vmMoRef(vm), []string{"snapshot"}, &v); err != nil {
		return nil, fmt.Errorf("snapshots of %s: %w", vm.Name, err)
	}
	var out []SnapshotEntry
	var walk func([]types.VirtualMachineSnapshotTree)
	walk = func(l []types.VirtualMachineSnapshotTree) {
		for _, t := range l {
			out = append(out, SnapshotEntry{
				MoRef: t.Snapshot.Value, Name: t.Name, Description: t.Description, Created: t.CreateTime,
				Quiesced: t.Quiesced, Ours: c.isOurs(t.Name, t.Description),
			})
			walk(t.ChildSnapshotList)
		}
	}
	if v.Snapshot != nil {
		walk(v.Snapshot.RootSnapshotList)
	}
	return out, nil
}

// isOurs: prefix AND this appliance's marker; anything else is the user's.
func (c *Client) isOurs(name, desc string) bool {
	if !strings.HasPrefix(name, SnapshotPrefix) {
		return false
	}
	rest, ok := strings.CutPrefix(desc, markerPrefix+c.cfg.ApplianceID+":")
	if !ok {
		return false
	}
	_, err := strconv.ParseInt(rest, 10, 64)
	return err == nil
}

// RemoveStaleSnapshots removes this appliance's snapshots of vm that were
// created before `before` (left by a crash) and returns what it removed.
// User snapshots — anything without both the prefix and this appliance's
// marker — are never touched.
func (c *Client) RemoveStaleSnapshots(ctx context.Context, vm VMRef, before time.Time) ([]SnapshotEntry, error) {
	list, err := c.Snapshots(ctx, vm)
	if err != nil {
		return nil, err
	}
	var removed []SnapshotEntry
	for _, s := range list {
		if !s.Ours || !s.Created.Before(before) {
			continue
		}
		if err := c.RemoveSnapshot(ctx, vm, s.MoRef); err != nil {
			return removed, fmt.Errorf("remove stale snapshot %q: %w", s.Name, err)
		}
		removed = append(removed, s)
	}
	return removed, nil
}

func (c *Client) retrieveOne(ctx context.Context, ref types.ManagedObjectReference, props []string, dst any) error {
	ocs, err := c.retrieve(ctx, types.PropertyFilterSpec{
		ObjectSet: []types.ObjectSpec{{Obj: ref}},
		PropSet:   []types.PropertySpec{{Type: ref.Type, PathSet: props}},
	})
	if err != nil {
		return err
	}
	if len(ocs) == 0 {
		return fmt.Errorf("%s: %w", ref, ErrNotFound)
	}
	if err := mo.LoadObjectContent(ocs, dst); err != nil {
		return fmt.Errorf("decode %s: %w", ref, err)
	}
	return nil
}

type progressSink struct{ fn func(int32) }

func (s *progressSink) Sink() chan<- progress.Report {
	ch := make(chan progress.Report)
	go func() {
		for p := range ch {
			s.fn(int32(p.Percentage()))
		}
	}()
	return ch
}
