// Repositories (#/repositories and #/repositories/<name>): the list, and one
// repository's usage over time, ratios, last check and its findings, check
// and reclaim with live progress, what reclaim would free, and (for
// administrators) removing it from the appliance, which keeps its data.
import { ensureCSS, pick, taskOf, watchTask, errorText, stateBadge } from "./jobs-common.js";
import { pendingText } from "./approvals.js";
import { usageChart } from "./repositories-chart.js";
import { checkMode } from "../lib/ui.js";

function statsOf(r) {
  return (r && r.stats) || {};
}
function dedup(r) {
  return pick(r, "dedupRatio") ?? pick(statsOf(r), "dedupRatio");
}
function compression(r) {
  return pick(r, "compressionRatio") ?? pick(statsOf(r), "compressionRatio");
}
function lastCheck(r) {
  const lc = pick(r, "lastCheck");
  if (lc) return lc;
  const m = (r && r.maintenance) || {};
  const t = pick(m, "lastQuickCheck", "lastFullCheck");
  return t && !String(t).startsWith("0001") ? { time: t, ok: null, findings: [] } : null;
}

function card(h, label, value, id) {
  return h("div", { class: "p2-card" }, h("span", { class: "p2-value", id }, value), h("span", { class: "p2-label" }, label));
}

async function listPage(root, ctx) {
  const h = ctx.h;
  const repos = await ctx.api("GET", "/repositories");
  if (!repos.length) {
    root.append(h("p", { class: "empty" }, "No repository is configured."));
    return;
  }
  const details = await Promise.all(repos.map((r) => ctx.api("GET", `/repositories/${encodeURIComponent(r.name)}`).catch(() => r)));
  root.append(
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        { class: "p2-table", id: "repositories-table" },
        h("caption", { class: "visually-hidden" }, "Repositories"),
        h("thead", null, h("tr", null, ["Name", "Points", "Protected", "Stored", "Dedup", "Compression", "Last check"].map((c) => h("th", { scope: "col" }, c)))),
        h(
          "tbody",
          null,
          details.map((r) => {
            const s = statsOf(r);
            const lc = lastCheck(r);
            return h(
              "tr",
              { "data-repository": r.name },
              h("td", { "data-label": "Name" }, h("a", { href: `#/repositories/${encodeURIComponent(r.name)}` }, r.name), h("span", { class: "hint p2-block" }, r.path || "")),
              h("td", { "data-label": "Points", class: "num" }, String(r.points ?? s.points ?? "–")),
              h("td", { "data-label": "Protected", class: "num" }, ctx.fmt.bytes(s.logicalBytes)),
              h("td", { "data-label": "Stored", class: "num" }, ctx.fmt.bytes(s.storedBytes)),
              h("td", { "data-label": "Dedup", class: "num" }, ctx.fmt.ratio(dedup(r))),
              h("td", { "data-label": "Compression", class: "num" }, ctx.fmt.ratio(compression(r))),
              h("td", { "data-label": "Last check" }, lc ? [lc.ok === false ? stateBadge(h, "failed") : lc.ok ? stateBadge(h, "ok") : "", " ", ctx.fmt.time(lc.time)] : "never"),
            );
          }),
        ),
      ),
    ),
  );
}

