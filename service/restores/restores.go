package restores

import (
	"context"
	"fmt"
	"time"

	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/restore"
	"github.com/vmvault/vmvault/service/repos"
	"github.com/vmvault/vmvault/web/api"
)

// Service implements web.Restores with the restore engine over the
// repository that holds the point and the daemon's vCenter session.
type Service struct {
	client restore.VCenter
	rs     *repos.Set
	inv    policy.Inventory
}

// New returns the restore service over the daemon's vCenter session
// (*vsphere.Client), its repositories and its inventory.
func New(client restore.VCenter, rs *repos.Set, inv policy.Inventory) *Service {
	return &Service{client: client, rs: rs, inv: inv}
}

// engine returns a restore engine over the repository holding point; the
// restore is an operation on that repository (it cannot be removed under
// it) until done.
func (s *Service) engine(ctx context.Context, point, what string) (_ *restore.Engine, _ string, _ repository.Point, done func(), _ error) {
	name, p, err := s.rs.Locate(ctx, point)
	if err != nil {
		return nil, "", p, nil, err
	}
	r, done, err := s.rs.Use(name, what+" of "+p.VM.Name)
	if err != nil {
		return nil, "", p, nil, err
	}
	return restore.New(r, s.client, restore.Options{}), name, p, done, nil
}

func restoreProgress(rep api.Reporter) func(restore.Progress) {
	return func(p restore.Progress) {
		phase := p.Phase
		if phase == "disk" {
			phase = fmt.Sprintf("disk %d", p.Disk)
		}
		rep.Progress(phase, p.Done, p.Size)
	}
}

// Restore implements web.Restores.
func (s *Service) Restore(ctx context.Context, req api.RestoreRequest, rep api.Reporter) (*api.RestoreResult, error) {
	e, repo, p, done, err := s.engine(ctx, req.Point, "restore")
	if err != nil {
		return nil, err
	}
	defer done()
	rep.Logf("restoring %s from %s (point %s, %s) as %s", p.VM.Name, repo, p.ID, p.Time.Format(time.RFC3339), req.Mode)
	res, err := e.RestoreVM(ctx, restore.VMRequest{
		RestorePoint: p.ID, Name: req.Name, Datacenter: req.Datacenter, Folder: req.Folder,
		Host: req.Host, Cluster: req.Cluster, ResourcePool: req.ResourcePool, Datastore: req.Datastore,
		NetworkMap: req.Networks, Thin: req.Thin, PowerOn: req.PowerOn,
		Overwrite: req.Mode == "original", PowerOff: req.PowerOff, Rehearsal: req.Mode == "rehearsal",
		Progress: restoreProgress(rep),
	})
	if err != nil {
		return nil, err
	}
	for _, w := range res.Warnings {
		rep.Logf("warning: %s", w)
	}
	rep.Logf("restored as %s (%s)", res.VM.Name, res.VM.MoRef)
	return restoreResultDTO(res), nil
}

// restoreResultDTO is the engine's result as the API documents it.
func restoreResultDTO(r restore.Result) *api.RestoreResult {
	out := &api.RestoreResult{Mode: r.Mode, RestorePoint: r.RestorePoint,
		VM:        api.VMRef{Name: r.VM.Name, InstanceUUID: r.VM.InstanceUUID, MoRef: r.VM.MoRef},
		PoweredOn: r.PoweredOn, Disks: []api.RestoredDisk{}, BytesWritten: r.BytesWritten, Seconds: r.Seconds,
		BytesPerSecond: r.BytesPerSec, Warnings: r.Warnings, RemoveCommand: r.RemoveCommand}
	for _, d := range r.Disks {
		out.Disks = append(out.Disks, api.RestoredDisk{Index: d.Index, SourceKey: d.SourceKey, TargetKey: d.TargetKey, Label: d.Label,
			Capacity: d.Capacity, BytesWritten: d.BytesWritten, SHA256: d.SHA256, Seconds: d.Seconds, Target: d.Target})
	}
	return out
}

// RestoreDisk implements web.Restores: the disk is attached to the target VM.
func (s *Service) RestoreDisk(ctx context.Context, req api.DiskRestoreRequest, rep api.Reporter) (*api.RestoreResult, error) {
	e, _, p, done, err := s.engine(ctx, req.Point, "disk restore")
	if err != nil {
		return nil, err
	}
	defer done()
	idx := -1
	for i, d := range p.Disks {
		if d.Key == req.Disk {
			idx = i
		}
	}
	if idx < 0 {
		return nil, fmt.Errorf("restore point %s has no disk with key %d: %w", p.ID, req.Disk, api.ErrNotFound)
	}
	vms, err := s.inv.VMs(ctx)
	if err != nil {
		return nil, fmt.Errorf("list inventory: %w", err)
	}
	target := ""
	for _, v := range vms {
		if v.InstanceUUID == req.TargetVM {
			target = v.MoRef
		}
	}
	if target == "" {
		return nil, fmt.Errorf("VM %s is not in the inventory: %w", req.TargetVM, api.ErrNotFound)
	}
	rep.Logf("attaching disk %d of point %s to %s", req.Disk, p.ID, target)
	res, err := e.AttachDisk(ctx, restore.AttachRequest{RestorePoint: p.ID, Disk: idx, VM: target, Datastore: req.Datastore, Thin: req.Thin, Progress: restoreProgress(rep)})
	if err != nil {
		return nil, err
	}
	return restoreResultDTO(res), nil
}
