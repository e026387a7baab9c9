// Package vsphere owns everything vmvault says to vCenter or ESXi: the
// connection (TLS pinning, keep-alive, re-login, the one retry policy),
// inventory and selection (ContainerView + PropertyCollector, vAPI tags),
// snapshots (quiesced, with a name prefix and a description marker so stale
// ones are found and user snapshots are never touched), CBT, reading disk
// bytes (HTTP Range reads of the snapshotted base flat extent through the
// datastore file service) and writing them back for restore (VM creation and
// datastore uploads).
//
// Its exported API uses vmvault's own types (VMRef, Disk, Snapshot, Extent)
// and sentinel errors; no vim25/govmomi type crosses it. It must never import
// repository, dedup, backup, restore or policy.
package vsphere
