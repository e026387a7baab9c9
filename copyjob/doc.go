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
package copyjob
