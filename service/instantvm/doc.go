// Package instantvm owns instant VM recovery's sessions in vCenter: a VM
// that runs straight from a restore point, reading its disks from the
// appliance's NFS export (service/instant), then is moved to production
// with Storage vMotion or stopped.
//
// One session, in order:
//
//	starting   the repository is held open and the point held in use
//	           (repository.HoldInUse: no retention, delete or reclaim
//	           removes its data), the point is exported (instant.Open,
//	           added to the daemon's NFS server), the export is mounted
//	           as an NFS datastore on the chosen host, and the VM is
//	           created from the point's configuration with its disks
//	           attached from the datastore and its own files (config,
//	           log, swap) on a production datastore (restore.InstantVM),
//	           then powered on
//	running    the guest reads the repository and writes the overlay
//	migrating  Storage vMotion to the chosen datastore, the VM running
//	done       moved: the NFS datastore is unmounted, the export and its
//	           overlay removed, the hold released
//	stopped    powered off, unregistered, its home deleted, unmounted,
//	           export and overlay removed, hold released
//	failed     a step failed: every step before it was undone, the
//	           record keeps the error
//
// Every failure undoes what was done, in reverse, so nothing is left
// mounted or registered; an undo that fails itself is named in the error.
//
// Sessions are records (record.json) kept in the session's own directory
// beside its overlay and scratch files, written atomically at each change
// of state: the record cannot outlive or lose the overlay it describes,
// which a row in state.db could. Resume, at start-up, reopens every
// session that was starting, running or migrating: the point is held and
// exported again under the same export path and file handles (ESXi's
// mount keeps working), a session caught starting is undone, and one
// caught migrating is finished or returned to running from what vCenter
// shows.
//
// It reaches vCenter through its own small interface (the daemon passes
// its *vsphere.Client) and repositories through RepoSet (service/repos);
// it never imports web, cmd or the daemon.
package instantvm
