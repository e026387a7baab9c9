// Package verification proves that a restore point works and records the
// proof on the point (issue 25's "verified restore points"). It owns one
// verification of one point, start to end, and the results kept per point.
//
// A verification runs in one of three modes:
//
//	walk  the no-boot check of service/verify: every volume of the point
//	      opened with the file-level readers and every file system walked
//	boot  the point instant-recovered (service/instantvm) into isolation —
//	      every NIC disconnected, or every NIC on one port group the caller
//	      names (an isolated network) — powered on, then VMware Tools'
//	      heartbeat waited for (green within Timeout, default 10 minutes),
//	      then the optional probes: TCP ports that must accept a connection
//	      and an HTTP URL that must answer 2xx, at the guest's IP address as
//	      Tools report it, retried until ProbeTimeout; and always torn down
//	      (instantvm's Stop: powered off, unregistered, unmounted, overlay
//	      dropped) whatever happened, even when the caller's context ended
//	both  walk, then boot; the point passes only when both pass
//
// The verdict is passed or failed with one line of reason ("no heartbeat
// within 10m0s (Tools guestToolsNotRunning, heartbeat gray)", "TCP port 22
// at 10.0.0.5 not open within 2m0s: connection refused"), plus timings:
// start to powered on, to heartbeat, to probes done. A verification that
// cannot run at all (the point unknown, no vCenter, a bad request) is an
// error and records nothing; one that ran and found the point wanting is a
// failed result, recorded.
//
// Probes reach the guest from the appliance: they need a network the
// appliance has a leg in (the isolated port group); with every NIC
// disconnected only the heartbeat can pass on real vSphere. The dialer is
// injectable (Config.Dialer) so tests probe local listeners.
//
// Results are JSON files, one per verification, in <Dir>/<point id>/,
// written atomically (temp file, fsync, rename) like instantvm's session
// records; the newest few per point are kept (KeepPerPoint) and the newest
// of each point is held in memory, so that the restore point API can show
// it on every point of a list without a file read. A result names its
// point by full id; results of points deleted later are harmless and
// dropped by Prune.
//
// Not owned here: scheduling (verification jobs in windows:
// service/verifyjob), the instant recovery flow itself (instantvm), the walk (verify),
// HTTP (web: api.go adapts a Manager to its interface).
package verification
