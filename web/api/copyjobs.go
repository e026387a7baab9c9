package api

import (
	"time"

	"github.com/vmvault/vmvault/policy"
)

// Copy jobs: a copy job, its runs and its running copy as /copy-jobs
// shows them.

// CopyJob is a copy job as the API takes and shows it: the restore points
// of a source repository (every VM, the listed VMs, or the points of the
// listed backup jobs) copied to a target repository in a window, with the
// target's own retention.
type CopyJob struct {
	ID        string           `json:"id"`
	Name      string           `json:"name"`
	Source    string           `json:"source"`
	Target    string           `json:"target"`
	VMs       []string         `json:"vms"`  // VM names or instance UUIDs
	Jobs      []string         `json:"jobs"` // backup job ids
	Window    policy.Window    `json:"window"`
	Retention policy.Retention `json:"retention"`
	Enabled   bool             `json:"enabled"`
	// UploadLimitMBps caps what the copy sends (MB/s; 0 unlimited);
	// UploadSchedule overrides it inside its windows.
	UploadLimitMBps float64             `json:"uploadLimitMBps,omitempty"`
	UploadSchedule  []policy.RateWindow `json:"uploadSchedule,omitempty"`
}

// CopyRun is one run of a copy job.
type CopyRun struct {
	ID            string    `json:"id"`
	Job           string    `json:"job"`
	Trigger       string    `json:"trigger"` // "window" or "manual"
	Window        string    `json:"window,omitempty"`
	Start         time.Time `json:"start"`
	End           time.Time `json:"end,omitzero"`
	State         string    `json:"state"` // running, succeeded, failed, cancelled, interrupted
	PointsCopied  int       `json:"pointsCopied"`
	PointsSkipped int       `json:"pointsSkipped"`
	PointsRemoved int       `json:"pointsRemoved"`
	BlobsSent     int64     `json:"blobsSent"`
	BytesSent     int64     `json:"bytesSent"`
	Error         string    `json:"error,omitempty"`
	Warnings      []string  `json:"warnings,omitempty"`
}

// CopyProgress is a running copy's position.
type CopyProgress struct {
	Run         string    `json:"run"`
	Started     time.Time `json:"started"`
	Point       string    `json:"point,omitempty"`
	VM          string    `json:"vm,omitempty"`
	PointsDone  int       `json:"pointsDone"`
	PointsTotal int       `json:"pointsTotal"`
	BytesSent   int64     `json:"bytesSent"`
}

// CopyJobView is a copy job with its running copy and last run.
type CopyJobView struct {
	CopyJob
	Running *CopyProgress `json:"running,omitempty"`
	LastRun *CopyRun      `json:"lastRun,omitempty"`
}
