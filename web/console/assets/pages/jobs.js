// Jobs: the list (#/jobs) with run now / edit / delete, and one job's page
// with its run history and per-VM outcomes (#/jobs/<id>).
import { ensureCSS, pick, stateBadge, runState, vmState, runPercent, isRunFinal, taskOf, watchTask, errorText } from "./jobs-common.js";
import { describeWindow, nextOpening } from "./jobwizard-window.js";
import { describeRetention } from "./jobwizard-retention.js";
import { describeSelection } from "./jobwizard-tree.js";
import { runPhase, phaseWord, windowOpenText, nextRunStart } from "./run-status.js";

function runStart(r) {
  return pick(r, "started", "start");
}
function runEnd(r) {
  const e = pick(r, "finished", "end", "ended");
  return e && !String(e).startsWith("0001") ? e : null;
}
function runTrigger(r) {
  const t = pick(r, "trigger");
  if (t) return t;
  if (r.manual) return "run now";
  if (r.missed) return "missed window";
  if (r.resumeOf) return "resume";
  return "window";
}

// nextRunText says when the job's next scheduled run starts: the window cut
// into slots (everyHours), as the scheduler does. When the window is open
// now it says until when too; open (the job's open run, if any) adds what
// the current run is doing.
function nextRunText(ctx, job, open) {
  if (job.enabled === false) return "disabled";
  const next = nextRunStart(job.window, job.everyHours || 0);
  if (!next) return "never (the window never opens)";
  const parts = [ctx.fmt.time(next)];
  if (job.everyHours > 0) parts.push(`every ${job.everyHours} h while the window is open`);
  const n = nextOpening(job.window);
  if (open) {
    const p = runPhase(open);
    parts.push(p.phase === "window-open" ? `the current run has ${p.failed ? `backed up ${p.total - p.failed} of ${ctx.fmt.plural(p.total, "VM")}` : `backed up every VM`}` : "a run is going now");
  } else if (n.openNow) {
    parts.push(`the window is open now${n.closes ? ` until ${ctx.fmt.time(n.closes)}` : ""}`);
  }
  return parts.join(" · ");
}

// runProgress follows a job run started with "run now". The run's record
// (GET /jobs/:id/runs) says which VMs are done; the stream's "scheduler"
// events carry the bytes of the VMs backing up now, so the bar moves within
// a VM too. The record is read again on every streamed event, on every
// change of the running backups and at least every 1.5 s. It resolves with
// the finished run.
function runProgress(ctx, jobId, runId, name) {
  const h = ctx.h;
  const bar = h("progress", { max: "100", value: "0", id: `run-bar-${jobId}` });
  const label = h("label", { for: `run-bar-${jobId}`, class: "progress-label" }, `Run of ${name}: starting…`);
  const info = h("span", { class: "progress-info" }, "0%");
  const el = h("div", { class: "progress p2-run-progress", "data-run": runId, "data-job": jobId, "data-state": "running", "data-percent": "0", role: "group", "aria-label": `Progress of ${name}` }, label, bar, info);
  let stopped = false;
  let timer = 0;
  let busy = false;
  let last = 0;
  let run = null;
  let active = []; // the scheduler's running backups of this run
  let resolveDone;
  const done = new Promise((r) => (resolveDone = r));

  const render = () => {
    if (!run) return;
    const st = runState(run);
    const vms = run.vms || [];
    const fin = vms.filter((v) => !["pending", "running", "queued", ""].includes(vmState(v))).length;
    let pc = runPercent(run);
    if (!isRunFinal(run) && vms.length) {
      const partial = active.reduce((n, b) => n + (b.total > 0 ? Math.min(1, b.done / b.total) : 0), 0);
      pc = Math.min(99, Math.floor(((fin + partial) / vms.length) * 100));
    }
    bar.value = pc;
    bar.setAttribute("aria-valuetext", `${pc}%`);
    const now = active.map((b) => `${b.vm}${b.phase ? ` (${b.phase})` : ""}`).join(", ");
    label.textContent = `Run of ${name}: ${vms.length ? `${fin} of ${ctx.fmt.plural(vms.length, "VM")} done` : st}${now && !isRunFinal(run) ? ` · now ${now}` : ""}`;
    const rate = active.reduce((n, b) => n + (b.rate || 0), 0);
    info.textContent = [`${pc}%`, rate && !isRunFinal(run) ? ctx.fmt.rate(rate) : "", st].filter(Boolean).join(" · ");
    el.dataset.percent = String(pc);
    el.dataset.state = st;
  };

  const finish = () => {
    stopped = true;
    clearTimeout(timer);
    unsub();
  };

  const refresh = async () => {
    if (stopped || busy) return;
    const wait = 700 - (Date.now() - last);
    if (wait > 0) {
      // Many stream messages in a burst make one request.
      clearTimeout(timer);
      timer = setTimeout(refresh, wait);
      return;
    }
    busy = true;
    last = Date.now();
    try {
      const runs = await ctx.api("GET", `/jobs/${encodeURIComponent(jobId)}/runs?limit=10`);
      const list = Array.isArray(runs) ? runs : (runs && runs.runs) || [];
      const r = (runId && list.find((x) => x.id === runId)) || (!runId && list[0]);
      if (r && !stopped) {
        run = r;
        if (isRunFinal(r)) active = [];
        render();
        if (isRunFinal(r)) {
          finish();
          resolveDone(r);
          return;
        }
      }
    } catch (e) {
      info.textContent = `progress unavailable: ${errorText(e)}`;
    } finally {
      busy = false;
    }
    if (!stopped) {
      clearTimeout(timer);
      timer = setTimeout(refresh, 1500);
    }
  };

  // The shell's shared stream carries the scheduler's running backups
  // ("scheduler" events) along with tasks and events.
  const unsub = ctx.stream(
    () => refresh(),
    () => refresh(),
    (a) => {
      const mine = ((a && a.backups) || []).filter((b) => b.run === runId || (!runId && b.job === jobId));
      const changed = mine.length !== active.length || mine.some((b, i) => !active[i] || active[i].vm !== b.vm);
      active = mine;
      render();
      if (changed) refresh();
    },
  );
  refresh();
  return {
    el,
    done,
    stop: finish,
  };
}

