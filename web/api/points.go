package api

import (
	"strings"
	"time"
)

// RestorePoint is a restore point as the API shows it.
type RestorePoint struct {
	ID           string            `json:"id"`
	Repository   string            `json:"repository"`
	Job          string            `json:"job,omitempty"`
	VM           VMRef             `json:"vm"`
	Time         time.Time         `json:"time"`
	Parent       string            `json:"parent,omitempty"`
	Consistency  string            `json:"consistency,omitempty"`
	Partial      bool              `json:"partial"`
	Locked       bool              `json:"locked"`
	LogicalBytes int64             `json:"logicalBytes"`
	Disks        []PointDisk       `json:"disks"`
	Warnings     []string          `json:"warnings,omitempty"`
	Tags         map[string]string `json:"tags,omitempty"`
	// Config is the VM configuration the point saved, in GET
	// /restore-points/{id} only (lists leave it out: one blob read per
	// point). Absent for points without one (image backups).
	Config *PointConfig `json:"config,omitempty"`
	// ConfigError says why a saved configuration could not be read.
	ConfigError string `json:"configError,omitempty"`
	// LockedUntil is the end of a running time lock (POST
	// /restore-points/{id}/lock with until): until then no role can unlock
	// or delete the point. Absent when none runs; Locked is true with it.
	LockedUntil time.Time `json:"lockedUntil,omitzero"`
	// Quiesce details Consistency: what the backup asked of the guest and
	// why it got less, if it did. Absent for points written before it was
	// recorded.
	Quiesce *PointQuiesce `json:"quiesce,omitempty"`
	// Verification is the point's latest verification (POST
	// /restore-points/{id}/verify); absent when it was never verified.
	Verification *PointVerification `json:"verification,omitempty"`
}

