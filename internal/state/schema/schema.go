package schema

// Version is the schema this code reads and writes. internal/state migrates
// older files at open, one version at a time, and refuses newer ones.
//
//	1  the buckets below, but only internal/state's records (jobs, runs,
//	   vmstate, maintenance, events) had a format byte; the others held raw
//	   JSON, strings, 8-byte times or RFC 3339 text.
//	2  a format byte before every value (meta/schema excepted).
//	3  users and tokens may carry a "scope" (auth.Scope). Values are
//	   unchanged; the version exists so that a program of schema 2, which
//	   would drop the scopes and let scoped users see everything, refuses
//	   the file (ErrTooNew) instead of reading it.
const Version = 3

// Bucket names. Every top-level bucket of state.db is one of these; each is
// written by exactly one package (Bucket.Owner).
var (
	BucketMeta        = []byte("meta")
	BucketJobs        = []byte("jobs")
	BucketRuns        = []byte("runs")
	BucketRunsByJob   = []byte("runs-by-job")
	BucketRunsOpen    = []byte("runs-open")
	BucketVMState     = []byte("vmstate")
	BucketMaintenance = []byte("maintenance")
	BucketEvents      = []byte("events")
	BucketScheduler   = []byte("scheduler")
	BucketNotify      = []byte("notify")
	BucketAuth        = []byte("auth")
	BucketUsers       = []byte("users")
	BucketTokens      = []byte("tokens")
	BucketTokenHash   = []byte("token-hash")
	BucketTasks       = []byte("tasks")
	BucketSettings    = []byte("settings")
	BucketApprovals   = []byte("approvals") // new in schema 2: nothing to migrate
	BucketCopyJobs    = []byte("copy-jobs") // new in schema 2
	BucketCopyRuns    = []byte("copy-runs") // new in schema 2
)

// Fixed keys.
var (
	KeySchema          = []byte("schema")            // meta: uint32 big endian, no format byte
	KeyCheckpoint      = []byte("checkpoint")        // scheduler
	KeyLastDailyReport = []byte("last-daily-report") // notify
	KeyAdminHash       = []byte("admin-hash")        // auth
	KeySettings        = []byte("settings")          // settings
)

// Owner is a package that reads and writes buckets of state.db: each
// bucket has exactly one (Bucket.By). internal/state reaches its own
// buckets directly; every other owner gets a handle of internal/state
// (state.DB.Store) that opens that owner's buckets and refuses the rest.
type Owner string

// The owners of state.db's buckets.
const (
	OwnerState     Owner = "internal/state"
	OwnerAuth      Owner = "internal/auth"
	OwnerTask      Owner = "internal/task"
	OwnerSettings  Owner = "service/settings"
	OwnerCopyJobs  Owner = "service/copyjob"
	OwnerApprovals Owner = "service/approval"
)

// Bucket describes one top-level bucket.
type Bucket struct {
	Name   []byte
	By     Owner  // the package that reads and writes it
	Owner  string // who that is, in words (FORMAT.md's owner column)
	Key    string // what a key is
	Format byte   // the format byte of every value (FormatRaw: meta only)
	Value  string // what a value holds
	// RawWriter names the file that still writes this bucket's values
	// itself, without a format byte, instead of through Owner (it could
	// not change together with this schema); while it is set the verifier
	// accepts such values. The migration covers the bucket all the same.
	// Empty once that file goes through Owner or the codec.
	RawWriter string
	// Since is the schema version that added the bucket (0 means 1): a
	// newer bucket has nothing to migrate from older files.
	Since uint32
}

