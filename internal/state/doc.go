// Package state owns the appliance's own bbolt database (state.db): jobs, job
// runs, the scheduler's per-VM state and checkpoint, maintenance progress and
// the event log. It is separate from every repository's index.db, so a
// repository can be detached and attached to another appliance.
//
// Layout (schema version 1, kept in the "meta" bucket under "schema"):
//
//	meta         "schema" -> uint32 big endian
//	jobs         job id -> record(policy.Job)
//	runs         run id -> record(policy.JobRun)
//	runs-by-job  job id NUL start(8 bytes BE unix ns) NUL run id -> empty   (history, newest last)
//	runs-open    run id -> empty                                           (runs without an end)
//	vmstate      job id NUL vm instance uuid -> record(policy.VMState)
//	maintenance  repository -> record(policy.MaintenanceState)
//	events       time(8 bytes BE unix ns) seq(8 bytes BE) -> record(policy.Event)
//	scheduler    "checkpoint" -> 8 bytes BE unix ns
//
// A record is one format byte (1 = JSON) followed by the payload. None of
// these buckets is hot (a few writes per backup), so JSON keeps them readable
// and evolvable; the format byte lets a later version change that explicitly.
// Every call is one short transaction, values are copied out before it ends.
//
// state.db cannot be rebuilt, so Open verifies the file before using it
// (integrity.go: a structural walk of the raw pages, then every bucket read
// through bbolt under recover, then tx.Check) and answers a damaged one
// with a *CorruptError naming the newest good copy, never a panic; the
// daemon keeps verified rolling copies in state.db.backups/ (copies.go:
// WriteCopy, PruneCopies, KeepCopies, InstallCopy).
//
// state implements policy.Store and so imports policy for its record types;
// it must never import backup, restore, vsphere, repository or web.
package state
