package api

import (
	"fmt"
	"time"

	"github.com/vmvault/vmvault/policy"
)

// RepositoryInfo describes one configured repository.
type RepositoryInfo struct {
	Name        string                   `json:"name"`
	Path        string                   `json:"path"`
	Format      string                   `json:"format"`
	Encrypted   bool                     `json:"encrypted"`
	Points      int                      `json:"points"`
	Stats       *RepoStats               `json:"stats,omitempty"`
	Maintenance *policy.MaintenanceState `json:"maintenance,omitempty"`
	Space       *Space                   `json:"space,omitempty"`
	Bandwidth   *Bandwidth               `json:"bandwidth,omitempty"` // absent: no limits
}

// Bandwidth is a repository's upload and download limits in MB/s (10^6
// bytes per second; 0 unlimited): the defaults, the windows that override
// them (the first open one wins), and the rates in force now.
type Bandwidth struct {
	UploadMBps      float64           `json:"uploadMBps"`
	DownloadMBps    float64           `json:"downloadMBps"`
	Schedule        []BandwidthWindow `json:"schedule,omitempty"`
	NowUploadMBps   float64           `json:"nowUploadMBps"`
	NowDownloadMBps float64           `json:"nowDownloadMBps"`
}

// BandwidthWindow is a pair of limits in force while Window is open.
type BandwidthWindow struct {
	Window       policy.Window `json:"window"`
	UploadMBps   float64       `json:"uploadMBps"`
	DownloadMBps float64       `json:"downloadMBps"`
}

// Space is where a repository's files live: the volume's size and free
// space (absent on an object store, which has no such figure), the growth
// and when the free space runs out at that rate.
type Space struct {
	TotalBytes int64 `json:"totalBytes"`
	FreeBytes  int64 `json:"freeBytes"`
	// Low is true below the alert threshold (LowBelowPercent of the total
	// or LowBelowBytes, whichever comes first).
	Low             bool    `json:"low"`
	LowBelowPercent float64 `json:"lowBelowPercent"`
	LowBelowBytes   int64   `json:"lowBelowBytes"`
	// GrowthBytesPerDay is the stored bytes the points add per day over the
	// last 30 days; absent until the points span an hour.
	GrowthBytesPerDay *float64 `json:"growthBytesPerDay,omitempty"`
	// FullAt is when the free space runs out at that rate; absent when the
	// repository is not growing (or not within a century).
	FullAt *time.Time `json:"fullAt,omitempty"`
}

// RepoStats are a repository's space figures (a walk of every point).
type RepoStats struct {
	Points           int          `json:"points"`
	LogicalBytes     int64        `json:"logicalBytes"` // sum of disk capacities over points
	UniqueBytes      int64        `json:"uniqueBytes"`  // plaintext bytes of live blobs
	StoredBytes      int64        `json:"storedBytes"`  // on-disk bytes of live blobs
	DiskBytes        int64        `json:"diskBytes"`    // all files of the repository
	DeadBytes        int64        `json:"deadBytes"`    // on-disk bytes of indexed blobs no point references: what reclaim can free
	Packs            int          `json:"packs"`
	Blobs            int          `json:"blobs"`
	DedupRatio       float64      `json:"dedupRatio"`       // LogicalBytes / UniqueBytes
	CompressionRatio float64      `json:"compressionRatio"` // UniqueBytes / StoredBytes
	PerPoint         []PointStats `json:"perPoint"`
	// Stale: these are the statistics of an earlier set of points, served
	// while a long walk over the current ones runs (Points of the
	// repository is always current).
	Stale bool `json:"stale,omitempty"`
}

// PointStats are one point's space figures.
type PointStats struct {
	ID           string `json:"id"`
	LogicalBytes int64  `json:"logicalBytes"`
	UniqueBytes  int64  `json:"uniqueBytes"` // plaintext bytes referenced by no other point
}

// CheckReport is the part of a check task's result (the report a
// repository check returns, as the task registry keeps it) that the
// console's "last check" reads.
type CheckReport struct {
	Problems []CheckProblem `json:"problems"`
}

// CheckProblem is one finding of a check.
type CheckProblem struct {
	Kind    string   `json:"kind"`
	Message string   `json:"message"`
	Points  []string `json:"points,omitempty"` // restore points affected
}

// String is the finding as the console lists it; it reads like the
// repository's own text of the problem (service/repos's test holds the two equal).
func (p CheckProblem) String() string {
	s := p.Kind + ": " + p.Message
	if len(p.Points) > 0 {
		s += fmt.Sprintf(" (restore points: %v)", p.Points)
	}
	return s
}

// Reporter is how a long operation run by the API reports; *task.Reporter
// implements it.
type Reporter interface {
	Progress(phase string, done, total int64)
	Logf(format string, args ...any)
}
