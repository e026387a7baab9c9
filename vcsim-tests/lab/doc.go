// Package lab is vmvault's vCenter lab: govmomi's simulator (vcsim, VPX
// model) started in process over TLS with credentials, plus what a backup
// product needs that vcsim lacks:
//
//   - real disk content: flat extents sized to the disk capacity (sparse),
//     written with WriteDisk or SetDiskImage and read back with ReadDisk;
//   - snapshot semantics: while a VM has a snapshot, writes made through the
//     lab go to an overlay, so the base flat file (what vmvault reads over
//     the datastore file service) shows the disk as it was at snapshot time;
//     removing the last snapshot merges the overlay, reverting discards it;
//   - snapshot chains: a snapshot taken on top of another (an
//     administrator's) freezes the overlay as a delta, so the flat file
//     holds only the oldest snapshot's state; NFC export of a snapshot
//     serves the chain consolidated up to it, "*" counts the deltas'
//     blocks as allocated, and removing one snapshot merges its delta into
//     the one below;
//   - disks vmvault must skip or route: SetDiskMode (independent),
//     SetPhysicalRDM, SetDatastoreType (vsan, VVOL), and ReadFault with a
//     Status (403/404 for one disk's flat file);
//   - changed block tracking: QueryChangedDiskAreas with change ids that
//     advance per snapshot, "*" for allocated areas, paging (a page shorter
//     than the disk), and resets (revert, resize, re-enable) that make old
//     change ids fail with a FileFault;
//   - VMware Tools state per VM: a quiesced snapshot fails with
//     ToolsUnavailable when Tools are not running, an
//     ApplicationQuiesceFault carrying the guest's message can be injected
//     (for any quiesce, or for VSS with writers only), Tools' version
//     status can be set, and every snapshot request's quiesce spec is
//     recorded (SnapshotRequests) so tests see the exact VSS spec sent;
//   - fault injection: snapshot task failures, vcsim method faults
//     (FaultInjectionRule), datastore reads that fail, stall or return an
//     HTTP error after N bytes, and session expiry.
//
// The extensions follow VSPHERE.md §4.7: a Registry.Handler installs wrapper
// objects in each session's registry, so dispatch reaches the wrappers while
// vcsim's own code keeps seeing its *simulator.VirtualMachine.
//
// The lab is test and demonstration infrastructure: it may expose vim25
// types. Only tests and `appliance demo` (which runs the product against an
// in-process lab) import it; the engines, web and policy never do.
package lab
