package copyjob

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/vmvault/vmvault/internal/ratelimit"
	"github.com/vmvault/vmvault/policy"
)

// Event kinds of copy runs.
const (
	EventCopyFinished = "copy.finished"
	EventCopyFailed   = "copy.failed"
)

// Job is a copy job's definition.
type Job struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Source and Target are repository names of the appliance.
	Source string `json:"source"`
	Target string `json:"target"`
	// VMs (names or instance UUIDs) and Jobs (backup job ids, by the job
	// tag of their points) select the source points: a point is copied when
	// it matches either list; both empty: every point of the source.
	VMs  []string `json:"vms"`
	Jobs []string `json:"jobs"`
	// Window is when copies run; a copy still running at the window's close
	// is cancelled and resumes in the next opening.
	Window policy.Window `json:"window"`
	// Retention decides which copies the target keeps, per VM, over the
	// copies already there and the points not yet copied (a point
	// retention would remove at once is not sent at all). A copy it
	// rejects is removed only if no other copy job into the same target
	// (disabled ones too) keeps it: the target holds the union.
	Retention policy.Retention `json:"retention"`
	Enabled   bool             `json:"enabled"`
	// UploadLimitMBps caps what the copy sends into the target (MB/s,
	// 10^6 bytes/s; 0: unlimited), on top of the target repository's own
	// upload limit. UploadSchedule overrides it inside its windows (the
	// first open one wins), e.g. a lower rate in business hours.
	UploadLimitMBps float64             `json:"uploadLimitMBps,omitempty"`
	UploadSchedule  []policy.RateWindow `json:"uploadSchedule,omitempty"`
}

var idRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// Validate reports every bad field (policy.ValidationError, matching
// policy.ErrInvalid). known says whether a repository name exists; nil
// accepts any.
func (j Job) Validate(known func(string) bool) error {
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, &policy.ValidationError{Field: field, Msg: fmt.Sprintf(format, a...)})
	}
	if !idRE.MatchString(j.ID) {
		bad("id", "must be 1-63 lower-case letters, digits, '.', '_' or '-', starting with a letter or digit")
	}
	if len(j.Name) > 200 {
		bad("name", "at most 200 characters")
	}
	for _, f := range []struct{ field, v string }{{"source", j.Source}, {"target", j.Target}} {
		switch {
		case f.v == "":
			bad(f.field, "a repository name is required")
		case known != nil && !known(f.v):
			errs = append(errs, &policy.ValidationError{Field: f.field, Msg: fmt.Sprintf("unknown repository %q", f.v), Err: policy.ErrUnknownRepository})
		}
	}
	if j.Source != "" && j.Source == j.Target {
		bad("target", "must differ from the source")
	}
	for i, v := range j.VMs {
		if v == "" || len(v) > 255 {
			bad(fmt.Sprintf("vms[%d]", i), "must be a VM name or instance UUID (1-255 characters)")
		}
	}
	for i, v := range j.Jobs {
		if v == "" || len(v) > 255 {
			bad(fmt.Sprintf("jobs[%d]", i), "must be a backup job id")
		}
	}
	if err := j.Window.Validate(); err != nil {
		bad("window", "%v", err)
	}
	if err := policy.ValidateMBps(j.UploadLimitMBps); err != nil {
		bad("uploadLimitMBps", "%v", err)
	}
	errs = append(errs, policy.ValidateRateWindows("uploadSchedule", j.UploadSchedule)...)
	if err := j.Retention.Validate(); err != nil {
		var ve *policy.ValidationError
		if errors.As(err, &ve) {
			errs = append(errs, ve)
		} else {
			bad("retention", "%v", err)
		}
	}
	return errors.Join(errs...)
}

// selects reports whether the job copies a source point of vmName /
// vmUUID written by backup job backupJob.
func (j Job) selects(vmName, vmUUID, backupJob string) bool {
	if len(j.VMs) == 0 && len(j.Jobs) == 0 {
		return true
	}
	return slices.Contains(j.VMs, vmName) || (vmUUID != "" && slices.Contains(j.VMs, vmUUID)) ||
		(backupJob != "" && slices.Contains(j.Jobs, backupJob))
}

// Run states.
const (
	RunRunning     = "running"
	RunSucceeded   = "succeeded"
	RunFailed      = "failed"
	RunCancelled   = "cancelled"
	RunInterrupted = "interrupted" // the appliance stopped while it ran
)

// Run is one run of a copy job.
type Run struct {
	ID      string    `json:"id"`
	Job     string    `json:"job"`
	Trigger string    `json:"trigger"`          // "window" or "manual"
	Window  string    `json:"window,omitempty"` // the occurrence's id
	Start   time.Time `json:"start"`
	End     time.Time `json:"end,omitzero"`
	State   string    `json:"state"`
	// PointsCopied were sent; PointsSkipped were already in the target;
	// PointsRemoved were removed from the target by the job's retention.
	PointsCopied  int    `json:"pointsCopied"`
	PointsSkipped int    `json:"pointsSkipped"`
	PointsRemoved int    `json:"pointsRemoved"`
	BlobsSent     int64  `json:"blobsSent"`
	BytesSent     int64  `json:"bytesSent"`
	Error         string `json:"error,omitempty"`
	// Warnings: what did not stop the run (a copy retention could not
	// remove yet, because it is locked).
	Warnings []string `json:"warnings,omitempty"`
}

// Progress is a running copy's position.
type Progress struct {
	Run         string    `json:"run"`
	Started     time.Time `json:"started"`
	Point       string    `json:"point,omitempty"`
	VM          string    `json:"vm,omitempty"`
	PointsDone  int       `json:"pointsDone"`
	PointsTotal int       `json:"pointsTotal"`
	BytesSent   int64     `json:"bytesSent"`
}

// uploadLimit is the job's upload limit as a ratelimit schedule.
func (j Job) uploadLimit() ratelimit.Schedule {
	s := ratelimit.Schedule{Default: ratelimit.MBps(j.UploadLimitMBps)}
	for _, w := range j.UploadSchedule {
		s.Windows = append(s.Windows, ratelimit.Window{Period: w.Window, Rate: ratelimit.MBps(w.MBps)})
	}
	return s
}
