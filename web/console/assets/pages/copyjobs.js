// Copy jobs (#/copy-jobs, #/copy-jobs/new, #/copy-jobs/<id>): restore
// points copied from a source to a target repository in a window, with the
// target's own retention. The list with run now and the last run, the
// create/edit form, and one job's runs.
import { h, clear, field, table } from "../lib/dom.js";
import { ensureCSS, stateBadge, errorText } from "./jobs-common.js";

const DAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"];
const KEEP = ["last", "daily", "weekly", "monthly", "quarterly", "yearly"];

// describeWindow says a window in words: "monday, tuesday 01:00-05:00 (UTC)".
export function describeWindow(w) {
  if (!w || !w.days) return "no window";
  const byRange = new Map();
  for (const d of DAYS) for (const r of w.days[d] || []) byRange.set(r, [...(byRange.get(r) || []), d]);
  if (!byRange.size) return "no window";
  const parts = [...byRange].map(([r, ds]) => `${ds.length === 7 ? "every day" : ds.join(", ")} ${r}`);
  return `${parts.join("; ")} (${w.location || "UTC"})`;
}

// describeRetention says what the target keeps: "last 7, weekly 4".
export function describeRetention(r) {
  const parts = KEEP.filter((k) => r && r[k] > 0).map((k) => `${k} ${r[k]}`);
  return parts.length ? `keeps ${parts.join(", ")}` : "keeps nothing";
}

// describeLimit words a copy job's upload limit (MB/s) and its windows.
export function describeLimit(j) {
  const base = j && j.uploadLimitMBps > 0 ? `${j.uploadLimitMBps} MB/s` : "unlimited";
  const n = ((j && j.uploadSchedule) || []).length;
  return n ? `${base}, other limits in ${n} window${n === 1 ? "" : "s"}` : base;
}

function describeSelection(j) {
  const vms = j.vms || [];
  const jobs = j.jobs || [];
  if (!vms.length && !jobs.length) return "every VM";
  return [jobs.length ? `points of ${jobs.join(", ")}` : "", vms.length ? `VMs ${vms.join(", ")}` : ""].filter(Boolean).join(" and ");
}

function runSummary(ctx, r) {
  if (!r) return "never run";
  const parts = [`${r.pointsCopied} copied`, ctx.fmt.bytes(r.bytesSent) + " sent"];
  if (r.pointsSkipped) parts.push(`${r.pointsSkipped} already there`);
  if (r.pointsRemoved) parts.push(`${r.pointsRemoved} removed by retention`);
  return parts.join(", ");
}

async function runNow(ctx, id, after) {
  try {
    const res = await ctx.api("POST", `/copy-jobs/${encodeURIComponent(id)}/run`);
    ctx.toast(`Copy started (${res.run}).`, "success");
    after();
  } catch (e) {
    ctx.toast(errorText(e), "error");
  }
}

async function listPage(root, ctx) {
  const box = h("div", { id: "copy-jobs-list" });
  root.append(box);
  if (ctx.header && ctx.can("administrator")) ctx.header.append(h("a", { class: "button primary", href: "#/copy-jobs/new", id: "new-copy-job" }, "New copy job"));
  const load = async () => {
    let jobs;
    try {
      jobs = await ctx.api("GET", "/copy-jobs");
    } catch (e) {
      clear(box).append(h("p", { class: "form-error", role: "alert" }, errorText(e)));
      return;
    }
    clear(box).append(table("!Copy jobs", [
      { label: "Name", cell: (j) => h("a", { href: `#/copy-jobs/${encodeURIComponent(j.id)}` }, j.name || j.id) },
      { label: "From → to", cell: (j) => `${j.source} → ${j.target}` },
      { label: "Copies", cell: (j) => describeSelection(j) },
      { label: "Window", cell: (j) => (j.enabled ? describeWindow(j.window) : "disabled (run now only)") },
      { label: "Target keeps", cell: (j) => describeRetention(j.retention) },
      {
        label: "Last run", cell: (j) => j.running
          ? [stateBadge(h, "running"), ` ${j.running.pointsDone} of ${j.running.pointsTotal} points, ${ctx.fmt.bytes(j.running.bytesSent)} sent`]
          : j.lastRun ? [stateBadge(h, j.lastRun.state), " ", ctx.fmt.time(j.lastRun.start), " · ", runSummary(ctx, j.lastRun)] : "never run",
      },
      {
        label: "Actions", cell: (j) => ctx.can("operator")
          ? h("button", { type: "button", class: "p2-small", "data-run": j.id, "aria-label": `Run ${j.name || j.id} now`, onclick: () => runNow(ctx, j.id, load) }, "Run now")
          : "",
      },
    ], jobs, "No copy job yet. A copy job sends restore points to a second repository (an S3 bucket offsite, say), only the data that repository lacks."));
  };
  await load();
  const unsub = ctx.stream(null, (e) => { if (String(e.kind || "").startsWith("copy.")) load(); });
  return () => unsub();
}

