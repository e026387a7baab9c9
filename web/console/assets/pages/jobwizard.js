// The job wizard (#/job-wizard to create, #/job-wizard/<id> to edit): name,
// VMs, repository, window, retention and quiesce, a retention preview, a
// summary, then save. Every step is its own form; the wizard's state lives
// in those forms and the object below, so Back and Next lose nothing. Server
// field errors are sent back to the step that owns the field.
import { ensureCSS, pick, scopedErrors, slug, errorText } from "./jobs-common.js";
import { DAYS, gridFromWindow, windowFromGrid, describeGrid, describeOpenings, hoursOpen, emptyGrid, dailyAt, runStarts } from "./jobwizard-window.js";
import { PRESETS, FIELDS, retentionFor, presetOf, describeRetention, validateRetention, normalize } from "./jobwizard-retention.js";
import {
  buildTree, vmKey, normalizeSelection, compactSelection, isIncluded, isExcluded, toggleInclude, toggleExclude,
  coveredBy, matchedVMs, validPattern, describeSelection, tagLabel,
} from "./jobwizard-tree.js";
import { windowGrid } from "./jobwizard-grid.js";

const QUIESCE = [
  {
    id: "application",
    title: "Application-consistent",
    text: "Windows: VSS with its writers (SQL Server, Exchange, Active Directory…), so databases restore without recovery; the VSS type below says whether their logs are truncated. Other guests get the file-system quiesce (VMware Tools' pre-freeze and post-thaw scripts are how their applications take part). If VSS refuses, the backup retries without writers, then crash-consistent, and says so in a warning, unless quiescing is required below.",
  },
  {
    id: "filesystem",
    title: "File-system-consistent (recommended)",
    text: "The guest's file systems are frozen for the snapshot, no application involved (Windows: VSS without writers; Linux: fsfreeze through VMware Tools). If the guest cannot be quiesced, the backup runs crash-consistent and says so in a warning, unless quiescing is required below.",
  },
  {
    id: "none",
    title: "Off (crash-consistent)",
    text: "No guest involvement: the point is like a power cut. Use it for VMs without VMware Tools or appliances that must not be quiesced.",
  },
];

// Which step owns which API field (prefixes); the first match wins.
const OWNERS = [
  ["basics", ["id", "name", "description", "enabled"]],
  ["vms", ["selection"]],
  ["repository", ["repository"]],
  ["schedule", ["window", "onWindowClose", "everyHours"]],
  ["retention", ["retention", "quiesce", "quiesceRequired", "concurrency", "maxAttempts", "priority"]],
];

function split(s) {
  return String(s || "")
    .split(",")
    .map((x) => x.trim())
    .filter(Boolean);
}

const defaultWindow = () => {
  const g = emptyGrid();
  for (let d = 0; d < 7; d++) for (let x = 0; x < 24; x++) g[d][x] = d >= 5 || x < 6 || x >= 18;
  return g;
};
const nightly = () => {
  const g = emptyGrid();
  for (let d = 0; d < 7; d++) for (let x = 0; x < 24; x++) g[d][x] = x < 6 || x >= 22;
  return g;
};
const always = () => emptyGrid().map((r) => r.map(() => true));

