// Package policy decides what runs when and what is kept: jobs and their
// validation, VM selection, weekly backup windows, retention (GFS) and the
// scheduler that drives backups and repository maintenance.
//
// policy decides; others do the work. It defines the small interfaces it
// consumes — Inventory (VMs with their containers and tags), Runner (back up
// one VM), Maintainer (check, retention removal, reclaim on a repository) and
// Store (persistence, implemented by internal/state) — and the daemon wires
// the real implementations in cmd. policy never imports backup, restore,
// vsphere or repository, and never calls time.Now: time comes from an
// internal/clock.Clock, or as a parameter to the pure functions (Window.At,
// Window.Next, Retention.Apply).
package policy
