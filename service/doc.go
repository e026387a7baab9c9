// Package service is the layer between the engines and the API: each
// sub-package is one service the daemon wires and web reaches through the
// small interfaces web declares. A service may use the engines (backup,
// restore, policy, repository) and the DTOs in web/api; it never imports
// web, the daemon, cmd or the vcsim lab, so that data flows one way:
// cmd -> daemon -> web -> (interfaces) <- service -> engines.
//
// The services: repos (the open repositories: points, statistics,
// maintenance, repository init), records (jobs, runs, events and VM states
// in state.db), settings (the settings store, secrets sealed), appsettings
// (the console's Settings sections and repositories added or removed),
// approval (destructive actions held for a delay or a second
// administrator), copyjob (offsite copies in windows), backups and
// restores (what POST /backups, /restores and the scheduler call), drconfig
// (the configuration saved for disaster recovery), vmstatus (the one
// protection rule set), capacity (growth and fill forecasts), inventory
// (vCenter VMs as policy.VM, the only bridge between vsphere and policy),
// topology (the console's vSphere tree, restore targets, tags), notify
// (mail alerts and the daily report; feed/ what they read), filerestore
// (file-level restore: service, catalog, FUSE mount), verify (a point's
// file systems walked whole, without booting it), instant (instant
// recovery's NFS v3 export of a point; the CLI drives it today, the
// daemon's sessions come later). internal/archtest
// enforces the layering.
package service