// runNow starts a job and shows its progress in holder; returns a stopper.
async function runNow(ctx, job, holder, onDone) {
  const h = ctx.h;
  let res;
  try {
    res = await ctx.api("POST", `/jobs/${encodeURIComponent(job.id)}/run`);
  } catch (e) {
    ctx.toast(`Could not start ${job.name}: ${errorText(e)}`, "error");
    return null;
  }
  ctx.toast(`${job.name} started.`, "success");
  holder.replaceChildren();
  const task = taskOf(res);
  const runId = res && (typeof res.run === "string" ? res.run : res.run && res.run.id);
  const w = runId || !task ? runProgress(ctx, job.id, runId, job.name) : watchTask(ctx, task);
  holder.append(w.el);
  w.done.then((r) => {
    const st = runState(r) || (r && r.state);
    holder.append(h("p", { role: "status", class: "p2-run-result" }, `Run of ${job.name} finished: ${st}.`));
    if (onDone) onDone(r);
  });
  return w;
}

// tagNames maps tag ids to {name, category} (GET /tags); empty when vSphere's
// tags cannot be read (the ids are shown then).
function tagNames(ctx) {
  return ctx
    .api("GET", "/tags")
    .then((l) => new Map((Array.isArray(l) ? l : []).map((t) => [t.id, t])))
    .catch(() => new Map());
}

