package policy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// QuiesceMode says how the guest is quiesced before the snapshot.
type QuiesceMode string

// Quiesce modes. The zero value means QuiesceFileSystem.
const (
	QuiesceNone QuiesceMode = "none" // crash-consistent snapshot
	// QuiesceFileSystem freezes the guest's file systems only: VSS without
	// writers (ctx_file_share_backup) on Windows, VMware Tools' fsfreeze
	// (sync driver) elsewhere. No application is involved.
	QuiesceFileSystem QuiesceMode = "filesystem"
	// QuiesceApplication asks VSS and its writers (SQL Server, Exchange,
	// AD, …) to make their data consistent (ctx_backup), with the job's
	// VSSType. Non-Windows guests have Tools' file-system quiesce only
	// (its pre-freeze/post-thaw scripts are how applications take part):
	// their points record filesystem with the reason.
	QuiesceApplication QuiesceMode = "application"
)

// VSSType is the VSS backup type of application quiescing.
type VSSType string

// VSS types. The zero value means VSSCopy.
const (
	// VSSCopy leaves the applications' logs and backup history alone: the
	// safe choice next to another backup product.
	VSSCopy VSSType = "copy"
	// VSSFull tells the writers a full backup was taken, so SQL Server and
	// Exchange truncate their logs: for when vmvault is their only backup.
	VSSFull VSSType = "full"
)

// CloseAction says what happens to a backup still running when its window closes.
type CloseAction string

// Close actions. The zero value means CloseFinish.
const (
	CloseFinish CloseAction = "finish" // let it finish; start nothing new
	CloseCancel CloseAction = "cancel" // cancel it and report it as cancelled
)

// Job is one backup job: which VMs, to which repository, when, and what is kept.
type Job struct {
	ID          string      `json:"id"`
	Name        string      `json:"name"`
	Description string      `json:"description,omitempty"`
	Enabled     bool        `json:"enabled"`
	Repository  string      `json:"repository"`
	Selection   Selection   `json:"selection"`
	Window      Window      `json:"window"`
	Retention   Retention   `json:"retention"`
	Quiesce     QuiesceMode `json:"quiesce,omitempty"`
	// QuiesceRequired fails a VM's backup (leaving no snapshot) when its
	// guest cannot be quiesced, instead of falling back to a
	// crash-consistent point with a warning. Not allowed with QuiesceNone.
	// Absent (false) in jobs saved before it existed, which keep falling back.
	QuiesceRequired bool `json:"quiesceRequired,omitempty"`
	// VSSType is the VSS backup type of QuiesceApplication ("" is copy);
	// full is refused with any other mode (nothing would truncate).
	VSSType VSSType `json:"vssType,omitempty"`
	// RequireAllDisks fails a VM's backup when one of its disks cannot be
	// backed up (independent, physical-mode RDM, multi-writer, encrypted)
	// instead of skipping the disk with a warning. Absent (false) in jobs
	// saved before it existed.
	RequireAllDisks bool        `json:"requireAllDisks,omitempty"`
	Priority        int         `json:"priority"`              // higher runs first when jobs compete
	Concurrency     int         `json:"concurrency,omitempty"` // VMs of this job at once; 0 means 1
	OnWindowClose   CloseAction `json:"onWindowClose,omitempty"`
	MaxAttempts     int         `json:"maxAttempts,omitempty"` // per VM per window; 0 retries until the window closes
	// EveryHours starts a new run every so many hours while the window is
	// open (see Slot); 0 means once per opening, and once a day in an
	// opening longer than a day.
	EveryHours int `json:"everyHours,omitempty"`
	// ActiveFullEvery makes every Nth backup of a VM an active full: every
	// disk read whole, changed block tracking not consulted (0: never).
	// ActiveFullDays does the same when the VM's last full backup is older
	// than that many days (0: never). See backup.Request.
	ActiveFullEvery int `json:"activeFullEvery,omitempty"`
	ActiveFullDays  int `json:"activeFullDays,omitempty"`
	// Transport is how the job's disks are read: TransportAuto (the zero
	// value: HotAdd, then network, then NFC, per disk, each fallback's
	// reason recorded on the restore point) or one transport only, which
	// fails a disk it cannot read.
	Transport Transport `json:"transport,omitempty"`
	// Scripts are commands run on the appliance before and after the job
	// and each VM's backup (scripts.go); absent in jobs saved before they existed.
	Scripts Scripts `json:"scripts,omitzero"`
}

// Transport names how disks are read (backup.Transport's values; policy
// does not import the engines).
type Transport string

// Transports.
const (
	TransportAuto    Transport = "auto"
	TransportHotAdd  Transport = "hotadd"
	TransportNetwork Transport = "network"
	TransportNFC     Transport = "nfc"
)