// PointQuiesce is what a backup asked of the guest and what it obtained.
type PointQuiesce struct {
	// Requested is none, filesystem or application; Obtained is the
	// point's consistency (application, filesystem, crash).
	Requested string `json:"requested"`
	VSSType   string `json:"vssType,omitempty"` // copy or full (application only)
	Obtained  string `json:"obtained"`
	// Reason (tools-not-running, tools-not-installed, tools-too-old,
	// quiesce-failed, not-windows, not-quiesced, powered-off, template)
	// says why Obtained falls short of Requested; Detail says it in words,
	// with vSphere's fault text for a failed quiesce.
	Reason string `json:"reason,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Spec is the quiesce spec of the snapshot kept: vss:<context>:<type>
	// on Windows, tools for VMware Tools' plain quiesce.
	Spec         string `json:"spec,omitempty"`
	ToolsVersion string `json:"toolsVersion,omitempty"`
	ToolsStatus  string `json:"toolsStatus,omitempty"`
}

// PointConfig is what a restore wizard needs of a point's saved VM
// configuration: its NICs to map to target networks and its disks.
type PointConfig struct {
	Name     string            `json:"name"`
	GuestID  string            `json:"guestId,omitempty"`
	NumCPU   int32             `json:"numCpu"`
	MemoryMB int32             `json:"memoryMb"`
	Firmware string            `json:"firmware,omitempty"`
	NICs     []PointNIC        `json:"nics"`
	Disks    []PointConfigDisk `json:"disks"`
}

// PointNIC is a saved network adapter. Network is as the backup recorded it
// (a port group's name, or a distributed port group's key); POST /restores'
// networks map takes it as the key.
type PointNIC struct {
	Label   string `json:"label"`
	Type    string `json:"type"`
	Network string `json:"network"`
}

// PointConfigDisk is a saved disk with where it lived.
type PointConfigDisk struct {
	Key       int32  `json:"key"`
	Label     string `json:"label"`
	Capacity  int64  `json:"capacity"`
	Datastore string `json:"datastore"`
	Skipped   string `json:"skipped,omitempty"` // why it was not backed up
}

// VMRef identifies a VM in API responses.
type VMRef struct {
	Name         string `json:"name"`
	InstanceUUID string `json:"instanceUuid,omitempty"`
	MoRef        string `json:"moref,omitempty"`
}

// PointDisk is one disk of a restore point.
type PointDisk struct {
	Key       int32  `json:"key"`
	Label     string `json:"label"`
	Capacity  int64  `json:"capacity"`
	Mode      string `json:"mode,omitempty"`
	BytesRead int64  `json:"bytesRead"`
	NewBytes  int64  `json:"newBytes"`
	Stored    int64  `json:"storedBytes"`
}

// PointFilter selects restore points; zero fields do not filter.
type PointFilter struct {
	VM         string    // instance UUID or exact name
	Repository string    // repository name
	Job        string    // job id (the "job" tag of the point)
	From, To   time.Time // [From, To)
}

// PointQuery asks for one page of restore points in list order (newest
// first; see PointLess): the filter, a search, and where the page starts.
type PointQuery struct {
	PointFilter
	// Search, in lower case, keeps the points PointMatches; "" keeps all.
	Search string
	// Limit is the most points the page holds (at least 1).
	Limit int
	// After, when set, starts the page after this key (the previous
	// page's last point), so a page does not shift when points are added
	// or deleted in front of it.
	After *PointKey
}

// PointKey is a point's place in list order.
type PointKey struct {
	Time       time.Time
	Repository string
	ID         string
}

// Key returns p's place in list order.
func (p RestorePoint) Key() PointKey {
	return PointKey{Time: p.Time, Repository: p.Repository, ID: p.ID}
}

// PointLess reports whether a point at a comes before one at b in list
// order: newest first, then by repository name, then by id. It is the
// order GET /restore-points has always answered in.
func PointLess(a, b PointKey) bool {
	if !a.Time.Equal(b.Time) {
		return a.Time.After(b.Time)
	}
	if a.Repository != b.Repository {
		return a.Repository < b.Repository
	}
	return a.ID < b.ID
}

// PointPage is one page of restore points.
type PointPage struct {
	Items []RestorePoint
	// Total counts every point the query's filter and search keep, on
	// every page.
	Total int
	// More says points follow the page's last.
	More bool
}

// PointMatches is the search of GET /restore-points?q=: a point whose id
// starts with q, or whose VM's name, instance UUID or job contains it
// (q in lower case).
func PointMatches(p RestorePoint, q string) bool {
	return strings.HasPrefix(p.ID, q) ||
		containsFold(p.VM.Name, q) ||
		strings.HasPrefix(strings.ToLower(p.VM.InstanceUUID), q) ||
		containsFold(p.Job, q)
}

// containsFold is strings.Contains(strings.ToLower(s), q) without
// allocating for ASCII s (the common case, searched for every point).
func containsFold(s, q string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return strings.Contains(strings.ToLower(s), q)
		}
	}
	if len(q) > len(s) {
		return false
	}
outer:
	for i := 0; i+len(q) <= len(s); i++ {
		for j := 0; j < len(q); j++ {
			c := s[i+j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != q[j] {
				continue outer
			}
		}
		return true
	}
	return false
}

// Keep reports whether the filter keeps p.
func (f PointFilter) Keep(p RestorePoint) bool {
	switch {
	case f.VM != "" && p.VM.InstanceUUID != f.VM && p.VM.Name != f.VM,
		f.Repository != "" && p.Repository != f.Repository,
		f.Job != "" && p.Job != f.Job,
		!f.From.IsZero() && p.Time.Before(f.From),
		!f.To.IsZero() && !p.Time.Before(f.To):
		return false
	}
	return true
}

// VMPoints sums up one VM's restore points for GET /vms.
type VMPoints struct {
	VM     VMRef // as its newest point names it
	Points int
	// Last is the VM's newest complete point, nil when it has none.
	Last *RestorePoint
}

// VMKey is how points are grouped by VM: the instance UUID, else the name.
func VMKey(v VMRef) string {
	if v.InstanceUUID != "" {
		return v.InstanceUUID
	}
	return v.Name
}
