package vsphere

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/task"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// Sentinel errors callers branch on. Errors returned by this package wrap one
// of these (test with errors.Is) when the condition applies.
var (
	// ErrNotFound: the VM, snapshot, disk, datastore or container does not exist.
	ErrNotFound = errors.New("vsphere: not found")
	// ErrLogin: the credentials were refused.
	ErrLogin = errors.New("vsphere: login failed")
	// ErrToolsUnavailable: a quiesced snapshot was asked for but VMware Tools
	// is not running in the guest; the caller may retry without quiescing.
	ErrToolsUnavailable = errors.New("vsphere: VMware Tools unavailable, cannot quiesce")
	// ErrQuiesceFailed: the guest's quiesce (VSS / sync driver) failed.
	ErrQuiesceFailed = errors.New("vsphere: guest quiesce failed")
	// ErrSnapshotFailed: the snapshot task failed for another reason.
	ErrSnapshotFailed = errors.New("vsphere: snapshot failed")
	// ErrConsolidation: disks still need consolidation after a snapshot removal.
	ErrConsolidation = errors.New("vsphere: disk consolidation failed")
	// ErrCBTReset: the stored change id can no longer be used (revert, resize,
	// lost ctk file, CBT re-enabled); the caller must fall back to a full read.
	ErrCBTReset = errors.New("vsphere: changed block tracking was reset")
	// ErrCBTDisabled: CBT is not enabled on the VM (no change id on the disk).
	ErrCBTDisabled = errors.New("vsphere: changed block tracking not enabled")
	// ErrUnsupportedDisk: the disk cannot be read consistently; the error is an
	// *UnsupportedDiskError carrying the reason.
	ErrUnsupportedDisk = errors.New("vsphere: unsupported disk")
	// ErrNeedsExport: the datastore file service cannot give this disk's
	// frozen content (vSAN or vVols datastore, or a delta chain under our
	// snapshot that only ESXi can assemble); read it through NFC export
	// (OpenExport) instead.
	ErrNeedsExport = errors.New("vsphere: disk must be read through NFC export")
	// ErrNotServed: a datastore file-service read answered 403 or 404 (after
	// a re-login); the disk may still be readable through NFC export.
	ErrNotServed = errors.New("vsphere: datastore file service does not serve the disk")
	// ErrInUse: the name is taken by something else (a datastore of that
	// name mounted from another export).
	ErrInUse = errors.New("vsphere: name in use")
	// ErrTransient marks errors the retry policy gave up on after retrying.
	ErrTransient = errors.New("vsphere: transient failure")
)

// UnsupportedDiskError says why a disk cannot be backed up or read.
type UnsupportedDiskError struct {
	VM     string
	Disk   int32
	Reason string
}

func (e *UnsupportedDiskError) Error() string {
	return fmt.Sprintf("vsphere: VM %s disk %d unsupported: %s", e.VM, e.Disk, e.Reason)
}

// Unwrap makes errors.Is(err, ErrUnsupportedDisk) true.
func (e *UnsupportedDiskError) Unwrap() error { return ErrUnsupportedDisk }

// faultOf extracts the vSphere method fault from a SOAP fault or a task
// error; nil when err carries none.
func faultOf(err error) types.BaseMethodFault {
	if err == nil {
		return nil
	}
	var te task.Error
	if errors.As(err, &te) && te.LocalizedMethodFault != nil {
		return te.LocalizedMethodFault.Fault
	}
	var pte *task.Error
	if errors.As(err, &pte) && pte.LocalizedMethodFault != nil {
		return pte.LocalizedMethodFault.Fault
	}
	var sf interface{ Fault() *soap.Fault }
	if errors.As(err, &sf) && sf.Fault() != nil {
		return asMethodFault(sf.Fault().VimFault())
	}
	// A SOAP fault wrapped with context (soap.IsSoapFault sees only a bare
	// one): its Fault method gives the method fault itself.
	var mf interface{ Fault() types.BaseMethodFault }
	if errors.As(err, &mf) && mf.Fault() != nil {
		return mf.Fault()
	}
	if soap.IsSoapFault(err) {
		return asMethodFault(soap.ToSoapFault(err).VimFault())
	}
	if soap.IsVimFault(err) {
		return soap.ToVimFault(err)
	}
	return nil
}

