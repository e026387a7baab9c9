package api

import "time"

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