async function listPage(root, ctx) {
  const h = ctx.h;
  const isAdmin = ctx.can("administrator");
  const isOp = ctx.can("operator");
  if (isAdmin && ctx.header) ctx.header.append(h("a", { href: "#/job-wizard", class: "button primary", id: "new-job" }, "New job"));
  const status = h("div", { class: "p2-status", role: "status", "aria-live": "polite" });
  const body = h("div", { class: "p2-jobs" }, h("p", { class: "loading" }, "Loading jobs…"));
  root.append(status, body);
  const watchers = [];
  const [jobs, vms, tags] = await Promise.all([ctx.api("GET", "/jobs"), ctx.api("GET", "/vms").catch(() => []), tagNames(ctx)]);
  const lastRuns = await Promise.all(
    jobs.map((j) =>
      ctx
        .api("GET", `/jobs/${encodeURIComponent(j.id)}/runs?limit=1`)
        .then((r) => (Array.isArray(r) ? r[0] : null))
        .catch(() => null),
    ),
  );
  body.replaceChildren();
  if (!jobs.length) {
    body.append(h("p", { class: "empty" }, "No backup jobs yet. ", isAdmin ? h("a", { href: "#/job-wizard" }, "Create the first job") : "An administrator creates them."));
    return () => watchers.forEach((w) => w.stop());
  }
  const names = new Map((vms || []).map((v) => [v.instanceUuid, { type: "vm", instanceUuid: v.instanceUuid, name: v.name }]));
  const lastRunCell = (last) => (last ? [stateBadge(h, phaseWord(runPhase(last))), h("span", { class: "p2-block" }, ctx.fmt.time(runStart(last)))] : "never");
  const openRun = (last) => (last && !runEnd(last) && last.state === "running" && last.trigger !== "manual" ? last : null);
  // Live: a job event (started, finished) refreshes that job's last run.
  const pending = new Map();
  const unsub = ctx.stream(null, (ev) => {
    if (!ev || !ev.job || !String(ev.kind || "").startsWith("job.")) return;
    clearTimeout(pending.get(ev.job));
    pending.set(
      ev.job,
      setTimeout(async () => {
        const cell = document.getElementById(`last-run-${ev.job}`);
        if (!cell) return;
        try {
          const r = await ctx.api("GET", `/jobs/${encodeURIComponent(ev.job)}/runs?limit=1`);
          cell.replaceChildren(...[].concat(lastRunCell(Array.isArray(r) ? r[0] : null)));
        } catch {
          /* the next event tries again */
        }
      }, 300),
    );
  });
  watchers.push({ stop: () => { unsub(); pending.forEach((x) => clearTimeout(x)); } });
  const vmCount = (j) => (vms || []).filter((v) => (v.jobs || []).includes(j.id)).length;
  const rows = jobs.map((j, i) => ({ j, last: lastRuns[i] }));
  const table = h(
    "table",
    { class: "p2-table", id: "jobs-table" },
    h("caption", { class: "visually-hidden" }, "Backup jobs"),
    h(
      "thead",
      null,
      h("tr", null, ["Name", "VMs", "Repository", "Window", "Last run", "Next run", "Actions"].map((c) => h("th", { scope: "col" }, c))),
    ),
    h(
      "tbody",
      null,
      rows.map(({ j, last }) => {
        const progressCell = h("div", { class: "p2-progress-holder", id: `job-progress-${j.id}` });
        const actions = h("div", { class: "p2-actions" });
        if (isOp) {
          const b = h("button", { type: "button", "data-action": "run", "data-job": j.id, "aria-label": `Run ${j.name} now` }, "Run now");
          b.addEventListener("click", async () => {
            b.disabled = true;
            const w = await runNow(ctx, j, progressCell, () => {
              b.disabled = false;
            });
            if (w) watchers.push(w);
            else b.disabled = false;
          });
          actions.append(b);
        }
        if (isAdmin) {
          actions.append(h("a", { class: "button", href: `#/job-wizard/${encodeURIComponent(j.id)}`, "aria-label": `Edit ${j.name}` }, "Edit"));
          const del = h("button", { type: "button", class: "danger", "data-action": "delete", "aria-label": `Delete ${j.name}` }, "Delete");
          del.addEventListener("click", async () => {
            const ok = await ctx.confirm(`Delete the job "${j.name}"? Its restore points stay in the repository until retention or you remove them.`, { danger: true, title: "Delete job?" });
            if (!ok) return;
            try {
              await ctx.api("DELETE", `/jobs/${encodeURIComponent(j.id)}`);
              ctx.toast(`Job ${j.name} deleted.`, "success");
              ctx.navigate("#/jobs");
            } catch (e) {
              ctx.toast(`Could not delete ${j.name}: ${errorText(e)}`, "error");
            }
          });
          actions.append(del);
        }
        const n = vmCount(j);
        return h(
          "tr",
          { "data-job": j.id },
          h("td", { "data-label": "Name" }, h("a", { href: `#/jobs/${encodeURIComponent(j.id)}` }, j.name), j.enabled === false ? h("span", { class: "badge p2-state-warn" }, " disabled") : null),
          h("td", { "data-label": "VMs" }, h("span", null, `${n} now`), h("span", { class: "hint p2-block" }, describeSelection(j.selection, names, tags))),
          h("td", { "data-label": "Repository" }, j.repository),
          h("td", { "data-label": "Window" }, describeWindow(j.window), h("span", { class: "hint p2-block" }, (j.window && j.window.location) || "UTC")),
          h("td", { "data-label": "Last run", id: `last-run-${j.id}` }, lastRunCell(last)),
          h("td", { "data-label": "Next run" }, nextRunText(ctx, j, openRun(last))),
          h("td", { "data-label": "Actions" }, actions, progressCell),
        );
      }),
    ),
  );
  body.append(h("div", { class: "table-wrap" }, table));
  return () => watchers.forEach((w) => w.stop());
}

