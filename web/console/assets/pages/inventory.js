// Inventory: the vSphere tree with each VM's protection status, filter and
// search, and "Back up now". A folder draws its first VM_PAGE VMs and a
// "Show more" button for the rest, so 1,000 VMs in one folder cost 100
// rows to draw; filters match every VM, drawn or not.
//
// Protected means a job covers the VM (GET /vms protected: an enabled job
// selects it and its newest point is recent for that job); a VM whose
// points come from "Back up now" alone shows "ad hoc", one its job has not
// backed up since its last window "overdue". "Back up now" asks which
// repository and says what an ad-hoc point does not do; the backups started
// here show their progress above the tree, not inside it.
import { h, clear, field, badge } from "../lib/dom.js";

const VM_PAGE = 100;

const powerWords = { poweredOn: "on", poweredOff: "off", suspended: "suspended" };

const kindLabel = {
  datacenter: "Datacenter", folder: "Folder", cluster: "Cluster", host: "Host",
  "resource-pool": "Resource pool", vm: "VM",
};

export default {
  route: "#/inventory",
  title: "Inventory",
  nav: true,
  async render(root, ctx) {
    performance.mark("vmvault:inventory:start");
    const { fmt } = ctx;
    const search = h("input", { type: "search", name: "q", id: "inventory-search", placeholder: "VM name or path", value: ctx.query.get("q") || "" });
    const status = h("select", { name: "status", id: "inventory-status" },
      h("option", { value: "" }, "All VMs"),
      h("option", { value: "protected" }, "Protected"),
      h("option", { value: "unprotected" }, "Not protected"),
      h("option", { value: "adhoc" }, "Ad-hoc points only"),
      h("option", { value: "missing" }, "No longer in vCenter"));
    status.value = ctx.query.get("status") || "";
    const count = h("p", { class: "muted", id: "inventory-count", role: "status" });
    const filters = h("form", { class: "row", role: "search", "aria-label": "Filter VMs", onsubmit: (e) => e.preventDefault() },
      field("Search", search), field("Protection", status));
    const notice = h("div");
    const runsList = h("ul", { class: "inventory-runs-list" });
    const runs = h("section", { id: "inventory-runs", class: "panel", hidden: true, "aria-labelledby": "inventory-runs-title" },
      h("h2", { id: "inventory-runs-title" }, "Backups started here"), runsList);
    const tree = h("div", { id: "inventory-tree" });
    root.append(filters, count, notice, runs, tree);

    const [vms, inv, jobs, repos] = await Promise.all([
      ctx.api("GET", "/vms"),
      ctx.api("GET", "/inventory").catch((e) => {
        if (e.status === 503 || e.status === 404 || e.status === 501) return null;
        throw e;
      }),
      ctx.api("GET", "/jobs").catch(() => []),
      ctx.api("GET", "/repositories").catch(() => []),
    ]);
    const jobRepo = new Map((jobs || []).map((j) => [j.id, j.repository]));
    // Jobs by name, as administrators call them (the API lists their ids).
    const jobName = new Map((jobs || []).map((j) => [j.id, j.name || j.id]));
    performance.mark("vmvault:inventory:data");
    const byUUID = new Map((vms || []).map(v => [v.instanceUuid, v]));
    const byMoref = new Map((vms || []).filter(v => v.moref).map(v => [v.moref, v]));
    const running = new Set(); // vm uuids with a backup started here, not ended

    // Nodes: the inventory tree when vCenter answers; VMs only known from
    // restore points go under a synthetic "Not in vCenter" node.
    let nodes = [];
    if (inv && Array.isArray(inv.nodes)) {
      nodes = inv.nodes.map(n => ({ ...n }));
    } else {
      notice.append(h("p", { class: "notice" }, "The vCenter inventory is not available (no vCenter connection). Showing the VMs the appliance knows."));
    }
    const seen = new Set();
    for (const n of nodes) {
      if (n.type !== "vm") continue;
      const st = byUUID.get(n.instanceUuid) || byMoref.get(n.id);
      n.status = st || null;
      if (st) seen.add(st.instanceUuid);
    }
    const leftovers = (vms || []).filter(v => !seen.has(v.instanceUuid));
    if (leftovers.length) {
      const inVC = leftovers.filter(v => v.inInventory);
      const gone = leftovers.filter(v => !v.inInventory);
      if (inVC.length) {
        nodes.push({ id: "__vms", type: "folder", name: inv ? "Other VMs" : "VMs", parent: "", path: "" });
        for (const v of inVC) nodes.push({ id: `vm:${v.instanceUuid}`, type: "vm", name: v.name, parent: "__vms", path: "", status: v });
      }
      if (gone.length) {
        nodes.push({ id: "__gone", type: "folder", name: "No longer in vCenter", parent: "", path: "" });
        for (const v of gone) nodes.push({ id: `vm:${v.instanceUuid}`, type: "vm", name: v.name, parent: "__gone", path: "", status: v });
      }
    }
    const children = new Map();
    const ids = new Set(nodes.map(n => n.id));
    for (const n of nodes) {
      const p = n.parent && ids.has(n.parent) ? n.parent : "";
      if (!children.has(p)) children.set(p, []);
      children.get(p).push(n);
    }
    for (const list of children.values()) {
      list.sort((a, b) => (a.type === "vm") - (b.type === "vm") || a.name.localeCompare(b.name));
    }
    const collapsed = new Set();
    const shownVMs = new Map(); // folder id -> VMs drawn (default VM_PAGE)

    function vmMatches(n) {
      const q = search.value.trim().toLowerCase();
      const st = n.status;
      if (q && !(`${n.name} ${n.path || ""}`.toLowerCase().includes(q))) return false;
      switch (status.value) {
        case "protected": return !!(st && st.protected);
        case "adhoc": return !!(st && st.adHoc);
        case "unprotected": return !(st && st.protected);
        case "missing": return !!(st && !st.inInventory);
        default: return true;
      }
    }

    // askBackup asks which repository the point goes to and confirms;
    // resolves to the repository's name, or null when cancelled.
    function askBackup(n) {
      return new Promise((resolve) => {
        const back = document.activeElement;
        const st = n.status || {};
        const names = (repos || []).map((r) => r.name);
        const mine = (st.jobs || []).map((j) => jobRepo.get(j)).find((r) => names.includes(r));
        const sel = h("select", { id: "backup-repo", name: "repository" }, names.map((r) => h("option", { value: r }, r)));
        if (mine) sel.value = mine;
        const covered = !!(st.jobs && st.jobs.some((j) => (jobs || []).some((x) => x.id === j && x.enabled)));
        const ok = h("button", { type: "submit", class: "primary", id: "backup-ok" }, "Back up now");
        const cancel = h("button", { type: "button", id: "backup-cancel" }, "Cancel");
        const form = h("form", { method: "dialog", id: "backup-form" },
          h("h2", { id: "backup-title" }, `Back up ${n.name} now?`),
          h("p", { id: "backup-why" }, covered
            ? `One restore point of ${n.name} now, besides its job's backups.`
            : `One restore point of ${n.name} now. No enabled job selects it: this ad-hoc point is a copy, but ${n.name} stays not protected until a job backs it up on a schedule.`),
          names.length ? field("Repository", sel) : h("p", { class: "form-error" }, "No repository to back up to."),
          h("div", { class: "actions" }, cancel, ok));
        const dlg = h("dialog", { id: "backup-now", "aria-labelledby": "backup-title", "aria-describedby": "backup-why" }, form);
        let result = null;
        dlg.addEventListener("close", () => {
          dlg.remove();
          if (back && back.isConnected && typeof back.focus === "function") back.focus();
          resolve(result);
        });
        cancel.addEventListener("click", () => dlg.close());
        form.addEventListener("submit", (e) => {
          e.preventDefault();
          if (!names.length) return;
          result = sel.value;
          dlg.close();
        });
        if (!names.length) ok.disabled = true;
        document.body.append(dlg);
        dlg.showModal();
        (names.length ? sel : cancel).focus();
      });
    }

    async function backupNow(n, btn) {
      const uuid = n.status.instanceUuid;
      const repository = await askBackup(n);
      if (!repository) return;
      btn.disabled = true;
      try {
        const task = await ctx.api("POST", "/backups", { vms: [uuid], repository });
        const bar = ctx.progress(task);
        const item = h("li", { class: "inventory-run", "data-vm": n.name }, h("span", { class: "name" }, `${n.name} → ${repository}`), bar,
          h("a", { href: `#/tasks/${encodeURIComponent(task.id)}` }, "Task details"));
        running.add(uuid);
        runsList.prepend(item);
        runs.hidden = false;
        ctx.toast(`Backup of ${n.name} to ${repository} started.`, "success");
        bar.addEventListener("taskdone", (e) => {
          running.delete(uuid);
          btn.disabled = false;
          const t = e.detail;
          refresh();
          if (t.state === "succeeded") ctx.toast(`Backup of ${n.name} finished.`, "success");
          else ctx.toast(`Backup of ${n.name} ${t.state}: ${t.error || ""}`, "error");
        });
      } catch (e) {
        btn.disabled = false;
        ctx.toast(`Could not start the backup of ${n.name}: ${e.message}`, "error");
      }
    }

    // protection is the VM's badge: the word says why it is (not) protected.
    function protection(st) {
      if (st && st.protected) return badge("protected");
      if (st && st.adHoc) return h("span", { class: "badge badge-warning", "data-protection": "ad-hoc", title: "Restore points from Back up now only: no enabled job selects this VM." }, "ad hoc only");
      if (st && st.overdue) return h("span", { class: "badge badge-warning", "data-protection": "overdue", title: "Its job has not backed it up since the job's last window." }, "overdue");
      return badge("unprotected");
    }

    function vmRow(n) {
      const st = n.status;
      const last = st && st.lastPoint;
      const uuid = st && (st.instanceUuid);
      let action = null;
      if (st && st.inInventory !== false && ctx.can("operator")) {
        const btn = h("button", { type: "button", class: "backup-now", "aria-label": `Back up ${n.name} now`, disabled: uuid && running.has(uuid) ? true : null }, "Back up now");
        btn.addEventListener("click", () => backupNow(n, btn));
        action = h("span", { class: "vm-actions" }, btn,
          uuid ? h("a", { href: `#/restore-points?vm=${encodeURIComponent(uuid)}`, class: "button" }, "Restore points") : null);
      }
      return h("li", { "data-vm": n.name },
        h("div", { class: "inventory-node" },
          h("span", { class: "inventory-toggle", "aria-hidden": "true" }),
          h("span", { class: "kind" }, n.template ? "Template" : "VM"),
          h("span", { class: "name" }, uuid ? h("a", { href: `#/vms/${encodeURIComponent(uuid)}`, "aria-label": `${n.name}: details` }, n.name) : n.name),
          protection(st),
          n.powerState ? h("span", { class: `power power-${n.powerState}` }, powerWords[n.powerState] || n.powerState) : null,
          h("span", { class: "meta" },
            last ? `last good: ${fmt.time(last.time)}` : "no restore point",
            last && last.logicalBytes ? ` · ${fmt.bytes(last.logicalBytes)}` : "",
            st && st.jobs && st.jobs.length ? ` · ${st.jobs.length === 1 ? "job" : "jobs"}: ${st.jobs.map((j) => jobName.get(j) || j).join(", ")}` : "",
            st && st.points ? ` · ${st.points} point${st.points === 1 ? "" : "s"}` : ""),
          // The last backup's warnings belong next to the VM, not only in the API.
          last && last.warnings && last.warnings.length
            ? h("span", { class: "inventory-warnings" }, badge(fmt.plural(last.warnings.length, "warning"), "warning"), " ", last.warnings.join("; "))
            : null,
          action));
    }

    // build returns the <li> for n, or null when nothing under it matches.
    function build(n, filtering) {
      if (n.type === "vm") return vmMatches(n) ? vmRow(n) : null;
      const kids = [];
      const cap = shownVMs.get(n.id) || VM_PAGE;
      let drawn = 0;
      let hidden = 0;
      for (const c of children.get(n.id) || []) {
        if (c.type !== "vm") {
          const li = build(c, filtering);
          if (li) kids.push(li);
        } else if (vmMatches(c)) {
          if (drawn < cap) {
            kids.push(vmRow(c));
            drawn++;
          } else hidden++;
        }
      }
      if (hidden) {
        const moreId = `inv-more-${n.id.replace(/[^A-Za-z0-9_-]/g, "_")}`;
        const more = h("button", { type: "button", class: "inventory-more", id: moreId, "data-hidden": String(hidden) }, `Show ${Math.min(VM_PAGE, hidden)} more VMs (${hidden} not shown)`);
        more.addEventListener("click", () => {
          shownVMs.set(n.id, cap + VM_PAGE);
          draw();
          const again = document.getElementById(moreId);
          if (again) again.focus();
        });
        kids.push(h("li", null, more));
      }
      // Filtering hides branches without a match; empty folders (vCenter's
      // datastore and network folders) are noise here either way.
      if (!kids.length && (filtering || n.type === "folder")) return null;
      const open = filtering || !collapsed.has(n.id);
      const listId = `inv-${n.id.replace(/[^A-Za-z0-9_-]/g, "_")}`;
      const toggle = h("button", { type: "button", class: "inventory-toggle", "aria-expanded": String(open), "aria-controls": listId, "aria-label": `${open ? "Collapse" : "Expand"} ${kindLabel[n.type] || n.type} ${n.name}` }, open ? "▾" : "▸");
      toggle.addEventListener("click", () => {
        if (collapsed.has(n.id)) collapsed.delete(n.id); else collapsed.add(n.id);
        draw();
        const again = document.querySelector(`[aria-controls="${listId}"]`);
        if (again) again.focus();
      });
      return h("li", null,
        h("div", { class: "inventory-node" }, kids.length ? toggle : h("span", { class: "inventory-toggle", "aria-hidden": "true" }),
          h("span", { class: "kind" }, kindLabel[n.type] || n.type), h("span", { class: "name" }, n.name)),
        kids.length ? h("ul", { id: listId, hidden: !open }, kids) : null);
    }

    function draw() {
      const filtering = !!(search.value.trim() || status.value);
      const top = (children.get("") || []).map(n => build(n, filtering)).filter(Boolean);
      const total = nodes.filter(n => n.type === "vm").length;
      const matching = nodes.filter(n => n.type === "vm" && vmMatches(n)).length;
      count.textContent = filtering ? `${matching} of ${fmt.plural(total, "VM")} match.` : `${fmt.plural(total, "VM")}.`;
      clear(tree).append(top.length
        ? h("ul", { class: "inventory-tree", "aria-label": "vSphere inventory" }, top)
        : h("p", { class: "empty" }, filtering ? "No VM matches the filter." : "The inventory is empty."));
    }

    // A finished backup (from this page or anywhere: the shell's stream)
    // changes its VMs' last point, count and protection: fetch them again.
    let refreshing = null;
    async function refresh() {
      if (refreshing) return refreshing;
      refreshing = (async () => {
        let fresh;
        try { fresh = (await ctx.api("GET", "/vms")) || []; } catch { return; }
        const by = new Map(fresh.map(v => [v.instanceUuid, v]));
        for (const n of nodes) {
          if (n.type !== "vm" || !n.status) continue;
          const v = by.get(n.status.instanceUuid);
          if (v) n.status = v;
        }
        if (root.isConnected) draw();
      })().finally(() => { refreshing = null; });
      return refreshing;
    }
    const unsub = ctx.stream((task) => {
      if (task && task.kind === "backup" && ["succeeded", "failed", "cancelled"].includes(task.state)) refresh();
    }, null);

    let t = 0;
    search.addEventListener("input", () => { clearTimeout(t); t = setTimeout(draw, 150); });
    status.addEventListener("change", draw);
    draw();
    performance.mark("vmvault:inventory:ready");
    return () => { clearTimeout(t); unsub(); };
  },
};
