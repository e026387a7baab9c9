// Tasks: running and recent tasks with live progress, and the backups the
// scheduler runs (tasks-scheduled.js); one task's details, log (from its SSE
// stream) and cancel.
import { h, clear, table, badge } from "../lib/dom.js";
import { isFinal, taskTitle, checkMode, names } from "../lib/ui.js";
import { mountScheduled } from "./tasks-scheduled.js";

function elapsed(t) {
  const start = t.started || t.created;
  if (!start) return null;
  const end = isFinal(t) && t.ended ? new Date(t.ended) : new Date();
  return (end - new Date(start)) / 1000;
}

// Backups and restores count bytes; checks and reclaims count points or
// packs, whose "rate" is no throughput.
const byteKinds = new Set(["backup", "restore", "restore-disk"]);

// done is the progress as words: "1.2 GiB of 4.0 GiB" or "3 of 6 points".
function doneText(fmt, t) {
  const p = t.progress || {};
  if (!p.total) return "–";
  if (byteKinds.has(t.kind)) return `${fmt.bytes(p.done)} of ${fmt.bytes(p.total)}`;
  const what = String(p.phase || "").replace(/^(read and verify|quick check): /, "");
  return `${p.done} of ${p.total}${what ? ` ${what}` : ""}`;
}

// namePoints teaches taskTitle the VM of each restore point a task names
// (a restore's subject is its point's 64-digit id).
async function namePoints(ctx, tasks) {
  if (!tasks.some(t => /^[0-9a-f]{32,}$/i.test(t.subject || "") && !names.has(t.subject))) return false;
  let pts;
  try { pts = (await ctx.api("GET", "/restore-points")) || []; } catch { return false; }
  for (const p of pts) if (p && p.id && p.vm && p.vm.name) names.set(p.id, p.vm.name);
  return true;
}

// warningsOf lists a task's warnings: a backup's per VM ("web-01: ...").
function warningsOf(t) {
  const res = t && t.result;
  const out = [];
  if (Array.isArray(res)) {
    for (const r of res) for (const w of (r && r.warnings) || []) out.push(r.name ? `${r.name}: ${w}` : w);
  } else if (res && Array.isArray(res.warnings)) out.push(...res.warnings);
  return out;
}

// readText: a backup that read nothing succeeded, it did not fail; say why.
function readText(fmt, r) {
  const n = r.bytesRead;
  if (n !== 0 || r.error) return fmt.bytes(n);
  return r.mode === "incremental" ? "0 B (nothing changed since the last backup)" : "0 B (the disks hold no data yet)";
}

// throughput: the live rate while running, the average once finished.
function throughput(t) {
  if (!byteKinds.has(t.kind)) return null;
  const p = t.progress || {};
  if (!isFinal(t)) return p.rate;
  const d = elapsed(t);
  return d > 0 && p.done > 0 ? p.done / d : null;
}

async function cancelTask(ctx, t, btn) {
  const ok = await ctx.confirm(`Cancel ${taskTitle(t)}? Work done so far may be discarded.`,
    { danger: true, title: "Cancel this task?", ok: "Cancel task" });
  if (!ok) return;
  btn.disabled = true;
  try {
    await ctx.api("POST", `/tasks/${encodeURIComponent(t.id)}/cancel`);
    ctx.toast("Cancellation requested.", "info");
  } catch (e) {
    btn.disabled = false;
    ctx.toast(`Could not cancel: ${e.message}`, "error");
  }
}

