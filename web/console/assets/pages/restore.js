// The restore wizard (#/restore, #/restore?vm=<uuid>, #/restore?point=<id>):
// choose a VM (also one deleted from vCenter), a restore point on a timeline
// grouped by day, the kind of restore, the target (datacenter, folder,
// compute, datastore with free space, network mapping), a summary, then the
// live progress and the result with the new VM's name. Instant recovery
// runs the VM from the point through the appliance's NFS export instead
// (POST /instant-recoveries); its sessions are on #/instant-recoveries.
import { ensureCSS, pick, taskOf, watchTask, errorText } from "./jobs-common.js";
import { groupByDay, consistency, pointVM, vmChoices, pointSize, datastoreFit } from "./restore-timeline.js";

const MODES = [
  { id: "new", title: "Restore as a new VM", text: "Creates a new VM from the restore point next to the original. Nothing existing is touched." },
  { id: "original", title: "Restore over the original VM", text: "Overwrites the original VM's disks with the restore point. Everything written since is lost.", danger: true },
  { id: "rehearsal", title: "Rehearsal", text: "Restores a disconnected copy (NICs not connected) to prove the point restores, then leaves it for you to inspect and delete." },
  { id: "instant", title: "Instant recovery", text: "Runs the VM straight from the restore point in about a minute: the host mounts the point from the appliance over NFS and the VM starts from it; what it writes goes to an overlay on the appliance. Move it to production later (Storage vMotion while it runs) or stop it." },
  { id: "disk", title: "Single disk", text: "Restores one disk of the point and attaches it to a VM of your choice." },
  { id: "files", title: "Restore files", text: "Browse the point's file systems and download single files, folders or a selection as a zip. Nothing is restored to vSphere." },
];

