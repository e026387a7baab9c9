// Instant recoveries (#/instant-recoveries): the VMs running straight from
// restore points through the appliance's NFS export (started from the
// restore wizard), with their state, host, NFS datastore, how full each
// overlay is, and per running session "Migrate to production" (Storage
// vMotion to a datastore while it runs) and "Stop" (power off, unregister,
// drop what it wrote). The list follows the sessions' tasks on the shared
// stream and polls while a session is active (overlay use has no event).
import { h, clear, table } from "../lib/dom.js";
import { ensureCSS, stateBadge, errorText, taskOf, watchTask } from "./jobs-common.js";

const ACTIVE = new Set(["starting", "running", "migrating"]);
const KINDS = { starting: "running", running: "ok", migrating: "running", done: "ok", stopped: "neutral", failed: "bad" };

// Overlay use at or above WARN (a share of the limit) is shown as a warning:
// a full overlay fails the VM's writes.
export const WARN = 0.8;

// overlayLevel says how full an overlay is: "ok", "warn" (above WARN) or
// "full"; "" without a limit (a session that ended has no overlay).
export function overlayLevel(used, limit) {
  if (!(limit > 0)) return "";
  const share = used / limit;
  if (share >= 1) return "full";
  if (share > WARN) return "warn";
  return "ok";
}

function badge(state) {
  const s = String(state || "unknown");
  return h("span", { class: `badge p2-state p2-state-${KINDS[s] || "neutral"}`, "data-state": s }, s);
}

// overlayCell is a meter of the overlay's use with the words beside it
// (colour is never the only signal); ctx needs fmt and nothing else.
export function overlayCell(ctx, s) {
  const used = s.overlayUsedBytes || 0;
  const limit = s.overlayLimitBytes || 0;
  const level = overlayLevel(used, limit);
  if (!level) return h("span", { class: "hint" }, "no overlay");
  const pct = Math.min(100, Math.floor((used / limit) * 100));
  const bar = h("span", { class: "p2-ir-bar", "aria-hidden": "true" }, h("span", { class: "p2-ir-fill" }));
  // The width is set from the module (CSP allows el.style, not style="").
  bar.firstChild.style.width = `${pct}%`;
  const words = `${ctx.fmt.bytes(used)} of ${ctx.fmt.bytes(limit)} (${pct}%)${level === "full" ? ", full: the VM's writes fail" : level === "warn" ? ", nearly full" : ""}`;
  return h(
    "div",
    { class: `p2-ir-overlay p2-ir-${level}`, "data-level": level, "data-percent": String(pct), role: "meter", "aria-valuemin": "0", "aria-valuemax": "100", "aria-valuenow": String(pct), "aria-valuetext": words, "aria-label": `Overlay of ${(s.vm && s.vm.name) || s.id}` },
    bar,
    h("span", { class: "p2-ir-words" }, words),
  );
}

// stateCell is a session's state word with what goes with it: isolated,
// the move's progress while migrating, the error of a failed one.
export function stateCell(ctx, s) {
  const out = [badge(s.state)];
  if (s.isolated && ACTIVE.has(s.state)) out.push(h("span", { class: "hint p2-block" }, "isolated"));
  if (s.state === "migrating") {
    const pct = Math.max(0, Math.min(100, s.progress || 0));
    const pid = `ir-progress-${s.id}`;
    out.push(
      h(
        "div",
        { class: "p2-ir-progress", "data-percent": String(pct) },
        h("label", { for: pid, class: "visually-hidden" }, `Moving ${(s.vm && s.vm.name) || s.id} to ${s.migrateTo || "production"}`),
        h("progress", { id: pid, max: "100", value: String(pct) }),
        h("span", { class: "hint" }, ` ${pct}% to ${s.migrateTo || "production"}`),
      ),
    );
  }
  if (s.state === "done" && s.migrateTo) out.push(h("span", { class: "hint p2-block" }, `moved to ${s.migrateTo}`));
  if (s.error) out.push(h("span", { class: "p2-ir-error p2-block" }, s.error));
  for (const w of s.warnings || []) out.push(h("span", { class: "hint p2-block" }, w));
  return out;
}

