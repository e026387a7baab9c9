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
//
// Choices made here (and why):
//
//   - A window occurrence is a stretch the window is open without a break:
//     ranges that touch (Friday 18:00-24:00, Saturday 00:00-24:00, Sunday
//     00:00-24:00, Monday 00:00-06:00) are one occurrence, so "at most once
//     per window" means once per weekend and once per night, never just
//     before and again just after midnight. A one-minute gap splits. Only a
//     window open all week keeps one occurrence per configured range.
//   - Wall times map to instants in the window's zone: a time skipped by a
//     DST gap means the end of the gap, a repeated time means its first
//     occurrence. Nights are an hour shorter or longer on DST days, as a
//     person reading the schedule expects.
//   - Retention buckets are calendar periods in the appliance zone (ISO
//     weeks), newest point per period, as in restic's forget.
//   - The scheduler is one goroutine that owns all state and persists each
//     decision before acting on it; backups, maintenance and inventory
//     queries run in goroutines it owns and report back over a channel.
//     A backup that completed is never repeated in the same window, also
//     across restarts.
//   - The resume rule. A run the previous process left open (a crash, a
//     kill -9, a restart) is interrupted: on start the scheduler ends it at
//     the last checkpoint (the last time it looked), marks every VM it had
//     not finished "interrupted" (vm.interrupted events for the backups that
//     were cut short, and a job.finished event naming the run), and then:
//     if it was a scheduled run of an enabled job whose window occurrence is
//     still open, a resume run for that same occurrence (JobRun.ResumeOf,
//     and ResumedBy on the old one) backs up only the VMs not yet backed up
//     in it, as far as Job.MaxAttempts allows; VMs already done are never
//     redone, a failed VM keeps its retry backoff. Otherwise (window closed,
//     job disabled or deleted, or a "run now") the run stays closed as
//     interrupted, each VM it left undone gets a vm.not-backed-up event (as
//     at a window close) and the next window picks them up. If nothing is left to
//     resume, the run is not interrupted: it continues until its window
//     closes. The old run's end and the resume run's start are stored in one
//     transaction. An attempt a clean stop cancelled is given back (an
//     upgrade never uses up MaxAttempts); one a crash cut short counts, since
//     that backup may be what crashed the appliance. The snapshot a killed
//     backup left on its VM is removed by the next backup of that VM (the
//     backup engine sweeps vmvault's stale snapshots first).
//   - Missed windows are detected from a persisted checkpoint (the last time
//     the scheduler looked): an occurrence that opened and closed entirely
//     after it was missed.
//   - Scripts (Job.Scripts, scripts_run.go; processes in policy/jobscript):
//     the pre-job script runs once per run, in the goroutine of the first VM
//     to start, and the others wait for it; pre-VM and post-VM run in each
//     VM's backup goroutine around Runner.RunBackup; post-job runs once the
//     run has ended (finishIfDone), in its own goroutine that stop waits for.
//     Their outcomes come back with the backup's result and become
//     script.ran / script.failed events on the scheduler goroutine. A run
//     cut short by a stop runs no post-job script; its resume run runs the
//     pre-job script again.
package policy
