// Package faults is the fault matrix: every vSphere call the backup and
// restore engines make fails once, in turn, in the lab (vcsim fault
// injection for SOAP methods, the lab's HTTP fault hooks for datastore and
// NFC transfers), and each case checks the outcome the operator must get —
// a clear error naming the call, or success through a retry where the call
// is idempotent — and that nothing is left behind: no backup snapshot, no
// half-created VM or disk, a repository whose check is clean and that
// holds no point of a failed run. It also holds the end-to-end tests of
// the backup's CBT verification (the lab under-reports changes).
//
// The table of cases and outcomes is in docs/RELIABILITY.md.
package faults
