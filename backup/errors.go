package backup

import "errors"

// Sentinel errors callers branch on (errors.Is).
var (
	// ErrUnsupportedVM: the VM cannot be backed up at all (template,
	// encrypted, no disk that can be read); the error says why.
	ErrUnsupportedVM = errors.New("backup: VM cannot be backed up")
	// ErrQuiesce: quiesce mode "require" and the guest could not be
	// quiesced; no snapshot was left behind.
	ErrQuiesce = errors.New("backup: guest could not be quiesced")
	// ErrSnapshot: the backup snapshot could not be created.
	ErrSnapshot = errors.New("backup: snapshot failed")
	// ErrBusy: a backup of the same VM is already running in this engine
	// (its sweep would remove the other run's snapshot).
	ErrBusy = errors.New("backup: a backup of this VM is already running")
	// ErrPanic: a worker panicked; the backup was abandoned cleanly.
	ErrPanic = errors.New("backup: internal error (panic)")
)