// pointWarnings: restore point id -> the warnings its backup recorded.
const pointWarnings = new Map();

// readCell: a backup that read nothing succeeded; it says why it is 0 B.
function readCell(ctx, v) {
  const n = pick(v, "bytesRead", "bytes") || 0;
  if (n || pick(v, "error") || !pick(v, "restorePoint", "point")) return ctx.fmt.bytes(n);
  return "0 B (nothing new to read)";
}

// runSummaryTail: how long a run took, or what an open one is doing.
function runSummaryTail(ctx, r) {
  const took = (end) => ctx.fmt.duration((new Date(end) - new Date(runStart(r))) / 1000);
  if (runEnd(r)) return ` · took ${took(runEnd(r))}`;
  const p = runPhase(r);
  if (p.phase === "window-open") return ` · ${p.last ? `took ${took(p.last)}; ` : ""}${windowOpenText(p, ctx.fmt.time)}`;
  return " · running";
}

function outcomesTable(ctx, r) {
  const h = ctx.h;
  const vms = r.vms || [];
  if (!vms.length) return h("p", { class: "hint" }, r.missed ? "The window was missed: the appliance was not running." : "No VM in this run.");
  return h(
    "table",
    { class: "p2-table p2-nested" },
    h("caption", { class: "visually-hidden" }, `VM outcomes of the run started ${ctx.fmt.time(runStart(r))}`),
    h("thead", null, h("tr", null, ["VM", "Outcome", "Read", "New", "Restore point", "Error"].map((c) => h("th", { scope: "col" }, c)))),
    h(
      "tbody",
      null,
      vms.map((v) => {
        const point = pick(v, "restorePoint", "point");
        return h(
          "tr",
          null,
          h("td", { "data-label": "VM" }, pick(v, "name") || pick(v, "vm", "instanceUuid")),
          h("td", { "data-label": "Outcome" }, stateBadge(h, vmState(v)), (() => {
            const w = pointWarnings.get(point) || [];
            return w.length ? h("ul", { class: "p2-run-warnings" }, w.map((x) => h("li", null, h("span", { class: "badge badge-warning" }, "warning"), " ", x))) : null;
          })()),
          h("td", { "data-label": "Read" }, readCell(ctx, v)),
          h("td", { "data-label": "New" }, ctx.fmt.bytes(pick(v, "newBytes", "stored") || 0)),
          h("td", { "data-label": "Restore point" }, point ? h("a", { href: `#/restore?point=${encodeURIComponent(point)}` }, point.slice(0, 12)) : "–"),
          h("td", { "data-label": "Error" }, pick(v, "error") || ""),
        );
      }),
    ),
  );
}