// NewJob returns an enabled job with the reference product's defaults: the
// default window (weekday nights and all weekend) in loc, the "more"
// retention preset, file-system quiesce, and running backups finish when the
// window closes. The caller adds the selection.
func NewJob(id, name, repository string, loc *time.Location) Job {
	return Job{
		ID: id, Name: name, Enabled: true, Repository: repository,
		Window:        DefaultWindow(loc),
		Retention:     presets["more"],
		Quiesce:       QuiesceFileSystem,
		OnWindowClose: CloseFinish,
	}
}

// concurrency returns the effective per-job limit.
func (j Job) concurrency() int {
	if j.Concurrency <= 0 {
		return 1
	}
	return j.Concurrency
}

// ValidateEnv is what validation checks a job against. Nil members skip their check.
type ValidateEnv struct {
	// KnownRepository reports whether the appliance has a repository of that name.
	KnownRepository func(name string) bool
	// Inventory, when set, is used to warn about a selection that matches nothing now.
	Inventory Inventory
}

// Validate checks a job before it is saved. err joins one *ValidationError
// per bad field (see FieldErrors); warnings are problems that do not block
// saving, such as a selection that matches no VM yet (containers may fill
// later) or an explicit VM the inventory does not know.
func (j Job) Validate(ctx context.Context, env ValidateEnv) (warnings []string, err error) {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &ValidationError{Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	switch {
	case j.ID == "":
		bad("id", "required")
	case len(j.ID) > 128 || !utf8.ValidString(j.ID) || strings.ContainsAny(j.ID, "/\x00"):
		bad("id", "must be at most 128 bytes of UTF-8 without '/' or NUL")
	}
	if strings.TrimSpace(j.Name) == "" {
		bad("name", "required")
	}
	switch {
	case j.Repository == "":
		bad("repository", "required")
	case env.KnownRepository != nil && !env.KnownRepository(j.Repository):
		errs = append(errs, &ValidationError{Field: "repository", Msg: fmt.Sprintf("unknown repository %q", j.Repository), Err: ErrUnknownRepository})
	}
	if err := j.Selection.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := j.Window.Validate(); err != nil {
		bad("window", "%v", err)
	}
	if err := j.Retention.Validate(); err != nil {
		errs = append(errs, err)
	}
	switch j.Quiesce {
	case "", QuiesceNone, QuiesceFileSystem, QuiesceApplication:
	default:
		bad("quiesce", "unknown mode %q (none, filesystem, application)", j.Quiesce)
	}
	if j.QuiesceRequired && j.Quiesce == QuiesceNone {
		bad("quiesceRequired", "cannot require quiescing with quiesce mode none")
	}
	switch {
	case j.VSSType != "" && j.VSSType != VSSCopy && j.VSSType != VSSFull:
		bad("vssType", "unknown VSS type %q (copy, full)", j.VSSType)
	case j.VSSType == VSSFull && j.Quiesce != QuiesceApplication:
		bad("vssType", "full needs quiesce mode application (VSS writers truncate their logs only when they take part)")
	}
	switch j.Transport {
	case "", TransportAuto, TransportHotAdd, TransportNetwork, TransportNFC:
	default:
		bad("transport", "unknown transport %q (auto, hotadd, network, nfc)", j.Transport)
	}
	switch j.OnWindowClose {
	case "", CloseFinish, CloseCancel:
	default:
		bad("onWindowClose", "unknown action %q (finish, cancel)", j.OnWindowClose)
	}
	if j.Concurrency < 0 {
		bad("concurrency", "must not be negative (got %d)", j.Concurrency)
	}
	if j.EveryHours < 0 || j.EveryHours > MaxEveryHours {
		bad("everyHours", "must be from 0 (once per opening) to %d hours, not %d", MaxEveryHours, j.EveryHours)
	}
	if j.MaxAttempts < 0 {
		bad("maxAttempts", "must not be negative (got %d)", j.MaxAttempts)
	}
	if j.ActiveFullEvery < 0 || j.ActiveFullEvery > 10000 {
		bad("activeFullEvery", "must be 0 (never) to 10000 backups (got %d)", j.ActiveFullEvery)
	}
	if j.ActiveFullDays < 0 || j.ActiveFullDays > 3650 {
		bad("activeFullDays", "must be 0 (never) to 3650 days (got %d)", j.ActiveFullDays)
	}
	j.Scripts.validate(bad)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if env.Inventory != nil {
		res, err := j.Selection.Resolve(ctx, env.Inventory, nil)
		if err != nil {
			return nil, fmt.Errorf("validate job %s selection: %w", j.ID, err)
		}
		if len(res.VMs) == 0 {
			warnings = append(warnings, "selection matches no VM now; containers and tags are evaluated again at every window")
		}
		for _, id := range res.Missing {
			warnings = append(warnings, fmt.Sprintf("VM %s is not in the inventory", id))
		}
	}
	return warnings, nil
}
