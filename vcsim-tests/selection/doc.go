// Package selection tests job selection end to end against the vCenter lab
// (vcsim-tests/lab): policy.Selection evaluated through inventory.New over a
// real vsphere.Client, with the lab's inventory rearranged through govmomi
// (folders, resource pools, moves, renames, tags) between evaluations, and a
// policy.Scheduler on a fake clock that resolves a job's selection at run
// time. Expected results are computed from the lab with plain govmomi, never
// from the code under test. It holds tests only.
package selection
