package api

// Restores: the bodies of POST /restores and /restores/disk and their
// tasks' result.

// RestoreRequest is the body of POST /restores.
type RestoreRequest struct {
	Point        string            `json:"point"`
	Mode         string            `json:"mode"`           // "new", "original" or "rehearsal"
	Name         string            `json:"name,omitempty"` // the new VM's name (mode new)
	Datacenter   string            `json:"datacenter,omitempty"`
	Folder       string            `json:"folder,omitempty"` // VM folder inventory path
	Cluster      string            `json:"cluster,omitempty"`
	ResourcePool string            `json:"resourcePool,omitempty"`
	Host         string            `json:"host,omitempty"` // at most one of cluster, resourcePool and host
	Datastore    string            `json:"datastore,omitempty"`
	Networks     map[string]string `json:"networks,omitempty"` // backed-up network -> target network
	Thin         bool              `json:"thin,omitempty"`
	PowerOn      bool              `json:"powerOn,omitempty"`
	PowerOff     bool              `json:"powerOff,omitempty"` // mode original: power the VM off first
}

// DiskRestoreRequest is the body of POST /restores/disk.
type DiskRestoreRequest struct {
	Point     string `json:"point"`
	Disk      int32  `json:"disk"`     // the disk's key in the restore point (RestorePoint.Disks[].Key)
	TargetVM  string `json:"targetVm"` // instance UUID of the VM to attach it to
	Datastore string `json:"datastore,omitempty"`
	Thin      bool   `json:"thin,omitempty"`
}

// RestoreResult is the result of a restore or restore-disk task.
type RestoreResult struct {
	Mode           string         `json:"mode"` // new, rehearsal, overwrite, attach
	RestorePoint   string         `json:"restorePoint"`
	VM             VMRef          `json:"vm"` // the VM restored, or the one the disk was attached to
	PoweredOn      bool           `json:"poweredOn"`
	Disks          []RestoredDisk `json:"disks"`
	BytesWritten   int64          `json:"bytesWritten"`
	Seconds        float64        `json:"seconds"`
	BytesPerSecond float64        `json:"bytesPerSecond"`
	Warnings       []string       `json:"warnings,omitempty"`
	RemoveCommand  string         `json:"removeCommand,omitempty"` // rehearsals: how to remove the VM
}

// RestoredDisk says what a restore wrote for one disk.
type RestoredDisk struct {
	Index        int     `json:"index"` // disk index in the restore point
	SourceKey    int32   `json:"sourceKey"`
	TargetKey    int32   `json:"targetKey,omitempty"`
	Label        string  `json:"label,omitempty"`
	Capacity     int64   `json:"capacity"`
	BytesWritten int64   `json:"bytesWritten"`
	SHA256       string  `json:"sha256"` // of the whole disk as restored
	Seconds      float64 `json:"seconds"`
	Target       string  `json:"target,omitempty"`
}
