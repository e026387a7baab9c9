// Package records is the service over the daemon's records in the state
// database (jobs, job runs, events, each VM's last backup attempt and
// success) as the API and the console read them: Store answers in
// web/api's types, marks the database's not-found error with
// api.ErrNotFound (keeping state's sentinel in the chain), and computes
// which VMs' last backup attempt failed. web reaches it only through the
// interfaces it declares (JobStore, RunLog, EventLog, VMStates), so it
// needs no import of internal/state.
package records