async function detailPage(root, ctx, id) {
  const h = ctx.h;
  const [job, vms, tags] = await Promise.all([ctx.api("GET", `/jobs/${encodeURIComponent(id)}`), ctx.api("GET", "/vms").catch(() => []), tagNames(ctx)]);
  const j = job.job || job;
  const names = new Map((vms || []).map((v) => [v.instanceUuid, { type: "vm", instanceUuid: v.instanceUuid, name: v.name }]));
  const title = document.getElementById("page-title");
  if (title) title.textContent = `Job: ${j.name}`;
  document.title = `Job ${j.name} — vmvault`;
  const watchers = [];
  const progressHolder = h("div", { class: "p2-progress-holder", id: `job-progress-${j.id}` });
  const history = h("section", { "aria-labelledby": "history-title" }, h("h2", { id: "history-title" }, "Run history"));
  const nextRunDD = h("dd", { id: "job-next-run" }, nextRunText(ctx, j));
  if (ctx.header) {
    if (ctx.can("operator")) {
      const b = h("button", { type: "button", class: "primary", "data-action": "run" }, "Run now");
      b.addEventListener("click", async () => {
        b.disabled = true;
        const w = await runNow(ctx, j, progressHolder, () => {
          b.disabled = false;
          loadHistory();
        });
        if (w) watchers.push(w);
        else b.disabled = false;
      });
      ctx.header.append(b);
    }
    if (ctx.can("administrator")) ctx.header.append(h("a", { class: "button", href: `#/job-wizard/${encodeURIComponent(j.id)}` }, "Edit"));
    ctx.header.append(h("a", { class: "button", href: "#/jobs" }, "All jobs"));
  }
  root.append(
    h(
      "dl",
      { class: "p2-dl" },
      h("dt", null, "Selection"),
      h("dd", null, describeSelection(j.selection, names, tags)),
      h("dt", null, "Repository"),
      h("dd", null, j.repository),
      h("dt", null, "Window"),
      h("dd", null, `${describeWindow(j.window)} (${(j.window && j.window.location) || "UTC"})`),
      h("dt", null, "Next run"),
      nextRunDD,
      h("dt", null, "Retention"),
      h("dd", null, describeRetention(j.retention)),
      h("dt", null, "Quiesce"),
      h("dd", null, `${j.quiesce || "filesystem"}${j.quiesce === "application" ? `, VSS ${j.vssType || "copy"}` : ""}${j.quiesceRequired ? ", required (a VM that cannot be quiesced fails)" : ""}`),
      ...scriptRows(h, j.scripts),
    ),
    progressHolder,
    history,
  );
  const list = h("div", { class: "p2-history" });
  history.append(list);
  async function loadHistory() {
    let runs;
    try {
      runs = await ctx.api("GET", `/jobs/${encodeURIComponent(j.id)}/runs?limit=50`);
    } catch (e) {
      list.replaceChildren(h("p", { class: "form-error", role: "alert" }, `Run history unavailable: ${errorText(e)}`));
      return;
    }
    runs = Array.isArray(runs) ? runs : [];
    // A run records no warnings; the restore points it made do.
    try {
      const pts = (await ctx.api("GET", `/restore-points?job=${encodeURIComponent(j.id)}`)) || [];
      for (const p of pts) if (p && p.warnings && p.warnings.length) pointWarnings.set(p.id, p.warnings);
    } catch {
      // The history shows without them.
    }
    nextRunDD.textContent = nextRunText(ctx, j, runs.find((r) => !runEnd(r) && r.state === "running" && r.trigger !== "manual"));
    if (!runs.length) {
      list.replaceChildren(h("p", { class: "empty" }, "This job has not run yet."));
      return;
    }
    list.replaceChildren(
      ...runs.map((r, i) =>
        h(
          "details",
          { class: "p2-run", open: i === 0 ? true : null, "data-run": r.id },
          h(
            "summary",
            null,
            stateBadge(h, phaseWord(runPhase(r))),
            ` ${ctx.fmt.time(runStart(r))} · ${runTrigger(r)}`,
            runSummaryTail(ctx, r),
            ` · ${ctx.fmt.plural((r.vms || []).length, "VM")}`,
          ),
          outcomesTable(ctx, r),
        ),
      ),
    );
  }
  await loadHistory();
  return () => watchers.forEach((w) => w.stop());
}

export default {
  route: "#/jobs",
  title: "Jobs",
  nav: true,
  async render(root, ctx) {
    await ensureCSS();
    // "#/jobs/new" (the shell README's name for it) opens the wizard.
    if (ctx.params && ctx.params[0] === "new" && ctx.params.length === 1) {
      history.replaceState(null, "", "#/job-wizard");
      ctx.navigate("#/job-wizard");
      return undefined;
    }
    if (ctx.params && ctx.params[1] === "edit") {
      history.replaceState(null, "", `#/job-wizard/${encodeURIComponent(ctx.params[0])}`);
      ctx.navigate(`#/job-wizard/${encodeURIComponent(ctx.params[0])}`);
      return undefined;
    }
    if (ctx.params && ctx.params[0]) return detailPage(root, ctx, ctx.params[0]);
    return listPage(root, ctx);
  },
};

// scriptRows shows a job's appliance-side scripts, read-only (they are set
// through the API or the CLI): one row per hook that is set.
function scriptRows(h, scripts) {
  const hooks = [
    ["preJob", "Pre-job script", true],
    ["postJob", "Post-job script", false],
    ["preVM", "Pre-VM script", true],
    ["postVM", "Post-VM script", false],
  ];
  const rows = [];
  for (const [key, label, pre] of hooks) {
    const sc = scripts && scripts[key];
    if (!sc || !Array.isArray(sc.command)) continue;
    const policy = sc.onFailure || (pre ? "fail" : "continue");
    rows.push(
      h("dt", null, label),
      h("dd", null, h("code", null, sc.command.join(" ")), ` (timeout ${sc.timeoutSeconds || 300} s, on failure: ${policy})`),
    );
  }
  return rows;
}
