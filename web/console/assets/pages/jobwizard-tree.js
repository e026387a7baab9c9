// The inventory tree (GET /inventory: a flat list of nodes) and the job
// selection model (policy.Selection). Pure functions.

// KIND maps inventory node types to policy.ContainerKind (the names differ
// only for resource pools).
const KIND = {
  datacenter: "datacenter",
  folder: "folder",
  cluster: "cluster",
  host: "host",
  "resource-pool": "resourcepool",
  resourcepool: "resourcepool",
};

export function containerKind(type) {
  return KIND[type] || null;
}

// buildTree links nodes to their parents; unknown parents become roots.
// Children are sorted containers first, then by name.
export function buildTree(nodes) {
  const byId = new Map();
  for (const n of nodes || []) byId.set(n.id, { ...n, children: [] });
  const roots = [];
  for (const n of byId.values()) {
    const p = n.parent && byId.get(n.parent);
    if (p && p !== n) p.children.push(n);
    else roots.push(n);
  }
  // Count the VMs below each node (shown next to containers).
  const count = (n) => (n.vms = n.children.reduce((k, c) => k + count(c), 0) + (n.type === "vm" ? 1 : 0));
  roots.forEach(count);
  // A datacenter's datastore and network folders never hold VMs: leave
  // them out. Its VM folder comes first, where the VMs are.
  for (const n of byId.values()) {
    if (n.type !== "datacenter") continue;
    n.children = n.children.filter((c) => !(c.type === "folder" && (c.name === "datastore" || c.name === "network") && c.vms === 0));
  }
  const rank = (n) => (n.type === "vm" ? 2 : n.type === "folder" && n.name === "vm" && byId.get(n.parent)?.type === "datacenter" ? 0 : 1);
  const order = (a, b) => rank(a) - rank(b) || String(a.name).localeCompare(String(b.name));
  const sortRec = (list) => {
    list.sort(order);
    for (const n of list) sortRec(n.children);
  };
  sortRec(roots);
  return { roots, byId };
}

// vmKey is a VM node's identity in a selection: its instance UUID.
export function vmKey(n) {
  return n.instanceUuid || "";
}

export function emptySelection() {
  return { vms: [], containers: [], tags: [], exclude: { vms: [], names: [], tags: [] } };
}

// normalizeSelection fills every list so the wizard can edit without checks.
export function normalizeSelection(s) {
  const e = emptySelection();
  if (!s) return e;
  return {
    vms: [...(s.vms || [])],
    containers: (s.containers || []).map((c) => ({ ...c })),
    tags: [...(s.tags || [])],
    exclude: {
      vms: [...((s.exclude && s.exclude.vms) || [])],
      names: [...((s.exclude && s.exclude.names) || [])],
      tags: [...((s.exclude && s.exclude.tags) || [])],
    },
  };
}

// compactSelection drops empty lists (the API's omitempty form).
export function compactSelection(s) {
  const out = {};
  if (s.vms.length) out.vms = s.vms;
  if (s.containers.length) out.containers = s.containers;
  if (s.tags.length) out.tags = s.tags;
  const ex = {};
  for (const k of ["vms", "names", "tags"]) if (s.exclude[k].length) ex[k] = s.exclude[k];
  if (Object.keys(ex).length) out.exclude = ex;
  return out;
}

export function isIncluded(sel, node) {
  if (node.type === "vm") return sel.vms.includes(vmKey(node));
  const k = containerKind(node.type);
  return sel.containers.some((c) => c.kind === k && c.id === node.id);
}

export function isExcluded(sel, node) {
  return node.type === "vm" && sel.exclude.vms.includes(vmKey(node));
}

// toggleInclude adds or removes a node (VM or container) from the selection.
export function toggleInclude(sel, node, on) {
  if (node.type === "vm") {
    const id = vmKey(node);
    sel.vms = sel.vms.filter((x) => x !== id);
    if (on) sel.vms.push(id);
    return sel;
  }
  const k = containerKind(node.type);
  if (!k) return sel;
  sel.containers = sel.containers.filter((c) => !(c.kind === k && c.id === node.id));
  if (on) sel.containers.push({ kind: k, id: node.id, name: node.name });
  return sel;
}

export function toggleExclude(sel, node, on) {
  if (node.type !== "vm") return sel;
  const id = vmKey(node);
  sel.exclude.vms = sel.exclude.vms.filter((x) => x !== id);
  if (on) sel.exclude.vms.push(id);
  return sel;
}

