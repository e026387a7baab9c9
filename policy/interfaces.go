package policy

import (
	"context"
	"time"
)

// Progress is a backup's progress as reported by the Runner.
type Progress struct {
	Phase      string `json:"phase"` // e.g. "snapshot", "disk 1/2", "commit"
	BytesDone  int64  `json:"bytesDone"`
	BytesTotal int64  `json:"bytesTotal"`
}

// BackupResult is what a successful backup produced.
type BackupResult struct {
	PointID string // the new restore point
	Bytes   int64  // bytes read from the VM's disks
	Stored  int64  // new bytes stored in the repository after deduplication
}

// Runner backs up one VM; the backup engine implements it and cmd wires it.
// RunBackup must be safe for concurrent calls on different VMs, must return
// promptly once ctx is cancelled (with an error wrapping ctx.Err()), and may
// call progress from any goroutine until it returns.
type Runner interface {
	RunBackup(ctx context.Context, job Job, vm VM, progress func(Progress)) (BackupResult, error)
}

// CheckRequest asks the repository to verify itself.
type CheckRequest struct {
	Repository string
	Full       bool      // true: read every pack's data (--read-data); false: structure plus what is new
	Since      time.Time // quick check: what was added since then (zero: everything's structure)
	Resume     string    // full check: opaque cursor where an earlier full check stopped ("" from the start)
}

// CheckResult is the outcome of a check.
type CheckResult struct {
	Damaged int    // damaged packs/points found; 0 means clean
	Summary string // human-readable findings
}

// CheckProgress is what a check reports as it goes.
type CheckProgress struct {
	Cursor string // full check: opaque resume point ("" for a quick check)
	Done   int64  // units (packs) verified so far in the whole check, including before a resume
	Total  int64  // units in the whole check; 0 while unknown
}

// Maintainer runs repository maintenance; the daemon implements it over the
// repository package. Every method honours ctx. Check calls progress with an
// opaque cursor from which a later Check can resume; the cursor reported last
// before a cancellation must be a safe resume point. Every method may run
// while backups write to the same repository (the repository serialises what
// must be: reclaim's barrier, catalog transactions).
type Maintainer interface {
	Check(ctx context.Context, req CheckRequest, progress func(CheckProgress)) (CheckResult, error)
	Points(ctx context.Context, repository string) ([]Point, error)
	RemovePoints(ctx context.Context, repository string, ids []string) error
	Reclaim(ctx context.Context, repository string) (freedBytes int64, err error)
}

// Severity of an event.
type Severity string

// Event severities.
const (
	SeverityInfo    Severity = "info"
	SeverityWarning Severity = "warning"
	SeverityError   Severity = "error"
)

// Rank orders severities (info < warning < error) for "at least" queries.
func (s Severity) Rank() int {
	switch s {
	case SeverityWarning:
		return 1
	case SeverityError:
		return 2
	}
	return 0
}

// Event kinds the scheduler records.
const (
	EventJobStarted        = "job.started"
	EventJobFinished       = "job.finished"
	EventVMBackedUp        = "vm.backed-up"
	EventVMFailed          = "vm.failed"
	EventVMCancelled       = "vm.cancelled"
	EventVMInterrupted     = "vm.interrupted"
	EventVMNotBackedUp     = "vm.not-backed-up"
	EventSelectionNew      = "selection.new"
	EventSelectionVanished = "selection.vanished"
	EventSelectionFailed   = "selection.failed"
	EventWindowMissed      = "window.missed"
	EventRetentionRemoved  = "retention.removed"
	EventReclaimDone       = "reclaim.done"
	EventCheckClean        = "check.clean"
	EventCheckDamage       = "check.damage"
	EventCheckPaused       = "check.paused"
	EventMaintenanceFailed = "maintenance.failed"
)

// Event is one thing worth telling a person: for the console and email reports.
type Event struct {
	Time       time.Time `json:"time"`
	Severity   Severity  `json:"severity"`
	Kind       string    `json:"kind"`
	Subject    string    `json:"subject"` // what it is about, e.g. the VM's name, the job's name or the repository
	Job        string    `json:"job,omitempty"`
	VM         string    `json:"vm,omitempty"` // instance UUID
	Repository string    `json:"repository,omitempty"`
	Message    string    `json:"message"`
	// User, Address, Outcome and Error make an event of a user's action
	// (the audit trail): who, from which client address, "ok" or
	// "failed", and why it failed. Empty on the scheduler's own events.
	User    string `json:"user,omitempty"`
	Address string `json:"address,omitempty"`
	Outcome string `json:"outcome,omitempty"`
	Error   string `json:"error,omitempty"`
	// ObjectKind, ObjectID and ObjectName name what a user's action acted
	// on (job, copyjob, repository, user, token, settings, point, instant,
	// task, approval, vm): its id and the name people know it by. Absent
	// on events recorded before they existed and on the scheduler's.
	ObjectKind string `json:"objectKind,omitempty"`
	ObjectID   string `json:"objectId,omitempty"`
	ObjectName string `json:"objectName,omitempty"`
	// Changes lists the fields a change (an update of a job, copy job,
	// user, token or settings section) changed, from what to what.
	Changes []Change `json:"changes,omitempty"`
}

