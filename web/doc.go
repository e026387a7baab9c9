// Package web owns vmvault's REST API under /api/v1: the gin router, the one
// handler signature (func(*gin.Context) (any, error)) and the one adapter
// that authenticates, checks the route's role and CSRF, writes JSON and maps
// errors to status codes and the one error shape
// {"error":{"code","message","details"}}; strict JSON decoding; the
// hand-written OpenAPI document (a test checks it against the route table,
// its request examples against the handlers and every GET's answer and
// every response example against its schema); Server-Sent Events for one
// task and, on /stream, for every task and event of the appliance (bounded
// per client, slow clients dropped, ended by Close or the task registry's
// Close); the console's endpoints (dashboard, inventory tree, vSphere
// tags, restore targets, job runs, retention previews, repository usage, users,
// connection tests); the browser security headers of every response;
// /healthz and /metrics. The console's files are web/console's.
//
// web depends on small service interfaces declared here (JobStore,
// Scheduler, Points, Repositories, Backups, Restores, EventLog, RunLog,
// Topology, TagSource, VCenterTester, Mailer, ...), so the
// engines can be wired by cmd without web knowing how they work. RepoSet is
// the Points and Repositories implementation over open repositories, and
// RepoMaintainer the policy.Maintainer over the same set.
// web must never import backup, restore, vsphere or cmd; engines reach it
// only through those interfaces.
package web
