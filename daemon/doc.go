// Package daemon owns the appliance daemon (`appliance serve`): its YAML
// configuration (Config, LoadConfig) and its object graph and lifecycle.
// New opens the state database (with its verified copies), the
// repositories and the vCenter session, and builds the services over them:
// authentication with vCenter logins, the task runner, the backup runner
// (service/backups: policy.Runner and the API's backups), the restore
// service (service/restores), copy jobs (service/copyjob), the scheduler
// with repository maintenance, email notifications (the notifier built
// from the smtp settings, wired through service/notify/feed: alerts and
// the daily report), file-level restore, and the console's vSphere-backed
// views (inventory tree, restore targets, tags, vCenter test), the
// console's settings over the configuration file's and its repositories
// (service/appsettings; the configuration file's side of them stays here,
// appsettings.go), the saver of the configuration into the repositories
// and its import (service/drconfig), and puts the HTTP API (package web)
// in front. Run serves it and runs the background
// work (start-up sweep of stale snapshots, then the scheduler; event
// pruning; copies of state.db; the file restore indexer) until its context
// ends, then stops within ShutdownGrace; Close releases what New opened.
//
// cmd/appliance only parses flags and calls in here; the engines (backup,
// restore, repository, policy, vsphere) know nothing of this package.
package daemon
