// Package state owns the appliance's own bbolt database (state.db): it
// opens, verifies, migrates and copies the file, and stores jobs, job runs,
// the scheduler's per-VM state and checkpoint, maintenance progress, the
// event log and the daily report's memory. It is separate from every
// repository's index.db, so a repository can be detached and attached to
// another appliance.
//
// The layout has one declaration, internal/state/schema (every bucket with
// its owner, key and value format; the schema version in meta/schema; a
// format byte before every value), described byte by byte in FORMAT.md.
// Each bucket has one owner (schema.Bucket.By). The services that keep
// records here — service/settings, service/copyjob, service/approval — get
// a Store (DB.Store(owner), store.go): transactions that open that owner's
// buckets and refuse every other (ErrNotOwner), so none of them holds the
// bbolt file. internal/auth (users, tokens) and internal/task (task
// summaries) sit below internal/state and still reach the file through
// Bolt(), writing only the buckets schema declares for them, with its
// codec.
// Open creates every declared bucket and migrates an older file in the same
// transaction, so a crash mid-migration leaves the old file intact; a newer
// file is refused untouched (ErrSchemaTooNew). None of these buckets is hot
// (a few writes per backup), so records are JSON, readable and evolvable.
// Every call is one short transaction, values are copied out before it ends.
//
// state.db cannot be rebuilt, so Open verifies the file before using it
// (integrity.go: a structural walk of the raw pages, then every bucket read
// through bbolt under recover, every value checked against its declared
// format, then tx.Check) and answers a damaged one with a *CorruptError
// naming the newest good copy, never a panic; the daemon keeps verified
// rolling copies in state.db.backups/ (copies.go: WriteCopy, PruneCopies,
// KeepCopies, InstallCopy).
//
// state implements policy.Store (and notify.ReportLog) and so imports policy
// for its record types; it must never import backup, restore, vsphere,
// repository or web.
package state
