// The Tasks page's "Scheduled backups" section: the backups the scheduler
// runs in a job's window (or for "run now") are not registry tasks, so the
// task list never shows them. Running ones come from the shell's stream
// ("scheduler" events, seeded by GET /dashboard's "scheduler"); finished
// ones from each job's run history (GET /jobs/:id/runs), refreshed on job
// events and polled while a run is still going.
import { h, clear, table, badge } from "../lib/dom.js";
import { runPhase, phaseWord, windowOpenText } from "./run-status.js";

const DAY_MS = 24 * 60 * 60 * 1000;
const finalRun = new Set(["succeeded", "partial", "failed", "cancelled", "missed", "interrupted"]);

function pct(b) {
  return b.total > 0 ? Math.max(0, Math.min(100, Math.floor((b.done / b.total) * 100))) : 0;
}

// eta is the seconds left at the current rate, or null when unknown.
function eta(b) {
  if (!(b.rate > 0) || !(b.total > 0) || b.done >= b.total) return null;
  return (b.total - b.done) / b.rate;
}

// outcomes counts a run's VMs by state: "2 succeeded · 1 failed".
export function outcomes(run) {
  const counts = new Map();
  for (const v of run.vms || []) {
    const s = String(v.state || v.status || "pending");
    counts.set(s, (counts.get(s) || 0) + 1);
  }
  if (!counts.size) return run.state === "missed" ? "window missed" : "no VMs";
  const order = ["succeeded", "running", "pending", "queued", "failed", "cancelled", "interrupted", "not-run", "skipped"];
  const rank = s => (order.includes(s) ? order.indexOf(s) : order.length);
  return [...counts.entries()]
    .sort((a, b) => rank(a[0]) - rank(b[0]))
    .map(([s, n]) => `${n} ${s}`).join(" · ");
}

// recentRuns keeps the runs started in the last 24 hours (and any still
// running), newest first.
export function recentRuns(runs, now = Date.now()) {
  return runs
    .filter(r => !finalRun.has(r.state) || (Date.parse(r.started) || 0) >= now - DAY_MS || (Date.parse(r.finished) || 0) >= now - DAY_MS)
    .sort((a, b) => (Date.parse(b.started) || 0) - (Date.parse(a.started) || 0));
}

