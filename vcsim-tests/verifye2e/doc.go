// Package verifye2e runs restore point verification end to end in the
// lab: a backed-up VM holding a real ext4 file system is instant-recovered
// into isolation through the appliance's NFS export, powered on, waited
// for (VMware Tools heartbeat, as the lab shows it), probed on TCP and
// HTTP at the address the lab reports (a local listener), torn down and
// the verdict recorded on the point; the no-boot walk finds a damaged file
// system.
package verifye2e
