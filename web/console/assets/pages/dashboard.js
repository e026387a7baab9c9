// Dashboard: the last 24 hours at a glance, kept live by the shared stream.
import { h, clear, table, badge } from "../lib/dom.js";
import { isFinal, names } from "../lib/ui.js";
import { weekSummary } from "./dashboard-week.js";
import { offsiteCard } from "./dashboard-offsite.js";
import { runPhase, windowOpenText, nextRunStart } from "./run-status.js";

function card(label, value, kind, href) {
  const body = [h("span", { class: "value" }, String(value)), h("span", { class: "label" }, label)];
  return h("div", { class: `card ${kind}`, "data-card": label }, href ? h("a", { href, class: "card-link" }, body) : body);
}

// readable: VM names for instance UUIDs, short point ids (the whole text
// in the title).
function readable(ctx, text) {
  const shown = ctx.fmt.readableIds(text, names);
  return shown === text ? text : h("span", { title: text }, shown);
}

function eventRows(ctx, events) {
  return table("!Recent events", [
    { label: "Time", cell: e => ctx.fmt.time(e.time) },
    { label: "Severity", cell: e => badge(e.severity || "info") },
    { label: "Subject", cell: e => readable(ctx, e.subject || (e.vm && (names.get(e.vm) || e.vm)) || e.job || "") },
    { label: "Message", cell: e => readable(ctx, e.message || e.kind || "") },
  ], events, "No events in the last 24 hours.");
}

