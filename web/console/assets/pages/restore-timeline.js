// Restore points on a timeline: grouped by local calendar day, newest first,
// with the words for their consistency. Pure functions.

// dayKey is the calendar day of an instant (YYYY-MM-DD) in time zone tz
// (the appliance's, so days match the times the console shows; undefined:
// the browser's).
export function dayKey(t, tz) {
  const d = t instanceof Date ? t : new Date(t);
  let f;
  try {
    f = new Intl.DateTimeFormat("en-CA", { timeZone: tz, year: "numeric", month: "2-digit", day: "2-digit" });
  } catch {
    f = new Intl.DateTimeFormat("en-CA", { year: "numeric", month: "2-digit", day: "2-digit" });
  }
  const p = Object.fromEntries(f.formatToParts(d).map((x) => [x.type, x.value]));
  return `${p.year}-${p.month}-${p.day}`;
}

// groupByDay returns [{day, label, points}] newest day first, points newest first.
export function groupByDay(points, now = new Date(), tz) {
  const sorted = [...(points || [])].sort((a, b) => new Date(b.time) - new Date(a.time));
  const groups = [];
  const byDay = new Map();
  for (const p of sorted) {
    const k = dayKey(p.time, tz);
    if (!byDay.has(k)) {
      const g = { day: k, label: dayLabel(k, now, tz), points: [] };
      byDay.set(k, g);
      groups.push(g);
    }
    byDay.get(k).points.push(p);
  }
  return groups;
}

export function dayLabel(key, now = new Date(), tz) {
  if (key === dayKey(now, tz)) return "Today";
  if (key === dayKey(new Date(now.getTime() - 86400000), tz)) return "Yesterday";
  const [yy, mm, dd] = key.split("-").map(Number);
  // Noon UTC of that date names the same calendar day in every zone.
  return new Date(Date.UTC(yy, mm - 1, dd, 12)).toLocaleDateString("en-GB", { timeZone: "UTC", weekday: "long", year: "numeric", month: "long", day: "numeric" });
}

// consistency says what a point's consistency means to an administrator.
export function consistency(p) {
  if (p && p.partial) return { label: "partial", kind: "bad", text: "Partial: some disks are missing; restore what is there only." };
  const c = String((p && p.consistency) || "").toLowerCase();
  if (c.includes("app")) return { label: "application-consistent", kind: "good", text: "Applications flushed their data (VSS writers) before the snapshot." };
  if (c.includes("file")) return { label: "file-system-consistent", kind: "good", text: "The guest file systems were quiesced before the snapshot." };
  if (c.includes("crash") || c === "" || c === "none") return { label: "crash-consistent", kind: "warn", text: "Like a power cut: the guest was not quiesced." };
  return { label: c, kind: "", text: "" };
}

// pointKey identifies the VM a point belongs to (instance UUID, else name).
export function pointVM(p) {
  return (p.vm && (p.vm.instanceUuid || p.vm.name)) || "";
}

// vmChoices merges inventory VMs (GET /vms) and VMs known only from restore
// points into one list: {key, name, inInventory, points}.
export function vmChoices(vms, points) {
  const out = new Map();
  for (const v of vms || []) {
    const key = v.instanceUuid || v.name;
    out.set(key, { key, name: v.name, inInventory: !!v.inInventory, points: 0 });
  }
  for (const p of points || []) {
    const key = pointVM(p);
    if (!out.has(key)) out.set(key, { key, name: (p.vm && p.vm.name) || key, inInventory: false, points: 0 });
    const c = out.get(key);
    c.points++;
    if (!c.newest || new Date(p.time) > new Date(c.newest)) c.newest = p.time;
  }
  return [...out.values()].sort((a, b) => String(a.name).localeCompare(String(b.name)));
}

// pointSize is what the point needs on a datastore when restored thick.
export function pointSize(p) {
  const disks = (p && p.disks) || [];
  const sum = disks.reduce((n, d) => n + (d.capacity || 0), 0);
  return sum || (p && p.logicalBytes) || 0;
}

// datastoreFit says whether a restore of need bytes fits a datastore:
// short when its free space is below need (thick disks take their full
// size; thin disks only what is written, so short is then a warning).
export function datastoreFit(ds, need, thin) {
  const free = Number(ds && ds.free) || 0;
  const short = free < need;
  return { short, blocking: short && !thin };
}
