// Package restores owns restoring on the API's behalf (POST /restores and
// /restores/disk): it finds the repository that holds the restore point,
// holds it as an operation for the restore's length (so that it cannot be
// removed under it) and drives the restore engine into vCenter, turning the
// engine's result into the API's.
//
// It reaches vCenter through restore.VCenter (the daemon passes its
// *vsphere.Client) and VMs through policy.Inventory, so it never joins
// vsphere and policy itself; it must never import web, cmd or the daemon,
// only web/api's DTOs.
package restores
