// Package web owns vmvault's REST API under /api/v1: the gin router, the one
// handler signature (func(*gin.Context) (any, error)) and the one adapter
// that authenticates, checks the route's role and CSRF, writes JSON and maps
// errors to status codes and the one error shape
// {"error":{"code","message","details"}}; strict JSON decoding; the
// hand-written OpenAPI document; Server-Sent Events for tasks; /healthz and
// /metrics.
//
// web depends on small service interfaces declared here (JobStore,
// Scheduler, Points, Repositories, Backups, Restores, EventLog, ...), so the
// engines can be wired by cmd without web knowing how they work. RepoSet is
// the Points and Repositories implementation over open repositories, and
// RepoMaintainer the policy.Maintainer over the same set.
// web must never import backup, restore, vsphere or cmd; engines reach it
// only through those interfaces.
package web
