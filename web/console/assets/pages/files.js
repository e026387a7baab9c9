// File-level restore (#/files): a search over the file catalog of every
// restore point ("which points hold report.docx?", versions side by side)
// and a file browser inside one point (#/files?point=<id>[&vol=<id>][&path=/etc]):
// the point's volumes, a directory tree, breadcrumbs, sizes and dates,
// multi-select, and downloads of a file or of a selection as a zip.
// Downloads are plain links to the API (Content-Disposition: attachment):
// nothing a restored file holds is ever rendered in the console.
import { h, clear, field, table, badge } from "../lib/dom.js";

let cssLoaded = null;
function ensureFilesCSS() {
  if (cssLoaded) return cssLoaded;
  cssLoaded = new Promise((resolve) => {
    const l = document.createElement("link");
    l.id = "files-css";
    l.rel = "stylesheet";
    l.href = "/assets/pages/files.css";
    l.addEventListener("load", () => resolve());
    l.addEventListener("error", () => resolve());
    setTimeout(resolve, 2000);
    document.head.appendChild(l);
  });
  return cssLoaded;
}

const enc = encodeURIComponent;
const PAGE = 500;

function volPath(point, vol, kind) {
  return `/restore-points/${enc(point)}/volumes/${enc(vol)}/${kind}`;
}

// contentURL is the download link of paths (one file: its bytes; else an archive).
export function contentURL(point, vol, paths, format) {
  const q = new URLSearchParams();
  for (const p of paths) q.append("path", p);
  if (format) q.set("format", format);
  return `/api/v1${volPath(point, vol, "content")}?${q.toString()}`;
}

function join(dir, name) {
  return dir === "/" ? `/${name}` : `${dir}/${name}`;
}

function parentOf(p) {
  const i = p.lastIndexOf("/");
  return i <= 0 ? "/" : p.slice(0, i);
}

function volTitle(v, fmt) {
  const where = v.lv ? `LV ${v.lv}` : v.partition != null ? `${v.disk} partition ${v.partition}` : v.disk;
  return `${v.label || v.id} · ${v.fs} · ${fmt.bytes(v.size)} · ${where}`;
}

function download(url) {
  const a = h("a", { href: url, download: "", class: "visually-hidden" }, "download");
  document.body.append(a);
  a.click();
  a.remove();
}

export default {
  route: "#/files",
  title: "Restore files",
  nav: true,
  role: "restore-only",
  async render(root, ctx) {
    await ensureFilesCSS();
    const point = ctx.query.get("point");
    root.append(searchSection(ctx));
    if (point) root.append(await browser(ctx, point));
    else root.append(await pointChooser(ctx));
  },
};

// ---- search over the catalog

function searchSection(ctx) {
  const { fmt } = ctx;
  const q = h("input", { id: "files-q", name: "q", type: "search", autocomplete: "off", spellcheck: "false", value: ctx.query.get("q") || "" });
  const vm = h("input", { id: "files-vm", name: "vm", autocomplete: "off", spellcheck: "false", value: ctx.query.get("vm") || "" });
  const out = h("div", { id: "files-results", "aria-live": "polite" });
  const form = h("form", { class: "panel files-search", id: "files-search", role: "search" },
    h("h2", null, "Find a file in every restore point"),
    h("div", { class: "row" },
      field("File name or path", q, "A part of the path (report.docx), or a pattern: *.conf, /home/*/report.docx"),
      field("VM (optional)", vm),
      h("div", { class: "field files-search-go" }, h("button", { type: "submit", class: "primary", id: "files-search-go" }, "Search"))),
    out);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    ctx.fieldErrors(form, null);
    if (!q.value.trim()) {
      ctx.fieldErrors(form, new ctx.ApiError(0, "validation", "", [{ field: "q", message: "Enter a file name or a pattern." }]));
      return;
    }
    clear(out).append(h("p", { class: "loading" }, "Searching…"));
    const params = new URLSearchParams({ q: q.value.trim() });
    if (vm.value.trim()) params.set("vm", vm.value.trim());
    let res;
    try {
      res = await ctx.api("GET", `/files/search?${params}`);
    } catch (e) {
      clear(out);
      if (e.fields && e.fields.length) ctx.fieldErrors(form, e);
      else out.append(h("p", { class: "form-error", role: "alert" }, e.message));
      return;
    }
    clear(out);
    const pending = res.pending || [];
    if (pending.length) out.append(h("p", { class: "notice", id: "files-pending" }, `${pending.length} restore point${pending.length === 1 ? " is" : "s are"} still being catalogued: search again in a minute to include ${pending.length === 1 ? "it" : "them"}.`));
    if (!res.hits.length) {
      out.append(h("p", { class: "empty", id: "files-nohit" }, "No file matches in the catalogued restore points."));
      return;
    }
    if (res.truncated) out.append(h("p", { class: "notice" }, `Showing the first ${res.hits.length} paths: narrow the pattern to see the rest.`));
    for (const hit of res.hits) {
      out.append(h("section", { class: "files-hit", "data-path": hit.path },
        h("h3", null, h("span", { class: "mono" }, hit.path), " ", h("span", { class: "muted" }, `${hit.vm} · volume ${hit.volume} · ${hit.versions.length} version${hit.versions.length === 1 ? "" : "s"}`)),
        table(`!Versions of ${hit.path}`, [
          { label: "Restore point", cell: (v) => fmt.time(v.time) },
          { label: "Size", cell: (v) => (hit.type === "file" ? fmt.bytes(v.size) : hit.type), class: "num" },
          { label: "Modified", cell: (v) => fmt.time(v.mtime) },
          { label: "Actions", cell: (v) => h("span", { class: "files-actions" },
            hit.type === "file" ? h("a", { href: contentURL(v.restorePoint, hit.volume, [hit.path]), download: "", class: "files-get" }, "Download") : null,
            h("a", { href: `#/files?point=${enc(v.restorePoint)}&vol=${enc(hit.volume)}&path=${enc(hit.type === "dir" ? hit.path : parentOf(hit.path))}` }, "Open folder")) },
        ], hit.versions)));
    }
  });
  if (q.value) setTimeout(() => form.requestSubmit(), 0);
  return form;
}

