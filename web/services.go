package web

import (
	"context"

	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/web/api"
)

// JobStore keeps jobs; records.Store implements it over the state
// database. Job and DeleteJob return an error matching api.ErrNotFound for
// an unknown id.
type JobStore interface {
	Jobs(ctx context.Context) ([]policy.Job, error)
	Job(ctx context.Context, id string) (policy.Job, error)
	PutJob(ctx context.Context, j policy.Job) error
	DeleteJob(ctx context.Context, id string) error
}

// Scheduler is the part of policy.Scheduler the API drives.
type Scheduler interface {
	// RunNow starts a run of the job outside its window and returns the run id.
	RunNow(ctx context.Context, job string) (string, error)
	// Reload re-reads jobs after one was saved or deleted.
	Reload(ctx context.Context) error
}

// SchedulerStatus is what the scheduler is doing now; *policy.Scheduler
// implements it. When Config.Scheduler implements it too, the dashboard and
// /stream show the scheduler's running backups and maintenance (which are
// not tasks of the registry).
type SchedulerStatus interface {
	Status() policy.Status
}

// EventQuery selects events.
type EventQuery = api.EventQuery

// EventLog reads the appliance's events; records.Store implements it.
type EventLog interface {
	Events(ctx context.Context, q EventQuery) ([]policy.Event, error)
}

// VMStates reads the scheduler's per-VM memory; records.Store implements it.
type VMStates interface {
	// VMStates returns the last attempt and success of each VM per job
	// (the metrics' last success per job).
	VMStates(ctx context.Context) ([]policy.VMState, error)
	// FailedVMs returns the VMs (by instance UUID) whose last backup
	// attempt failed after their last success (the dashboard's "failed").
	FailedVMs(ctx context.Context) (map[string]bool, error)
}

// The restore point types are api's, shared with the services that fill them.
type (
	RestorePoint    = api.RestorePoint
	PointConfig     = api.PointConfig
	PointNIC        = api.PointNIC
	PointConfigDisk = api.PointConfigDisk
	VMRef           = api.VMRef
	PointDisk       = api.PointDisk
	PointFilter     = api.PointFilter
)

// Points lists and changes restore points across the appliance's repositories.
type Points interface {
	Points(ctx context.Context, f PointFilter) ([]RestorePoint, error)
	Point(ctx context.Context, id string) (RestorePoint, error)
	SetLocked(ctx context.Context, id string, locked bool) error
	Delete(ctx context.Context, id string) error
}

// The repository types are api's, shared with the services that fill them.
type (
	RepositoryInfo = api.RepositoryInfo
	RepoStats      = api.RepoStats
	PointStats     = api.PointStats
	// Reporter is how a long operation run by the API reports; *task.Reporter
	// implements it.
	Reporter = api.Reporter
)

// Repositories lists repositories and runs their maintenance.
type Repositories interface {
	Repositories(ctx context.Context) ([]RepositoryInfo, error)
	// Repository returns one repository with its space statistics.
	Repository(ctx context.Context, name string) (RepositoryInfo, error)
	// Check verifies a repository (full: read every blob) and returns its report.
	Check(ctx context.Context, name string, full bool, rep Reporter) (any, error)
	// Reclaim frees the space of deleted points and returns its report.
	Reclaim(ctx context.Context, name string, rep Reporter) (any, error)
}

// BackupRequest is the body of POST /backups.
type BackupRequest struct {
	VMs        []string `json:"vms"`                  // instance UUIDs
	Repository string   `json:"repository,omitempty"` // default: the first configured one
	Job        string   `json:"job,omitempty"`        // recorded on the points; "" for ad-hoc backups
}

// Backups backs up VMs now; the backup engine implements it (cmd wires it).
// Backup runs inside a task: it honours ctx and reports through rep.
type Backups interface {
	// Backup returns one outcome per requested VM, also when it fails
	// part way (the outcomes so far).
	Backup(ctx context.Context, req BackupRequest, rep Reporter) ([]BackupOutcome, error)
}

// BackupOutcome is one VM of a backup task's result.
type BackupOutcome struct {
	VM           string `json:"vm"` // instance UUID as requested
	Name         string `json:"name,omitempty"`
	RestorePoint string `json:"restorePoint,omitempty"`
	Mode         string `json:"mode,omitempty"` // full or incremental
	BytesRead    int64  `json:"bytesRead"`
	NewBytes     int64  `json:"newBytes"`
	Error        string `json:"error,omitempty"`
	// Warnings: what the backup did or could not do that the
	// administrator should know ("changed block tracking was off: enabled it").
	Warnings []string `json:"warnings,omitempty"`
}

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

