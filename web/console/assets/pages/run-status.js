// How a job run and a job's schedule read to an administrator, shared by
// the dashboard, the Tasks page's scheduled backups and the job page.
//
// A scheduled run stays open until its slot of the window closes (the
// scheduler retries failed VMs until then), so "running" alone would say a
// backup is still going hours after its last VM. runPhase tells a run whose
// VMs are all done from one still backing up, and nextRunStart says when
// the job's next run starts, cutting the window into slots as
// policy.Job.Slot does. Pure functions: the browser tests import them.
import { intervals, wallClock } from "./jobwizard-window.js";

const MIN_PER_DAY = 1440;
const MIN_PER_WEEK = 7 * MIN_PER_DAY;
const finalVM = new Set(["succeeded", "failed", "cancelled", "interrupted", "not-run", "skipped"]);

function vmState(v) {
  return String((v && (v.state || v.status)) || "");
}

// runPhase returns {phase, done, failed, total, until, last}:
// phase is "backing-up" while a VM is pending or running, "window-open"
// when an open scheduled run has every VM done and waits for its slot to
// close (until: run.slotCloses), and the run's own state once it ended.
// last is when its last VM finished.
export function runPhase(run) {
  const vms = (run && run.vms) || [];
  const total = vms.length;
  const done = vms.filter((v) => finalVM.has(vmState(v))).length;
  const failed = vms.filter((v) => ["failed", "interrupted", "not-run", "cancelled"].includes(vmState(v))).length;
  const ends = vms.map((v) => Date.parse(v.finished || "")).filter((t) => t > 0);
  const last = ends.length ? new Date(Math.max(...ends)) : null;
  const state = String((run && run.state) || "");
  let phase = state || "running";
  if (state === "running") phase = total > 0 && done === total ? "window-open" : "backing-up";
  return { phase, done, failed, total, until: run && run.slotCloses ? new Date(run.slotCloses) : null, last };
}

// plural: "1 VM", "3 VMs".
function vmCount(n) {
  return `${n} VM${n === 1 ? "" : "s"}`;
}

// windowOpenText says what a run in phase "window-open" waits for:
// "all 3 VMs backed up; the window stays open until 06:00, failed VMs are
// retried until then". fmtTime formats an instant.
export function windowOpenText(p, fmtTime) {
  const until = p.until ? ` until ${fmtTime(p.until)}` : "";
  if (!p.failed) return `${p.total === 1 ? "its VM is" : `all ${vmCount(p.total)}`} backed up; the window stays open${until}, failed VMs are retried until then`;
  return `${p.total - p.failed} of ${vmCount(p.total)} backed up, ${p.failed} failed; ${p.failed === 1 ? "it is" : "they are"} retried while the window stays open${until}`;
}

// phaseBadge is the word the run's state badge shows.
export function phaseWord(p) {
  if (p.phase === "window-open") return p.failed ? "retrying" : "backed up";
  if (p.phase === "backing-up") return "running";
  return p.phase;
}

// slotStarts returns, in minutes of the week in the window's zone, when the
// runs of a window start: at each opening (touching ranges are one opening,
// Sunday joins Monday) and every everyHours in it, or every 24 h without
// everyHours. A window open all week opens each day at 00:00.
export function slotStarts(win, everyHours) {
  const open = new Uint8Array(MIN_PER_WEEK);
  for (const [s, e] of intervals(win)) open.fill(1, s, e);
  const step = (everyHours > 0 ? everyHours : 24) * 60;
  const at = (m) => open[((m % MIN_PER_WEEK) + MIN_PER_WEEK) % MIN_PER_WEEK] === 1;
  const openings = [];
  for (let m = 0; m < MIN_PER_WEEK; m++) {
    if (!at(m) || at(m - 1)) continue;
    let e = m;
    while (e - m < MIN_PER_WEEK && at(e)) e++;
    openings.push([m, e]);
  }
  if (!openings.length && open[0]) for (let d = 0; d < 7; d++) openings.push([d * MIN_PER_DAY, (d + 1) * MIN_PER_DAY]);
  const out = [];
  for (const [s, e] of openings) for (let t = s; t < e; t += step) out.push(t % MIN_PER_WEEK);
  return out.sort((a, b) => a - b);
}

// nextRunStart returns the instant the job's next scheduled run starts
// after now (a run starting this very minute is the current one), or null
// for a window that never opens.
export function nextRunStart(win, everyHours, now = new Date()) {
  const starts = slotStarts(win, everyHours);
  if (!starts.length) return null;
  const tz = (win && win.location) || "UTC";
  const base = new Date(Math.floor(now.getTime() / 60000) * 60000);
  const here = wallClock(base, tz);
  let best = Infinity;
  for (const s of starts) {
    let d = (s - here.weekMinute + MIN_PER_WEEK) % MIN_PER_WEEK;
    if (d === 0) d = MIN_PER_WEEK;
    best = Math.min(best, d);
  }
  // One DST correction, as nextOpening does.
  const guess = new Date(base.getTime() + best * 60000);
  return new Date(guess.getTime() - (wallClock(guess, tz).offset - here.offset) * 60000);
}
