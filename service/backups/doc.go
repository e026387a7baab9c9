// Package backups owns backing VMs up on the appliance's behalf: the
// scheduler's backups (policy.Runner) and the API's (POST /backups) run
// through one Runner, with one backup engine per repository over the
// daemon's vCenter session, so that both paths choose quiescing, tag the
// points with their job and register each backup as an operation on its
// repository (which then cannot be removed under it) the same way.
//
// It is the backup half of the bridge between policy and vsphere (the
// archtest rule inventory-only-bridge lets it import both): the scheduler's
// jobs name VMs as policy sees them, the engine reads them through vsphere.
// The daemon wires it (New, then Add and Remove as repositories are added
// and removed from the console); it must never import web, cmd or the
// daemon, only web/api's DTOs.
package backups
