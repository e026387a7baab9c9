// Package inventory adapts vsphere to policy: it implements
// policy.Inventory over a vCenter connection, turning every
// vsphere.Placement (a VM with its datacenter, folder chain, cluster, host,
// resource pool chain and tags) into a policy.VM.
//
// It is the only package that knows both vsphere and policy. vsphere must
// never import policy and policy must never import vsphere (each stays
// testable without the other), so the translation lives here and the daemon
// wires inventory.New(client) into the scheduler. inventory must never import
// backup, restore, repository, dedup, web (web/api included) or cmd; the
// console's inventory tree, restore targets and tag listing, which answer in
// web/api's types, are service/topology's.
//
// Choices made here (and why):
//
//   - Containers are named by managed object id (ContainerRef.ID is the
//     moref value, "group-v22"), never by inventory path: a renamed folder
//     or cluster keeps protecting its VMs. Name is carried for display only.
//   - Tags are tag ids ("urn:vmomi:InventoryServiceTag:…"), not names: a
//     renamed tag still selects, and two categories may share a tag name.
//     Tags and TagListing name them (category and name) for the console,
//     from the same vAPI reading: only tags attached to some VM are listed.
//   - A VM whose configuration vCenter cannot report (no instance UUID:
//     inaccessible, orphaned, still being created) is left out: policy keys
//     every decision and every restore point by instance UUID, and such a VM
//     cannot be backed up anyway. It reappears once vCenter reports it.
//   - One listing costs a fixed number of round trips, whatever the number
//     of VMs: one ContainerView with one property retrieve for the whole
//     inventory, and for tags a vAPI login, one attached-tags query for all
//     VMs, one tag list, one call per category and a logout
//     (vsphere.(*Client).Placements).
package inventory
