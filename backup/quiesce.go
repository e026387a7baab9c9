package backup

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/vmvault/vmvault/vmconfig"
	"github.com/vmvault/vmvault/vsphere"
)

// Quiescing: what the job asks for (a level and a VSS type), what vSphere
// is sent, and what the point ends up with. The level decides the spec:
//
//	filesystem, Windows: VSS without writers (ctx_file_share_backup, COPY)
//	application, Windows: VSS with writers (ctx_backup, bootable system
//	  state, COPY or FULL)
//	either, other guests: Tools' plain quiesce (sync driver / fsfreeze, with
//	  Tools' pre-freeze and post-thaw scripts); recorded as filesystem, and
//	  an application request says "not-windows" (Tools has no other level)
//
// Under QuiesceRequire a VM whose guest cannot be quiesced at the level
// asked fails (a failed VSS writer is a failure, not a step down); under
// QuiescePrefer an application request that VSS refuses is retried without
// writers, and a guest that cannot be quiesced at all gets a
// crash-consistent point. Either way the point records why.

// QuiesceLevel is how deep a guest is quiesced when it can be.
type QuiesceLevel string

// Quiesce levels.
const (
	// LevelApplication: VSS with its writers on Windows (the zero value
	// of Request.Level: with VSS COPY it leaves the guest's backup history
	// alone, so it is the safest deep quiesce).
	LevelApplication QuiesceLevel = "application"
	// LevelFilesystem: the file systems frozen, no application involved.
	LevelFilesystem QuiesceLevel = "filesystem"
)

// ParseLevel validates a quiesce level ("" is application).
func ParseLevel(s string) (QuiesceLevel, error) {
	switch QuiesceLevel(s) {
	case "":
		return LevelApplication, nil
	case LevelApplication, LevelFilesystem:
		return QuiesceLevel(s), nil
	}
	return "", fmt.Errorf("quiesce level %q: want application or filesystem", s)
}

// VSSType is the VSS backup type of application quiescing.
type VSSType string

// VSS backup types.
const (
	// VSSCopy leaves the applications' logs and backup history alone: safe
	// next to another backup product (the default).
	VSSCopy VSSType = "copy"
	// VSSFull lets SQL Server, Exchange and other writers truncate their
	// logs: for when vmvault is their only backup.
	VSSFull VSSType = "full"
)

// ParseVSSType validates a VSS type ("" is copy).
func ParseVSSType(s string) (VSSType, error) {
	switch VSSType(s) {
	case "":
		return VSSCopy, nil
	case VSSCopy, VSSFull:
		return VSSType(s), nil
	}
	return "", fmt.Errorf("VSS type %q: want copy or full", s)
}

// Why a point got less than was asked (QuiesceReport.Reason); see vmconfig.
const (
	ReasonToolsNotRunning   = vmconfig.ReasonToolsNotRunning
	ReasonToolsNotInstalled = vmconfig.ReasonToolsNotInstalled
	ReasonToolsTooOld       = vmconfig.ReasonToolsTooOld
	ReasonQuiesceFailed     = vmconfig.ReasonQuiesceFailed
	ReasonNotWindows        = vmconfig.ReasonNotWindows
	ReasonNotQuiesced       = vmconfig.ReasonNotQuiesced
	ReasonPoweredOff        = vmconfig.ReasonPoweredOff
	ReasonTemplate          = vmconfig.ReasonTemplate
)

// QuiesceReport is what a VM's backup asked of the guest and what it got;
// the restore point keeps it in its tags (vmconfig.Quiesce).
type QuiesceReport = vmconfig.Quiesce

// maxDetail bounds the fault text kept on a point (a guest's VSS error can
// be long; the task log has it all).
const maxDetail = 1024

func specName(s vsphere.QuiesceSent, quiesced bool) string {
	switch {
	case !quiesced:
		return ""
	case !s.Windows:
		return "tools"
	}
	t := "copy"
	if s.VSSBackupType == vsphere.VSSFull {
		t = "full"
	}
	return "vss:" + s.VSSContext + ":" + t
}

// quiesceAsk is one request to the guest, most ambitious first.
type quiesceAsk struct {
	level QuiesceLevel
	what  string // for the operator: "VSS with writers (ctx_backup)"
}