// mountScheduled builds the section into holder; returns its cleanup.
export function mountScheduled(holder, ctx) {
  const { fmt } = ctx;
  const running = h("div", { id: "tasks-sched-running" }, h("p", { class: "empty" }, "Loading…"));
  const runsBox = h("div", { id: "tasks-sched-runs", "aria-busy": "true" }, h("p", { class: "empty" }, "Loading job runs…"));
  holder.append(h("section", { id: "tasks-scheduled", class: "tasks-sched", "aria-labelledby": "tasks-sched-title" },
    h("h2", { id: "tasks-sched-title" }, "Scheduled backups"),
    h("h3", null, "Running now"), running,
    h("h3", null, "Job runs in the last 24 hours"), runsBox));

  let alive = true;
  const names = new Map(); // job id -> name
  const jobName = id => names.get(id) || id;
  const jobLink = id => h("a", { href: `#/jobs/${encodeURIComponent(id)}`, class: "tasks-sched-job" }, jobName(id));

  // Running backups: one table row per VM, updated in place so focus and
  // screen readers are not disturbed by every progress tick.
  const rows = new Map(); // run + VM -> {tr, ...cells}
  let tbody = null;
  let active = [];
  function ensureTable() {
    if (tbody) return;
    tbody = h("tbody");
    clear(running).append(h("div", { class: "table-wrap" },
      h("table", { id: "tasks-sched-table" },
        h("caption", { class: "visually-hidden" }, "Scheduled backups running"),
        h("thead", null, h("tr", null, ["VM", "Job", "Phase", "Progress", "Started"].map(c => h("th", { scope: "col" }, c)))),
        tbody)));
  }
  function showRunning(a) {
    active = (a && a.backups) || [];
    const seen = new Set();
    for (const b of active) {
      const key = `${b.run}/${b.instanceUuid || b.vm}`;
      seen.add(key);
      let r = rows.get(key);
      if (!r) {
        ensureTable();
        const bid = `tasks-sched-bar-${rows.size}-${Date.now().toString(36)}`;
        const bar = h("progress", { id: bid, max: "100", value: "0" });
        const label = h("label", { for: bid, class: "progress-label" });
        const info = h("span", { class: "progress-info" });
        const prog = h("div", { class: "progress" }, label, bar, info);
        const job = h("td", { "data-label": "Job" });
        const phase = h("td", { "data-label": "Phase" });
        const started = h("td", { "data-label": "Started" });
        const tr = h("tr", { "data-sched-vm": b.vm, "data-run": b.run, "data-job": b.job },
          h("td", { "data-label": "VM" }, b.vm || b.instanceUuid || ""), job, phase,
          h("td", { "data-label": "Progress" }, prog), started);
        tbody.append(tr);
        r = { tr, job, phase, started, bar, label, info, jobShown: "" };
        rows.set(key, r);
      }
      const pc = pct(b);
      if (r.jobShown !== jobName(b.job)) { clear(r.job).append(jobLink(b.job)); r.jobShown = jobName(b.job); }
      r.phase.textContent = b.phase || "running";
      r.started.textContent = fmt.time(b.started);
      r.label.textContent = `Backup of ${b.vm || b.instanceUuid} (job ${jobName(b.job)})`;
      if (b.total > 0) r.bar.value = pc; else r.bar.removeAttribute("value");
      r.bar.setAttribute("aria-valuetext", `${pc}%`);
      const left = eta(b);
      r.info.textContent = [`${pc}%`,
        b.total > 0 ? `${fmt.bytes(b.done)} of ${fmt.bytes(b.total)}` : "",
        b.rate ? fmt.rate(b.rate) : "",
        left !== null ? `ETA ${fmt.duration(left)}` : ""].filter(Boolean).join(" · ");
      r.tr.dataset.percent = String(pc);
    }
    for (const [key, r] of rows) {
      if (!seen.has(key)) { r.tr.remove(); rows.delete(key); }
    }
    if (!rows.size) {
      tbody = null;
      clear(running).append(h("p", { class: "empty" }, "No scheduled backup is running."));
    }
  }

  // Recent runs of every job.
  let runs = [];
  let drawn = null;
  function drawRuns() {
    runsBox.removeAttribute("aria-busy");
    // Redraw only on a change, and keep the focus on the same run's link:
    // the list is polled while a run goes.
    const sig = JSON.stringify(runs.map(r => [r.id, r.state, r.finished, r.slotCloses, outcomes(r), jobName(r.job)]));
    if (sig === drawn) return;
    drawn = sig;
    const focused = runsBox.contains(document.activeElement) ? document.activeElement.closest("tr[data-run]") : null;
    const focusRun = focused ? focused.dataset.run : null;
    clear(runsBox).append(table("!Job runs in the last 24 hours", [
      { label: "Job", cell: r => jobLink(r.job) },
      {
        label: "State", cell: (r) => {
          // A scheduled run whose VMs are all done stays open until its
          // window slot closes: it is not "running".
          const p = runPhase(r);
          const b = badge(phaseWord(p) || "unknown", p.phase === "window-open" ? (p.failed ? "warning" : "succeeded") : undefined);
          return p.phase === "window-open" ? [b, h("span", { class: "hint tasks-sched-open" }, windowOpenText(p, fmt.time))] : b;
        },
      },
      { label: "Trigger", cell: r => (r.trigger === "manual" ? "run now" : r.trigger || "") },
      { label: "Started", cell: r => fmt.time(r.started) },
      {
        label: "Duration", class: "num", cell: (r) => {
          const p = runPhase(r);
          const end = r.finished ? Date.parse(r.finished) : p.phase === "window-open" && p.last ? p.last.getTime() : Date.now();
          return fmt.duration((end - Date.parse(r.started)) / 1000);
        },
      },
      { label: "VMs", cell: r => h("span", { class: "tasks-sched-outcomes" }, outcomes(r)) },
    ], runs, "No job ran in the last 24 hours."));
    // Tests and styles find a run by its id and state.
    const trs = runsBox.querySelectorAll("tbody tr");
    runs.forEach((r, i) => {
      if (!trs[i]) return;
      trs[i].dataset.run = r.id;
      trs[i].dataset.job = r.job;
      trs[i].dataset.state = r.state || "";
      trs[i].dataset.phase = runPhase(r).phase;
      if (r.id === focusRun) trs[i].querySelector("a").focus();
    });
  }

  let loading = null;
  let again = false;
  async function loadRuns() {
    if (loading) { again = true; return loading; }
    loading = (async () => {
      try {
        const jobs = (await ctx.api("GET", "/jobs")) || [];
        for (const j of jobs) names.set(j.id, j.name || j.id);
        const lists = await Promise.all(jobs.map(j => ctx.api("GET", `/jobs/${encodeURIComponent(j.id)}/runs?limit=5`)
          .catch(e => { if (e.status === 404) return []; throw e; })));
        if (!alive) return;
        runs = recentRuns(lists.flatMap(l => (Array.isArray(l) ? l : [])));
        drawRuns();
        showRunning({ backups: active }); // job names may have arrived
      } catch (e) {
        if (!alive) return;
        runsBox.removeAttribute("aria-busy");
        drawn = null;
        clear(runsBox).append(h("p", { class: "form-error", role: "alert" }, `Could not load the job runs: ${e.message}`));
      } finally {
        loading = null;
      }
      if (again && alive) { again = false; schedule(0); }
    })();
    return loading;
  }

  // Refresh soon after a change; while a run is still going, every 2 s.
  let timer = 0;
  function schedule(ms) {
    if (!alive) return;
    clearTimeout(timer);
    timer = setTimeout(async () => {
      timer = 0;
      await loadRuns();
      // A run waiting for its window to close changes only on job events.
      if (alive && !timer && (runs.some(r => runPhase(r).phase === "backing-up") || active.length)) schedule(2000);
    }, ms);
  }

  // A GET /dashboard answer older than a stream update does not paint over it.
  let seq = 0;
  const unsub = ctx.stream({
    event: (ev) => {
      if (ev && ev.job && String(ev.kind || "").startsWith("job.")) schedule(300);
    },
    scheduler: (a) => {
      seq++;
      const before = new Set(active.map(b => b.run));
      showRunning(a);
      const now = new Set(active.map(b => b.run));
      if (before.size !== now.size || [...now].some(r => !before.has(r))) schedule(300);
    },
  });
  const mine = seq;
  ctx.api("GET", "/dashboard").then((d) => {
    if (alive && seq === mine) showRunning(d && d.scheduler);
  }).catch(() => { if (alive && seq === mine) showRunning(null); });
  schedule(0);

  return () => { alive = false; unsub(); clearTimeout(timer); };
}