// ---- choose a point

async function pointChooser(ctx) {
  const { fmt } = ctx;
  const pts = await ctx.api("GET", "/restore-points");
  // One group per VM (by name), newest point first; the VM the page was
  // opened for (?vm=, from a VM's "Find files…") is chosen, not whichever
  // VM backed up last.
  const byVM = new Map();
  for (const p of pts) {
    const n = (p.vm && p.vm.name) || "";
    if (!byVM.has(n)) byVM.set(n, []);
    byVM.get(n).push(p);
  }
  const groups = [...byVM.entries()].sort((a, b) => a[0].localeCompare(b[0]));
  for (const [, list] of groups) list.sort((a, b) => String(b.time).localeCompare(String(a.time)));
  const sel = h("select", { id: "files-point", name: "point" },
    groups.map(([n, list]) => h("optgroup", { label: n },
      list.map((p) => h("option", { value: p.id, "data-vm": n }, `${n} — ${fmt.time(p.time)}${p.partial ? " (partial)" : ""}`)))));
  const want = ctx.query.get("vm");
  const first = want && [...sel.options].find((o) => o.dataset.vm === want);
  if (first) sel.value = first.value;
  const box = h("form", { class: "panel", id: "files-choose" },
    h("h2", null, "Browse a restore point"),
    pts.length ? [field("Restore point", sel), h("button", { type: "submit", class: "primary" }, "Browse files")] : h("p", { class: "empty" }, "No restore points yet."));
  box.addEventListener("submit", (ev) => {
    ev.preventDefault();
    ctx.navigate(`#/files?point=${enc(sel.value)}`);
  });
  return box;
}

// ---- browse one point