// Change is one field an audited change changed. A secret (a password,
// passphrase, token or key) is never recorded: Secret is true and From
// and To are empty.
type Change struct {
	Field  string `json:"field"` // dotted path in the object's JSON, e.g. retention.daily
	From   string `json:"from,omitempty"`
	To     string `json:"to,omitempty"`
	Secret bool   `json:"secret,omitempty"`
}

// VMState is the scheduler's memory of one VM in one job.
type VMState struct {
	Job          string    `json:"job"`
	VM           string    `json:"vm"` // instance UUID
	Name         string    `json:"name"`
	Selected     bool      `json:"selected"` // in the job's last resolved selection
	LastAttempt  time.Time `json:"lastAttempt,omitzero"`
	LastSuccess  time.Time `json:"lastSuccess,omitzero"`
	LastPoint    string    `json:"lastPoint,omitempty"`
	LastError    string    `json:"lastError,omitempty"`
	WindowID     string    `json:"windowId,omitempty"` // occurrence the fields below refer to
	Attempts     int       `json:"attempts,omitempty"`
	Done         bool      `json:"done,omitempty"` // backed up in WindowID: never again in that window
	NextRetry    time.Time `json:"nextRetry,omitzero"`
	Running      bool      `json:"running,omitempty"` // an attempt is in flight; still true after a crash
	RunningRunID string    `json:"runningRunId,omitempty"`
}

// OutcomeStatus is a VM's state within one job run.
type OutcomeStatus string

// VM outcomes within a run.
const (
	OutcomePending     OutcomeStatus = "pending"
	OutcomeRunning     OutcomeStatus = "running"
	OutcomeSucceeded   OutcomeStatus = "succeeded"
	OutcomeFailed      OutcomeStatus = "failed" // last attempt failed (retried while the window is open)
	OutcomeCancelled   OutcomeStatus = "cancelled"
	OutcomeInterrupted OutcomeStatus = "interrupted" // the appliance stopped while it ran
	OutcomeNotRun      OutcomeStatus = "not-run"     // the window closed before it could run
)

// VMOutcome is one VM's result within a job run.
type VMOutcome struct {
	VM       string        `json:"vm"`
	Name     string        `json:"name"`
	MoRef    string        `json:"moref,omitempty"`
	Status   OutcomeStatus `json:"status"`
	Attempts int           `json:"attempts"`
	Start    time.Time     `json:"start,omitzero"`
	End      time.Time     `json:"end,omitzero"`
	Bytes    int64         `json:"bytes,omitempty"`
	Stored   int64         `json:"stored,omitempty"`
	Point    string        `json:"point,omitempty"`
	Error    string        `json:"error,omitempty"`
}

// JobRun is one run of a job: one window occurrence, one "run now", or a
// missed window (Missed, no VMs). A run the appliance stopped under is
// Interrupted; if its window was still open at the next start, a resume run
// (ResumeOf) for the same occurrence backs up the VMs it left undone.
type JobRun struct {
	ID          string      `json:"id"`
	Job         string      `json:"job"`
	WindowID    string      `json:"windowId,omitempty"`
	Manual      bool        `json:"manual,omitempty"`
	Missed      bool        `json:"missed,omitempty"`
	Interrupted bool        `json:"interrupted,omitempty"` // ended by an appliance stop or crash
	ResumeOf    string      `json:"resumeOf,omitempty"`    // the interrupted run this one resumes
	ResumedBy   string      `json:"resumedBy,omitempty"`   // the run that resumed this interrupted one
	Start       time.Time   `json:"start"`
	End         time.Time   `json:"end,omitzero"` // zero while the run is open
	VMs         []VMOutcome `json:"vms,omitempty"`
}

// Outcome returns the VM's outcome entry, or nil.
func (r *JobRun) Outcome(vm string) *VMOutcome {
	for i := range r.VMs {
		if r.VMs[i].VM == vm {
			return &r.VMs[i]
		}
	}
	return nil
}

// MaintenanceState is the maintenance progress of one repository.
type MaintenanceState struct {
	Repository      string    `json:"repository"`
	LastQuickCheck  time.Time `json:"lastQuickCheck,omitzero"`
	LastFullCheck   time.Time `json:"lastFullCheck,omitzero"` // last completed full check
	FullCheckCursor string    `json:"fullCheckCursor,omitempty"`
	FullCheckStart  time.Time `json:"fullCheckStart,omitzero"` // when the unfinished full check began
	LastReclaim     time.Time `json:"lastReclaim,omitzero"`
}

// Store persists the scheduler's state; internal/state implements it over
// the appliance's bbolt database. Methods are safe for concurrent use and
// each is one short transaction.
type Store interface {
	Jobs(ctx context.Context) ([]Job, error)
	VMStates(ctx context.Context) ([]VMState, error)
	PutVMState(ctx context.Context, s VMState) error
	PutVMStates(ctx context.Context, s []VMState) error // one transaction for a whole selection
	PutRun(ctx context.Context, r JobRun) error
	PutRuns(ctx context.Context, r []JobRun) error // one transaction: an interrupted run closed with its resume run
	OpenRuns(ctx context.Context) ([]JobRun, error)
	Checkpoint(ctx context.Context) (time.Time, error)
	SetCheckpoint(ctx context.Context, t time.Time) error
	Maintenance(ctx context.Context) ([]MaintenanceState, error)
	PutMaintenance(ctx context.Context, m MaintenanceState) error
	AddEvent(ctx context.Context, e Event) error
}