// Restores restores VMs and disks; the restore engine implements it.
type Restores interface {
	Restore(ctx context.Context, req RestoreRequest, rep Reporter) (*RestoreResult, error)
	RestoreDisk(ctx context.Context, req DiskRestoreRequest, rep Reporter) (*RestoreResult, error)
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

// Settings are the appliance-wide preferences the console edits.
type Settings = api.Settings

// Mailer sends the test mail of POST /settings/smtp/test; notify implements
// it and the daemon wires it. A nil Mailer means SMTP is not configured.
type Mailer interface {
	SendTest(ctx context.Context, to string) error
}

// SettingsStore keeps Settings; settings.Bolt implements it.
type SettingsStore interface {
	Settings(ctx context.Context) (Settings, bool, error) // false: never saved
	PutSettings(ctx context.Context, s Settings) error
}

// InventoryNode is one object of the vSphere tree (GET /inventory): a flat
// list the console turns into a tree through Parent.
type InventoryNode struct {
	ID           string `json:"id"`     // managed object id, e.g. "datacenter-2", "vm-42"
	Type         string `json:"type"`   // datacenter, folder, cluster, host, resource-pool, vm
	Name         string `json:"name"`   // as vCenter shows it
	Parent       string `json:"parent"` // id of the nearest listed ancestor; "" at the top
	Path         string `json:"path"`   // inventory path, "/DC0/vm/web01"
	InstanceUUID string `json:"instanceUuid,omitempty"`
	PowerState   string `json:"powerState,omitempty"` // VMs: poweredOn, poweredOff, suspended
	Template     bool   `json:"template,omitempty"`
	// Tags are a VM's tag ids (GET /tags names them); absent when it has
	// none or the tagging service could not be read.
	Tags []string `json:"tags,omitempty"`
}

// Inventory node types.
const (
	NodeDatacenter   = "datacenter"
	NodeFolder       = "folder"
	NodeCluster      = "cluster"
	NodeHost         = "host"
	NodeResourcePool = "resource-pool"
	NodeVM           = "vm"
)

// RestoreTargets are the places a restore can go (GET /restore-targets).
type RestoreTargets struct {
	Datacenters []TargetDatacenter `json:"datacenters"`
}

// TargetDatacenter is one datacenter's restore targets.
type TargetDatacenter struct {
	Name       string            `json:"name"`
	Path       string            `json:"path"`
	Folders    []string          `json:"folders"` // VM folder inventory paths
	Compute    []TargetCompute   `json:"compute"`
	Datastores []TargetDatastore `json:"datastores"`
	Networks   []TargetNetwork   `json:"networks"`
}

// TargetCompute is a cluster or a host a restored VM can run on.
type TargetCompute struct {
	Name string `json:"name"`
	Type string `json:"type"` // "cluster" or "host"
	Path string `json:"path"`
}

// TargetDatastore is a datastore with its space (bytes) from vCenter's summary.
type TargetDatastore struct {
	Name       string `json:"name"`
	Capacity   int64  `json:"capacity"`
	Free       int64  `json:"free"`
	Type       string `json:"type,omitempty"`
	Accessible bool   `json:"accessible"`
}

// TargetNetwork is a network or port group. ID is its managed object id: a
// backup records a distributed port group's NIC by it (PointNIC.Network).
type TargetNetwork struct {
	ID   string `json:"id,omitempty"`
	Name string `json:"name"`
	Type string `json:"type,omitempty"`
}

// Topology reads vCenter's tree and restore targets; the daemon implements
// it over vsphere (with a short cache). A nil Topology means no vCenter is
// configured: the routes answer 503.
type Topology interface {
	Nodes(ctx context.Context) ([]InventoryNode, error)
	Targets(ctx context.Context) (RestoreTargets, error)
}

// RunLog reads job runs; records.Store implements it.
type RunLog interface {
	// Runs returns up to limit runs of a job, newest first.
	Runs(ctx context.Context, job string, limit int) ([]policy.JobRun, error)
}

// VCenterTest is the body of POST /settings/vcenter/test; empty fields mean
// the configured connection's.
type VCenterTest struct {
	URL        string `json:"url,omitempty"`
	Username   string `json:"username,omitempty"`
	Password   string `json:"password,omitempty"`
	Thumbprint string `json:"thumbprint,omitempty"`
	Insecure   bool   `json:"insecure,omitempty"`
}

// VCenterTestResult is what a connection test found.
type VCenterTestResult struct {
	OK      bool   `json:"ok"`
	Version string `json:"version,omitempty"` // vCenter's full name and build
	Message string `json:"message"`
}

// VCenterTester tries a vCenter connection (log in, read the version, log
// out); the daemon implements it over vsphere.Connect. A refused or failed
// connection is a result with OK false, not an error; errors are for
// requests it cannot try (ErrConflict, ErrUnavailable).
type VCenterTester interface {
	TestVCenter(ctx context.Context, req VCenterTest) (VCenterTestResult, error)
}

// Tag is a vSphere tag (GET /tags). Jobs select and exclude VMs by ID: a
// renamed tag still selects, and two categories may hold the same name.
type Tag struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Category string `json:"category"`
}

// TagSource lists vSphere's tags with their names and categories; the
// daemon implements it over the inventory's vAPI reading, with a short
// cache. A nil TagSource means no vCenter is configured: GET /tags answers 503.
type TagSource interface {
	Tags(ctx context.Context) ([]Tag, error)
}

// VMTagSource is what a TagSource may also offer: each VM's tag ids by
// managed object id, from the same cached reading. GET /inventory uses it
// for its VM nodes; without it, it reads the policy inventory.
type VMTagSource interface {
	VMTags(ctx context.Context) (map[string][]string, error)
}
