package restore

import "errors"

// Sentinel errors callers branch on (errors.Is).
var (
	// ErrInvalidRequest: the request itself is wrong (missing or
	// contradictory fields).
	ErrInvalidRequest = errors.New("restore: invalid request")
	// ErrPointUnusable: the restore point is partial, has no usable VM
	// configuration, or its disks do not match its configuration.
	ErrPointUnusable = errors.New("restore: restore point cannot be restored")
	// ErrTargetNotFound: a named datacenter, folder, host, cluster, pool,
	// datastore, network or VM does not exist.
	ErrTargetNotFound = errors.New("restore: target not found")
	// ErrNameInUse: a VM with the new VM's name exists.
	ErrNameInUse = errors.New("restore: VM name in use")
	// ErrNoSpace: a datastore has less free space than the disks need.
	ErrNoSpace = errors.New("restore: not enough free space on the datastore")
	// ErrPoweredOn: restoring over a powered-on VM without permission to
	// power it off.
	ErrPoweredOn = errors.New("restore: the VM is powered on")
	// ErrLayoutChanged: the original VM's disks no longer match the restore
	// point (restore to a new VM instead).
	ErrLayoutChanged = errors.New("restore: the VM's disks no longer match the restore point")
)