export default {
  route: "#/job-wizard",
  title: "Job wizard",
  nav: false,
  role: "administrator",
  async render(root, ctx) {
    await ensureCSS();
    const h = ctx.h;
    const editId = ctx.params && ctx.params[0];
    const title = document.getElementById("page-title");
    if (!ctx.can("administrator")) {
      root.append(h("p", { class: "form-error", role: "alert" }, "Only administrators create and change jobs."));
      return;
    }
    root.append(h("p", { class: "loading" }, "Loading…"));
    const [orig, repos, jobs, settings, inv, vmList, tagRes] = await Promise.all([
      editId ? ctx.api("GET", `/jobs/${encodeURIComponent(editId)}`).then((j) => j.job || j) : Promise.resolve(null),
      ctx.api("GET", "/repositories").catch(() => []),
      ctx.api("GET", "/jobs").catch(() => []),
      ctx.api("GET", "/settings").catch(() => ({})),
      ctx
        .api("GET", "/inventory")
        .then((r) => ({ nodes: (r && r.nodes) || [], error: null }))
        .catch(async (e) => {
          // No topology: fall back to the flat list of inventory VMs.
          const vms = await ctx.api("GET", "/vms").catch(() => []);
          return {
            nodes: vms.filter((v) => v.inInventory).map((v) => ({ id: v.moref || v.instanceUuid, type: "vm", name: v.name, parent: "", instanceUuid: v.instanceUuid })),
            error: e,
          };
        }),
      ctx.api("GET", "/vms").catch(() => []),
      ctx
        .api("GET", "/tags")
        .then((t) => ({ list: Array.isArray(t) ? t : [], error: null }))
        .catch((e) => ({ list: [], error: e })),
    ]);
    // Tag id -> {id, name, category}: selections store ids, people read names.
    const tagsById = new Map(tagRes.list.map((t) => [t.id, t]));
    // Instance UUID -> name, for the preview (the API names VMs by UUID there).
    const vmNames = new Map((vmList || []).map((v) => [v.instanceUuid, v.name]));
    for (const n of inv.nodes) if (n.type === "vm" && vmKey(n)) vmNames.set(vmKey(n), n.name);
    root.replaceChildren();
    const pageName = editId ? `Edit job: ${orig.name}` : "New backup job";
    if (title) title.textContent = pageName;
    document.title = `${pageName} — vmvault`;

    const tree = buildTree(inv.nodes);
    const tz = (orig && orig.window && orig.window.location) || settings.timeZone || Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
    const fromWin = orig ? gridFromWindow(orig.window) : { grid: defaultWindow(), approximate: false };
    const st = {
      id: orig ? orig.id : "",
      idTouched: !!orig,
      name: orig ? orig.name : "",
      description: (orig && orig.description) || "",
      enabled: orig ? orig.enabled !== false : true,
      repository: (orig && orig.repository) || (repos.length === 1 ? repos[0].name : ""),
      selection: normalizeSelection(orig && orig.selection),
      grid: fromWin.grid,
      location: tz,
      onWindowClose: (orig && orig.onWindowClose) || "finish",
      preset: orig ? presetOf(orig.retention) : "more",
      retention: orig ? normalize(orig.retention) : normalize(retentionFor("more")),
      quiesce: (orig && orig.quiesce) || "filesystem",
      quiesceRequired: !!(orig && orig.quiesceRequired),
      vssType: (orig && orig.vssType) || "copy",
      everyHours: (orig && orig.everyHours) || 0,
    };
    const retentionObj = () => (st.preset === "custom" ? { preset: "", ...st.retention } : retentionFor(st.preset));

    // ---- step 1: basics
    function stepBasics() {
      const name = h("input", { name: "name", id: "job-name", required: true, maxlength: "200", value: st.name, autocomplete: "off" });
      const idIn = h("input", { name: "id", id: "job-id", required: true, maxlength: "128", value: st.id, readonly: editId ? true : null, autocomplete: "off", spellcheck: "false" });
      const desc = h("textarea", { name: "description", id: "job-desc", rows: "2", maxlength: "1000" }, st.description);
      const enabled = h("input", { type: "checkbox", name: "enabled", id: "job-enabled", checked: st.enabled });
      name.addEventListener("input", () => {
        if (!st.idTouched && !editId) idIn.value = slug(name.value);
      });
      idIn.addEventListener("input", () => (st.idTouched = true));
      const form = h(
        "form",
        { novalidate: true },
        h("div", { class: "field" }, h("label", { for: "job-name" }, "Job name"), name),
        h("div", { class: "field" }, h("label", { for: "job-id" }, "Job ID"), idIn, h("p", { class: "hint", id: "job-id-hint" }, editId ? "The ID of a saved job cannot change." : "Used in the API and in restore point tags; letters, digits and dashes work best.")),
        h("div", { class: "field" }, h("label", { for: "job-desc" }, "Description (optional)"), desc),
        h("div", { class: "field p2-check" }, enabled, h("label", { for: "job-enabled" }, "Enabled: run in the backup window")),
      );
      idIn.setAttribute("aria-describedby", "job-id-hint");
      return {
        key: "basics",
        title: "Name",
        form,
        focus: name,
        collect() {
          st.name = name.value.trim();
          st.id = idIn.value.trim();
          st.description = desc.value.trim();
          st.enabled = enabled.checked;
        },
        validate() {
          const e = [];
          if (!st.name) e.push({ field: "name", message: "Enter a name." });
          if (!st.id) e.push({ field: "id", message: "Enter an ID." });
          else if (st.id.length > 128 || /[/\0]/.test(st.id)) e.push({ field: "id", message: "At most 128 characters, without '/'." });
          else if (!editId && jobs.some((j) => j.id === st.id)) e.push({ field: "id", message: `A job with ID "${st.id}" exists already.` });
          return e;
        },
      };
    }

    // tagBox is the tag picker: every tag by "category / name" with an
    // include and an exclude box (the selection stores tag ids). Tags the
    // job names that vSphere no longer lists stay, by id, so they can be
    // removed. Without the tagging service it falls back to id fields.
    function tagBox(sel, changed) {
      if (tagRes.error) {
        const inc = h("input", { name: "selection.tags", id: "sel-tags", value: sel.tags.join(", "), autocomplete: "off", spellcheck: "false" });
        const exc = h("input", { name: "selection.exclude.tags", id: "sel-extags", value: sel.exclude.tags.join(", "), autocomplete: "off", spellcheck: "false" });
        for (const i of [inc, exc]) i.addEventListener("input", changed);
        return {
          el: h(
            "div",
            null,
            h("p", { class: "notice", role: "status" }, `vSphere's tags are not available (${errorText(tagRes.error)}); enter tag ids by hand.`),
            h("div", { class: "field" }, h("label", { for: "sel-tags" }, "Also include VMs with these tag ids (comma-separated)"), inc),
            h("div", { class: "field" }, h("label", { for: "sel-extags" }, "Exclude VMs with these tag ids (comma-separated)"), exc),
          ),
          read() {
            sel.tags = split(inc.value);
            sel.exclude.tags = split(exc.value);
          },
        };
      }
      const counts = new Map();
      for (const n of tree.byId.values()) if (n.type === "vm") for (const t of n.tags || []) counts.set(t, (counts.get(t) || 0) + 1);
      const list = [...tagRes.list];
      for (const id of [...sel.tags, ...sel.exclude.tags]) if (!tagsById.has(id) && !list.some((t) => t.id === id)) list.push({ id, name: id, category: "", unknown: true });
      const boxes = [];
      const rowsEl = list.map((t, i) => {
        const label = t.unknown ? t.id : tagLabel(t.id, tagsById);
        const inc = h("input", { type: "checkbox", id: `tag-inc-${i}`, "data-tag-include": t.id, checked: sel.tags.includes(t.id), "aria-label": `Include VMs tagged ${label}` });
        const exc = h("input", { type: "checkbox", id: `tag-exc-${i}`, "data-tag-exclude": t.id, checked: sel.exclude.tags.includes(t.id), "aria-label": `Exclude VMs tagged ${label}` });
        inc.addEventListener("change", () => {
          if (inc.checked) exc.checked = false;
          changed();
        });
        exc.addEventListener("change", () => {
          if (exc.checked) inc.checked = false;
          changed();
        });
        boxes.push({ id: t.id, inc, exc });
        const n = counts.get(t.id) || 0;
        return h(
          "li",
          { class: "p2-tag", "data-tag-label": label },
          h("span", { class: "p2-tag-name" }, label),
          h("span", { class: "hint" }, t.unknown ? " · not on any VM now" : ` · ${n} VM${n === 1 ? "" : "s"} now`),
          h("span", { class: "p2-tag-boxes" }, inc, h("label", { for: `tag-inc-${i}` }, "include"), " ", exc, h("label", { for: `tag-exc-${i}` }, "exclude")),
        );
      });
      return {
        el: h(
          "fieldset",
          { class: "p2-fieldset field", "data-field": "selection.tags", id: "tag-picker" },
          h("legend", null, "Tags"),
          h("p", { class: "hint" }, "Include protects every VM carrying the tag, including VMs tagged later; exclude leaves them out whatever else selects them."),
          rowsEl.length ? h("ul", { class: "p2-tags" }, rowsEl) : h("p", { class: "empty" }, "No VM carries a vSphere tag."),
        ),
        read() {
          sel.tags = boxes.filter((b) => b.inc.checked).map((b) => b.id);
          sel.exclude.tags = boxes.filter((b) => b.exc.checked).map((b) => b.id);
        },
      };
    }

    // ---- step 2: VMs and containers
    function stepVMs() {
      const sel = st.selection;
      const matchOut = h("p", { class: "p2-match", id: "selection-match", "aria-live": "polite" });
      const filter = h("input", { type: "search", id: "tree-filter", placeholder: "Filter by name", autocomplete: "off" });
      const treeBox = h("div", { class: "p2-tree", "data-field": "selection", tabindex: "-1", role: "group", "aria-labelledby": "tree-label" });
      const exNames = h("input", { name: "selection.exclude.names", id: "sel-exnames", value: sel.exclude.names.join(", "), autocomplete: "off", spellcheck: "false" });
      const tagPicker = tagBox(sel, () => refresh());
      const rows = new Map(); // node id -> {li, inc, exc}
      function nodeItem(n) {
        const incId = `inc-${n.id}`;
        const inc = h("input", { type: "checkbox", id: incId, "data-node": n.id, checked: isIncluded(sel, n) });
        const kind = n.type === "vm" ? (n.template ? "template" : "VM") : n.type.replace("-", " ");
        const label = h("label", { for: incId }, n.name, h("span", { class: "p2-kind" }, ` ${kind}${n.type === "folder" || n.type === "datacenter" ? ` · ${n.vms} VM${n.vms === 1 ? "" : "s"}` : ""}`));
        let exc = null;
        const line = h("div", { class: "p2-tree-line" }, inc, label);
        if (n.type === "vm") {
          const excId = `exc-${n.id}`;
          exc = h("input", { type: "checkbox", id: excId, "data-exclude": n.id, checked: isExcluded(sel, n), "aria-label": `Exclude ${n.name}` });
          line.append(h("span", { class: "p2-exclude" }, exc, h("label", { for: excId }, "exclude")));
          exc.addEventListener("change", () => {
            toggleExclude(sel, n, exc.checked);
            refresh();
          });
        }
        const cover = h("span", { class: "p2-covered hint" });
        line.append(cover);
        inc.addEventListener("change", () => {
          toggleInclude(sel, n, inc.checked);
          refresh();
        });
        const li = h("li", { "data-name": String(n.name).toLowerCase(), "data-type": n.type }, line);
        if (n.children.length) li.append(h("ul", null, n.children.map(nodeItem)));
        rows.set(n.id, { li, inc, exc, cover, n });
        return li;
      }
      if (tree.roots.length) treeBox.append(h("ul", { class: "p2-tree-root" }, tree.roots.map(nodeItem)));
      else treeBox.append(h("p", { class: "empty" }, "The inventory has no VMs to show."));

      function refresh() {
        for (const { n, inc, exc, cover } of rows.values()) {
          inc.checked = isIncluded(sel, n);
          if (exc) exc.checked = isExcluded(sel, n);
          const c = coveredBy(sel, n, tree.byId);
          cover.textContent = c && !inc.checked ? ` included with ${c.name}` : "";
        }
        readInputs();
        const m = matchedVMs(sel, tree);
        const names = m.slice(0, 8).map((x) => x.name).join(", ");
        let text = `Selected now: ${m.length} VM${m.length === 1 ? "" : "s"}${m.length ? ` (${names}${m.length > 8 ? ", …" : ""})` : ""}.`;
        // The tree places VMs in their folders; which host, cluster or pool
        // runs a VM only the appliance knows when the window opens.
        const compute = sel.containers.filter((c) => ["cluster", "host", "resourcepool"].includes(c.kind));
        if (compute.length) text += ` Plus the VMs running in ${compute.map((c) => c.name || c.id).join(", ")} (evaluated at each window).`;
        if (sel.tags.length) text += ` Tags are evaluated again at each window (${sel.tags.map((t) => tagLabel(t, tagsById)).join(", ")}).`;
        matchOut.textContent = text;
      }
      function readInputs() {
        tagPicker.read();
        sel.exclude.names = split(exNames.value);
      }
      exNames.addEventListener("input", refresh);
      filter.addEventListener("input", () => {
        const q = filter.value.trim().toLowerCase();
        for (const { li, n } of rows.values()) {
          if (n.type !== "vm") continue;
          li.hidden = !!q && !String(n.name).toLowerCase().includes(q);
        }
      });
      const form = h(
        "form",
        { novalidate: true },
        inv.error ? h("p", { class: "notice", role: "status" }, `The vSphere tree is not available (${errorText(inv.error)}); showing the VMs the appliance knows.`) : null,
        h(
          "fieldset",
          { class: "p2-fieldset" },
          h("legend", { id: "tree-label" }, "VMs and containers"),
          h("p", { class: "hint" }, "Tick a datacenter, folder, cluster, host or resource pool to protect everything in it, including VMs added later; tick single VMs to protect just them. Exclusions win over every inclusion."),
          h("div", { class: "field" }, h("label", { for: "tree-filter" }, "Filter VMs"), filter),
          treeBox,
        ),
        tagPicker.el,
        h("div", { class: "field" }, h("label", { for: "sel-exnames" }, "Exclude VM names matching (comma-separated patterns, e.g. *-test, tmp?)"), exNames),
        matchOut,
      );
      refresh();
      return {
        key: "vms",
        title: "VMs",
        form,
        focus: filter,
        collect: readInputs,
        validate() {
          const e = [];
          if (!sel.vms.length && !sel.containers.length && !sel.tags.length) e.push({ field: "selection", message: "Select at least one VM, container or tag." });
          const bad = sel.exclude.names.filter((p) => !validPattern(p));
          if (bad.length) e.push({ field: "selection.exclude.names", message: `Bad pattern: ${bad.join(", ")}` });
          return e;
        },
      };
    }

    // ---- step 3: repository
    function stepRepository() {
      const list = repos.map((r, i) =>
        h(
          "div",
          { class: "p2-radio" },
          h("input", { type: "radio", name: "repository", id: `repo-${i}`, value: r.name, checked: st.repository === r.name }),
          h(
            "label",
            { for: `repo-${i}` },
            h("strong", null, r.name),
            h("span", { class: "hint p2-block" }, `${ctx.fmt.plural(r.points, "restore point")} · ${r.encrypted ? "encrypted" : "not encrypted"}${r.path ? ` · ${r.path}` : ""}`),
          ),
        ),
      );
      const form = h(
        "form",
        { novalidate: true },
        h(
          "fieldset",
          { class: "p2-fieldset field", "data-field": "repository" },
          h("legend", null, "Repository the job writes to"),
          list.length ? list : h("p", { class: "empty" }, "No repository is configured on this appliance."),
        ),
      );
      return {
        key: "repository",
        title: "Repository",
        form,
        focus: () => form.querySelector("input[name=repository]:checked") || form.querySelector("input[name=repository]"),
        collect() {
          const c = form.querySelector("input[name=repository]:checked");
          st.repository = c ? c.value : "";
        },
        validate() {
          return st.repository ? [] : [{ field: "repository", message: "Choose a repository." }];
        },
      };
    }

    // ---- step 4: window
    function stepSchedule() {
      const words = h("ul", { class: "p2-words", id: "window-words" });
      const openingsOut = h("ul", { class: "p2-words", id: "window-openings" });
      const summary = h("p", { id: "window-summary", "aria-live": "polite", class: "p2-match" });
      const startsOut = h("ul", { class: "p2-words", id: "window-starts" });
      const every = h(
        "select",
        { name: "everyHours", id: "window-every", "aria-describedby": "window-every-hint" },
        h("option", { value: "0", selected: !st.everyHours }, "Once per opening (once a day in longer openings)"),
        [1, 2, 3, 4, 6, 8, 12].map((n) => h("option", { value: String(n), selected: st.everyHours === n }, `Every ${n} hour${n === 1 ? "" : "s"} while the window is open`)),
      );
      const showStarts = () => {
        const ops = describeOpenings(st.grid);
        const starts = runStarts(st.grid, Number(every.value));
        startsOut.replaceChildren(...ops.map((o, i) => h("li", null, `${o}: runs start ${starts[i]}`)));
      };
      every.addEventListener("change", showStarts);
      const show = (g) => {
        st.grid = g;
        words.replaceChildren(...describeGrid(g).map((t) => h("li", null, t)));
        const ops = describeOpenings(g);
        openingsOut.replaceChildren(...ops.map((t) => h("li", null, t)));
        summary.textContent = `${hoursOpen(g)} hours a week, ${ops.length} opening${ops.length === 1 ? "" : "s"}: ${describeGrid(g).join("; ")}`;
        showStarts();
      };
      const grid = windowGrid(h, st.grid, show);
      grid.classList.add("field");
      grid.setAttribute("data-field", "window");
      const loc = h("input", { name: "window.location", id: "window-tz", value: st.location, list: "tz-list", autocomplete: "off", spellcheck: "false" });
      let zones = [];
      try {
        zones = Intl.supportedValuesOf("timeZone");
      } catch {
        zones = [];
      }
      const tzList = h("datalist", { id: "tz-list" }, zones.map((z) => h("option", { value: z })));
      const close = h(
        "select",
        { name: "onWindowClose", id: "window-close" },
        h("option", { value: "finish", selected: st.onWindowClose !== "cancel" }, "Let running backups finish, start no new ones"),
        h("option", { value: "cancel", selected: st.onWindowClose === "cancel" }, "Cancel running backups"),
      );
      const quick = (label, fn) => {
        const b = h("button", { type: "button", class: "p2-small" }, label);
        b.addEventListener("click", () => grid.set(fn()));
        return b;
      };
      const dailyHour = h(
        "select",
        { id: "daily-at-hour", "aria-label": "Hour of the daily run" },
        Array.from({ length: 24 }, (_, i) => h("option", { value: String(i), selected: i === 22 }, `${String(i).padStart(2, "0")}:00`)),
      );
      const daily = h("button", { type: "button", class: "p2-small", id: "daily-at" }, "Daily at");
      daily.addEventListener("click", () => {
        every.value = "0";
        grid.set(dailyAt(Number(dailyHour.value)));
      });
      const form = h(
        "form",
        { novalidate: true },
        h("h3", { class: "p2-sub", id: "grid-title" }, "When may backups run?"),
        h(
          "p",
          { class: "hint", id: "window-grid-help" },
          "Paint hours with the mouse or a finger: drag across cells to open them, start on an open cell to close them. With the keyboard: arrow keys move, Space toggles the hour, Shift+arrow paints while moving.",
        ),
        fromWin.approximate ? h("p", { class: "notice", role: "status" }, "This job's window has ranges that do not start or end on the hour; the grid shows them rounded to whole hours, and saving stores the grid as painted.") : null,
        h("div", { class: "p2-actions", role: "group", "aria-label": "Quick windows" }, quick("Nights and weekends", defaultWindow), quick("Every night 22:00–06:00", nightly), quick("Always", always), quick("Clear", emptyGrid), h("span", null, daily, " ", dailyHour)),
        grid,
        h("h3", { class: "p2-sub" }, "The window in words"),
        words,
        h("details", null, h("summary", null, "Openings (when backups start)"), openingsOut),
        summary,
        h("div", { class: "field" }, h("label", { for: "window-tz" }, "Time zone of the window"), loc, tzList),
        h("div", { class: "field" }, h("label", { for: "window-close" }, "When the window closes"), close),
        h(
          "div",
          { class: "field", "data-field": "everyHours" },
          h("label", { for: "window-every" }, "How often a run starts"),
          every,
          h("p", { class: "hint", id: "window-every-hint" }, "Each run backs every selected VM up once and retries failures until the next run starts or the window closes. A backup still running when the next run starts finishes; only the window's close cancels it (if chosen above)."),
        ),
        h("h3", { class: "p2-sub" }, "When runs start"),
        startsOut,
      );
      show(st.grid);
      return {
        key: "schedule",
        title: "Window",
        form,
        focus: () => grid.focusGrid(),
        collect() {
          st.grid = grid.get();
          st.location = loc.value.trim() || "UTC";
          st.onWindowClose = close.value;
          st.everyHours = Number(every.value) || 0;
        },
        validate() {
          const e = [];
          if (!hoursOpen(st.grid)) e.push({ field: "window", message: "Paint at least one hour." });
          try {
            new Intl.DateTimeFormat("en-US", { timeZone: st.location });
          } catch {
            e.push({ field: "window.location", message: `Unknown time zone "${st.location}" (an IANA name such as Europe/Paris).` });
          }
          return e;
        },
      };
    }

    // ---- step 5: retention and quiesce
    function stepRetention() {
      const inputs = {};
      const desc = h("p", { class: "p2-match", id: "retention-words", "aria-live": "polite" });
      const fill = () => {
        const r = st.preset === "custom" ? st.retention : retentionFor(st.preset);
        for (const f of FIELDS) inputs[f.key].value = String(r[f.key]);
        desc.textContent = `Keeps ${describeRetention(r)} restore points per VM.`;
      };
      const presetRadios = [...PRESETS, { id: "custom", title: "Custom", r: null }].map((p) => {
        const rid = `ret-${p.id}`;
        const input = h("input", { type: "radio", name: "retentionPreset", id: rid, value: p.id, checked: st.preset === p.id });
        input.addEventListener("change", () => {
          if (!input.checked) return;
          if (p.id === "custom") st.retention = normalize(st.preset === "custom" ? st.retention : retentionFor(st.preset));
          st.preset = p.id;
          fill();
        });
        return h("div", { class: "p2-radio" }, input, h("label", { for: rid }, h("strong", null, p.title), h("span", { class: "hint p2-block" }, p.r ? describeRetention(p.r) : "Set the counts below.")));
      });
      const counts = FIELDS.map((f) => {
        const i = h("input", { type: "number", min: "0", max: "10000", step: "1", name: `retention.${f.key}`, id: `ret-count-${f.key}`, inputmode: "numeric" });
        inputs[f.key] = i;
        i.addEventListener("input", () => {
          // Editing a count makes the policy custom, starting from the preset shown.
          if (st.preset !== "custom") {
            st.retention = normalize(retentionFor(st.preset));
            st.preset = "custom";
            const c = document.getElementById("ret-custom");
            if (c) c.checked = true;
          }
          st.retention[f.key] = i.value === "" ? 0 : Number(i.value);
          desc.textContent = `Keeps ${describeRetention(st.retention)} restore points per VM.`;
        });
        return h("div", { class: "field p2-count" }, h("label", { for: i.id }, f.label), i);
      });
      const quiesce = QUIESCE.map((q) =>
        h(
          "div",
          { class: "p2-radio" },
          h("input", { type: "radio", name: "quiesce", id: `q-${q.id}`, value: q.id, checked: st.quiesce === q.id }),
          h("label", { for: `q-${q.id}` }, h("strong", null, q.title), h("span", { class: "hint p2-block" }, q.text)),
        ),
      );
      const required = h("input", { type: "checkbox", name: "quiesceRequired", id: "q-required", checked: st.quiesceRequired && st.quiesce !== "none", "aria-describedby": "q-required-hint" });
      const requiredHint = h(
        "p",
        { class: "hint", id: "q-required-hint" },
        "Without it, a VM whose guest cannot be quiesced (VMware Tools not running or quiescing failed) is still backed up, crash-consistent, with a warning. With it, that VM's backup fails instead: its snapshot is removed, no restore point is made for it in that run and the run reports the reason; the scheduler retries it while the window is open. Choose it only when a crash-consistent point is worse than none.",
      );
      const vss = h(
        "select",
        { name: "vssType", id: "q-vss", "aria-describedby": "q-vss-hint" },
        h("option", { value: "copy", selected: st.vssType !== "full" }, "Copy: leave the applications' logs alone (another product backs them up)"),
        h("option", { value: "full", selected: st.vssType === "full" }, "Full: let SQL Server and Exchange truncate their logs (vmvault is their only backup)"),
      );
      const vssHint = h("p", { class: "hint", id: "q-vss-hint" }, "Applies to application-consistent quiescing of Windows guests only.");
      const syncRequired = () => {
        const mode = form.querySelector("input[name=quiesce]:checked")?.value;
        required.disabled = mode === "none";
        if (mode === "none") required.checked = false;
        vss.disabled = mode !== "application";
      };
      const form = h(
        "form",
        { novalidate: true },
        h("fieldset", { class: "p2-fieldset field", "data-field": "retention" }, h("legend", null, "Retention: which restore points to keep"), presetRadios, h("div", { class: "p2-counts" }, counts), desc),
        h(
          "fieldset",
          { class: "p2-fieldset field", "data-field": "quiesce" },
          h("legend", null, "Quiescing"),
          quiesce,
          h("div", { class: "field", "data-field": "vssType" }, h("label", { for: "q-vss" }, "VSS backup type"), vss, vssHint),
          h("div", { class: "field p2-check", "data-field": "quiesceRequired" }, required, h("label", { for: "q-required" }, "Require quiescing: fail the VM's backup rather than fall back to crash-consistent")),
          requiredHint,
        ),
      );
      for (const r of form.querySelectorAll("input[name=quiesce]")) r.addEventListener("change", syncRequired);
      syncRequired();
      fill();
      return {
        key: "retention",
        title: "Retention",
        form,
        focus: () => form.querySelector("input[name=retentionPreset]:checked"),
        collect() {
          const c = form.querySelector("input[name=retentionPreset]:checked");
          st.preset = c ? c.value : "custom";
          if (st.preset === "custom") for (const f of FIELDS) st.retention[f.key] = inputs[f.key].value === "" ? 0 : Number(inputs[f.key].value);
          const q = form.querySelector("input[name=quiesce]:checked");
          st.quiesce = q ? q.value : "filesystem";
          st.quiesceRequired = st.quiesce !== "none" && required.checked;
          st.vssType = vss.value === "full" ? "full" : "copy";
        },
        validate() {
          return Object.entries(validateRetention(retentionObj())).map(([field, message]) => ({ field, message }));
        },
      };
    }

    // noPointsText says why the preview lists no point: the repository may
    // hold points, only none of this job's (a saved job's preview only sees
    // its own, so ask the repository how many it holds).
    async function noPointsText(decisions, scoped) {
      let total = decisions.length;
      if (editId) {
        try {
          const pts = (await ctx.api("GET", `/restore-points?repository=${encodeURIComponent(st.repository || "")}`)) || [];
          total = pts.length;
        } catch {
          return "This job has no restore points yet: nothing would be removed.";
        }
      }
      if (!total) return "The repository holds no restore points yet: nothing would be removed.";
      const whose = editId ? "none of them made by this job" : scoped ? "none of them of the VMs this job selects" : "none of them in the preview";
      return `The repository holds ${ctx.fmt.plural(total, "restore point")}, ${whose}: nothing would be removed.`;
    }

    // ---- step 6: retention preview
    function stepPreview() {
      const out = h("div", { id: "retention-preview", "aria-live": "polite", "aria-busy": "false" });
      const form = h("form", { novalidate: true }, h("p", { class: "hint" }, "What this retention would keep and remove in the chosen repository today, before anything is saved."), out);
      let seq = 0;
      return {
        key: "preview",
        title: "Preview",
        form,
        focus: null,
        async onShow() {
          const mine = ++seq;
          out.setAttribute("aria-busy", "true");
          out.replaceChildren(h("p", { class: "loading" }, "Computing the preview…"));
          const body = { repository: st.repository, retention: retentionObj() };
          if (editId) body.job = editId;
          let p;
          try {
            p = await ctx.api("POST", "/retention-preview", body);
          } catch (e) {
            if (mine !== seq) return;
            out.setAttribute("aria-busy", "false");
            out.replaceChildren(h("p", { class: "form-error", role: "alert" }, `No preview: ${errorText(e)}`));
            return;
          }
          if (mine !== seq) return;
          out.setAttribute("aria-busy", "false");
          const decisions = (p && p.decisions) || [];
          // A new job has no points of its own yet: show what its retention
          // would do to the points the repository holds for the VMs it selects.
          const selected = new Set(matchedVMs(st.selection, tree).map(vmKey));
          const scoped = !editId && selected.size > 0;
          const jobPts = scoped ? decisions.filter((d) => selected.has(d.vm)) : decisions;
          const keep = scoped ? jobPts.filter((d) => d.keep).length : pick(p, "keep") ?? 0;
          const remove = scoped ? jobPts.length - keep : pick(p, "remove") ?? 0;
          const freed = scoped ? jobPts.filter((d) => !d.keep).reduce((n, d) => n + (d.bytes || 0), 0) : pick(p, "bytesFreed") || 0;
          out.replaceChildren(
            h(
              "p",
              { class: "hint" },
              editId
                ? "Applied to this job's restore points."
                : scoped
                  ? "This job has no restore points yet: the preview applies its retention to the points the repository already holds for the VMs it selects."
                  : "Applied to every restore point in the repository.",
            ),
            h("p", { class: "p2-preview-summary", id: "preview-summary" }, `Would keep ${keep} and remove ${remove} restore point${remove === 1 ? "" : "s"}${remove ? `, freeing about ${ctx.fmt.bytes(freed)}` : ": nothing would be freed"}.`),
            jobPts.length
              ? h(
                  "div",
                  { class: "table-wrap" },
                  h(
                    "table",
                    { class: "p2-table" },
                    h("caption", { class: "visually-hidden" }, "Retention decisions"),
                    h("thead", null, h("tr", null, ["Point", "VM", "Time", "Decision", "Why"].map((c) => h("th", { scope: "col" }, c)))),
                    h(
                      "tbody",
                      null,
                      jobPts.slice(0, 200).map((d) =>
                        h(
                          "tr",
                          null,
                          h("td", { "data-label": "Point" }, String(d.point || "").slice(0, 12)),
                          h("td", { "data-label": "VM" }, vmNames.get(d.vm) || d.vm || ""),
                          h("td", { "data-label": "Time" }, ctx.fmt.time(d.time)),
                          h("td", { "data-label": "Decision" }, h("span", { class: `badge p2-state p2-state-${d.keep ? "ok" : "warn"}` }, d.keep ? "keep" : "remove"), d.locked ? " (locked)" : ""),
                          h("td", { "data-label": "Why" }, (d.reasons || []).join(", ")),
                        ),
                      ),
                    ),
                  ),
                )
              : h("p", { class: "empty", id: "preview-none" }, await noPointsText(decisions, scoped)),
          );
        },
        collect() {},
        validate() {
          return [];
        },
      };
    }

    // ---- step 7: summary and save
    function stepSummary() {
      const dl = h("dl", { class: "p2-dl", id: "job-summary" });
      const errs = h("div", { id: "save-errors" });
      const form = h("form", { novalidate: true }, errs, dl);
      return {
        key: "summary",
        title: "Summary",
        form,
        errs,
        focus: null,
        onShow() {
          const row = (k, v, step) => {
            const b = h("button", { type: "button", class: "p2-link", "aria-label": `Change ${k}` }, "Change");
            b.addEventListener("click", () => go(steps.findIndex((s) => s.key === step)));
            return [h("dt", null, k), h("dd", null, v, " ", b)];
          };
          dl.replaceChildren(
            ...row("Name", `${st.name} (${st.id})${st.enabled ? "" : " — disabled"}`, "basics"),
            ...row("VMs", describeSelection(st.selection, tree.byId, tagsById), "vms"),
            ...row("Repository", st.repository, "repository"),
            ...row("Window", `${describeGrid(st.grid).join("; ")} (${st.location}); when it closes: ${st.onWindowClose === "cancel" ? "cancel" : "finish"}; ${st.everyHours ? `a run every ${st.everyHours} h while open` : "a run per opening, one a day in longer openings"}`, "schedule"),
            ...row("Retention", describeRetention(retentionObj()), "retention"),
            ...row("Quiescing", `${(QUIESCE.find((q) => q.id === st.quiesce) || {}).title || st.quiesce}${st.quiesce === "application" ? (st.vssType === "full" ? ", VSS full (logs truncated)" : ", VSS copy") : ""}${st.quiesceRequired ? " — required: a VM that cannot be quiesced fails" : st.quiesce === "none" ? "" : " — falls back to crash-consistent"}`, "retention"),
          );
        },
        collect() {},
        validate() {
          return [];
        },
      };
    }

    const steps = [stepBasics(), stepVMs(), stepRepository(), stepSchedule(), stepRetention(), stepPreview(), stepSummary()];
    let cur = 0;
    let visited = 0;
    const stepper = h("ol", { class: "p2-steps", "aria-label": "Steps" });
    const stepButtons = steps.map((s, i) => {
      const b = h("button", { type: "button", class: "p2-step", "data-step": s.key }, h("span", { class: "p2-step-n" }, String(i + 1)), ` ${s.title}`);
      b.addEventListener("click", () => tryGo(i));
      stepper.append(h("li", null, b));
      return b;
    });
    const back = h("button", { type: "button", id: "wizard-back" }, "Back");
    const next = h("button", { type: "button", class: "primary", id: "wizard-next" }, "Next");
    const save = h("button", { type: "button", class: "primary", id: "wizard-save" }, editId ? "Save changes" : "Create job");
    const cancel = h("a", { class: "button", href: editId ? `#/jobs/${encodeURIComponent(editId)}` : "#/jobs" }, "Cancel");
    const sections = steps.map((s, i) => {
      const hid = `step-title-${s.key}`;
      s.heading = h("h2", { id: hid, tabindex: "-1" }, `Step ${i + 1} of ${steps.length}: ${s.title}`);
      s.form.setAttribute("aria-labelledby", hid);
      s.form.addEventListener("submit", (e) => {
        e.preventDefault();
        tryGo(cur + 1);
      });
      // Enter in a text field moves on, as in any form.
      s.form.append(h("button", { type: "submit", hidden: true, tabindex: "-1" }, "Next"));
      const sec = h("section", { class: "p2-step-panel", "data-step": s.key, hidden: true }, s.heading, s.form);
      return sec;
    });
    const nav = h("div", { class: "p2-wizard-nav" }, back, next, save, cancel);
    root.append(h("div", { class: "p2-wizard" }, h("div", { class: "p2-stepnav" }, stepper), ...sections, nav));

    function show(i) {
      cur = i;
      visited = Math.max(visited, i);
      sections.forEach((s, k) => (s.hidden = k !== i));
      stepButtons.forEach((b, k) => {
        if (k === i) b.setAttribute("aria-current", "step");
        else b.removeAttribute("aria-current");
        b.disabled = k > visited;
        b.classList.toggle("done", k < i);
      });
      back.disabled = i === 0;
      next.hidden = i === steps.length - 1;
      save.hidden = i !== steps.length - 1;
      const s = steps[i];
      if (s.onShow) s.onShow();
      const f = typeof s.focus === "function" ? s.focus() : s.focus;
      (f || s.heading).focus();
    }

    function check(i) {
      const s = steps[i];
      s.collect();
      const errs = s.validate();
      ctx.fieldErrors(s.form, null);
      if (errs.length) {
        ctx.fieldErrors(s.form, { status: 0, code: "validation", message: "Please correct the fields marked.", fields: errs });
        return false;
      }
      return true;
    }

    function tryGo(i) {
      if (i < 0 || i >= steps.length) return;
      if (i > cur) {
        // Moving forward validates every step on the way.
        for (let k = cur; k < i; k++) {
          if (!check(k)) {
            if (k !== cur) {
              show(k);
              check(k);
            }
            return;
          }
        }
      } else {
        steps[cur].collect();
      }
      show(i);
    }

    function go(i) {
      steps[cur].collect();
      show(i);
    }

    back.addEventListener("click", () => go(cur - 1));
    next.addEventListener("click", () => tryGo(cur + 1));
    save.addEventListener("click", async () => {
      for (let k = 0; k < steps.length - 1; k++) {
        if (!check(k)) {
          show(k);
          check(k);
          return;
        }
      }
      // Only the job's own fields go back: a GET may carry more than PUT accepts.
      const kept = {};
      for (const k of ["priority", "concurrency", "maxAttempts"]) if (orig && orig[k] !== undefined) kept[k] = orig[k];
      const job = {
        ...kept,
        id: st.id,
        name: st.name,
        description: st.description || undefined,
        enabled: st.enabled,
        repository: st.repository,
        selection: compactSelection(st.selection),
        window: windowFromGrid(st.grid, st.location),
        retention: retentionObj(),
        quiesce: st.quiesce,
        quiesceRequired: st.quiesceRequired || undefined,
        vssType: st.quiesce === "application" && st.vssType === "full" ? "full" : undefined,
        onWindowClose: st.onWindowClose,
        everyHours: st.everyHours || undefined,
      };
      if (!job.description) delete job.description;
      save.disabled = true;
      save.textContent = "Saving…";
      const summary = steps[steps.length - 1];
      ctx.fieldErrors(summary.form, null);
      try {
        const res = editId ? await ctx.api("PUT", `/jobs/${encodeURIComponent(editId)}`, job) : await ctx.api("POST", "/jobs", job);
        const warnings = (res && res.warnings) || [];
        ctx.toast(`Job ${st.name} ${editId ? "saved" : "created"}.${warnings.length ? ` Note: ${warnings.join("; ")}` : ""}`, warnings.length ? "info" : "success");
        ctx.navigate(`#/jobs/${encodeURIComponent(st.id)}`);
      } catch (e) {
        save.disabled = false;
        save.textContent = editId ? "Save changes" : "Create job";
        handleSaveError(e);
      }
    });

    function handleSaveError(e) {
      const fields = (e.fields || []).slice();
      if (e.status === 409 && !fields.length) fields.push({ field: "id", message: e.message });
      const summary = steps[steps.length - 1];
      if (!fields.length) {
        ctx.fieldErrors(summary.form, { message: errorText(e), fields: [] });
        return;
      }
      const err = { status: e.status, code: e.code, message: e.message, fields };
      const owned = (f, prefixes) => prefixes.some((p) => f.field === p || f.field.startsWith(p + ".") || f.field.startsWith(p + "["));
      let first = -1;
      let firstErr = null;
      for (const [key, prefixes] of OWNERS) {
        const idx = steps.findIndex((s) => s.key === key);
        const mine = scopedErrors(err, prefixes);
        // Window errors about the time zone belong on the time zone input.
        if (key === "schedule") for (const f of mine.fields) if (/location|zone/i.test(f.message)) f.field = "window.location";
        ctx.fieldErrors(steps[idx].form, null);
        if (!mine.fields.length) continue;
        ctx.fieldErrors(steps[idx].form, mine);
        if (first < 0) {
          first = idx;
          firstErr = mine;
        }
      }
      const unowned = fields.filter((f) => !OWNERS.some(([, prefixes]) => owned(f, prefixes)));
      ctx.fieldErrors(summary.form, { message: `The appliance refused the job: ${fields.map((f) => `${f.field}: ${f.message}`).join("; ")}`, fields: [] });
      if (first >= 0 && !unowned.length) {
        show(first);
        ctx.fieldErrors(steps[first].form, firstErr);
      }
    }

    show(0);
  },
};