// spaceView: used and free space of the repository's volume as a bar and
// words, the growth and the forecast, and a warning below the threshold. An
// object store has no free space to show: only what the repository holds.
export function spaceView(h, fmt, sp, stats) {
  if (!sp) {
    return [h("p", { class: "hint", id: "space-none" }, `This repository's storage reports no free space (an object store grows until a quota stops it); it holds ${fmt.bytes((stats && stats.diskBytes) || 0)}.`)];
  }
  const used = Math.max(0, sp.totalBytes - sp.freeBytes);
  const pct = sp.totalBytes > 0 ? Math.round((100 * used) / sp.totalBytes) : 0;
  const meter = h("meter", { id: "space-meter", min: "0", max: String(sp.totalBytes), value: String(used), low: String(sp.totalBytes * 0.8), high: String(sp.totalBytes * 0.9), optimum: "0", "aria-label": "Space used" });
  const out = [
    h("p", { id: "space-words" }, meter, ` ${fmt.bytes(used)} used of ${fmt.bytes(sp.totalBytes)} (${pct}%), ${fmt.bytes(sp.freeBytes)} free.`),
  ];
  const g = sp.growthBytesPerDay;
  let forecast;
  if (g === undefined || g === null) forecast = "Not enough history yet for a forecast (the points span less than an hour).";
  else if (g <= 0) forecast = "The repository is not growing over the last 30 days: retention removes as much as backups add.";
  else if (sp.fullAt) forecast = `It grows by about ${fmt.bytes(g)} a day (last 30 days): at that rate it is full around ${new Date(sp.fullAt).toLocaleDateString(undefined, { year: "numeric", month: "short", day: "numeric" })}.`;
  else forecast = `It grows by about ${fmt.bytes(g)} a day (last 30 days): not full within a century at that rate.`;
  out.push(h("p", { id: "space-forecast" }, forecast));
  if (sp.low) {
    out.push(h("p", { class: "notice warn", role: "alert", id: "space-low" },
      `Low on space: less than ${sp.lowBelowPercent}% or ${fmt.bytes(sp.lowBelowBytes)} free. Backups fail when it fills: shorten retention, reclaim the space of deleted points, or give the volume more space.`));
  }
  return out;
}

// bandwidthView: the repository's bandwidth limits (MB/s, from the
// configuration file) and the rates in force now, or that there are none.
export function bandwidthView(h, bw) {
  const rate = (v) => (v > 0 ? `${v} MB/s` : "unlimited");
  if (!bw) return [h("p", { class: "hint", id: "bandwidth-none" }, "No bandwidth limits: uploads and downloads run as fast as the storage allows (repositories[].upload_limit_mb_per_s and download_limit_mb_per_s in the configuration file set them).")];
  const out = [h("p", { id: "bandwidth-now" }, `Now: uploads ${rate(bw.nowUploadMBps)}, downloads ${rate(bw.nowDownloadMBps)}.`)];
  const sched = bw.schedule || [];
  out.push(h("p", { id: "bandwidth-default" }, `${sched.length ? "Outside the windows below" : "Always"}: uploads ${rate(bw.uploadMBps)}, downloads ${rate(bw.downloadMBps)}.`));
  if (sched.length) {
    const days = (w) => Object.entries((w && w.days) || {}).map(([d, rs]) => `${d} ${rs.join(", ")}`).join("; ");
    out.push(h("ul", { id: "bandwidth-windows" }, ...sched.map((s) => h("li", null, `${days(s.window)}${s.window && s.window.location ? ` (${s.window.location})` : ""}: uploads ${rate(s.uploadMBps)}, downloads ${rate(s.downloadMBps)}`))));
  }
  return out;
}