// snapshot takes the backup snapshot as mode and level say and reports
// what the guest gave.
func (e *Engine) snapshot(ctx context.Context, vm vsphere.VM, name string, mode QuiesceMode, level QuiesceLevel, vss VSSType) (*vsphere.Snapshot, QuiesceReport, []string, error) {
	rep := QuiesceReport{Requested: string(level), ToolsVersion: vsphere.ToolsVersionString(vm.ToolsVersion), ToolsStatus: vm.ToolsVersionStatus}
	if level == LevelApplication {
		rep.VSSType = string(vss)
	}
	opts := vsphere.SnapshotOptions{
		Name:           name,
		QuiesceTimeout: e.opts.QuiesceTimeout,
	}
	crash := func(warns []string) (*vsphere.Snapshot, QuiesceReport, []string, error) {
		opts.Quiesce = false
		snap, err := e.createSnapshot(ctx, vm, opts)
		if err != nil {
			if ctx.Err() != nil {
				return nil, rep, warns, ctx.Err()
			}
			return nil, rep, warns, fmt.Errorf("%w: %s: %w", ErrSnapshot, vm.Name, err)
		}
		rep.Obtained = ConsistencyCrash
		return snap, rep, warns, nil
	}
	switch {
	case mode == QuiesceOff:
		rep.Requested, rep.VSSType = "none", ""
		return crash(nil)
	case vm.PowerState == "poweredOff":
		// No guest to quiesce, and none needed: nothing writes the disks.
		rep.Reason, rep.Detail = ReasonPoweredOff, "the VM is powered off: its disks are at rest"
		return crash(nil)
	}
	windows := vm.GuestFamily == "windowsGuest"
	if vm.ToolsVersionStatus == "guestToolsTooOld" || vm.ToolsVersionStatus == "guestToolsBlacklisted" {
		// vSphere's own verdict: quiescing through such Tools is unsupported
		// (and a hung quiesce stuns the guest), so it is not tried.
		rep.Reason = ReasonToolsTooOld
		rep.Detail = fmt.Sprintf("VMware Tools %s is %s for quiescing (vSphere reports %s): upgrade VMware Tools in the guest",
			orUnknown(rep.ToolsVersion), map[bool]string{true: "blacklisted", false: "too old"}[vm.ToolsVersionStatus == "guestToolsBlacklisted"], vm.ToolsVersionStatus)
		if mode == QuiesceRequire {
			return nil, rep, nil, fmt.Errorf("%w: %s (quiesce mode require): %s: %w", ErrQuiesce, vm.Name, rep.Detail, vsphere.ErrToolsUnavailable)
		}
		return crash([]string{fmt.Sprintf("guest could not be quiesced (%s): the restore point is crash-consistent", rep.Detail)})
	}
	asks := []quiesceAsk{{level: LevelFilesystem, what: "the file-system quiesce of VMware Tools"}}
	if windows {
		asks[0].what = "VSS without writers (" + vsphere.VSSContextFileShare + ")"
		if level == LevelApplication {
			asks = append([]quiesceAsk{{level: LevelApplication, what: "VSS with writers (" + vsphere.VSSContextBackup + ", " + string(vss) + ")"}}, asks...)
		}
	}
	var failures []string
	var warns []string
	for i, a := range asks {
		opts.Quiesce, opts.Writers = true, a.level == LevelApplication
		opts.VSSBackupType = vsphere.VSSCopy
		if vss == VSSFull {
			opts.VSSBackupType = vsphere.VSSFull
		}
		snap, err := e.createSnapshot(ctx, vm, opts)
		if err == nil {
			rep.Spec = specName(snap.Quiesce, snap.Quiesced)
			// What was sent decides, not what the engine meant to send:
			// CreateSnapshot reads the guest family again.
			writers := snap.Quiesce.Windows && snap.Quiesce.VSSContext == vsphere.VSSContextBackup
			switch {
			case !snap.Quiesced:
				rep.Obtained, rep.Reason = ConsistencyCrash, ReasonNotQuiesced
				rep.Detail = "vSphere made the snapshot but reports it not quiesced"
				if mode == QuiesceRequire {
					var r Result
					e.removeSnapshot(ctx, vm.VMRef, snap, &r)
					return nil, rep, r.Warnings, fmt.Errorf("%w: %s (quiesce mode require): %s", ErrQuiesce, vm.Name, rep.Detail)
				}
				warns = append(warns, "guest was not quiesced (vSphere reports the snapshot not quiesced): the restore point is crash-consistent")
			case writers:
				rep.Obtained = ConsistencyApplication
			default:
				rep.Obtained = ConsistencyFilesystem
				switch {
				case len(failures) > 0:
					rep.Reason, rep.Detail = ReasonQuiesceFailed, strings.Join(failures, "; ")
					warns = append(warns, fmt.Sprintf("application quiescing failed (%s): the restore point is file-system consistent (%s)", rep.Detail, a.what))
				case level == LevelApplication:
					rep.Reason = ReasonNotWindows
					rep.Detail = "not a Windows guest: no VSS writers; VMware Tools froze the file systems (its pre-freeze and post-thaw scripts are how applications take part)"
				}
			}
			return snap, rep, warns, nil
		}
		toolsErr := errors.Is(err, vsphere.ErrToolsUnavailable)
		switch {
		case ctx.Err() != nil:
			return nil, rep, warns, ctx.Err()
		case !toolsErr && !errors.Is(err, vsphere.ErrQuiesceFailed):
			return nil, rep, warns, fmt.Errorf("%w: %s: %w", ErrSnapshot, vm.Name, err)
		}
		if toolsErr {
			rep.Reason = ReasonToolsNotRunning
			rep.Detail = "VMware Tools is not running in the guest"
			if vm.ToolsStatus == "toolsNotInstalled" || vm.ToolsVersionStatus == "guestToolsNotInstalled" {
				rep.Reason, rep.Detail = ReasonToolsNotInstalled, "VMware Tools is not installed in the guest"
			}
			if m := vsphere.FaultMessages(err); len(m) > 0 {
				rep.Detail += ": " + strings.Join(m, "; ")
			}
		} else {
			failures = append(failures, a.what+": "+faultText(err))
			rep.Reason, rep.Detail = ReasonQuiesceFailed, strings.Join(failures, "; ")
		}
		rep.Detail = truncate(rep.Detail, maxDetail)
		if mode == QuiesceRequire {
			return nil, rep, warns, fmt.Errorf("%w: %s (quiesce mode require): %s: %w", ErrQuiesce, vm.Name, rep.Detail, err)
		}
		if toolsErr || i == len(asks)-1 {
			break
		}
	}
	return crash(append(warns, fmt.Sprintf("guest could not be quiesced (%s): the restore point is crash-consistent", rep.Detail)))
}

// faultText is what vSphere said about a failed quiesce: the fault's
// messages, or the error itself when it carried none.
func faultText(err error) string {
	if m := vsphere.FaultMessages(err); len(m) > 0 {
		return strings.Join(m, "; ")
	}
	return err.Error()
}

func orUnknown(s string) string {
	if s == "" {
		return "(version unknown)"
	}
	return s
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && s[cut]&0xC0 == 0x80 { // not inside a UTF-8 sequence
		cut--
	}
	return s[:cut] + "…"
}
