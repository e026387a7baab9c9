// Package verifyjob owns verification jobs (issue 25's "verified restore
// points" on a schedule): their definitions, kept as JSON files, and the
// Runner that, while a job's window is open, verifies the newest complete
// restore point of each selected VM through service/verification.
//
// A job selects VMs by name, instance UUID or name pattern with * (none:
// every VM with points). In each opening of its window a run picks, per
// selected VM, the newest complete (not partial) point; with onlyNew a
// point that already has a verification result is left out. The run
// verifies at most maxConcurrent points at once and starts none after the
// window closes: the verifications running then finish (a boot is torn
// down either way) and the points not started are counted as skipped. A
// run per window opening: points written later in the same opening wait
// for the next. Run now (RunNow) starts one outside the window.
//
// Each job is one file, <Dir>/<id>.json, holding the definition and its
// newest runs (KeepRuns), written atomically (temp file, fsync, rename)
// like service/verification's results. A finished run emits
// verification.finished (warning when a point failed) or
// verification.failed.
//
// Not owned here: one verification (service/verification), HTTP (web;
// api.go adapts to web's interface).
package verifyjob