// asMethodFault returns v as a BaseMethodFault; SOAP decoding yields fault
// values (types.SystemError), whose methods are on the pointer.
func asMethodFault(v any) types.BaseMethodFault {
	if v == nil {
		return nil
	}
	if f, ok := v.(types.BaseMethodFault); ok {
		return f
	}
	rv := reflect.ValueOf(v)
	p := reflect.New(rv.Type())
	p.Elem().Set(rv)
	if f, ok := p.Interface().(types.BaseMethodFault); ok {
		return f
	}
	return nil
}

// FaultMessages returns the texts a vSphere fault carried with err: the
// localized message of a task error and the fault's own messages
// (MethodFault.faultMessage, where ESXi puts the guest's VSS or sync
// driver error), without duplicates. Nil when err carries no fault.
func FaultMessages(err error) []string {
	var out []string
	add := func(s string) {
		s = strings.TrimSpace(s)
		if s == "" || strings.HasPrefix(s, "*types.") { // vcsim's placeholder
			return
		}
		for _, o := range out {
			if o == s {
				return
			}
		}
		out = append(out, s)
	}
	var te task.Error
	var pte *task.Error
	switch {
	case errors.As(err, &te) && te.LocalizedMethodFault != nil:
		add(te.LocalizedMessage)
	case errors.As(err, &pte) && pte != nil && pte.LocalizedMethodFault != nil:
		add(pte.LocalizedMessage)
	}
	if f := faultOf(err); f != nil {
		if mf := f.GetMethodFault(); mf != nil {
			for _, m := range mf.FaultMessage {
				add(m.Message)
			}
		}
	}
	return out
}

// detailSuffix is ": <fault messages>" for the messages err's text lacks.
func detailSuffix(err error) string {
	text := err.Error()
	var extra []string
	for _, m := range FaultMessages(err) {
		if !strings.Contains(text, m) {
			extra = append(extra, m)
		}
	}
	if len(extra) == 0 {
		return ""
	}
	return " (" + strings.Join(extra, "; ") + ")"
}

// isFault reports whether err carries a fault of the same type as target
// (or one derived from it, as fault.Is understands it).
func isFault(err error, target types.BaseMethodFault) bool {
	if err == nil {
		return false
	}
	if fault.Is(err, target) {
		return true
	}
	f := faultOf(err)
	return f != nil && fmt.Sprintf("%T", f) == fmt.Sprintf("%T", target)
}

// mapFault wraps err with the sentinel that matches its vSphere fault, keeping
// the original message for the operator.
func mapFault(op string, err error) error {
	if err == nil {
		return nil
	}
	switch {
	case isFault(err, &types.ToolsUnavailable{}):
		return fmt.Errorf("%s: %w: %w%s", op, ErrToolsUnavailable, err, detailSuffix(err))
	case isFault(err, &types.ApplicationQuiesceFault{}):
		// The guest's own words (VSS writer, sync driver) are in the
		// fault's messages; the operator needs them to fix the guest
		// (FaultMessages reads them through the wrapped err).
		return fmt.Errorf("%s: %w: %w%s", op, ErrQuiesceFailed, err, detailSuffix(err))
	case isFault(err, &types.ManagedObjectNotFound{}), isFault(err, &types.NotFound{}):
		return fmt.Errorf("%s: %w: %v", op, ErrNotFound, err)
	case isFault(err, &types.InvalidLogin{}):
		return fmt.Errorf("%s: %w: %v", op, ErrLogin, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// IsTransient reports whether err is a failure worth retrying (network
// trouble, a busy server, a SystemError fault), as this package's retry
// policy classifies it. Callers that retry a call which is not idempotent
// on its own (a snapshot) must first undo what the failed attempt may
// have done.
func IsTransient(err error) bool { return transient(err) }