// coveredBy reports the included container above node, if any (so the tree
// can show "included through folder X").
export function coveredBy(sel, node, byId) {
  let p = node.parent && byId.get(node.parent);
  while (p) {
    if (isIncluded(sel, p)) return p;
    p = p.parent && byId.get(p.parent);
  }
  return null;
}

// matchedVMs evaluates the selection against the tree the way
// policy.Selection.Matches does: VM nodes carry their tag ids (GET
// /inventory), so tag inclusions and exclusions count too.
export function matchedVMs(sel, tree) {
  const out = [];
  const pats = sel.exclude.names.map(globToRegExp);
  const tagged = (n, list) => list.length > 0 && (n.tags || []).some((t) => list.includes(t));
  for (const n of tree.byId.values()) {
    if (n.type !== "vm") continue;
    if (isExcluded(sel, n) || tagged(n, sel.exclude.tags)) continue;
    if (pats.some((re) => re.test(n.name))) continue;
    if (isIncluded(sel, n) || coveredBy(sel, n, tree.byId) || tagged(n, sel.tags)) out.push(n);
  }
  out.sort((a, b) => String(a.name).localeCompare(String(b.name)));
  return out;
}

// globToRegExp mirrors path.Match's *, ? and [...] (case-insensitive).
export function globToRegExp(p) {
  let re = "";
  const s = String(p);
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === "*") re += "[^/]*";
    else if (c === "?") re += "[^/]";
    else if (c === "[") {
      const j = s.indexOf("]", i + 1);
      if (j < 0) return /(?!)/;
      let body = s.slice(i + 1, j);
      if (body.startsWith("^")) body = "^" + body.slice(1).replace(/[\\\]]/g, "\\$&");
      else body = body.replace(/[\\\]^]/g, "\\$&");
      re += `[${body}]`;
      i = j;
    } else if (c === "\\" && i + 1 < s.length) {
      re += s[++i].replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    } else re += c.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  }
  return new RegExp(`^${re}$`, "i");
}

// validPattern says whether a name pattern is acceptable to path.Match.
export function validPattern(p) {
  if (!p) return false;
  let depth = 0;
  for (let i = 0; i < p.length; i++) {
    if (p[i] === "\\") i++;
    else if (p[i] === "[") depth++;
    else if (p[i] === "]") depth = Math.max(0, depth - 1);
  }
  return depth === 0 && !p.endsWith("\\");
}

// tagLabel names a tag id "Category / name" from GET /tags (a Map id ->
// {name, category}); an id it does not know (a tag attached to no VM now, or
// deleted) stays the id.
export function tagLabel(id, tags) {
  const t = tags && tags.get(id);
  if (!t) return id;
  return t.category ? `${t.category} / ${t.name}` : t.name;
}

// describeSelection: "2 VMs, 1 folder, tag Environment / production;
// excluding 1 VM, names *-test". tags (optional) names tag ids.
export function describeSelection(sel, byId, tags) {
  const s = normalizeSelection(sel);
  const parts = [];
  const name = (id) => {
    if (!byId) return id;
    for (const n of byId.values()) if (n.type === "vm" && vmKey(n) === id) return n.name;
    return id;
  };
  if (s.vms.length) parts.push(s.vms.length <= 3 ? s.vms.map(name).join(", ") : `${s.vms.length} VMs`);
  for (const c of s.containers) parts.push(`${c.kind} ${c.name || (byId && byId.get(c.id) && byId.get(c.id).name) || c.id}`);
  if (s.tags.length) parts.push(`tag${s.tags.length > 1 ? "s" : ""} ${s.tags.map((t) => tagLabel(t, tags)).join(", ")}`);
  const ex = [];
  if (s.exclude.vms.length) ex.push(s.exclude.vms.map(name).join(", "));
  if (s.exclude.names.length) ex.push(`names ${s.exclude.names.join(", ")}`);
  if (s.exclude.tags.length) ex.push(`tag${s.exclude.tags.length > 1 ? "s" : ""} ${s.exclude.tags.map((t) => tagLabel(t, tags)).join(", ")}`);
  let out = parts.length ? parts.join("; ") : "nothing";
  if (ex.length) out += ` — excluding ${ex.join("; ")}`;
  return out;
}
