// Package approval owns the appliance's pending destructive actions: an
// administrator's deletion of a restore point, shortening of a job's
// retention or removal of a repository from the appliance, which takes
// effect only after a configured delay, unless a second administrator
// approves it earlier or any administrator cancels it. It keeps them in a bucket of its own in state.db (store.go), runs
// them when their time comes (Manager.Run) and reports every execution as
// an audit event; web asks for, lists, approves and cancels them.
//
// Bucket "approvals" (owned here, beside internal/state's buckets in the
// same file):
//
//	approvals   id (16 lower-case hex digits) -> record(api.Approval)
//
// A record is one format byte (1 = JSON) followed by the payload, like
// internal/state's. A status moves only forward, in one transaction that
// checks the status it moves from: pending -> executing -> executed or
// failed, pending -> cancelled. An action found executing at start (the
// daemon stopped during it) goes back to pending and runs again; every
// kind is idempotent or fails harmlessly (the point or repository is
// already gone).
package approval