async function browser(ctx, pointID) {
  const { fmt } = ctx;
  const [pt, vols] = await Promise.all([ctx.api("GET", `/restore-points/${enc(pointID)}`), ctx.api("GET", `/restore-points/${enc(pointID)}/volumes`)]);
  const st = { vol: null, dir: ctx.query.get("path") || "/", entries: [], total: 0, next: null, selected: new Set() };
  const browsable = vols.filter((v) => v.browsable);
  st.vol = (vols.find((v) => v.id === ctx.query.get("vol") && v.browsable) || browsable[0] || {}).id || null;

  const wrap = h("section", { class: "files-browser", id: "files-browser", "data-point": pt.id },
    h("h2", null, `${pt.vm.name} — ${fmt.time(pt.time)}`),
    h("p", { class: "muted" }, h("a", { href: "#/files" }, "Another restore point"), " · ", h("a", { href: `#/restore?point=${enc(pt.id)}` }, "Restore the whole VM or a disk")));

  const volList = h("ul", { class: "files-vols", id: "files-vols", "aria-label": "Volumes" },
    vols.map((v) => h("li", null,
      h("button", { type: "button", class: "files-vol", "data-vol": v.id, "aria-pressed": String(v.id === st.vol), disabled: v.browsable ? null : true, onclick: () => openVolume(v.id) }, volTitle(v, fmt)),
      v.browsable ? null : h("span", { class: "hint" }, " ", badge("cannot be browsed", "warn"), ` ${v.reason || v.fs}`))));
  wrap.append(h("h3", null, "Volumes"), volList);
  if (!st.vol) {
    wrap.append(h("p", { class: "empty", id: "files-novol" }, "No volume of this restore point holds a file system vmvault can read."));
    return wrap;
  }

  const tree = h("ul", { class: "files-tree", id: "files-tree", role: "tree", "aria-label": "Folders" });
  const crumbs = h("nav", { class: "files-crumbs", id: "files-crumbs", "aria-label": "Breadcrumbs" });
  const listing = h("div", { id: "files-listing" });
  const more = h("button", { type: "button", id: "files-more", class: "files-more", hidden: true, onclick: () => loadPage(false) }, "Show more");
  const dlSel = h("button", { type: "button", id: "files-dl-selection", class: "primary", disabled: true, onclick: () => download(contentURL(pt.id, st.vol, [...st.selected], "zip")) }, "Download selection (zip)");
  const dlDir = h("button", { type: "button", id: "files-dl-folder", onclick: () => download(contentURL(pt.id, st.vol, [st.dir], "zip")) }, "Download this folder (zip)");
  const selInfo = h("span", { id: "files-selinfo", class: "muted", "aria-live": "polite" }, "");
  wrap.append(h("div", { class: "files-panes" },
    h("div", { class: "files-tree-pane panel" }, h("h3", null, "Folders"), tree),
    h("div", { class: "files-main" }, crumbs, h("div", { class: "files-toolbar row" }, dlSel, dlDir, selInfo), listing, more)));

  function setHash() {
    const q = new URLSearchParams({ point: pt.id, vol: st.vol, path: st.dir });
    history.replaceState(null, "", `#/files?${q}`);
  }

  function updateSelection() {
    dlSel.disabled = st.selected.size === 0;
    // The link the button downloads, for people (a tooltip) and tests.
    if (st.selected.size) dlSel.dataset.href = contentURL(pt.id, st.vol, [...st.selected], "zip");
    else delete dlSel.dataset.href;
    selInfo.textContent = st.selected.size ? `${st.selected.size} selected` : "";
  }

  function renderCrumbs() {
    const parts = st.dir.split("/").filter(Boolean);
    const items = [h("li", null, h("a", { href: "#", "data-path": "/", onclick: (e) => { e.preventDefault(); openDir("/"); } }, "/"))];
    let acc = "";
    parts.forEach((p, i) => {
      acc += `/${p}`;
      const target = acc;
      items.push(h("li", null, i === parts.length - 1 ? h("span", { "aria-current": "page" }, p) : h("a", { href: "#", "data-path": target, onclick: (e) => { e.preventDefault(); openDir(target); } }, p)));
    });
    clear(crumbs).append(h("ol", null, items));
  }

  function renderListing() {
    const allBox = h("input", { type: "checkbox", id: "files-all", "aria-label": "Select every entry shown", checked: st.entries.length > 0 && st.entries.every((e) => st.selected.has(join(st.dir, e.name))) });
    allBox.addEventListener("change", () => {
      for (const e of st.entries) {
        const p = join(st.dir, e.name);
        if (allBox.checked) st.selected.add(p);
        else st.selected.delete(p);
      }
      renderListing();
      updateSelection();
    });
    const rows = st.entries.map((e) => ({ e, p: join(st.dir, e.name) }));
    const tbl = table(`!Contents of ${st.dir}`, [
      { label: "Select", cell: (r) => {
        const cb = h("input", { type: "checkbox", class: "files-sel", "data-path": r.p, "aria-label": `Select ${r.e.name}`, checked: st.selected.has(r.p) });
        cb.addEventListener("change", () => {
          if (cb.checked) st.selected.add(r.p);
          else st.selected.delete(r.p);
          updateSelection();
        });
        return cb;
      } },
      { label: "Name", cell: (r) => {
        if (r.e.type === "dir") return h("button", { type: "button", class: "files-open link", "data-path": r.p, onclick: () => openDir(r.p) }, `${r.e.name}/`);
        if (r.e.type === "file") return h("a", { href: contentURL(pt.id, st.vol, [r.p]), download: "", class: "files-get", "data-path": r.p }, r.e.name);
        if (r.e.type === "symlink") return h("span", { class: "files-link" }, r.e.name, h("span", { class: "muted" }, ` → ${r.e.target}`));
        return h("span", null, r.e.name);
      } },
      { label: "Size", cell: (r) => (r.e.type === "file" ? fmt.bytes(r.e.size) : r.e.type === "dir" ? "folder" : r.e.type), class: "num" },
      { label: "Modified", cell: (r) => fmt.time(r.e.mtime) },
      { label: "Mode", cell: (r) => h("span", { class: "mono" }, r.e.mode) },
    ], rows, "This folder is empty.");
    clear(listing).append(h("div", { class: "files-listing-head" }, allBox, h("label", { for: "files-all" }, "Select all shown"),
      h("span", { class: "muted", id: "files-count" }, ` · ${st.total} entr${st.total === 1 ? "y" : "ies"}`)), tbl);
    more.hidden = st.next == null;
    if (st.next != null) more.textContent = `Show more (${st.entries.length} of ${st.total})`;
  }

  async function loadPage(reset) {
    const offset = reset ? 0 : st.next || 0;
    const q = new URLSearchParams({ path: st.dir, offset: String(offset), limit: String(PAGE) });
    let l;
    try {
      l = await ctx.api("GET", `${volPath(pt.id, st.vol, "files")}?${q}`);
    } catch (e) {
      clear(listing).append(h("p", { class: "form-error", role: "alert" }, e.message));
      more.hidden = true;
      return;
    }
    st.entries = reset ? l.entries : st.entries.concat(l.entries);
    st.total = l.total;
    st.next = l.nextOffset;
    renderListing();
  }

  async function openDir(dir) {
    st.dir = dir;
    setHash();
    renderCrumbs();
    clear(listing).append(h("p", { class: "loading" }, "Loading…"));
    await loadPage(true);
    revealInTree(dir);
  }

  function openVolume(id) {
    st.vol = id;
    st.selected.clear();
    updateSelection();
    for (const b of volList.querySelectorAll("button.files-vol")) b.setAttribute("aria-pressed", String(b.dataset.vol === id));
    clear(tree).append(treeNode("/", "/"));
    openDir("/");
  }

  // The tree: folders only, loaded when a node is expanded.
  function treeNode(path, name) {
    const kids = h("ul", { role: "group", hidden: true });
    const toggle = h("button", { type: "button", class: "files-toggle", "aria-label": `Expand ${name}`, "aria-expanded": "false" }, "▸");
    const label = h("button", { type: "button", class: "files-node link", "data-path": path, onclick: () => openDir(path) }, name);
    const li = h("li", { role: "treeitem", "data-path": path }, h("span", { class: "files-node-row" }, toggle, label), kids);
    li.expand = async () => {
      if (toggle.getAttribute("aria-expanded") === "true") return;
      toggle.setAttribute("aria-expanded", "true");
      toggle.setAttribute("aria-label", `Collapse ${name}`);
      toggle.textContent = "▾";
      kids.hidden = false;
      if (li.loaded) return;
      li.loaded = true;
      try {
        let off = 0;
        for (;;) {
          const l = await ctx.api("GET", `${volPath(pt.id, st.vol, "files")}?${new URLSearchParams({ path, offset: String(off), limit: "10000" })}`);
          for (const e of l.entries) if (e.type === "dir") kids.append(treeNode(join(path, e.name), e.name));
          if (l.nextOffset == null) break;
          off = l.nextOffset;
        }
      } catch (e) {
        kids.append(h("li", { class: "field-error" }, e.message));
      }
    };
    toggle.addEventListener("click", () => {
      if (toggle.getAttribute("aria-expanded") === "true") {
        toggle.setAttribute("aria-expanded", "false");
        toggle.setAttribute("aria-label", `Expand ${name}`);
        toggle.textContent = "▸";
        kids.hidden = true;
      } else li.expand();
    });
    return li;
  }

  async function revealInTree(dir) {
    let node = tree.querySelector('li[data-path="/"]');
    const parts = dir.split("/").filter(Boolean);
    let acc = "";
    if (node) await node.expand(); // the root's folders are always shown
    for (const p of parts) {
      if (!node) return;
      await node.expand();
      acc += `/${p}`;
      node = [...node.querySelectorAll(":scope > ul > li")].find((li) => li.dataset.path === acc);
    }
    for (const b of tree.querySelectorAll(".files-node[aria-current]")) b.removeAttribute("aria-current");
    if (node) node.querySelector(".files-node").setAttribute("aria-current", "true");
  }

  clear(tree).append(treeNode("/", "/"));
  renderCrumbs();
  openDir(st.dir);
  return wrap;
}
