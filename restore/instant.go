package restore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vmvault/vmvault/vsphere"
)

// InstantRequest asks for a VM that runs from disks that already exist:
// the files of a restore point's NFS export, mounted as a datastore
// (service/instantvm mounts it; this engine only builds the VM).
type InstantRequest struct {
	// VMRequest places the VM. Datastore is where the VM's own files go
	// (configuration, logs, swap: a production datastore, so nothing but
	// the disks is on the export); default: the first disk's original.
	// Name defaults to "<vm>-instant". Rehearsal, Overwrite, Transport,
	// Thin and DiskDatastores are not used.
	VMRequest
	// DiskFiles maps each restore point disk index to its descriptor on
	// the export, as a datastore path ("[vmvault-ab12] web01.vmdk").
	DiskFiles map[int]string
	// Isolated leaves every NIC disconnected (verification, restore-only
	// users).
	Isolated bool
	// Original keeps the original VM's identity: its BIOS UUID and MACs,
	// its instance UUID and name too when it is gone. The original must be
	// gone or powered off (two running copies would clash).
	Original bool
}

type unregisterer interface {
	UnregisterVM(ctx context.Context, vm vsphere.VMRef) (string, error)
	DeleteDatastoreFile(ctx context.Context, datacenter, dsPath string) error
}

// InstantVM creates the VM of an instant recovery from the point's
// configuration, its disks attached from req.DiskFiles, and powers it on
// when asked. A failure after the VM exists unregisters it again (never a
// Destroy: that would delete the export's files) and deletes its home
// directory; nothing is left half-made.
func (e *Engine) InstantVM(ctx context.Context, req InstantRequest) (Result, error) {
	start := time.Now()
	report := func(p Progress) {
		if req.Progress != nil {
			req.Progress(p)
		}
	}
	report(Progress{Phase: "validate"})
	if e.vc == nil {
		return Result{}, fmt.Errorf("%w: no vCenter connection", ErrInvalidRequest)
	}
	un, ok := e.vc.(unregisterer)
	if !ok {
		return Result{}, fmt.Errorf("%w: this vCenter connection cannot unregister VMs", ErrInvalidRequest)
	}
	if req.Overwrite || req.Rehearsal {
		return Result{}, fmt.Errorf("%w: an instant recovery neither overwrites nor rehearses", ErrInvalidRequest)
	}
	p, cfg, err := e.loadPoint(ctx, req.RestorePoint, true)
	if err != nil {
		return Result{}, err
	}
	for i := range p.Disks {
		if req.DiskFiles[i] == "" {
			return Result{}, fmt.Errorf("%w: no export file for disk %d", ErrInvalidRequest, i)
		}
	}
	vr := req.VMRequest
	if req.Original {
		orig, ferr := e.findOriginal(ctx, cfg)
		switch {
		case ferr == nil && orig.PowerState != "poweredOff":
			return Result{}, fmt.Errorf("%w: the original VM %s is %s: power it off first, or recover without its identity", ErrInvalidRequest, orig.Name, orig.PowerState)
		case ferr == nil:
			vr.identity = true
		case errors.Is(ferr, ErrTargetNotFound):
			vr.identity, vr.originalGone = true, true
			if vr.Name == "" {
				vr.Name = cfg.Name
			}
		default:
			return Result{}, fmt.Errorf("look for the original VM: %w", ferr)
		}
	}
	if vr.Name == "" {
		vr.Name = cfg.Name + "-instant"
	}
	vr.existing = req.DiskFiles
	vr.isolated = req.Isolated
	pl, err := e.planNew(ctx, vr, p, cfg)
	if err != nil {
		return Result{}, err
	}
	res := Result{Mode: "instant", RestorePoint: p.ID, Warnings: pl.warnings}
	report(Progress{Phase: "create"})
	vm, err := e.vc.CreateVM(ctx, pl.spec)
	if err != nil {
		cctx, cancel := e.cleanupCtx(ctx)
		defer cancel()
		var errs []error
		if refs, lerr := e.vc.VMsNamed(cctx, pl.spec.Name); lerr == nil {
			for _, r := range refs {
				_, uerr := un.UnregisterVM(cctx, r)
				errs = append(errs, uerr)
			}
		} else {
			errs = append(errs, lerr)
		}
		if rerr := errors.Join(errs...); rerr != nil {
			return res, fmt.Errorf("create VM %s: %w; removing what it left failed too: %v (check for a VM of that name)", pl.spec.Name, err, rerr)
		}
		return res, fmt.Errorf("create VM %s: %w (nothing was left behind)", pl.spec.Name, err)
	}
	res.VM = vm.VMRef
	for i, idx := range pl.diskIdx {
		res.Disks = append(res.Disks, DiskResult{SourceKey: p.Disks[idx].Key, Label: p.Disks[idx].Label, Target: pl.spec.Disks[i].ExistingFile})
	}
	if req.PowerOn {
		report(Progress{Phase: "power-on"})
		if err := e.vc.PowerOn(ctx, vm.VMRef); err != nil {
			report(Progress{Phase: "cleanup"})
			cctx, cancel := e.cleanupCtx(ctx)
			defer cancel()
			if uerr := RemoveInstantVM(cctx, un, pl.spec.Datacenter, vm.VMRef); uerr != nil {
				return res, fmt.Errorf("power on %s: %w; unregistering it failed too: %v (remove it by hand)", vm.Name, err, uerr)
			}
			res.VM = vsphere.VMRef{}
			return res, fmt.Errorf("power on %s: %w (the VM was unregistered)", vm.Name, err)
		}
		res.PoweredOn = true
	}
	res.finish(start)
	report(Progress{Phase: "done"})
	return res, nil
}

// RemoveInstantVM powers an instant VM off, unregisters it and deletes
// its home directory (what vSphere wrote there); the disks, the export's
// files, are left to the export.
func RemoveInstantVM(ctx context.Context, vc unregisterer, datacenter string, vm vsphere.VMRef) error {
	home, err := vc.UnregisterVM(ctx, vm)
	if err != nil {
		return err
	}
	if home == "" {
		return nil
	}
	return vc.DeleteDatastoreFile(ctx, datacenter, home)
}
