package restore

import (
	"context"
	"fmt"
	"time"

	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/vmconfig"
	"github.com/vmvault/vmvault/vsphere"
)

// findOriginal finds the VM a restore point came from: by managed object id
// when its instance UUID still matches, else by instance UUID.
func (e *Engine) findOriginal(ctx context.Context, cfg *vmconfig.VMConfig) (vsphere.VM, error) {
	if cfg.MoRef != "" {
		vm, err := e.vc.VM(ctx, vsphere.VMRef{MoRef: cfg.MoRef})
		if err == nil && (cfg.InstanceUUID == "" || vm.InstanceUUID == cfg.InstanceUUID) {
			return vm, nil
		}
	}
	if cfg.InstanceUUID != "" {
		all, err := e.vc.VMNotes(ctx)
		if err != nil {
			return vsphere.VM{}, err
		}
		for _, v := range all {
			if v.InstanceUUID == cfg.InstanceUUID {
				return e.vc.VM(ctx, v.VMRef)
			}
		}
	}
	return vsphere.VM{}, fmt.Errorf("%w: the original VM %q (%s, instance %s) no longer exists; restore to a new VM", ErrTargetNotFound, cfg.Name, cfg.MoRef, cfg.InstanceUUID)
}

// overwrite writes a restore point over the original VM's disks. Everything
// is checked first (VM found, same disks at the same keys and capacities, no
// snapshots, powered off or allowed to power it off).
func (e *Engine) overwrite(ctx context.Context, req VMRequest, p repository.Point, cfg *vmconfig.VMConfig, start time.Time) (Result, error) {
	report := func(pr Progress) {
		if req.Progress != nil {
			req.Progress(pr)
		}
	}
	vm, err := e.findOriginal(ctx, cfg)
	if err != nil {
		return Result{}, err
	}
	res := Result{Mode: "overwrite", RestorePoint: p.ID, VM: vm.VMRef}
	if vm.HasSnapshots {
		return res, fmt.Errorf("%w: VM %s has snapshots; remove them before restoring over it", ErrLayoutChanged, vm.Name)
	}
	targets := make([]vsphere.Disk, len(p.Disks))
	for i, pd := range p.Disks {
		found := false
		for _, d := range vm.Disks {
			if d.Key == pd.Key {
				targets[i], found = d, true
			}
		}
		if !found {
			return res, fmt.Errorf("%w: VM %s has no disk with key %d (%s)", ErrLayoutChanged, vm.Name, pd.Key, pd.Label)
		}
		if targets[i].CapacityBytes != pd.Capacity {
			return res, fmt.Errorf("%w: disk %d of VM %s has %d bytes, the restore point %d", ErrLayoutChanged, pd.Key, vm.Name, targets[i].CapacityBytes, pd.Capacity)
		}
		if targets[i].Unsupported != "" {
			return res, fmt.Errorf("%w: disk %d of VM %s cannot be written: %s", ErrLayoutChanged, pd.Key, vm.Name, targets[i].Unsupported)
		}
	}
	if vm.PowerState != "poweredOff" && !req.PowerOff {
		return res, &plainError{sentinel: ErrPoweredOn, msg: fmt.Sprintf("VM %s is %s. Shut it down in vSphere, or let the restore power it off (the console's \"Power the VM off first\", the API's powerOff), then start the restore again", vm.Name, powerWords(vm.PowerState))}
	}
	if vm.PowerState != "poweredOff" {
		report(Progress{Phase: "power-off"})
		if err := e.vc.PowerOff(ctx, vm.VMRef); err != nil {
			return res, fmt.Errorf("power off %s before overwriting it: %w", vm.Name, err)
		}
		res.Warnings = append(res.Warnings, fmt.Sprintf("VM %s was %s and was powered off", vm.Name, vm.PowerState))
	}
	// The writes below bypass changed block tracking: invalidate every
	// change id before the first byte lands (and again after the last), so
	// no later incremental backup trusts a change id from before.
	if err := e.vc.ResetCBT(ctx, vm.VMRef); err != nil {
		return res, fmt.Errorf("restore over VM %s: %w (nothing was written)", vm.Name, err)
	}
	for i := range p.Disks {
		dres, err := e.uploadDisk(ctx, vm.VMRef, p.ID, i, targets[i].Key, report)
		if err != nil {
			return res, fmt.Errorf("restore over VM %s: %w; %d of %d disks were fully written and disk %d partly: the VM is inconsistent, restore again", vm.Name, err, i, len(p.Disks), p.Disks[i].Key)
		}
		dres.SourceKey, dres.Label, dres.Target = p.Disks[i].Key, p.Disks[i].Label, targets[i].FileName
		res.Disks = append(res.Disks, dres)
	}
	if err := e.vc.ResetCBT(ctx, vm.VMRef); err != nil {
		res.Warnings = append(res.Warnings, fmt.Sprintf("resetting changed block tracking after the restore failed (%v); the next backup of %s must be a full one", err, vm.Name))
	}
	if req.PowerOn {
		report(Progress{Phase: "power-on"})
		if err := e.vc.PowerOn(ctx, vm.VMRef); err != nil {
			return res, fmt.Errorf("restore over VM %s: the disks are restored but power on failed: %w", vm.Name, err)
		}
		res.PoweredOn = true
	}
	res.finish(start)
	report(Progress{Phase: "done"})
	return res, nil
}

// powerWords is a vSphere power state as an administrator says it.
func powerWords(state string) string {
	switch state {
	case "poweredOn":
		return "powered on"
	case "suspended":
		return "suspended"
	case "poweredOff":
		return "powered off"
	}
	return state
}

// plainError is a sentinel error whose message is written for the person
// who reads it: errors.Is finds the sentinel, the text does not repeat it.
type plainError struct {
	sentinel error
	msg      string
}

func (e *plainError) Error() string { return e.msg }
func (e *plainError) Unwrap() error { return e.sentinel }
