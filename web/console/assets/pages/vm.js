// One VM (#/vms/{instance UUID}): what the appliance knows of it in one
// place — where it lives in vCenter, its jobs, its restore points (sizes,
// consistency, warnings) and the runs that backed it up or failed to, with
// the last error and what to do next.
import { ensureCSS, errorText } from "./jobs-common.js";
import { consistency } from "./restore-timeline.js";

// At most this many runs per job are read: the page shows recent history.
const RUNS_PER_JOB = 50;

export default {
  route: "#/vms",
  title: "VM",
  nav: false,
  async render(root, ctx) {
    await ensureCSS();
    const h = ctx.h;
    const { fmt } = ctx;
    const key = (ctx.params && ctx.params[0]) || "";
    const title = document.getElementById("page-title");
    if (!key) {
      root.append(h("p", null, "No VM was named. "), h("a", { href: "#/inventory" }, "Choose one in the inventory"));
      return;
    }
    root.append(h("p", { class: "loading" }, "Loading the VM…"));
    const optional = (p) => p.catch((e) => (e.status === 503 || e.status === 404 || e.status === 501 ? null : Promise.reject(e)));
    const [vms, inv, jobs, tags] = await Promise.all([
      ctx.api("GET", "/vms"),
      optional(ctx.api("GET", "/inventory")),
      ctx.api("GET", "/jobs").catch(() => []),
      optional(ctx.api("GET", "/tags")),
    ]);
    const vm = (vms || []).find((v) => v.instanceUuid === key) || (vms || []).find((v) => v.name === key);
    root.replaceChildren();
    if (!vm) {
      if (title) title.textContent = "VM not found";
      root.append(h("p", { class: "empty", id: "vm-missing" }, `The appliance knows no VM ${key}: it is neither in vCenter nor in a restore point. `), h("a", { href: "#/inventory" }, "Back to the inventory"));
      return;
    }
    const name = vm.name || vm.instanceUuid;
    if (title) title.textContent = `VM: ${name}`;
    document.title = `VM ${name} — vmvault`;

    const nodes = (inv && inv.nodes) || [];
    const node = nodes.find((n) => n.type === "vm" && (n.instanceUuid === vm.instanceUuid || (vm.moref && n.id === vm.moref)));
    const jobNames = new Map((jobs || []).map((j) => [j.id, j.name]));
    const tagNames = new Map(((tags && (tags.tags || tags)) || []).map((t) => [t.id, t.category ? `${t.category} / ${t.name}` : t.name]));

    const [points, runs] = await Promise.all([
      ctx.api("GET", `/restore-points?vm=${encodeURIComponent(vm.instanceUuid)}`).catch(() => []),
      Promise.all((vm.jobs || []).map((j) => ctx.api("GET", `/jobs/${encodeURIComponent(j)}/runs?limit=${RUNS_PER_JOB}`).catch(() => []))),
    ]);
    // This VM's outcome in each run, newest first.
    const history = [];
    (vm.jobs || []).forEach((job, i) => {
      for (const r of runs[i] || []) {
        const o = (r.vms || []).find((x) => x.instanceUuid === vm.instanceUuid);
        if (o) history.push({ job, run: r, o, when: o.started || r.started });
      }
    });
    history.sort((a, b) => String(b.when).localeCompare(String(a.when)));
    const lastFailure = history.find((x) => x.o.state === "failed" || x.o.state === "not-run" || x.o.state === "interrupted");
    const lastSuccess = history.find((x) => x.o.state === "succeeded");
    const pts = points || [];
    const last = pts[0] || vm.lastPoint || null;

    // The newest of the job runs' last success and the newest point (an
    // ad-hoc backup is a backup too).
    function lastBackup() {
      const byJob = lastSuccess ? { t: lastSuccess.o.finished || lastSuccess.when, by: jobNames.get(lastSuccess.job) || lastSuccess.job } : null;
      const byPoint = pts[0] ? { t: pts[0].time, by: pts[0].job ? jobNames.get(pts[0].job) || pts[0].job : "ad hoc" } : null;
      const b = !byJob ? byPoint : !byPoint ? byJob : Date.parse(byPoint.t) > Date.parse(byJob.t) ? byPoint : byJob;
      return b ? `${fmt.time(b.t)} (${b.by})` : "never";
    }
    // Protected means a job covers the VM (GET /vms): the words say why not.
    function protectionWords(v) {
      if (v.protected) return [h("span", { class: "badge badge-protected" }, "protected")];
      if (v.adHoc) return [h("span", { class: "badge badge-warning" }, "ad hoc only"), " its restore points come from Back up now or an earlier job: no enabled job selects it, so nothing keeps them current."];
      if (v.overdue) return [h("span", { class: "badge badge-warning" }, "overdue"), " its job has not backed it up since the job's last window."];
      return [h("span", { class: "badge badge-unprotected" }, "not protected")];
    }
    const dl = (rows) => h("dl", { class: "p2-dl" }, rows.filter(Boolean).flatMap(([k, v]) => [h("dt", null, k), h("dd", null, v)]));
    const cfg = last && last.config;
    const capacity = last && last.disks ? last.disks.reduce((n, d) => n + (d.capacity || 0), 0) : 0;
    const where = node ? node.path || "" : "";
    const power = node && node.powerState ? node.powerState.replace(/^powered/, "powered ").toLowerCase() : "";

    const summary = h("section", { "aria-labelledby": "vm-summary-h", id: "vm-summary" },
      h("h2", { id: "vm-summary-h" }, "Summary"),
      dl([
        ["Protection", h("span", { id: "vm-protection" }, ...protectionWords(vm))],
        ["In vCenter", vm.inInventory ? (where || "yes") : "no longer: only its restore points remain"],
        power ? ["Power", power + (node.template ? " (template)" : "")] : null,
        cfg && cfg.guestId ? ["Guest OS", cfg.guestId] : null,
        cfg ? ["Hardware", `${fmt.plural(cfg.numCpu, "vCPU")}, ${fmt.bytes((cfg.memoryMb || 0) * 1048576)} memory`] : null,
        capacity ? ["Disks", `${fmt.plural(last.disks.length, "disk")}, ${fmt.bytes(capacity)} provisioned`] : null,
        ["Jobs", (vm.jobs || []).length ? h("span", null, (vm.jobs || []).flatMap((j, i) => [i ? ", " : "", h("a", { href: `#/jobs/${encodeURIComponent(j)}` }, jobNames.get(j) || j)])) : "no job selects it"],
        (vm.tags || []).length ? ["Tags", vm.tags.map((t) => tagNames.get(t) || t).join(", ")] : null,
        ["Restore points", pts.length ? `${fmt.plural(pts.length, "restore point")}, newest ${fmt.time(pts[0].time)}` : "none yet"],
        last && (last.warnings || []).length
          ? ["Warnings", h("ul", { class: "p2-run-warnings", id: "vm-warnings" }, last.warnings.map((w) => h("li", null, h("span", { class: "badge badge-warning" }, "warning"), " ", w)))]
          : null,
        ["Last backup", lastBackup()],
        lastFailure && (!lastSuccess || String(lastFailure.when) > String(lastSuccess.when))
          ? ["Last error", h("span", { class: "form-error", id: "vm-last-error" }, `${lastFailure.o.error || lastFailure.o.state} — ${fmt.time(lastFailure.when)}. `, nextStep(lastFailure.o.error || ""))]
          : null,
        ["Instance UUID", h("code", null, vm.instanceUuid)],
      ]),
    );

    const actions = h("div", { class: "page-actions" },
      vm.inInventory && ctx.can("operator") ? backupButton() : null,
      pts.length ? h("a", { class: "button", href: `#/restore?vm=${encodeURIComponent(vm.instanceUuid)}` }, "Restore…") : null,
      pts.length ? h("a", { class: "button", href: `#/files?vm=${encodeURIComponent(name)}` }, "Find files…") : null,
      h("a", { class: "button", href: `#/restore-points?vm=${encodeURIComponent(vm.instanceUuid)}` }, "All its restore points"));

    function backupButton() {
      const b = h("button", { type: "button", id: "vm-backup-now" }, "Back up now");
      b.addEventListener("click", async () => {
        b.disabled = true;
        try {
          const task = await ctx.api("POST", "/backups", { vms: [vm.instanceUuid] });
          actions.append(ctx.progress(task));
          ctx.toast(`Backup of ${name} started.`, "success");
        } catch (e) {
          b.disabled = false;
          ctx.toast(`Could not start the backup of ${name}: ${errorText(e)}`, "error");
        }
      });
      return b;
    }

    const pointRows = pts.slice(0, 100).map((p) => {
      const c = consistency(p);
      const stored = (p.disks || []).reduce((n, d) => n + (d.newBytes || 0), 0);
      return h("tr", { "data-point": p.id },
        h("td", { "data-label": "Time", class: "nowrap" }, h("a", { href: `#/restore-points?vm=${encodeURIComponent(vm.instanceUuid)}&q=${encodeURIComponent(p.id.slice(0, 12))}` }, fmt.time(p.time))),
        h("td", { "data-label": "Point", class: "nowrap" }, h("code", null, p.id.slice(0, 12))),
        h("td", { "data-label": "Job" }, p.job ? jobNames.get(p.job) || p.job : "ad hoc"),
        h("td", { "data-label": "Repository" }, p.repository || ""),
        h("td", { "data-label": "Consistency" }, h("span", { class: `badge p2-state p2-state-${c.kind === "good" ? "ok" : c.kind === "bad" ? "bad" : "warn"}`, title: c.text }, c.label)),
        h("td", { "data-label": "Size", class: "nowrap" }, fmt.bytes(p.logicalBytes || 0)),
        h("td", { "data-label": "New data", class: "nowrap" }, fmt.bytes(stored)),
        h("td", { "data-label": "Notes", class: "vm-point-notes" }, p.locked ? h("span", { class: "badge" }, "locked") : null,
          (p.warnings || []).length ? h("ul", { class: "p2-run-warnings" }, p.warnings.map((w) => h("li", null, h("span", { class: "badge badge-warning" }, "warning"), " ", w))) : null),
      );
    });
    const pointsSec = h("section", { "aria-labelledby": "vm-points-h", id: "vm-points" },
      h("h2", { id: "vm-points-h" }, "Restore points"),
      pointRows.length
        ? h("div", { class: "table-wrap" }, h("table", { class: "p2-table" },
          h("caption", { class: "visually-hidden" }, `Restore points of ${name}, newest first`),
          h("thead", null, h("tr", null, ["Time", "Point", "Job", "Repository", "Consistency", "Size", "New data", "Notes"].map((c) => h("th", { scope: "col" }, c)))),
          h("tbody", null, pointRows)))
        : h("p", { class: "empty" }, "No restore point yet."),
      pts.length > 100 ? h("p", { class: "hint" }, `The newest 100 of ${pts.length} are shown.`) : null);

    const runRows = history.slice(0, 100).map(({ job, run, o, when }) =>
      h("tr", { "data-run": run.id },
        h("td", { "data-label": "Started", class: "nowrap" }, fmt.time(when)),
        h("td", { "data-label": "Job" }, h("a", { href: `#/jobs/${encodeURIComponent(job)}` }, jobNames.get(job) || job)),
        h("td", { "data-label": "Trigger", class: "nowrap" }, run.trigger),
        h("td", { "data-label": "Result" }, h("span", { class: `badge p2-state p2-state-${o.state === "succeeded" ? "ok" : o.state === "running" || o.state === "pending" ? "warn" : "bad"}` }, o.state)),
        h("td", { "data-label": "Read", class: "nowrap" }, fmt.bytes(o.bytesRead || 0)),
        h("td", { "data-label": "New data", class: "nowrap" }, fmt.bytes(o.newBytes || 0)),
        h("td", { "data-label": "Attempts", class: "nowrap" }, String(o.attempts || (o.state === "pending" ? 0 : 1))),
        h("td", { "data-label": "Error" }, o.error || ""),
      ));
    const runsSec = h("section", { "aria-labelledby": "vm-runs-h", id: "vm-runs" },
      h("h2", { id: "vm-runs-h" }, "Job runs"),
      runRows.length
        ? h("div", { class: "table-wrap" }, h("table", { class: "p2-table" },
          h("caption", { class: "visually-hidden" }, `Job runs that included ${name}, newest first`),
          h("thead", null, h("tr", null, ["Started", "Job", "Trigger", "Result", "Read", "New data", "Attempts", "Error"].map((c) => h("th", { scope: "col" }, c)))),
          h("tbody", null, runRows)))
        : h("p", { class: "empty" }, (vm.jobs || []).length ? "No run of its jobs has included it yet." : "No job selects this VM: create one in Jobs, or back it up now."));

    root.append(actions, summary, pointsSec, runsSec);
  },
};

// nextStep says what an administrator can do about a backup error.
function nextStep(err) {
  const e = err.toLowerCase();
  if (e.includes("quiesc")) return "Check VMware Tools in the guest, or let the job fall back to crash-consistent points.";
  if (e.includes("snapshot")) return "Look at the VM's snapshots in vCenter (consolidation needed, disk space on its datastore).";
  if (e.includes("window")) return "Widen the job's window or let more VMs run at once.";
  if (e.includes("repository") || e.includes("no space") || e.includes("disk full")) return "Check the repository's free space on the Repositories page.";
  if (e.includes("login") || e.includes("session") || e.includes("vcenter")) return "Check the vCenter connection in Settings.";
  return "The job retries while its window is open; Back up now tries again at once.";
}