function num(name, value) {
  return h("input", { type: "number", min: "0", max: "1000", name, value: String(value || 0), class: "p2-num" });
}

async function formPage(root, ctx, id) {
  const editing = id && id !== "new";
  const [repos, jobs, job] = await Promise.all([
    ctx.api("GET", "/repositories").catch(() => []),
    ctx.api("GET", "/jobs").catch(() => []),
    editing ? ctx.api("GET", `/copy-jobs/${encodeURIComponent(id)}`) : Promise.resolve(null),
  ]);
  const title = document.getElementById("page-title");
  if (title) title.textContent = editing ? `Copy job: ${job.name || job.id}` : "New copy job";
  const j = job || { id: "", name: "", source: repos[0]?.name || "", target: repos[1]?.name || "", vms: [], jobs: [], enabled: true,
    window: { location: "UTC", days: Object.fromEntries(DAYS.map((d) => [d, ["01:00-05:00"]])) }, retention: { last: 7, weekly: 4 } };
  const repoSelect = (name, value) => h("select", { name }, repos.map((r) => h("option", { value: r.name, selected: r.name === value }, r.name)));
  const firstRange = (() => { for (const d of DAYS) if ((j.window.days[d] || []).length) return j.window.days[d][0]; return "01:00-05:00"; })();
  const [from, to] = firstRange.split("-");
  const dayBoxes = DAYS.map((d) => h("label", { class: "p2-check" }, h("input", { type: "checkbox", name: `day-${d}`, checked: (j.window.days[d] || []).length > 0 }), ` ${d}`));
  const jobBoxes = jobs.map((b) => h("label", { class: "p2-check" }, h("input", { type: "checkbox", name: "job", value: b.id, checked: (j.jobs || []).includes(b.id) }), ` ${b.name || b.id}`));
  const form = h("form", { id: "copy-job-form", novalidate: true },
    h("div", { class: "form-error", role: "alert", hidden: true }),
    field("Id", h("input", { name: "id", value: j.id, required: true, readonly: editing, pattern: "[a-z0-9][a-z0-9._-]*" }), "lower-case letters, digits, '.', '_' and '-'"),
    field("Name", h("input", { name: "name", value: j.name })),
    field("Source repository", repoSelect("source", j.source)),
    field("Target repository", repoSelect("target", j.target), "another repository: an S3 bucket offsite, a second disk"),
    h("fieldset", { "data-field": "jobs" }, h("legend", null, "Copy the points of these backup jobs"), jobBoxes.length ? jobBoxes : h("p", { class: "hint" }, "No backup job.")),
    field("…and of these VMs", h("input", { name: "vms", value: (j.vms || []).join(", ") }), "names or instance UUIDs, comma-separated; nothing here and no job ticked: every VM"),
    h("fieldset", { "data-field": "window" }, h("legend", null, "Window"), dayBoxes,
      field("Opens", h("input", { type: "time", name: "from", value: from })),
      field("Closes", h("input", { type: "time", name: "to", value: to }), "a copy still running at the close stops and resumes in the next window"),
      field("Time zone", h("input", { name: "location", value: j.window.location || "UTC" }))),
    h("fieldset", { "data-field": "retention" }, h("legend", null, "The target keeps"), KEEP.map((k) => field(k, num(k, j.retention[k])))),
    field("Upload limit (MB/s)", h("input", { type: "number", name: "uploadLimitMBps", min: "0", step: "any", value: j.uploadLimitMBps ? String(j.uploadLimitMBps) : "" }),
      (j.uploadSchedule || []).length ? `10^6 bytes per second; empty: unlimited. The ${j.uploadSchedule.length} window(s) of other limits set through the API are kept.` : "what the copy sends, in 10^6 bytes per second; empty: unlimited (the target repository's own limit still applies)"),
    h("label", { class: "p2-check" }, h("input", { type: "checkbox", name: "enabled", checked: j.enabled }), " Enabled (copy in the window; disabled jobs run only on demand)"),
    h("div", { class: "p2-actions" },
      h("button", { type: "submit", class: "primary", id: "save-copy-job" }, "Save"),
      h("a", { class: "button", href: "#/copy-jobs" }, "Cancel")));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    ctx.fieldErrors(form, null);
    const f = new FormData(form);
    const range = `${f.get("from")}-${f.get("to") === "00:00" ? "24:00" : f.get("to")}`;
    const body = {
      id: String(f.get("id") || "").trim(), name: String(f.get("name") || "").trim(),
      source: f.get("source"), target: f.get("target"),
      jobs: f.getAll("job").map(String),
      vms: String(f.get("vms") || "").split(",").map((s) => s.trim()).filter(Boolean),
      window: { location: String(f.get("location") || "UTC").trim(), days: Object.fromEntries(DAYS.filter((d) => f.get(`day-${d}`)).map((d) => [d, [range]])) },
      retention: Object.fromEntries(KEEP.map((k) => [k, Number(f.get(k) || 0)])),
      enabled: !!f.get("enabled"),
      uploadLimitMBps: Number(f.get("uploadLimitMBps") || 0),
    };
    // The form has no editor for the windows: a save keeps them.
    if ((j.uploadSchedule || []).length) body.uploadSchedule = j.uploadSchedule;
    try {
      if (editing) await ctx.api("PUT", `/copy-jobs/${encodeURIComponent(id)}`, body);
      else await ctx.api("POST", "/copy-jobs", body);
      ctx.toast("Copy job saved.", "success");
      ctx.navigate(`#/copy-jobs/${encodeURIComponent(body.id)}`);
    } catch (e) {
      ctx.fieldErrors(form, e);
    }
  });
  root.append(form);
}

