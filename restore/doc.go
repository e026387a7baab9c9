// Package restore is the restore engine: it brings restore points back to
// vSphere and to files.
//
// A whole VM is rebuilt from the restore point's saved configuration
// (vmconfig) as a new VM (name, placement, datastores, network mapping,
// thin/thick, power on), as a rehearsal copy (new name, NICs disconnected,
// marked for `appliance rehearsal cleanup`), or written over the original
// VM (explicit request only; the VM keeps its identity). A single disk is
// attached to an existing VM or downloaded as a raw image or a
// streamOptimized VMDK.
//
// Every restore validates everything first (point complete, targets exist,
// room on the datastores, name free) and changes nothing when validation
// fails; a restore that fails or is cancelled midway removes what it created.
// Disk bytes come from repository.DiskReader (every blob verified) in disk
// order with parallel prefetch; the SHA-256 of each disk's full content
// (holes as zeros) is computed while streaming and reported, and DiskDigest
// computes the same value from the repository alone.
//
// The engine sees vCenter through small interfaces declared here (Finder,
// VMBuilder, DiskSink; VCenter is all three), which *vsphere.Client
// implements; unit tests drive the engine against an in-memory fake of them.
//
// restore imports repository, vsphere, vmconfig and vmdk; it never imports
// backup, policy, web or cmd.
package restore