export default {
  route: "#/restore",
  title: "Restore",
  nav: true,
  async render(root, ctx) {
    await ensureCSS();
    const h = ctx.h;
    const watchers = [];
    root.append(h("p", { class: "loading" }, "Loading…"));
    const [vms, points, settings] = await Promise.all([ctx.api("GET", "/vms").catch(() => []), ctx.api("GET", "/restore-points"), ctx.api("GET", "/settings").catch(() => ({}))]);
    // Days and times in the appliance's zone, as everywhere in the console.
    let tz = (settings && (settings.timeZone)) || undefined;
    try {
      new Intl.DateTimeFormat("en-GB", { timeZone: tz });
    } catch {
      tz = undefined;
    }
    root.replaceChildren();
    const choices = vmChoices(vms, points).filter((c) => c.points > 0);
    const invVMs = (vms || []).filter((v) => v.inInventory);

    const st = { vm: "", point: null, mode: "new", targets: null, targetsError: null };
    const qPoint = ctx.query.get("point");
    const qVM = ctx.query.get("vm");
    if (qPoint) {
      const p = points.find((x) => x.id === qPoint || x.id.startsWith(qPoint));
      if (p) {
        st.point = p;
        st.vm = pointVM(p);
      }
    } else if (qVM && choices.some((c) => c.key === qVM)) st.vm = qVM;

    const panels = {};
    const stepsList = ["vm", "point", "mode", "target", "summary", "run"];
    const titles = { vm: "VM", point: "Restore point", mode: "Kind of restore", target: "Target", summary: "Summary", run: "Progress" };
    const stepper = h("ol", { class: "p2-steps", "aria-label": "Steps" });
    const stepBtns = {};
    stepsList.forEach((k, i) => {
      const b = h("button", { type: "button", class: "p2-step", "data-step": k, disabled: true }, h("span", { class: "p2-step-n" }, String(i + 1)), ` ${titles[k]}`);
      b.addEventListener("click", () => {
        if (panels[current] && panels[current].collect) panels[current].collect();
        show(k);
      });
      stepBtns[k] = b;
      stepper.append(h("li", null, b));
    });
    root.append(h("div", { class: "p2-wizard" }, h("div", { class: "p2-stepnav" }, stepper)));
    const wiz = root.querySelector(".p2-wizard");
    for (const k of stepsList) {
      const heading = h("h2", { id: `restore-${k}-title`, tabindex: "-1" }, titles[k]);
      const form = h("form", { novalidate: true, "aria-labelledby": `restore-${k}-title` });
      const sec = h("section", { class: "p2-step-panel", id: `restore-${k}`, hidden: true }, heading, form);
      panels[k] = { sec, heading, form };
      wiz.append(sec);
    }
    let visited = 0;
    let current = "";
    function show(k, focusEl) {
      current = k;
      visited = Math.max(visited, stepsList.indexOf(k));
      for (const s of stepsList) {
        panels[s].sec.hidden = s !== k;
        const b = stepBtns[s];
        b.disabled = stepsList.indexOf(s) > visited || (k === "run" && s !== "run") || (s === "run" && k !== "run");
        if (s === k) b.setAttribute("aria-current", "step");
        else b.removeAttribute("aria-current");
        b.classList.toggle("done", stepsList.indexOf(s) < stepsList.indexOf(k));
      }
      render[k]();
      (focusEl && focusEl() || panels[k].heading).focus();
    }
    const navButtons = (backTo, nextLabel = "Next") => {
      const back = backTo ? h("button", { type: "button", class: "p2-back" }, "Back") : null;
      if (back)
        back.addEventListener("click", () => {
          // Back keeps what was typed on this step.
          if (panels[current].collect) panels[current].collect();
          show(backTo);
        });
      const next = h("button", { type: "submit", class: "primary p2-next" }, nextLabel);
      return h("div", { class: "p2-wizard-nav" }, back, next);
    };
    const bind = (k, onNext) => {
      const f = panels[k].form;
      f.onsubmit = (e) => {
        e.preventDefault();
        onNext();
      };
    };
    const fieldErr = (form, list) => ctx.fieldErrors(form, list && list.length ? { status: 0, code: "validation", message: "Please correct the fields marked.", fields: list } : null);

    // netName shows a recorded network by name: a backup records a NIC on a
    // distributed port group by its id ("dvportgroup-12").
    const netName = (src) => {
      for (const d of (st.targets && st.targets.datacenters) || []) {
        const n = (d.networks || []).find((x) => x.id === src || x.name === src);
        if (n) return n.name;
      }
      return src;
    };

    // networkParts is the NIC mapping of the target step: one row per
    // network the point's NICs were on (the API maps networks, so NICs on
    // one network move together), defaulting to the network of the same
    // name (or id) in the datacenter and flagging a network it lacks.
    function networkParts(dc) {
      const nets = dc.networks || [];
      const cfg = st.detail && st.detail.config;
      const nics = (cfg && cfg.nics) || [];
      const out = [];
      if (st.detail && st.detail.error) out.push(h("p", { class: "notice", role: "status" }, `The restore point's configuration could not be read (${errorText(st.detail.error)}); its adapters keep their networks.`));
      else if (st.detail && st.detail.configError) out.push(h("p", { class: "notice", role: "status" }, `The restore point's configuration could not be read (${st.detail.configError}).`));
      const bySrc = new Map();
      for (const n of nics) {
        if (!n.network) continue;
        if (!bySrc.has(n.network)) bySrc.set(n.network, []);
        bySrc.get(n.network).push(n);
      }
      const disks = (cfg && cfg.disks) || [];
      if (disks.length)
        out.push(
          h(
            "div",
            { class: "field", id: "restore-saved-disks" },
            h("p", { class: "p2-sub" }, "Disks in this restore point"),
            h("ul", { class: "p2-words" }, disks.map((d) => h("li", null, `${d.label || `disk ${d.key}`} — ${ctx.fmt.bytes(d.capacity)}${d.datastore ? ` on ${d.datastore}` : ""}${d.skipped ? ` (not backed up: ${d.skipped})` : ""}`))),
          ),
        );
      if (!cfg) return out;
      if (!bySrc.size) {
        out.push(h("p", { class: "hint", id: "restore-no-nics" }, nics.length ? "The VM's adapters had no network; they are restored unconnected." : "The VM had no network adapter."));
        return out;
      }
      const rows = [...bySrc.entries()].map(([src, list], i) => {
        const same = nets.find((n) => n.id === src || n.name === src);
        const srcName = same ? same.name : src;
        const chosen = st.netChoice && st.netChoice[src] !== undefined ? st.netChoice[src] : same ? same.name : "";
        const nicText = list.map((n) => `${n.label || "adapter"} (${n.type || "NIC"})`).join(", ");
        const hintId = `net-${i}-hint`;
        const select = h(
          "select",
          { id: `net-${i}`, name: `networks.${src}`, "data-source": src, "data-source-name": srcName, "data-same": same ? same.name : "", "data-nics": nicText, "aria-describedby": hintId },
          same ? null : h("option", { value: "", selected: !chosen }, "Choose a network…"),
          nets.map((n) => h("option", { value: n.name, selected: chosen === n.name }, n.id === src || n.name === src ? `${n.name} (same network)` : n.name)),
        );
        return h(
          "div",
          { class: "p2-nic-row field", "data-nic-network": src },
          h("label", { for: `net-${i}` }, `${nicText} on ${srcName}`),
          select,
          h("p", { class: same ? "hint" : "hint p2-space-bad", id: hintId }, same ? `Connects to ${same.name} unless you choose another network.` : `${srcName} does not exist in ${dc.name}: choose where to connect ${list.length === 1 ? "this adapter" : "these adapters"}.`),
        );
      });
      out.push(
        h(
          "fieldset",
          { class: "p2-fieldset", "data-field": "networks", id: "restore-networks" },
          h("legend", null, "Network mapping"),
          h("p", { class: "hint" }, st.mode === "rehearsal" ? "Each network the VM's adapters were on, and the network to put them on (a rehearsal leaves them disconnected)." : st.mode === "instant" ? "Each network the VM's adapters were on, and the network to put them on (isolated, they stay disconnected)." : "Each network the VM's adapters were on, and the network to connect them to."),
          rows,
        ),
      );
      return out;
    }

    // instantParts are the target step's fields of an instant recovery: where
    // the VM runs (datacenter, folder, the host that mounts the export), the
    // datastore of its own files, the network mapping, isolation, power on.
    function instantParts(dcs, sel) {
      const out = [];
      const dc = dcs.find((d) => d.name === st.datacenter) || dcs[0];
      if (dc) {
        st.datacenter = dc.name;
        out.push(sel("datacenter", "restore-dc", "Datacenter", dcs.map((d) => h("option", { value: d.name, selected: d.name === dc.name }, d.name))));
        out.push(sel("folder", "restore-folder", "VM folder", [h("option", { value: "" }, "Default (the datacenter's VM folder)"), ...(dc.folders || []).map((x) => h("option", { value: x, selected: st.folder === x }, x))]));
        const hosts = (dc.compute || []).filter((c) => c.type === "host");
        const hostField = sel(
          "host",
          "instant-host",
          "Host",
          [h("option", { value: "" }, hosts.length > 1 ? "Choose a host…" : "Default (the only host)"), ...hosts.map((c) => h("option", { value: c.path || c.name, selected: st.host === (c.path || c.name) }, c.name))],
          "It mounts the restore point from the appliance as an NFS datastore and runs the VM.",
        );
        hostField.querySelector("select").dataset.required = String(hosts.length > 1);
        out.push(hostField);
        out.push(
          sel(
            "datastore",
            "instant-ds",
            "Datastore for the VM's own files",
            [h("option", { value: "" }, "Default (the first disk's original datastore)"), ...(dc.datastores || []).filter((d) => !/^vmvault-/.test(d.name)).map((d) => h("option", { value: d.name, selected: st.datastore === d.name }, `${d.name} — ${ctx.fmt.bytes(d.free)} free`))],
            "Only its configuration, log and swap file: the disks stay on the appliance until you move the VM to production.",
          ),
        );
        out.push(...networkParts(dc));
      }
      const operator = ctx.can("operator");
      const inInv = (choices.find((c) => c.key === st.vm) || {}).inInventory;
      // A copy on the network next to a running original would clash with
      // it (same addresses): isolated unless the original is gone.
      const isolated = !operator || (st.isolated ?? !!inInv);
      out.push(
        h(
          "div",
          { class: "field" },
          h(
            "div",
            { class: "p2-check p2-ir-check" },
            h("input", { type: "checkbox", id: "instant-isolated", name: "isolated", checked: isolated, disabled: operator ? null : true, "aria-describedby": "instant-isolated-hint" }),
            h("label", { for: "instant-isolated" }, "Isolated (network adapters disconnected)"),
          ),
          h(
            "p",
            { class: operator ? "hint" : "hint notice", id: "instant-isolated-hint" },
            operator
              ? "Ticked, the VM starts with every network adapter disconnected: a copy on the network next to a running original would clash with it (the same addresses). Connect them in vCenter when you are ready."
              : "Your role (restore-only) may start an instant recovery only isolated, every network adapter disconnected: a copy on the network could clash with the original VM. An operator can connect it later.",
          ),
        ),
        h("div", { class: "field p2-check" }, h("input", { type: "checkbox", id: "instant-poweron", name: "powerOn", checked: st.irPowerOn ?? true }), h("label", { for: "instant-poweron" }, "Power the VM on")),
      );
      return out;
    }

    function instantSummary(add) {
      add("VM name", st.name);
      add("Datacenter", st.datacenter || "the default datacenter");
      add("Folder", st.folder || "the datacenter's VM folder");
      add("Host", st.host ? st.host.split("/").pop() : "the only host");
      add("VM files on", st.datastore || "the first disk's original datastore");
      add("Disks", "run from the appliance's NFS export (writes go to an overlay on the appliance)");
    }

    const render = {
      // ---- 1. VM
      vm() {
        const f = panels.vm.form;
        const search = h("input", { type: "search", id: "restore-vm-search", placeholder: "Search VMs", autocomplete: "off" });
        const list = h("div", { class: "p2-vm-list field", "data-field": "vm", role: "radiogroup", "aria-labelledby": "restore-vm-title" });
        const draw = () => {
          const q = search.value.trim().toLowerCase();
          list.replaceChildren(
            ...choices
              .filter((c) => !q || String(c.name).toLowerCase().includes(q))
              .map((c, i) =>
                h(
                  "div",
                  { class: "p2-radio" },
                  h("input", { type: "radio", name: "vm", id: `rvm-${i}`, value: c.key, checked: st.vm === c.key, "data-name": c.name }),
                  h("label", { for: `rvm-${i}` }, h("strong", null, c.name), h("span", { class: "hint" }, ` ${c.points} restore point${c.points === 1 ? "" : "s"}${c.newest ? `, newest ${ctx.fmt.time(c.newest)}` : ""}`), c.inInventory ? "" : h("span", { class: "badge p2-state-warn" }, " not in vCenter")),
                ),
              ),
          );
          if (!list.children.length) list.append(h("p", { class: "empty" }, choices.length ? "No VM matches." : "No VM has a restore point yet."));
        };
        search.addEventListener("input", draw);
        f.replaceChildren(h("p", { class: "hint" }, "VMs with restore points, including VMs since deleted from vCenter."), h("div", { class: "field" }, h("label", { for: "restore-vm-search" }, "Search"), search), list, navButtons(null));
        draw();
        bind("vm", () => {
          const c = f.querySelector("input[name=vm]:checked");
          if (!c) return fieldErr(f, [{ field: "vm", message: "Choose a VM." }]);
          if (st.vm !== c.value) st.point = null;
          st.vm = c.value;
          show("point");
        });
      },
      // ---- 2. point on a timeline
      point() {
        const f = panels.point.form;
        const mine = points.filter((p) => pointVM(p) === st.vm);
        const groups = groupByDay(mine, new Date(), tz);
        const dayNav = h("ul", { class: "p2-days", "aria-label": "Days with restore points" });
        const box = h("div", { class: "field", "data-field": "point", role: "radiogroup", "aria-label": "Restore points" });
        const vmName = (choices.find((c) => c.key === st.vm) || {}).name || st.vm;
        groups.forEach((g, gi) => {
          const b = h("button", { type: "button", "aria-pressed": "false", "data-day": g.day }, `${g.label} (${g.points.length})`);
          b.addEventListener("click", () => {
            const sec = document.getElementById(`day-${g.day}`);
            for (const x of dayNav.querySelectorAll("button")) x.setAttribute("aria-pressed", String(x === b));
            if (sec) {
              sec.scrollIntoView({ block: "nearest" });
              const r = sec.querySelector("input");
              if (r) r.focus();
            }
          });
          dayNav.append(h("li", null, b));
          box.append(
            h(
              "section",
              { class: "p2-day", id: `day-${g.day}`, "aria-labelledby": `dayh-${g.day}` },
              h("h3", { id: `dayh-${g.day}` }, g.label),
              g.points.map((p, pi) => {
                const c = consistency(p);
                const rid = `rp-${gi}-${pi}`;
                return h(
                  "div",
                  { class: "p2-point" },
                  h("input", { type: "radio", name: "point", id: rid, value: p.id, checked: st.point && st.point.id === p.id }),
                  h(
                    "label",
                    { for: rid },
                    h("strong", null, new Date(p.time).toLocaleTimeString("en-GB", { timeZone: tz, hour: "2-digit", minute: "2-digit", second: "2-digit" })),
                    h("span", { class: `badge p2-state-${c.kind || "neutral"}`, title: c.text }, c.label),
                    h("span", { class: "hint" }, h("code", { class: "point-id", title: p.id }, String(p.id).slice(0, 12)), ` · ${ctx.fmt.bytes(p.logicalBytes)} · ${p.repository}${p.job ? ` · job ${p.job}` : ""}`),
                    p.locked ? h("span", { class: "badge p2-state-running" }, "locked") : null,
                  ),
                );
              }),
            ),
          );
        });
        f.replaceChildren(h("p", { class: "hint" }, `${mine.length} restore point${mine.length === 1 ? "" : "s"} of ${vmName}, newest first.`), dayNav, box, navButtons("vm"));
        bind("point", () => {
          const c = f.querySelector("input[name=point]:checked");
          if (!c) return fieldErr(f, [{ field: "point", message: "Choose a restore point." }]);
          st.point = mine.find((p) => p.id === c.value);
          show("mode");
        });
      },
      // ---- 3. mode
      mode() {
        const f = panels.mode.form;
        const inInv = (choices.find((c) => c.key === st.vm) || {}).inInventory;
        // Overwriting the original VM needs an operator (the API refuses it to restore-only).
        const mayOverwrite = ctx.can("operator");
        const blocked = (m) => m.id === "original" && (!inInv || !mayOverwrite);
        const why = (m) => (!inInv ? "Not possible: the original VM is no longer in vCenter." : "Needs the operator role: restoring over the original VM overwrites it.");
        const text = (m) => (m.id === "instant" && !mayOverwrite ? `${m.text} Your role starts it isolated (network adapters disconnected).` : m.text);
        f.replaceChildren(
          h(
            "fieldset",
            { class: "p2-fieldset field", "data-field": "mode" },
            h("legend", null, "What should the restore do?"),
            MODES.map((m) =>
              h(
                "div",
                { class: "p2-radio" },
                h("input", { type: "radio", name: "mode", id: `mode-${m.id}`, value: m.id, checked: st.mode === m.id, disabled: blocked(m) ? true : null }),
                h("label", { for: `mode-${m.id}` }, h("strong", null, m.title), h("span", { class: "hint p2-block" }, blocked(m) ? why(m) : text(m))),
              ),
            ),
          ),
          navButtons("point"),
        );
        bind("mode", () => {
          const c = f.querySelector("input[name=mode]:checked");
          if (!c) return fieldErr(f, [{ field: "mode", message: "Choose what to do." }]);
          // Each kind has its own default name ("-restored", "-instant").
          if (st.mode !== c.value) st.name = undefined;
          st.mode = c.value;
          if (st.mode === "files") return ctx.navigate(`#/files?point=${encodeURIComponent(st.point.id)}`);
          show("target");
        });
      },
      // ---- 4. target
      async target() {
        const f = panels.target.form;
        f.replaceChildren(h("p", { class: "loading" }, "Loading the vSphere targets…"));
        if (!st.targets && !st.targetsError) {
          try {
            st.targets = await ctx.api("GET", "/restore-targets");
          } catch (e) {
            st.targetsError = e;
          }
        }
        // The point's saved configuration (its NICs and disks) comes with
        // the point itself, read once per point.
        if (st.mode !== "disk" && st.mode !== "original" && (!st.detail || st.detail.id !== st.point.id)) {
          try {
            st.detail = await ctx.api("GET", `/restore-points/${encodeURIComponent(st.point.id)}`);
          } catch (e) {
            st.detail = { id: st.point.id, error: e };
          }
          st.networks = null;
          st.netChoice = null;
        }
        if (current !== "target") return;
        const T = st.targets || { datacenters: [] };
        const dcs = T.datacenters || [];
        const need = pointSize(st.point);
        const vmName = (st.point.vm && st.point.vm.name) || "vm";
        const fields = [];
        const sel = (name, id, label, options, hint) => {
          const s = h("select", { name, id }, options);
          fields.push(s);
          return h("div", { class: "field" }, h("label", { for: id }, label), s, hint ? h("p", { class: "hint", id: `${id}-hint` }, hint) : null);
        };
        const parts = [];
        if (st.targetsError) parts.push(h("p", { class: "notice", role: "status" }, `The vSphere targets are not available (${errorText(st.targetsError)}); the restore uses the original placement.`));
        if (st.mode === "original") {
          parts.push(
            h(
              "div",
              { class: "p2-danger-box" },
              h("p", null, h("strong", null, "This overwrites the disks of the VM "), h("strong", { class: "mono" }, vmName), h("strong", null, ". "), "Everything written to it since the restore point is lost."),
              h("div", { class: "field" }, h("label", { for: "confirm-name" }, `Type the VM's name (${vmName}) to confirm`), h("input", { id: "confirm-name", name: "confirmName", autocomplete: "off", spellcheck: "false", value: st.confirmName || "" })),
              h("div", { class: "field p2-check" }, h("input", { type: "checkbox", id: "power-off", name: "powerOff", checked: st.powerOff === true }), h("label", { for: "power-off" }, "Power the VM off first if it is running")),
            ),
          );
        } else if (st.mode === "disk") {
          const disks = st.point.disks || [];
          parts.push(
            sel("disk", "restore-disk", "Disk to restore", disks.map((d) => h("option", { value: String(d.key), selected: String(st.disk) === String(d.key) }, `${d.label || `disk ${d.key}`} — ${ctx.fmt.bytes(d.capacity)}`))),
            sel("targetVm", "restore-target-vm", "Attach it to VM", [h("option", { value: "" }, "Choose a VM…"), ...invVMs.map((v) => h("option", { value: v.instanceUuid, selected: st.targetVm === v.instanceUuid }, v.name))]),
          );
        } else {
          parts.push(
            h(
              "div",
              { class: "field" },
              h("label", { for: "restore-name" }, st.mode === "rehearsal" ? "Name of the rehearsal VM (optional; the appliance appends -rehearsal- and the time)" : st.mode === "instant" ? "Name of the VM" : "Name of the new VM"),
              h("input", { id: "restore-name", name: "name", autocomplete: "off", spellcheck: "false", value: st.name ?? (st.mode === "new" ? `${vmName}-restored` : st.mode === "instant" ? `${vmName}-instant` : "") }),
            ),
          );
        }
        if (st.mode === "instant") parts.push(...instantParts(dcs, sel));
        else if (st.mode !== "original" && dcs.length) {
          const dc = dcs.find((d) => d.name === st.datacenter) || dcs[0];
          st.datacenter = dc.name;
          if (st.mode !== "disk") {
            parts.push(sel("datacenter", "restore-dc", "Datacenter", dcs.map((d) => h("option", { value: d.name, selected: d.name === dc.name }, d.name))));
            parts.push(sel("folder", "restore-folder", "VM folder", [h("option", { value: "" }, "Default (the datacenter's VM folder)"), ...(dc.folders || []).map((x) => h("option", { value: x, selected: st.folder === x }, x))]));
            parts.push(
              sel("compute", "restore-compute", "Cluster or host", [
                h("option", { value: "" }, "Default (the original placement if it exists)"),
                ...(dc.compute || []).map((c) => h("option", { value: `${c.type}:${c.path || c.name}`, selected: st.compute === `${c.type}:${c.path || c.name}` }, `${c.name} (${c.type})`)),
              ]),
            );
          }
          const dsOpts = (dc.datastores || []).map((d) => {
            const short = datastoreFit(d, need, false).short;
            return h("option", { value: d.name, selected: st.datastore === d.name, "data-short": short ? "true" : null }, `${d.name} — ${ctx.fmt.bytes(d.free)} free of ${ctx.fmt.bytes(d.capacity)}${short ? " — not enough space" : ""}`);
          });
          parts.push(sel("datastore", "restore-ds", "Datastore", [h("option", { value: "" }, "Default (each disk's original datastore)"), ...dsOpts], `The restore needs up to ${ctx.fmt.bytes(need)} (thick); thin disks need less.`));
          parts.push(h("p", { id: "ds-space", class: "p2-space", "aria-live": "polite" }));
          parts.push(h("div", { class: "field p2-check" }, h("input", { type: "checkbox", id: "restore-thin", name: "thin", checked: !!st.thin }), h("label", { for: "restore-thin" }, "Thin-provision the disks")));
          if (st.mode !== "disk") parts.push(...networkParts(dc));
          parts.push(h("div", { class: "field p2-check" }, h("input", { type: "checkbox", id: "restore-poweron", name: "powerOn", checked: !!st.powerOn, disabled: st.mode === "disk" ? true : null }), h("label", { for: "restore-poweron" }, "Power the VM on afterwards")));
        }
        f.replaceChildren(...parts, navButtons("mode"));
        const dsSel = f.querySelector("#restore-ds");
        const thin = f.querySelector("#restore-thin");
        const space = f.querySelector("#ds-space");
        const checkSpace = () => {
          if (!dsSel || !space) return;
          const opt = dsSel.selectedOptions[0];
          if (opt && opt.dataset.short === "true") {
            space.className = "p2-space p2-space-bad";
            space.textContent = thin && thin.checked ? `${dsSel.value} may not have enough space: thin disks only take what is written, so it can still fit.` : `${dsSel.value} does not have enough free space for ${ctx.fmt.bytes(need)}. Choose another datastore or thin disks.`;
          } else if (opt && opt.value) {
            space.className = "p2-space p2-space-ok";
            space.textContent = `${dsSel.value} has enough free space.`;
          } else space.textContent = "";
        };
        const dcSel = f.querySelector("#restore-dc");
        if (dcSel)
          dcSel.addEventListener("change", () => {
            collect();
            st.datacenter = dcSel.value;
            st.folder = "";
            st.compute = "";
            st.host = "";
            st.datastore = "";
            st.netChoice = null;
            render.target();
          });
        if (dsSel) dsSel.addEventListener("change", checkSpace);
        if (thin) thin.addEventListener("change", checkSpace);
        checkSpace();
        function collect() {
          const v = (n) => {
            const e = f.elements.namedItem(n);
            return e && e.value !== undefined ? e.value : "";
          };
          const c = (n) => {
            const e = f.elements.namedItem(n);
            return !!(e && e.checked);
          };
          st.name = f.elements.namedItem("name") ? v("name").trim() : st.name;
          st.confirmName = v("confirmName");
          st.powerOff = c("powerOff");
          st.disk = v("disk");
          st.targetVm = v("targetVm");
          st.datacenter = v("datacenter") || st.datacenter;
          st.folder = v("folder");
          st.compute = v("compute");
          st.datastore = v("datastore");
          st.thin = c("thin");
          if (st.mode === "instant") {
            st.host = v("host");
            st.irPowerOn = c("powerOn");
            // Restore-only may only run it isolated (the API answers 403 otherwise).
            st.isolated = !ctx.can("operator") || c("isolated");
          } else st.powerOn = c("powerOn");
          st.networks = {};
          st.netChoice = {};
          for (const s of f.querySelectorAll("select[data-source]")) {
            st.netChoice[s.dataset.source] = s.value;
            // Only a change is sent: a network kept by name needs no entry.
            if (s.value && s.value !== s.dataset.same) st.networks[s.dataset.source] = s.value;
          }
        }
        panels.target.collect = collect;
        bind("target", () => {
          collect();
          const errs = [];
          if (st.mode === "new" && !st.name) errs.push({ field: "name", message: "Enter a name for the new VM." });
          if (st.mode === "instant" && !st.name) errs.push({ field: "name", message: "Enter a name for the VM." });
          const hostSel = f.querySelector("#instant-host");
          if (hostSel && !st.host && hostSel.dataset.required === "true") errs.push({ field: "host", message: "Choose the host that mounts the restore point and runs the VM." });
          if (st.name && st.name.length > 80) errs.push({ field: "name", message: "At most 80 characters." });
          if (st.mode === "original" && st.confirmName !== vmName) errs.push({ field: "confirmName", message: `Type ${vmName} exactly to confirm.` });
          if (st.mode === "disk" && !st.targetVm) errs.push({ field: "targetVm", message: "Choose the VM to attach the disk to." });
          const opt = dsSel && dsSel.selectedOptions[0];
          if (opt && opt.dataset.short === "true" && !st.thin) errs.push({ field: "datastore", message: `Not enough free space on ${st.datastore} for ${ctx.fmt.bytes(need)}.` });
          for (const s of f.querySelectorAll("select[data-source]"))
            if (!s.value) errs.push({ field: s.name, message: `${s.dataset.sourceName} does not exist in ${st.datacenter}: choose the network to connect ${s.dataset.nics} to.` });
          if (errs.length) return fieldErr(f, errs);
          fieldErr(f, null);
          show("summary");
        });
      },
      // ---- 5. summary
      summary() {
        const f = panels.summary.form;
        const p = st.point;
        const mode = MODES.find((m) => m.id === st.mode);
        const dl = h("dl", { class: "p2-dl", id: "restore-choices" });
        const add = (k, v) => dl.append(h("dt", null, k), h("dd", null, v));
        add("VM", (p.vm && p.vm.name) || st.vm);
        add("Restore point", `${ctx.fmt.time(p.time)} · ${consistency(p).label} · ${p.repository}`);
        add("Kind", mode.title);
        if (st.mode === "instant") instantSummary(add);
        else if (st.mode === "new" || st.mode === "rehearsal") add("New VM name", st.name || "(chosen by the appliance)");
        if (st.mode === "disk") {
          const d = (p.disks || []).find((x) => String(x.key) === String(st.disk));
          add("Disk", d ? `${d.label || d.key} (${ctx.fmt.bytes(d.capacity)})` : String(st.disk));
          add("Attach to", (invVMs.find((v) => v.instanceUuid === st.targetVm) || {}).name || st.targetVm);
        }
        if (st.mode !== "original" && st.mode !== "disk" && st.mode !== "instant") {
          // The same words as the target step's defaults: "default" alone
          // says nothing about where the VM lands.
          add("Datacenter", st.datacenter || "the original VM's datacenter");
          add("Folder", st.folder || "the datacenter's VM folder");
          add("Cluster or host", st.compute ? st.compute.replace(/^[^:]*:/, "") : "the original placement if it exists");
        }
        if (st.mode !== "original" && st.mode !== "instant") {
          add("Datastore", st.datastore || "each disk's original datastore");
          add("Disks", st.thin ? "thin" : "as backed up");
        }
        const maps = Object.entries(st.networks || {});
        if (maps.length) add("Networks", maps.map(([a, b]) => `${netName(a)} → ${b}`).join(", "));
        if (st.mode === "instant") {
          add("Network adapters", st.isolated ? "disconnected (isolated)" : "connected");
          add("Power on", st.irPowerOn ? "yes" : "no");
        } else if (st.mode === "original") add("Power", st.powerOff ? "power off first" : "leave as is");
        else if (st.mode !== "disk") add("Power on", st.powerOn ? "yes" : "no");
        const nav = navButtons("target", st.mode === "original" ? "Overwrite the VM" : st.mode === "instant" ? "Start instant recovery" : "Start restore");
        const startBtn = nav.querySelector("button[type=submit]");
        startBtn.id = "restore-start";
        if (st.mode === "original") startBtn.className = "danger";
        f.replaceChildren(...(st.mode === "original" ? [h("p", { class: "p2-danger-box" }, "The original VM's disks will be overwritten.")] : []), dl, nav);
        bind("summary", start);
      },
      run() {},
    };

    async function start() {
      const f = panels.summary.form;
      const p = st.point;
      const vmName = (p.vm && p.vm.name) || st.vm;
      if (st.mode === "original") {
        const ok = await ctx.confirm(`Overwrite ${vmName} with the restore point of ${ctx.fmt.time(p.time)}? Everything written to it since is lost. This cannot be undone.`, { danger: true, title: "Overwrite the VM?", ok: "Overwrite" });
        if (!ok) return;
      }
      let path = "/restores";
      let body;
      if (st.mode === "instant") {
        path = "/instant-recoveries";
        body = { point: p.id, isolated: !!st.isolated, powerOn: !!st.irPowerOn };
        if (st.name) body.name = st.name;
        if (st.datacenter) body.datacenter = st.datacenter;
        if (st.folder) body.folder = st.folder;
        if (st.host) body.host = st.host;
        if (st.datastore) body.datastore = st.datastore;
        if (Object.keys(st.networks || {}).length) body.networks = st.networks;
      } else if (st.mode === "disk") {
        path = "/restores/disk";
        body = { point: p.id, disk: Number(st.disk), targetVm: st.targetVm };
        if (st.datastore) body.datastore = st.datastore;
        if (st.thin) body.thin = true;
      } else {
        body = { point: p.id, mode: st.mode };
        if (st.mode !== "original") {
          if (st.name) body.name = st.name;
          if (st.datacenter) body.datacenter = st.datacenter;
          if (st.folder) body.folder = st.folder;
          if (st.compute) {
            const [type, ...rest] = st.compute.split(":");
            body[type === "cluster" ? "cluster" : "host"] = rest.join(":");
          }
          if (st.datastore) body.datastore = st.datastore;
          if (st.thin) body.thin = true;
          if (st.powerOn) body.powerOn = true;
          if (Object.keys(st.networks || {}).length) body.networks = st.networks;
        } else if (st.powerOff) body.powerOff = true;
      }
      const btn = f.querySelector("#restore-start");
      if (btn) btn.disabled = true;
      let res;
      try {
        res = await ctx.api("POST", path, body);
      } catch (e) {
        if (btn) btn.disabled = false;
        // Field errors belong to the target step (name, datastore, ...).
        if (e.fields && e.fields.length && e.fields.some((x) => x.field !== "point" && x.field !== "mode")) {
          show("target");
          ctx.fieldErrors(panels.target.form, e);
        } else ctx.fieldErrors(f, { status: e.status, message: `The ${st.mode === "instant" ? "instant recovery" : "restore"} did not start: ${e.status === 403 ? e.message : errorText(e)}`, fields: [] });
        return;
      }
      const task = taskOf(res);
      show("run");
      const rf = panels.run.form;
      if (!task) {
        rf.replaceChildren(h("p", null, "The restore started."));
        return;
      }
      const w = watchTask(ctx, task);
      w.el.id = "restore-progress";
      watchers.push(w);
      const out = h("div", { id: "restore-result", "aria-live": "polite" });
      rf.replaceChildren(w.el, out);
      const t = await w.done;
      if (!root.isConnected) return;
      const r = t.result || {};
      if (t.state === "succeeded" && st.mode === "instant") {
        const vm = r.vm || {};
        out.replaceChildren(
          h(
            "div",
            { class: "p2-result", role: "status", id: "instant-result", "data-session": r.id || "" },
            h("p", null, "Running as ", h("a", { href: "#/instant-recoveries", id: "restored-vm-name", "data-moref": vm.moref || "" }, vm.name || st.name || ""), ` from the NFS datastore ${r.nfsDatastore || ""}${r.isolated ? ", network adapters disconnected" : ""}.`),
            h("p", { class: "hint" }, "Move it to production (Storage vMotion while it runs) or stop it on the Instant recoveries page."),
            (r.warnings || []).length ? h("ul", null, r.warnings.map((x) => h("li", null, x))) : null,
          ),
          h("div", { class: "p2-wizard-nav" }, h("a", { class: "button primary", href: "#/instant-recoveries", id: "instant-sessions-link" }, "Instant recoveries")),
        );
      } else if (t.state === "succeeded") {
        const vm = r.vm || {};
        const newName = vm.name || st.name || "";
        const warnings = r.warnings || [];
        out.replaceChildren(
          h(
            "div",
            { class: "p2-result", role: "status" },
            st.mode === "disk"
              ? h("p", null, "The disk was restored and attached.")
              : h("p", null, st.mode === "original" ? "The VM was restored in place: " : "Restored as ", h("a", { href: `#/inventory?q=${encodeURIComponent(newName)}`, id: "restored-vm-name", "data-moref": vm.moref || "" }, newName), "."),
            r.bytesWritten ? h("p", { class: "hint" }, `${ctx.fmt.bytes(r.bytesWritten)} written in ${ctx.fmt.duration(r.seconds)}.`) : null,
            warnings.length ? h("ul", null, warnings.map((x) => h("li", null, x))) : null,
            r.removeCommand ? h("p", { class: "hint" }, "To remove the rehearsal VM: ", h("code", null, r.removeCommand)) : null,
          ),
          h("div", { class: "p2-wizard-nav" }, h("a", { class: "button", href: "#/restore-points" }, "Restore points"), (() => {
            const again = h("button", { type: "button", id: "restore-again" }, "Another restore");
            again.addEventListener("click", () => ctx.navigate("#/restore"));
            return again;
          })()),
        );
      } else {
        // A failed restore leaves the wizard as it was: go back to change
        // the choices (power off, target) or try the same again.
        const back = h("button", { type: "button", id: "restore-back" }, "Back");
        back.addEventListener("click", () => show("target"));
        const retry = h("button", { type: "button", class: "primary", id: "restore-retry" }, "Retry");
        retry.addEventListener("click", () => { show("summary"); start(); });
        const why = String(t.error || "").replace(/^restore: /, "").replace(/[.\s]+$/, "");
        out.replaceChildren(h("div", { class: "p2-result failed", role: "alert" }, `The ${st.mode === "instant" ? "instant recovery" : "restore"} ${t.state}${why ? `: ${why}` : ""}.`),
          h("div", { class: "p2-wizard-nav" }, back, retry));
      }
      const title = out.querySelector("a, button");
      if (title) title.focus();
    }

    if (st.point) {
      visited = 2;
      show("mode");
    } else if (st.vm) {
      visited = 1;
      show("point");
    } else show("vm");
    return () => watchers.forEach((w) => w.stop());
  },
};
