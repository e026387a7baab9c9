// Package notify owns the appliance's email: an SMTP sender (STARTTLS or
// implicit TLS, AUTH PLAIN/LOGIN, timeouts, cancellation, retries of
// transient 4xx failures) and the two reports built on it — a failure alert
// sent shortly after a backup, restore or check fails (failures that arrive
// within the debounce interval share one mail), and a daily summary at a
// configured local time.
//
// Repeated failures are quiet: the failures of one operation (job, VM,
// operation; or repository for checks and maintenance) with no success
// between them form a streak, mailed once per Config.RepeatAfter and
// counted ("failed N times since HH:MM") in the next mail and the daily
// report. Streaks live in memory only; a restart forgets them (the next
// failure is mailed again). The time of the last daily report sent is kept
// through ReportLog so that a report that fell due while the daemon was
// down is sent once at start, and none twice.
//
// It reads what happened through small interfaces it defines (Source for
// the daily report) and through policy's record types (Event, Job, JobRun),
// and is fed failures by its owner (Notifier.ObserveEvent, Notifier.Fail).
// It must never import backup, restore, vsphere, repository or web:
// service/notify/feed adapts those to Source and wraps the API's services
// to alert, and the daemon wires it.
//
// Secrets: the SMTP password lives only in SMTPConfig and the SASL exchange;
// it is never logged nor put in an error.
package notify
