// Package copyjob owns the appliance's copy jobs: which restore points of a
// source repository are copied to a target repository (every VM, some VMs,
// or the points of some backup jobs), in which window, and how many of the
// copies the target keeps (a retention of its own). It stores the
// definitions and their runs in the daemon's state database (store.go, its
// own buckets), and its Runner starts a copy at each window opening (or on
// demand), copies with repository.Copy the points the target lacks — which
// is idempotent and resumable, so a copy cut by the window's close, a
// cancel or a kill resumes at the next run — applies the target retention,
// records the run and reports it as a policy.Event (copy.finished, or
// copy.failed as an error event, which the notifier mails).
//
// The retention rule when several copy jobs write into one target (the
// same source, or different sources): a copy in the target is removed
// only when no copy job into that target whose selection covers it keeps
// it — the target holds the union of the jobs' keep sets. Each job's keep
// set is what its own run would keep, computed at removal time from the
// store's current jobs and the repositories' current listings, so no job
// removes what another sends again at its next run. Disabled jobs count
// (a paused job still stands by what it copied); deleted jobs do not. A
// job into the target whose source cannot be opened or listed holds every
// copy its selection covers, and the run says so in a warning. Points of
// the target that are not copies (original backups, without the
// repository.CopySourceTag tag) are never removed by a copy job.
package copyjob