async function detailPage(root, ctx, name) {
  const h = ctx.h;
  const title = document.getElementById("page-title");
  if (title) title.textContent = `Repository: ${name}`;
  document.title = `Repository ${name} — vmvault`;
  const watchers = [];
  const cards = h("div", { class: "p2-cards", id: "repo-cards" });
  const chartBox = h("div", { id: "usage-chart" }, h("p", { class: "loading" }, "Loading usage…"));
  const checkBox = h("div", { id: "last-check" });
  const spaceBox = h("div", { id: "repo-space" });
  const bandwidthBox = h("div", { id: "repo-bandwidth" });
  const opBox = h("div", { id: "repo-operation", "aria-live": "polite" });
  const readData = h("input", { type: "checkbox", id: "check-read-data" });
  const checkBtn = h("button", { type: "button", class: "primary", id: "run-check" }, "Run check");
  const reclaimBtn = h("button", { type: "button", id: "run-reclaim" }, "Reclaim space");
  const reclaimInfo = h("p", { class: "hint", id: "reclaim-info" });
  const removeBtn = h("button", { type: "button", class: "danger", id: "remove-repository" }, "Remove from the appliance");
  const removeInfo = h("p", { class: "hint", id: "remove-info" }, "Removing detaches this repository from the appliance: its restore points are no longer listed and no job can use it. Its data is not deleted: the files stay where they are, and Settings, Repositories, \u201cOpen an existing repository\u201d with its passphrase brings it back with every restore point.");
  const removeBox = h("div", { id: "remove-result", "aria-live": "polite" });
  let path = "";
  if (ctx.header) ctx.header.append(h("a", { class: "button", href: "#/repositories" }, "All repositories"));
  const canRun = ctx.can("operator");
  root.append(
    cards,
    h("section", { "aria-labelledby": "space-title" }, h("h2", { id: "space-title" }, "Space"), spaceBox),
    h("section", { "aria-labelledby": "bandwidth-title" }, h("h2", { id: "bandwidth-title" }, "Bandwidth"), bandwidthBox),
    h("section", { "aria-labelledby": "usage-title" }, h("h2", { id: "usage-title" }, "Usage over time"), chartBox),
    h("section", { "aria-labelledby": "check-title" }, h("h2", { id: "check-title" }, "Last check"), checkBox),
    canRun
      ? h(
          "section",
          { "aria-labelledby": "maint-title" },
          h("h2", { id: "maint-title" }, "Maintenance"),
          h("div", { class: "p2-actions" }, checkBtn, h("span", { class: "p2-check" }, readData, h("label", { for: "check-read-data" }, "Read and verify all data (slow)"))),
          h("div", { class: "p2-actions" }, reclaimBtn),
          reclaimInfo,
          opBox,
        )
      : null,
    ctx.can("administrator")
      ? h("section", { "aria-labelledby": "remove-title" }, h("h2", { id: "remove-title" }, "Remove from the appliance"), removeInfo, h("div", { class: "p2-actions" }, removeBtn), removeBox)
      : null,
  );

  async function load() {
    const r = await ctx.api("GET", `/repositories/${encodeURIComponent(name)}`);
    const s = statsOf(r);
    path = r.path || "";
    const reclaimable = pick(r, "reclaimableBytes");
    cards.replaceChildren(
      card(h, "restore points", String(r.points ?? s.points ?? "–"), "repo-points"),
      card(h, "protected (logical)", ctx.fmt.bytes(s.logicalBytes), "repo-logical"),
      card(h, "stored on disk", ctx.fmt.bytes(s.storedBytes ?? s.diskBytes), "repo-stored"),
      card(h, "deduplication", ctx.fmt.ratio(dedup(r)), "repo-dedup"),
      card(h, "compression", ctx.fmt.ratio(compression(r)), "repo-compression"),
      card(h, "reclaim would free", reclaimable === undefined || reclaimable === null ? "unknown" : ctx.fmt.bytes(reclaimable), "repo-reclaimable"),
    );
    spaceBox.replaceChildren(...spaceView(h, ctx.fmt, r.space, s));
    bandwidthBox.replaceChildren(...bandwidthView(h, r.bandwidth));
    reclaimInfo.textContent =
      reclaimable === undefined || reclaimable === null
        ? "Reclaim removes the data of deleted restore points; the appliance has no estimate of what it would free now."
        : reclaimable > 0
          ? `Reclaim removes the data of deleted restore points: about ${ctx.fmt.bytes(reclaimable)} would be freed now.`
          : "Reclaim removes the data of deleted restore points: nothing would be freed now (no deleted point left data behind).";
    const lc = lastCheck(r);
    // A full check (every blob read and verified) must not read like a
    // quick one: the check's task says which it was.
    let modeText = lc && lc.source === "maintenance" ? " · scheduled maintenance check" : "";
    if (lc && lc.task) {
      try {
        const m = checkMode(await ctx.api("GET", `/tasks/${encodeURIComponent(lc.task)}`));
        if (m) modeText = m === "full" ? " · full check: all data read and verified" : " · quick check: index and packs, data not read";
      } catch { /* the task aged out of the list: no mode to show */ }
    }
    if (!lc) checkBox.replaceChildren(h("p", { class: "empty" }, "This repository has not been checked yet."));
    else {
      const findings = lc.findings || lc.problems || [];
      checkBox.replaceChildren(
        h("p", null, lc.ok === false ? stateBadge(h, "failed") : lc.ok ? stateBadge(h, "ok") : "", ` ${ctx.fmt.time(lc.time)}`, modeText, lc.ok === null ? " (result not recorded)" : findings.length ? ` — ${findings.length} finding${findings.length === 1 ? "" : "s"}` : " — no problems found"),
        findings.length ? h("ul", { class: "p2-findings", id: "check-findings" }, findings.slice(0, 100).map((f) => h("li", null, typeof f === "string" ? f : `${f.kind ? `${f.kind}: ` : ""}${f.message || JSON.stringify(f)}${f.points && f.points.length ? ` (points ${f.points.map((x) => x.slice(0, 8)).join(", ")})` : ""}`))) : "",
      );
    }
    return r;
  }

  async function loadUsage() {
    let usage;
    try {
      usage = await ctx.api("GET", `/repositories/${encodeURIComponent(name)}/usage`);
    } catch (e) {
      chartBox.replaceChildren(h("p", { class: "empty" }, `Usage history unavailable: ${errorText(e)}`));
      return;
    }
    let list = Array.isArray(usage) ? usage : (usage && usage.samples) || [];
    let fmtDate = (t) => new Date(t).toLocaleDateString(undefined, { month: "short", day: "numeric" });
    // A first day of backups is one daily sample, a dot per series: draw
    // it per restore point instead, with times on the axis.
    if (list.length < 2) {
      try {
        const per = await ctx.api("GET", `/repositories/${encodeURIComponent(name)}/usage?per=point`);
        if (Array.isArray(per) && per.length >= 2) {
          list = per;
          // 24-hour times as everywhere in the console; seconds when the
          // points are minutes apart (else every label reads the same).
          const span = Date.parse(per[per.length - 1].time) - Date.parse(per[0].time);
          const opts = { hour: "2-digit", minute: "2-digit", hourCycle: "h23", ...(span < 3600e3 ? { second: "2-digit" } : {}) };
          fmtDate = (t) => new Date(t).toLocaleTimeString(undefined, opts);
        }
      } catch { /* the daily samples stay */ }
    }
    const svg = usageChart(list, { fmtBytes: ctx.fmt.bytes, fmtDate, title: `Usage of ${name} over time` });
    // The same numbers as a table, for screen readers and for copying.
    const tbl = list.length
      ? h(
          "details",
          null,
          h("summary", null, "Usage as a table"),
          h(
            "div",
            { class: "table-wrap" },
            h(
              "table",
              { class: "p2-table" },
              h("caption", { class: "visually-hidden" }, `Usage of ${name}`),
              h("thead", null, h("tr", null, ["Time", "Points", "Logical", "Stored"].map((c) => h("th", { scope: "col" }, c)))),
              h("tbody", null, list.map((s) => h("tr", null, h("td", { "data-label": "Time" }, ctx.fmt.time(s.time)), h("td", { "data-label": "Points", class: "num" }, String(s.points ?? "")), h("td", { "data-label": "Logical", class: "num" }, ctx.fmt.bytes(s.logicalBytes)), h("td", { "data-label": "Stored", class: "num" }, ctx.fmt.bytes(s.storedBytes))))),
            ),
          ),
        )
      : null;
    // One sample draws a dot per series: say why there is no line yet.
    const few = list.length < 2 ? h("p", { class: "hint", id: "usage-few" }, list.length ? "One restore point so far: the lines start with the next backup." : "No usage recorded yet.") : null;
    chartBox.replaceChildren(svg, few || "", tbl || "");
  }

  async function operation(kind, body, btn) {
    checkBtn.disabled = true;
    reclaimBtn.disabled = true;
    opBox.replaceChildren();
    let res;
    try {
      res = await ctx.api("POST", `/repositories/${encodeURIComponent(name)}/${kind}`, body);
    } catch (e) {
      opBox.replaceChildren(h("p", { class: "form-error", role: "alert" }, `Could not start the ${kind}: ${errorText(e)}`));
      checkBtn.disabled = false;
      reclaimBtn.disabled = false;
      return;
    }
    const task = taskOf(res);
    if (!task) {
      opBox.replaceChildren(h("p", null, `${kind} started.`));
      checkBtn.disabled = false;
      reclaimBtn.disabled = false;
      return;
    }
    const w = watchTask(ctx, task);
    w.el.id = `${kind}-progress`;
    watchers.push(w);
    opBox.replaceChildren(w.el);
    const t = await w.done;
    checkBtn.disabled = false;
    reclaimBtn.disabled = false;
    const result = t.result || {};
    let text;
    if (t.state !== "succeeded") text = `The ${kind} ${t.state}${t.error ? `: ${t.error}` : ""}.`;
    else if (kind === "check") {
      const probs = result.problems || [];
      text = probs.length ? `Check finished: ${probs.length} problem${probs.length === 1 ? "" : "s"} found.` : `Check finished: no problems found (${result.points ?? "?"} points, ${result.blobs ?? "?"} blobs).`;
    } else text = `Reclaim finished: ${ctx.fmt.bytes(pick(result, "bytesFreed") || 0)} freed.`;
    opBox.append(h("p", { class: `p2-result${t.state === "succeeded" ? "" : " failed"}`, id: `${kind}-result`, role: "status" }, text));
    if (btn && btn.isConnected) btn.focus();
    load().catch(() => {});
    loadUsage();
  }

  checkBtn.addEventListener("click", () => operation("check", readData.checked ? { readData: true } : undefined, checkBtn));
  reclaimBtn.addEventListener("click", async () => {
    const ok = await ctx.confirm(`Reclaim space in ${name}? Data only deleted restore points used is removed for good; backups to this repository wait while it runs.`, { title: "Reclaim space?", ok: "Reclaim" });
    if (ok) operation("reclaim", undefined, reclaimBtn);
  });

  removeBtn.addEventListener("click", async () => {
    const where = path ? ` in ${path}` : "";
    const ok = await ctx.confirm(`Remove ${name} from the appliance? Its data is kept: the files${where} are not deleted, and it can be opened again from Settings with its passphrase. It is refused while jobs or copy jobs use it or an operation runs on it.`, { danger: true, title: "Remove repository?", ok: "Remove" });
    if (!ok) return;
    removeBtn.disabled = true;
    removeBox.replaceChildren();
    try {
      const res = await ctx.api("DELETE", `/repositories/${encodeURIComponent(name)}`);
      if (res && res.status === "pending") {
        // approvals.delay: the removal waits for the delay or a second administrator.
        removeBox.replaceChildren(h("p", { class: "p2-result", id: "remove-pending", role: "status" }, `Not removed yet. ${pendingText(ctx, res)} `, h("a", { href: "#/approvals" }, "Approvals")));
        return;
      }
      removeBox.replaceChildren(
        h("p", { class: "p2-result", id: "remove-done", role: "status" }, (res && res.message) || `Repository ${name} removed from the appliance; its data is kept.`, " ", h("a", { href: "#/repositories" }, "All repositories")),
      );
      checkBtn.disabled = true;
      reclaimBtn.disabled = true;
      ctx.toast(`Repository ${name} removed; its data is kept.`, "success");
    } catch (e) {
      removeBtn.disabled = false;
      removeBox.replaceChildren(h("p", { class: "form-error", role: "alert", id: "remove-error" }, `Not removed: ${errorText(e)}`));
    }
  });

  await load();
  await loadUsage();
  // Live: events about this repository (backups into it, maintenance)
  // refresh its figures without a reload.
  let timer = 0;
  const unsub = ctx.stream(null, (ev) => {
    if (!ev || (ev.repository !== name && !String(ev.kind || "").startsWith("vm.backed-up"))) return;
    clearTimeout(timer);
    timer = setTimeout(() => {
      load().catch(() => {});
      loadUsage();
    }, 1000);
  });
  return () => {
    unsub();
    clearTimeout(timer);
    watchers.forEach((w) => w.stop());
  };
}

export default {
  route: "#/repositories",
  title: "Repositories",
  nav: true,
  async render(root, ctx) {
    await ensureCSS();
    if (ctx.params && ctx.params[0]) return detailPage(root, ctx, ctx.params[0]);
    return listPage(root, ctx);
  },
};
