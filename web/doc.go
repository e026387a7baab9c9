// Package web owns vmvault's REST API under /api/v1: the gin router, the one
// handler signature (func(*gin.Context) (any, error)) and the one adapter
// that authenticates, checks the route's role, CSRF and, for a point,
// repository or task in the path, the principal's scope (scope.go: every
// route has a scope class; lists filter through the request's judge),
// writes JSON and maps
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
// web is HTTP only: routing, decoding, authentication, error mapping and
// DTOs. It depends on small service interfaces declared in the files of the
// resources that use them (JobStore, Scheduler, Points, Repositories,
// Backups, Restores, EventLog, RunLog, VMStates, Topology, TagSource,
// VCenterTester, Mailer, FileService, ...), and on web/api for the types
// and error kinds it shares with the services that implement them:
// service/repos (restore points, repositories, maintenance), records (jobs, runs,
// events, VM states over the state database) and settings. Handlers live in
// one file per resource (jobs.go, restore_points.go, repositories.go,
// tasks.go, events.go, vms.go, inventory.go, settings.go, backups.go,
// restores.go, files.go, auth.go, users.go, dashboard.go).
// web must never import repository, internal/state, backup, restore,
// vsphere, the service packages or cmd, not even through another package
// (imports_test.go checks it).
package web