// migrateDialog asks for the production datastore; resolves to its name,
// or null when cancelled.
function migrateDialog(ctx, s, datastores) {
  return new Promise((resolve) => {
    const back = document.activeElement;
    const name = (s.vm && s.vm.name) || s.id;
    const select = h("select", { id: "ir-migrate-ds", name: "datastore", required: "" }, h("option", { value: "" }, "Choose a datastore…"), datastores.map((d) => h("option", { value: d.name }, d.free ? `${d.name} — ${ctx.fmt.bytes(d.free)} free` : d.name)));
    const err = h("p", { class: "field-error", id: "ir-migrate-error", role: "alert" });
    const cancel = h("button", { type: "button", id: "ir-migrate-cancel" }, "Cancel");
    const ok = h("button", { type: "submit", class: "primary", id: "ir-migrate-ok" }, "Migrate");
    const form = h(
      "form",
      { id: "ir-migrate-form", novalidate: "" },
      h("h2", { id: "ir-migrate-title" }, "Migrate to production"),
      h("p", { id: "ir-migrate-why" }, `Storage vMotion moves ${name}'s disks from the appliance's NFS export to the datastore you choose while the VM keeps running; then the NFS datastore is unmounted and the overlay removed.`),
      h("div", { class: "field" }, h("label", { for: "ir-migrate-ds" }, "Target datastore"), select),
      err,
      h("div", { class: "actions" }, cancel, ok),
    );
    const dlg = h("dialog", { id: "ir-migrate", "aria-labelledby": "ir-migrate-title", "aria-describedby": "ir-migrate-why" }, form);
    let result = null;
    dlg.addEventListener("close", () => {
      dlg.remove();
      if (back && back.isConnected && typeof back.focus === "function") back.focus();
      resolve(result);
    });
    cancel.addEventListener("click", () => dlg.close());
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      if (!select.value) {
        err.textContent = "Choose the datastore to move the VM to.";
        select.setAttribute("aria-invalid", "true");
        select.focus();
        return;
      }
      result = select.value;
      dlg.close();
    });
    document.body.append(dlg);
    dlg.showModal();
    select.focus();
  });
}