async function renderList(root, ctx) {
  const { fmt } = ctx;
  const stateSel = h("select", { id: "tasks-state", name: "state" },
    h("option", { value: "" }, "All"), ["running", "queued", "succeeded", "failed", "cancelled", "interrupted"].map(s => h("option", { value: s }, s)));
  stateSel.value = ctx.query.get("state") || "";
  const list = h("div", { id: "tasks-list" });
  const sched = h("div", { class: "tasks-sched-holder" });
  root.append(h("form", { class: "row", "aria-label": "Filter tasks", onsubmit: e => e.preventDefault() },
    h("div", { class: "field" }, h("label", { for: "tasks-state" }, "State"), stateSel)), list, sched);

  let tasks = [];
  const bars = new Map();

  function draw() {
    const rows = tasks.filter(t => !stateSel.value || t.state === stateSel.value);
    clear(list).append(table("!Tasks", [
      { label: "Task", class: "tasks-title", cell: t => h("a", { href: `#/tasks/${encodeURIComponent(t.id)}` }, taskTitle(t)) },
      {
        label: "State", cell: (t) => {
          const n = warningsOf(t).length;
          return n ? h("span", { class: "tasks-state" }, badge(t.state), " ", badge(ctx.fmt.plural(n, "warning"), "warning")) : badge(t.state);
        },
      },
      {
        label: "Progress", cell: (t) => {
          let b = bars.get(t.id);
          if (!b) { b = ctx.progress(t); bars.set(t.id, b); } else b.update(t);
          return b;
        },
      },
      { label: "Started", class: "tasks-when", cell: t => fmt.time(t.started || t.created) },
      { label: "Duration", class: "num", cell: t => fmt.duration(elapsed(t)) },
      { label: "Throughput", class: "num", cell: t => fmt.rate(throughput(t)) },
      {
        label: "Actions", class: "tasks-actions", cell: (t) => {
          if (isFinal(t) || !ctx.can("operator")) return "";
          const btn = h("button", { type: "button", class: "cancel-task", "aria-label": `Cancel ${taskTitle(t)}` }, "Cancel");
          btn.addEventListener("click", () => cancelTask(ctx, t, btn));
          return btn;
        },
      },
    ], rows, "No tasks."));
  }

  // The scheduler's backups are not registry tasks: their own section,
  // loaded without holding up the task list.
  const unsched = mountScheduled(sched, ctx);
  try {
    tasks = (await ctx.api("GET", "/tasks?limit=100")) || [];
    await namePoints(ctx, tasks);
  } catch (e) {
    unsched();
    throw e;
  }
  draw();
  stateSel.addEventListener("change", draw);
  let pending = 0;
  const unsub = ctx.stream((t) => {
    const i = tasks.findIndex(x => x.id === t.id);
    const before = i >= 0 ? tasks[i].state : "";
    if (i >= 0) tasks[i] = t; else {
      tasks.unshift(t);
      namePoints(ctx, [t]).then(named => { if (named && !pending) pending = requestAnimationFrame(() => { pending = 0; draw(); }); });
    }
    // Progress bars update themselves; redraw only when a row appears or changes state.
    if (before !== t.state) {
      if (!pending) pending = requestAnimationFrame(() => { pending = 0; draw(); });
    }
  }, null);
  return () => { unsub(); unsched(); cancelAnimationFrame(pending); };
}

