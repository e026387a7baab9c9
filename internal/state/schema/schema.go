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

// Bucket describes one top-level bucket.
type Bucket struct {
	Name   []byte
	Owner  string // the package (or file) that reads and writes it
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
	{Name: BucketMeta, Owner: "internal/state", Key: `"schema"`, Format: FormatRaw, Value: "schema version, uint32 big endian"},
	{Name: BucketJobs, Owner: "internal/state", Key: "job id", Format: FormatJSON, Value: "policy.Job"},
	{Name: BucketRuns, Owner: "internal/state", Key: "run id", Format: FormatJSON, Value: "policy.JobRun"},
	{Name: BucketRunsByJob, Owner: "internal/state", Key: "job id NUL start (8 bytes, time order) NUL run id", Format: FormatEmpty, Value: "nothing (index)"},
	{Name: BucketRunsOpen, Owner: "internal/state", Key: "run id", Format: FormatEmpty, Value: "nothing (index of runs without an end)"},
	{Name: BucketVMState, Owner: "internal/state", Key: "job id NUL VM instance UUID", Format: FormatJSON, Value: "policy.VMState"},
	{Name: BucketMaintenance, Owner: "internal/state", Key: "repository name", Format: FormatJSON, Value: "policy.MaintenanceState"},
	{Name: BucketEvents, Owner: "internal/state", Key: "time (8 bytes, time order) sequence (8 bytes BE)", Format: FormatJSON, Value: "policy.Event (scheduler events and the audit trail)"},
	{Name: BucketScheduler, Owner: "internal/state", Key: `"checkpoint"`, Format: FormatTime, Value: "the scheduler's checkpoint"},
	{Name: BucketNotify, Owner: "internal/state (notify.ReportLog)", Key: `"last-daily-report"`, Format: FormatBytes, Value: "RFC 3339 text (UTC) of when the last daily report was sent"},
	{Name: BucketAuth, Owner: "internal/auth", Key: `"admin-hash"`, Format: FormatBytes, Value: "PHC Argon2id string of the single administrator of earlier versions"},
	{Name: BucketUsers, Owner: "internal/auth", Key: "lower-case user name", Format: FormatJSON, Value: "auth.User with its hash (\"\" for a vCenter user and for a local one whose passwordNotSet is true) and, since schema 3, its scope"},
	{Name: BucketTokens, Owner: "internal/auth", Key: "token id", Format: FormatJSON, Value: "auth.Token with its hash and, since schema 3, its scope"},
	{Name: BucketTokenHash, Owner: "internal/auth", Key: "hex SHA-256 of the token secret", Format: FormatBytes, Value: "token id"},
	{Name: BucketTasks, Owner: "internal/task", Key: "task id (creation time in hex first)", Format: FormatJSON, Value: "task.Info"},
	{Name: BucketCopyJobs, Owner: "copyjob", Key: "copy job id", Format: FormatJSON, Value: "copyjob.Job (source and target repository, selection, window, target retention)", Since: 2},
	{Name: BucketCopyRuns, Owner: "copyjob", Key: "copy job id, NUL, run id", Format: FormatJSON, Value: "copyjob.Run (start, end, state, points and bytes sent, errors); 200 kept per job", Since: 2},
	{Name: BucketApprovals, Owner: "approval", Key: "16 hex digits (the action's id)", Format: FormatJSON, Value: "web/api.Approval (a destructive action waiting for its delay or a second administrator)", Since: 2},
	{Name: BucketSettings, Owner: "settings (settings.Bolt; internal/state's DB.GetSettings, DB.PutSettings read the same value)", Key: `"settings", and since schema 2 "vcenter", "smtp", "maintenance", "repositories"`, Format: FormatJSON, Value: "web/api.Settings; the sections saved from the console (passwords sealed with the state directory's settings.key); the repositories added from the console"},
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
