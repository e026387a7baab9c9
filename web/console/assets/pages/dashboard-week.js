// The dashboard's last seven days: per local day, how many VM backups
// succeeded and failed, from the jobs' runs and the ad-hoc backup tasks.
// Pure: no DOM, so the browser tests import and check it directly.

// dayKey is the local calendar day of t: "2026-12-01".
export function dayKey(t) {
  const d = new Date(t);
  if (Number.isNaN(d.getTime())) return "";
  return `${d.getFullYear()}-${String(d.getMonth() + 1).padStart(2, "0")}-${String(d.getDate()).padStart(2, "0")}`;
}

// lastDays returns the keys of the n local days ending with now's, oldest first.
export function lastDays(now, n = 7) {
  const out = [];
  const d = new Date(now);
  d.setHours(12, 0, 0, 0); // noon: a DST change never skips or repeats a day
  for (let i = n - 1; i >= 0; i--) {
    const x = new Date(d);
    x.setDate(d.getDate() - i);
    out.push(dayKey(x));
  }
  return out;
}

// weekSummary counts, per day of lastDays(now), the VM backups that
// succeeded, failed (a failed attempt that a later retry fixed counts as
// its success only) and were not run (the window closed first). runs are
// GET /jobs/{id}/runs answers concatenated; tasks GET /tasks (backups only
// count; each VM outcome of a task is one backup).
export function weekSummary(runs, tasks, now) {
  const days = lastDays(now);
  const by = new Map(days.map((k) => [k, { day: k, succeeded: 0, failed: 0, notRun: 0 }]));
  const add = (when, state) => {
    const e = by.get(dayKey(when));
    if (!e) return;
    if (state === "succeeded") e.succeeded++;
    else if (state === "failed" || state === "interrupted" || state === "cancelled") e.failed++;
    else if (state === "not-run") e.notRun++;
  };
  for (const r of runs || []) {
    if (r.trigger === "missed") continue;
    for (const o of r.vms || []) add(o.finished || o.started || r.started, o.state);
  }
  for (const t of tasks || []) {
    if (t.kind !== "backup" || !t.ended) continue;
    const outs = Array.isArray(t.result) ? t.result : [];
    if (!outs.length) add(t.ended, t.state);
    for (const o of outs) add(t.ended, o.error ? "failed" : "succeeded");
  }
  return days.map((k) => by.get(k));
}