export default {
  route: "#/dashboard",
  title: "Dashboard",
  nav: true,
  async render(root, ctx) {
    performance.mark("vmvault:dashboard:start");
    const { fmt } = ctx;
    const cards = h("div", { class: "dashboard-cards", "aria-label": "Protection summary", role: "group" });
    const running = h("div", { id: "dashboard-running" });
    const sched = h("div", { id: "dashboard-scheduled" });
    // Scheduled runs whose VMs are all done but whose window is still open.
    const openRuns = h("div", { id: "dashboard-open-runs" });
    const nextRun = h("p", { id: "dashboard-next-run", hidden: true });
    const windowBox = h("div", { id: "dashboard-window" });
    const repos = h("div", { id: "dashboard-repos" });
    const events = h("div", { id: "dashboard-events" });
    const week = h("div", { id: "dashboard-week" }, h("p", { class: "loading" }, "Counting…"));
    root.append(cards,
      h("div", { class: "dashboard-grid" },
        h("section", { class: "panel", "aria-labelledby": "dash-running" }, h("h2", { id: "dash-running" }, "Running tasks"), running),
        h("section", { class: "panel", "aria-labelledby": "dash-scheduled" }, h("h2", { id: "dash-scheduled" }, "Scheduled backups"), sched, openRuns),
        h("section", { class: "panel", "aria-labelledby": "dash-window" }, h("h2", { id: "dash-window" }, "Next backup window"), windowBox, nextRun)),
      h("section", { "aria-labelledby": "dash-week" }, h("h2", { id: "dash-week" }, "Backups in the last 7 days"), week),
      h("section", { "aria-labelledby": "dash-repos" }, h("h2", { id: "dash-repos" }, "Repositories"), repos),
      h("section", { "aria-labelledby": "dash-events" }, h("h2", { id: "dash-events" }, "Recent events"), events));

    const shown = new Map(); // task id -> progress element
    const timers = [];
    let recent = [];

    function showTask(t) {
      let el = shown.get(t.id);
      if (!el) {
        const empty = running.querySelector(".empty");
        if (empty) empty.remove();
        el = ctx.progress(t);
        const link = h("a", { href: `#/tasks/${encodeURIComponent(t.id)}`, class: "task-link" }, "Details");
        const row = h("div", { class: "dashboard-task", "data-task-row": t.id }, el, link);
        running.append(row);
        shown.set(t.id, el);
        // A finished task stays a minute so its outcome can be read, then goes.
        el.addEventListener("taskdone", () => {
          timers.push(setTimeout(() => {
            row.remove();
            shown.delete(t.id);
            if (!shown.size && !running.querySelector(".empty")) running.append(h("p", { class: "empty" }, "Nothing is running."));
          }, 60000));
        });
      } else {
        el.update(t);
      }
    }

    // showScheduler paints the scheduler's running backups (GET /dashboard's
    // "scheduler", then the stream's "scheduler" events): one bar per VM,
    // updated in place so focus and screen readers are not disturbed.
    const schedRows = new Map(); // run + VM -> {row, bar, info}
    function showScheduler(a) {
      const backups = (a && a.backups) || [];
      const seen = new Set();
      for (const b of backups) {
        const key = `${b.run}/${b.instanceUuid || b.vm}`;
        seen.add(key);
        let r = schedRows.get(key);
        if (!r) {
          const bid = `sched-bar-${schedRows.size}-${Date.now().toString(36)}`;
          const bar = h("progress", { id: bid, max: "100", value: "0" });
          const label = h("label", { for: bid, class: "progress-label" });
          const info = h("span", { class: "progress-info" });
          const row = h("div", { class: "progress dashboard-sched", "data-sched-vm": b.vm, "data-job": b.job }, label, bar, info);
          const empty = sched.querySelector(".empty");
          if (empty) empty.remove();
          sched.append(row);
          r = { row, bar, label, info };
          schedRows.set(key, r);
        }
        const pc = b.total > 0 ? Math.min(100, Math.floor((b.done / b.total) * 100)) : 0;
        r.label.textContent = `${b.vm} · job ${b.job}${b.phase ? ` (${b.phase})` : ""}`;
        r.bar.value = pc;
        r.bar.setAttribute("aria-valuetext", `${pc}%`);
        r.info.textContent = [`${pc}%`, b.total > 0 ? `${fmt.bytes(b.done)} of ${fmt.bytes(b.total)}` : "", b.rate ? fmt.rate(b.rate) : ""].filter(Boolean).join(" · ");
        r.row.dataset.percent = String(pc);
      }
      for (const [key, r] of schedRows) {
        if (!seen.has(key)) { r.row.remove(); schedRows.delete(key); }
      }
      if (!schedRows.size && !sched.querySelector(".empty")) sched.append(h("p", { class: "empty" }, "No scheduled backup is running."));
    }

    // schedSeq counts the stream's scheduler updates: a GET /dashboard
    // answer older than the last one does not paint over it.
    let schedSeq = 0;
    let lastWindowJob = "";
    function render(d, seq = schedSeq) {
      if (seq === schedSeq) showScheduler(d.scheduler);
      const vms = d.vms || {};
      clear(cards).append(
        card("Protected VMs", vms.protected ?? 0, "ok", "#/inventory?status=protected"),
        card("Failed in the last 24 h", vms.failed ?? 0, (vms.failed ?? 0) > 0 ? "bad" : "", "#/events?severity=error"),
        card("Not protected", vms.unprotected ?? 0, (vms.unprotected ?? 0) > 0 ? "warn" : "", "#/inventory?status=unprotected"),
        ...offsiteCard(d.offsite));
      const tasks = d.runningTasks || [];
      for (const t of tasks) showTask(t);
      if (!shown.size && !running.querySelector(".empty")) running.append(h("p", { class: "empty" }, "Nothing is running."));
      const w = d.nextWindow;
      lastWindowJob = w ? w.job : "";
      clear(windowBox).append(w
        ? h("p", null, h("strong", null, w.name || w.job), " — ",
          w.open ? "open now" : `opens ${fmt.time(w.start)}`,
          w.end ? `, until ${fmt.time(w.end)}` : "")
        : h("p", { class: "empty" }, "No backup window is scheduled."));
      clear(repos).append(table("!Repository usage", [
        { label: "Repository", cell: r => r.name || r.id },
        { label: "Stored", class: "num", cell: r => (r.statsStale ? [fmt.bytes(r.storedBytes), " ", h("span", { class: "hint", title: "figures of the previous restore points: the repository's statistics are being recomputed" }, "updating")] : fmt.bytes(r.storedBytes)) },
        { label: "Logical", class: "num", cell: r => fmt.bytes(r.logicalBytes) },
        { label: "Dedup", class: "num", cell: r => fmt.ratio(r.dedupRatio) },
        { label: "Compression", class: "num", cell: r => fmt.ratio(r.compressionRatio) },
        {
          label: "Free", class: "num", cell: (r) => {
            const sp = r.space;
            if (!sp) return "–";
            const txt = `${fmt.bytes(sp.freeBytes)}${sp.fullAt ? `, full ~${new Date(sp.fullAt).toLocaleDateString(undefined, { month: "short", day: "numeric" })}` : ""}`;
            return sp.low ? badge(`low: ${txt}`, "failed") : txt;
          },
        },
        { label: "Damage", cell: r => (r.damage > 0 ? badge(`${r.damage} damaged`, "damaged") : badge("none", "ok")) },
        {
          label: "Last check", cell: (r) => {
            const c = r.lastCheck;
            if (!c) return "never";
            return [fmt.time(c.time), " ", c.ok ? badge("ok") : badge("failed")];
          },
        },
      ], d.repositories || [], "No repositories are configured."));
      recent = (d.recentEvents || []).slice(0, 20);
      clear(events).append(eventRows(ctx, recent));
    }

    // Marks for the scale test: data arrived, page drawn.
    const first = await ctx.api("GET", "/dashboard");
    performance.mark("vmvault:dashboard:data");
    render(first);
    performance.mark("vmvault:dashboard:ready");

    // Each enabled job's newest run: one that has backed up every VM and
    // waits for its window slot to close says so (it is not "running"), and
    // the earliest next run start of all jobs shows under the window.
    let jobsSeen = [];
    let alive = true;
    async function showRuns() {
      try {
        const jobs = ((await ctx.api("GET", "/jobs")) || []).filter((j) => j.enabled !== false);
        jobsSeen = jobs;
        const last = await Promise.all(jobs.map((j) => ctx.api("GET", `/jobs/${encodeURIComponent(j.id)}/runs?limit=1`)
          .then((r) => (Array.isArray(r) ? r[0] : null)).catch(() => null)));
        if (!alive) return;
        const lines = [];
        jobs.forEach((j, i) => {
          const r = last[i];
          const p = r && runPhase(r);
          if (!p || p.phase !== "window-open") return;
          lines.push(h("p", { class: "dashboard-open-run", "data-job": j.id, "data-run": r.id },
            h("a", { href: `#/jobs/${encodeURIComponent(j.id)}` }, j.name || j.id), `: ${windowOpenText(p, fmt.time)}.`));
        });
        clear(openRuns).append(...lines);
        showNextRun();
      } catch { /* the next job event retries */ }
    }
    function showNextRun() {
      let best = null;
      for (const j of jobsSeen) {
        const t = nextRunStart(j.window, j.everyHours || 0);
        if (t && (!best || t < best.t)) best = { t, j };
      }
      nextRun.hidden = !best;
      // The window above names its job already: the same job's run says when only.
      const same = best && lastWindowJob === best.j.id;
      if (best) nextRun.textContent = same ? `Its next run starts ${fmt.time(best.t)}.` : `Next scheduled run: ${best.j.name || best.j.id} at ${fmt.time(best.t)}.`;
    }
    showRuns();

    // The week: every job's recent runs and the ad-hoc backup tasks,
    // counted per day (at most 200 runs per job: a job running every hour
    // makes 168 in a week).
    async function showWeek() {
      try {
        const jobs = (await ctx.api("GET", "/jobs")) || [];
        const [runs, tasks] = await Promise.all([
          Promise.all(jobs.map((j) => ctx.api("GET", `/jobs/${encodeURIComponent(j.id)}/runs?limit=200`).catch(() => []))),
          ctx.api("GET", "/tasks?limit=1000").catch(() => []),
        ]);
        const days = weekSummary(runs.flat(), tasks, new Date());
        const most = Math.max(1, ...days.map((d) => d.succeeded + d.failed + d.notRun));
        const label = (k) => new Date(`${k}T12:00:00`).toLocaleDateString(undefined, { weekday: "short", day: "numeric", month: "short" });
        clear(week).append(table("!Backups per day", [
          { label: "Day", cell: (d) => label(d.day) },
          { label: "Succeeded", class: "num", cell: (d) => String(d.succeeded) },
          { label: "Failed", class: "num", cell: (d) => (d.failed ? badge(String(d.failed), "failed") : "0") },
          { label: "Not run", class: "num", cell: (d) => String(d.notRun) },
          {
            label: "", cell: (d) => {
              // CSSOM, not a style attribute: the CSP allows no inline style.
              const ok = h("span", { class: "week-ok" });
              const bad = h("span", { class: "week-bad" });
              ok.style.width = `${(100 * d.succeeded) / most}%`;
              bad.style.width = `${(100 * (d.failed + d.notRun)) / most}%`;
              return h("span", { class: "week-bar", "aria-hidden": "true" }, ok, bad);
            },
          },
        ], days));
        for (const [i, tr] of [...week.querySelectorAll("tbody tr")].entries()) tr.dataset.day = days[i].day;
      } catch (e) {
        clear(week).append(h("p", { class: "form-error" }, `The week could not be counted: ${e.message}`));
      }
    }
    showWeek();

    // Counts change when tasks end or events arrive: reload, at most every 2 s.
    let reloadTimer = 0;
    const reload = () => {
      if (reloadTimer) return;
      reloadTimer = setTimeout(async () => {
        reloadTimer = 0;
        const seq = schedSeq;
        try { if (alive) render(await ctx.api("GET", "/dashboard"), seq); } catch { /* next event retries */ }
        if (alive) showRuns();
      }, 2000);
    };
    const unsub = ctx.stream((t) => {
      if (!isFinal(t) || shown.has(t.id)) showTask(t);
      if (isFinal(t)) reload();
    }, (e) => {
      recent = [e, ...recent].slice(0, 20);
      clear(events).append(eventRows(ctx, recent));
      reload();
    }, (a) => {
      schedSeq++;
      showScheduler(a);
    });
    return () => { alive = false; unsub(); clearTimeout(reloadTimer); timers.forEach(clearTimeout); };
  },
};