// Buckets is every bucket of state.db, in FORMAT.md's order.
var Buckets = []Bucket{
	{Name: BucketMeta, By: OwnerState, Owner: "internal/state", Key: `"schema"`, Format: FormatRaw, Value: "schema version, uint32 big endian"},
	{Name: BucketJobs, By: OwnerState, Owner: "internal/state", Key: "job id", Format: FormatJSON, Value: "policy.Job"},
	{Name: BucketRuns, By: OwnerState, Owner: "internal/state", Key: "run id", Format: FormatJSON, Value: "policy.JobRun"},
	{Name: BucketRunsByJob, By: OwnerState, Owner: "internal/state", Key: "job id NUL start (8 bytes, time order) NUL run id", Format: FormatEmpty, Value: "nothing (index)"},
	{Name: BucketRunsOpen, By: OwnerState, Owner: "internal/state", Key: "run id", Format: FormatEmpty, Value: "nothing (index of runs without an end)"},
	{Name: BucketVMState, By: OwnerState, Owner: "internal/state", Key: "job id NUL VM instance UUID", Format: FormatJSON, Value: "policy.VMState"},
	{Name: BucketMaintenance, By: OwnerState, Owner: "internal/state", Key: "repository name", Format: FormatJSON, Value: "policy.MaintenanceState"},
	{Name: BucketEvents, By: OwnerState, Owner: "internal/state", Key: "time (8 bytes, time order) sequence (8 bytes BE)", Format: FormatJSON, Value: "policy.Event (scheduler events and the audit trail)"},
	{Name: BucketScheduler, By: OwnerState, Owner: "internal/state", Key: `"checkpoint"`, Format: FormatTime, Value: "the scheduler's checkpoint"},
	{Name: BucketNotify, By: OwnerState, Owner: "internal/state (notify.ReportLog)", Key: `"last-daily-report"`, Format: FormatBytes, Value: "RFC 3339 text (UTC) of when the last daily report was sent"},
	{Name: BucketAuth, By: OwnerAuth, Owner: "internal/auth", Key: `"admin-hash"`, Format: FormatBytes, Value: "PHC Argon2id string of the single administrator of earlier versions"},
	{Name: BucketUsers, By: OwnerAuth, Owner: "internal/auth", Key: "lower-case user name", Format: FormatJSON, Value: "auth.User with its hash (\"\" for a vCenter user and for a local one whose passwordNotSet is true) and, since schema 3, its scope"},
	{Name: BucketTokens, By: OwnerAuth, Owner: "internal/auth", Key: "token id", Format: FormatJSON, Value: "auth.Token with its hash and, since schema 3, its scope"},
	{Name: BucketTokenHash, By: OwnerAuth, Owner: "internal/auth", Key: "hex SHA-256 of the token secret", Format: FormatBytes, Value: "token id"},
	{Name: BucketTasks, By: OwnerTask, Owner: "internal/task", Key: "task id (creation time in hex first)", Format: FormatJSON, Value: "task.Info"},
	{Name: BucketCopyJobs, By: OwnerCopyJobs, Owner: "copyjob (copyjob.Store)", Key: "copy job id", Format: FormatJSON, Value: "copyjob.Job (source and target repository, selection, window, target retention)", Since: 2},
	{Name: BucketCopyRuns, By: OwnerCopyJobs, Owner: "copyjob (copyjob.Store)", Key: "copy job id, NUL, run id", Format: FormatJSON, Value: "copyjob.Run (start, end, state, points and bytes sent, errors); 200 kept per job", Since: 2},
	{Name: BucketApprovals, By: OwnerApprovals, Owner: "approval (approval.Manager)", Key: "16 hex digits (the action's id)", Format: FormatJSON, Value: "web/api.Approval (a destructive action waiting for its delay or a second administrator)", Since: 2},
	{Name: BucketSettings, By: OwnerSettings, Owner: "settings (settings.Bolt)", Key: `"settings", and since schema 2 "vcenter", "smtp", "maintenance", "repositories"`, Format: FormatJSON, Value: "web/api.Settings; the sections saved from the console (passwords sealed with the state directory's settings.key); the repositories added from the console"},
}

// BucketsOf returns the names of the buckets o owns, in Buckets' order.
func BucketsOf(o Owner) [][]byte {
	var out [][]byte
	for _, b := range Buckets {
		if b.By == o {
			out = append(out, b.Name)
		}
	}
	return out
}

// Lookup returns the declared bucket named name.
func Lookup(name []byte) (Bucket, bool) {
	for _, b := range Buckets {
		if string(b.Name) == string(name) {
			return b, true
		}
	}
	return Bucket{}, false
}
