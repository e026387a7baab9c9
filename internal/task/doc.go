// Package task owns the appliance's registry of long operations (backups,
// restores, checks, reclaims): each gets an id, a kind and a subject, a state
// (queued, running, succeeded, failed, cancelled), progress (bytes done and
// total, phase, rate, ETA), a bounded ring of log lines and a cancel that
// cancels its context. Anyone may subscribe to a task's updates; each
// subscriber gets a small buffered channel and a subscriber too slow to keep
// up is dropped (its channel closed) rather than allowed to block the task.
// A summary of every finished task is persisted through Store, so the task
// list survives a restart.
//
// task imports only internal/clock (and bbolt and internal/state/schema, its
// bucket and value format in state.db, for BoltStore); it must never import
// policy, internal/state, backup, restore, repository, vsphere or web:
// engines report through the plain Reporter methods and know nothing of
// this package.
package task