async function renderDetail(root, ctx, id) {
  const { fmt } = ctx;
  ctx.header.append(h("a", { href: "#/tasks", class: "button" }, "All tasks"));
  let task = await ctx.api("GET", `/tasks/${encodeURIComponent(id)}`);
  await namePoints(ctx, [task]);
  const bar = ctx.progress(task);
  const facts = h("dl", { class: "facts" });
  const actions = h("div", { class: "row" });
  const log = h("pre", { class: "tasks-log", id: "task-log", tabindex: "0", "aria-label": "Task log" });
  const result = h("div");
  root.append(h("section", { class: "panel", "aria-labelledby": "task-summary" },
    h("h2", { id: "task-summary" }, taskTitle(task)),
    bar, facts, actions, result),
  h("section", { "aria-labelledby": "task-log-title" }, h("h2", { id: "task-log-title" }, "Log"), log));

  function drawFacts() {
    clear(facts).append(
      h("dt", null, "State"), h("dd", null, badge(task.state)),
      ...(checkMode(task) ? [h("dt", null, "Check"), h("dd", { id: "task-check-mode" }, checkMode(task) === "full" ? "Full: read and verify all data" : "Quick: index and packs only")] : []),
      h("dt", null, "Created"), h("dd", null, fmt.time(task.created)),
      h("dt", null, "Started"), h("dd", null, fmt.time(task.started)),
      h("dt", null, "Ended"), h("dd", null, fmt.time(task.ended)),
      h("dt", null, "Duration"), h("dd", null, fmt.duration(elapsed(task))),
      h("dt", null, "Throughput"), h("dd", null, fmt.rate(throughput(task))),
      h("dt", null, "Done"), h("dd", null, doneText(fmt, task)));
    clear(actions);
    if (!isFinal(task) && ctx.can("operator")) {
      const btn = h("button", { type: "button", class: "danger", id: "task-cancel" }, "Cancel task");
      btn.addEventListener("click", () => cancelTask(ctx, task, btn));
      actions.append(btn);
    }
    clear(result);
    if (task.error) result.append(h("div", { class: "form-error", role: "alert" }, task.error));
    const warns = warningsOf(task);
    if (warns.length) {
      result.append(h("div", { class: "notice tasks-warnings", id: "task-warnings", role: "status" },
        h("strong", null, `${ctx.fmt.plural(warns.length, "warning")}:`), h("ul", null, warns.map(w => h("li", null, w)))));
    }
    const res = task.result;
    if (Array.isArray(res) && res.length && typeof res[0] === "object") {
      // The VM's UUID adds nothing next to its name.
      const keys = Object.keys(res[0]).filter(k => typeof res[0][k] !== "object" && !(k === "vm" && "name" in res[0]));
      const words = { bytesRead: "Read", newBytes: "New data", restorePoint: "Restore point", name: "VM" };
      const label = k => words[k] || k.replace(/([a-z])([A-Z])/g, (_, a, b) => `${a} ${b.toLowerCase()}`).replace(/_/g, " ").replace(/^./, c => c.toUpperCase());
      // A backup's read mode in words (backup.Mode*).
      const readModes = { full: "whole disk", allocated: "allocated areas", incremental: "changed blocks" };
      result.append(table("Result", keys.map(k => ({
        label: label(k),
        class: /bytes/i.test(k) ? "num" : k === "mode" ? "nowrap" : null,
        cell: (r) => {
          if (k === "bytesRead" && task.kind === "backup") return readText(fmt, r);
          if (/bytes/i.test(k)) return fmt.bytes(r[k]);
          const v = String(r[k] ?? "");
          if (k === "mode" && readModes[v]) return readModes[v];
          // A point's id: its first digits, linked to the point among the VM's.
          if (/^[0-9a-f]{64}$/i.test(v)) return h("a", { href: `#/restore-points?q=${encodeURIComponent(v.slice(0, 12))}`, title: v }, h("code", null, `${v.slice(0, 12)}…`));
          return /^[0-9a-f]{32,}$/i.test(v) ? h("span", { class: "mono" }, v) : v;
        },
      })), res));
    } else if (res && typeof res === "object") {
      // Sentence case, as the rest of the console: "Powered on", not "Powered On".
      const label = k => k.replace(/([a-z])([A-Z])/g, (_, a, b) => `${a} ${b.toLowerCase()}`).replace(/^./, c => c.toUpperCase());
      const modes = { new: "new VM", overwrite: "overwrote the original VM", original: "overwrote the original VM", rehearsal: "rehearsal", attach: "disk attached to a VM", download: "download" };
      const value = (k, v) => {
        if (/persecond/i.test(k) && typeof v === "number") return fmt.rate(v);
        if (/bytes/i.test(k) && typeof v === "number") return fmt.bytes(v);
        if (k === "seconds" && typeof v === "number") return v < 10 ? `${v.toFixed(1)} s` : fmt.duration(v);
        if (k === "mode" && modes[v]) return modes[v];
        if (typeof v === "boolean") return v ? "yes" : "no";
        if (/^[0-9a-f]{64}$/i.test(String(v))) return h("code", { title: v }, `${String(v).slice(0, 12)}…`);
        return String(v);
      };
      const rows = Object.entries(res).filter(([k, v]) => typeof v !== "object" && k !== "readData")
        .map(([k, v]) => [h("dt", null, k === "bytesRead" && task.kind === "check" ? "Data read" : label(k)), h("dd", null, value(k, v))]);
      // A restore names the VM it made or overwrote, with a link to its page.
      const vm = res.vm && typeof res.vm === "object" && res.vm.name ? res.vm : null;
      if (vm) {
        const name = vm.instanceUuid ? h("a", { href: `#/vms/${encodeURIComponent(vm.instanceUuid)}`, id: "task-result-vm" }, vm.name) : vm.name;
        rows.unshift([h("dt", null, res.mode === "new" || res.mode === "rehearsal" ? "Restored as" : "VM"), h("dd", null, name)]);
      }
      result.append(h("dl", { class: "facts", id: "task-result" }, rows));
    }
  }
  drawFacts();

  let es = null;
  let retry = 0;
  let closed = false;
  function open() {
    if (closed) return;
    clear(log);
    es = new EventSource(`/api/v1/tasks/${encodeURIComponent(id)}/events`);
    const onTask = (m) => {
      try { task = JSON.parse(m.data); } catch { return; }
      bar.update(task);
      drawFacts();
      // The server ends the stream after the final state and its log lines;
      // the "error" that follows closes it for good.
    };
    es.addEventListener("state", onTask);
    es.addEventListener("progress", onTask);
    es.addEventListener("log", (m) => {
      let l;
      try { l = JSON.parse(m.data); } catch { return; }
      const lvl = String(l.level || "info").toLowerCase();
      log.append(h("span", { class: `lvl-${lvl}` }, `${fmt.time(l.time)} ${lvl.toUpperCase()} ${l.message}\n`));
      log.scrollTop = log.scrollHeight;
    });
    es.addEventListener("error", () => {
      es.close();
      if (!isFinal(task) && !closed) retry = setTimeout(open, 2000);
    });
  }
  open();
  return () => { closed = true; clearTimeout(retry); if (es) es.close(); };
}

export default {
  route: "#/tasks",
  title: "Tasks",
  nav: true,
  async render(root, ctx) {
    if (ctx.params.length) return renderDetail(root, ctx, ctx.params[0]);
    return renderList(root, ctx);
  },
};
