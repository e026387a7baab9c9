// Package restoree2e tests the restore engine (restore/) end to end against
// the vCenter lab: lab VMs are backed up with backup.Engine into a real
// repository, then restored to new VMs, as rehearsals, over the original,
// as single disks attached or downloaded, with validation failures and
// faults midway. Tests only; it has no non-test code.
package restoree2e