async function detailPage(root, ctx, id) {
  const job = await ctx.api("GET", `/copy-jobs/${encodeURIComponent(id)}`);
  const title = document.getElementById("page-title");
  if (title) title.textContent = `Copy job: ${job.name || job.id}`;
  const runsBox = h("div", { id: "copy-runs" });
  const progress = h("p", { id: "copy-progress", "aria-live": "polite" });
  if (ctx.header) {
    ctx.header.append(h("a", { class: "button", href: "#/copy-jobs" }, "All copy jobs"));
    if (ctx.can("administrator")) ctx.header.append(h("a", { class: "button", href: `#/copy-jobs/${encodeURIComponent(id)}/edit`, id: "edit-copy-job" }, "Edit"));
    if (ctx.can("operator")) ctx.header.append(h("button", { type: "button", class: "primary", id: "run-copy-job", onclick: () => runNow(ctx, id, load) }, "Run now"));
    if (ctx.can("administrator")) {
      ctx.header.append(h("button", {
        type: "button", id: "delete-copy-job", class: "danger", onclick: async () => {
          if (!(await ctx.confirm(`Delete copy job ${job.name || job.id}? The copies already in ${job.target} stay.`, { danger: true }))) return;
          try {
            await ctx.api("DELETE", `/copy-jobs/${encodeURIComponent(id)}`);
            ctx.navigate("#/copy-jobs");
          } catch (e) { ctx.toast(errorText(e), "error"); }
        },
      }, "Delete"));
    }
  }
  root.append(
    h("dl", { class: "p2-words", id: "copy-job-summary" },
      h("dt", null, "From → to"), h("dd", null, `${job.source} → ${job.target}`),
      h("dt", null, "Copies"), h("dd", null, describeSelection(job)),
      h("dt", null, "Window"), h("dd", null, job.enabled ? describeWindow(job.window) : "disabled (run now only)"),
      h("dt", null, "Target keeps"), h("dd", null, describeRetention(job.retention)),
      h("dt", null, "Upload limit"), h("dd", { id: "copy-job-limit" }, describeLimit(job))),
    progress,
    h("section", { "aria-labelledby": "copy-runs-title" }, h("h2", { id: "copy-runs-title" }, "Runs"), runsBox));
  let timer = 0;
  async function load() {
    clearTimeout(timer);
    const [j, runs] = await Promise.all([ctx.api("GET", `/copy-jobs/${encodeURIComponent(id)}`), ctx.api("GET", `/copy-jobs/${encodeURIComponent(id)}/runs?limit=100`)]);
    progress.textContent = j.running ? `Copying: ${j.running.pointsDone} of ${j.running.pointsTotal} restore points, ${ctx.fmt.bytes(j.running.bytesSent)} sent${j.running.vm ? ` (now ${j.running.vm})` : ""}.` : "";
    clear(runsBox).append(table("!Copy runs", [
      { label: "Started", cell: (r) => ctx.fmt.time(r.start) },
      { label: "Trigger", cell: (r) => r.trigger },
      { label: "State", cell: (r) => stateBadge(h, r.state) },
      { label: "Copied", class: "num", cell: (r) => String(r.pointsCopied) },
      { label: "Already there", class: "num", cell: (r) => String(r.pointsSkipped) },
      { label: "Removed", class: "num", cell: (r) => String(r.pointsRemoved) },
      { label: "Sent", class: "num", cell: (r) => ctx.fmt.bytes(r.bytesSent) },
      { label: "Error", cell: (r) => [r.error || "", ...(r.warnings || []).map((w) => h("span", { class: "hint p2-block" }, w))] },
    ], runs, "No run yet."));
    if (j.running) timer = setTimeout(() => load().catch(() => {}), 2000);
  }
  await load();
  const unsub = ctx.stream(null, (e) => { if (String(e.kind || "").startsWith("copy.")) load().catch(() => {}); });
  return () => { clearTimeout(timer); unsub(); };
}

export default {
  route: "#/copy-jobs",
  title: "Copy jobs",
  nav: true,
  role: "restore-only",
  async render(root, ctx) {
    await ensureCSS();
    const [id, sub] = ctx.params || [];
    if (!id) return listPage(root, ctx);
    if (id === "new" || sub === "edit") return formPage(root, ctx, id);
    return detailPage(root, ctx, id);
  },
};