export default {
  route: "#/instant-recoveries",
  title: "Instant recoveries",
  nav: true,
  role: "restore-only",
  async render(root, ctx) {
    await ensureCSS();
    const box = h("div", { id: "instant-list" }, h("p", { class: "loading" }, "Loading…"));
    const status = h("p", { id: "instant-status", class: "p2-status", role: "status" });
    root.append(
      h("p", { class: "hint" }, "VMs running straight from restore points through the appliance's NFS export. Start one from the ", h("a", { href: "#/restore" }, "restore wizard"), " (Instant recovery). What a VM writes goes to an overlay on the appliance until it is moved to production."),
      status,
      box,
    );
    const watchers = [];
    let timer = 0;
    let gone = false;
    let targets = null;
    // While a dialog is open the list is not redrawn: the button that
    // opened it stays to take the focus back.
    let dialogs = 0;
    const asking = async (p) => {
      dialogs += 1;
      try {
        return await p;
      } finally {
        dialogs -= 1;
      }
    };

    // datastores the VM can move to: every datacenter's, without the
    // sessions' own NFS datastores.
    async function datastores() {
      if (!targets) targets = await ctx.api("GET", "/restore-targets");
      const seen = new Set();
      const out = [];
      for (const dc of targets.datacenters || [])
        for (const d of dc.datastores || [])
          if (!/^vmvault-/.test(d.name) && d.type !== "NFS" && !seen.has(d.name)) {
            seen.add(d.name);
            out.push(d);
          }
      return out;
    }

    // follow shows an action's task until it ends, then reloads.
    function follow(task, what) {
      if (!task) return load();
      const w = watchTask(ctx, task);
      watchers.push(w);
      clear(status).append(w.el);
      w.done.then((t) => {
        if (gone) return;
        clear(status);
        if (t.state === "succeeded") ctx.toast(`${what}: done.`, "success");
        else ctx.toast(`${what} ${t.state}: ${t.error || "see the task"}`, "error");
        load();
      });
      load();
    }

    async function migrate(s) {
      let list;
      try {
        list = await datastores();
      } catch (e) {
        ctx.toast(`The datastores are not available: ${errorText(e)}`, "error");
        return;
      }
      const ds = await asking(migrateDialog(ctx, s, list));
      if (!ds) return;
      try {
        const res = await ctx.api("POST", `/instant-recoveries/${encodeURIComponent(s.id)}/migrate`, { datastore: ds });
        ctx.toast(`Moving ${s.vm.name || s.id} to ${ds}.`, "info");
        follow(taskOf(res), `Migrate ${s.vm.name || s.id}`);
      } catch (e) {
        ctx.toast(`Not migrated: ${e.status === 403 ? e.message : errorText(e)}`, "error");
      }
    }

    async function stop(s) {
      const name = (s.vm && s.vm.name) || s.id;
      const ok = await asking(ctx.confirm(
        `Stop the instant recovery of ${s.sourceVm}? The VM ${name} is powered off and unregistered, the NFS datastore ${s.nfsDatastore} unmounted, and everything the VM wrote since it started is lost. The restore point itself is not changed.`,
        { danger: true, title: "Stop the instant recovery?", ok: "Stop" },
      ));
      if (!ok) return;
      try {
        const res = await ctx.api("POST", `/instant-recoveries/${encodeURIComponent(s.id)}/stop`);
        follow(taskOf(res), `Stop ${name}`);
      } catch (e) {
        ctx.toast(`Not stopped: ${e.status === 403 ? e.message : errorText(e)}`, "error");
      }
    }

    function actions(s) {
      if (s.state !== "running" || !ctx.can("operator")) return "";
      const name = (s.vm && s.vm.name) || s.id;
      return h(
        "div",
        { class: "p2-actions" },
        h("button", { type: "button", class: "p2-small", "data-migrate": s.id, "aria-label": `Migrate ${name} to production`, onclick: () => migrate(s) }, "Migrate to production"),
        h("button", { type: "button", class: "p2-small danger", "data-stop": s.id, "aria-label": `Stop ${name}`, onclick: () => stop(s) }, "Stop"),
      );
    }

    let loading = null;
    let again = false;
    async function load() {
      if (loading) {
        // An update came in while loading: load once more after it.
        again = true;
        return loading;
      }
      loading = (async () => {
        clearTimeout(timer);
        if (dialogs > 0) {
          timer = setTimeout(() => load(), 1000);
          return;
        }
        let list;
        try {
          list = await ctx.api("GET", "/instant-recoveries");
        } catch (e) {
          if (gone) return;
          clear(box).append(
            h("p", { class: e.status === 501 ? "notice" : "form-error", role: e.status === 501 ? "status" : "alert", id: "instant-unavailable" },
              e.status === 501 ? "Instant recovery is not set up on this appliance: the daemon needs its instant section (the NFS address the ESXi hosts mount, and their vmkernel networks) and a vCenter." : errorText(e)),
          );
          return;
        }
        if (gone) return;
        // Keep the focus on a row's button across a redraw.
        const focused = document.activeElement && box.contains(document.activeElement) ? document.activeElement : null;
        const refocus = focused && (focused.dataset.migrate ? `[data-migrate="${focused.dataset.migrate}"]` : focused.dataset.stop ? `[data-stop="${focused.dataset.stop}"]` : "");
        clear(box).append(
          table(
            "!Instant recovery sessions",
            [
              { label: "Source VM", cell: (s) => s.sourceVm || "" },
              { label: "VM", class: "p2-ir-vm", cell: (s) => (s.vm && s.vm.name) || "" },
              { label: "State", cell: (s) => stateCell(ctx, s) },
              { label: "Host", class: "nowrap", cell: (s) => (s.host ? s.host.split("/").pop() : "the only host") },
              { label: "NFS datastore", cell: (s) => h("span", { class: "mono p2-ir-nfs" }, s.nfsDatastore || "") },
              { label: "Overlay", cell: (s) => overlayCell(ctx, s) },
              { label: "Created", cell: (s) => ctx.fmt.time(s.created) },
              { label: "Actions", cell: (s) => actions(s) },
            ],
            list,
            "No instant recovery yet. In the restore wizard, choose a restore point and Instant recovery: the VM runs from the backup in about a minute.",
          ),
        );
        const rows = box.querySelectorAll("tbody tr");
        list.forEach((s, i) => {
          if (rows[i]) {
            rows[i].dataset.session = s.id;
            rows[i].dataset.state = s.state;
          }
        });
        if (refocus) {
          const el = box.querySelector(refocus);
          if (el) el.focus();
        }
        // Overlay use changes without an event: poll while a session is active.
        if (list.some((s) => ACTIVE.has(s.state))) timer = setTimeout(() => load(), 3000);
      })().finally(() => {
        loading = null;
        if (again && !gone) {
          again = false;
          load();
        }
      });
      return loading;
    }

    await load();
    const unsub = ctx.stream((t) => {
      if (String(t.kind || "").startsWith("instant-")) load();
    }, null);
    return () => {
      gone = true;
      clearTimeout(timer);
      watchers.forEach((w) => w.stop());
      unsub();
    };
  },
};
