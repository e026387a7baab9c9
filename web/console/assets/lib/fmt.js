// Formatting of sizes, ratios, times and durations for people.

const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];

export function bytes(n) {
  if (n === null || n === undefined || Number.isNaN(Number(n))) return "–";
  let v = Number(n);
  let i = 0;
  while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i += 1; }
  return `${i === 0 ? Math.round(v) : v.toFixed(v >= 100 ? 0 : 1)} ${units[i]}`;
}

// sig3 writes v with three significant digits (34.9, 5.00, 812).
function sig3(v) {
  const a = Math.abs(v);
  return v.toFixed(a >= 100 ? 0 : a >= 10 ? 1 : 2);
}

export function ratio(x) {
  if (x === null || x === undefined || !Number.isFinite(Number(x)) || Number(x) <= 0) return "–";
  return `${Number(x).toFixed(2)}×`;
}

let zone;
export function setTimeZone(tz) {
  try {
    new Intl.DateTimeFormat("en-GB", { timeZone: tz });
    zone = tz;
  } catch { zone = undefined; }
}

export function time(t) {
  if (!t) return "–";
  const d = t instanceof Date ? t : new Date(t);
  if (Number.isNaN(d.getTime()) || d.getUTCFullYear() <= 1) return "–";
  return new Intl.DateTimeFormat("en-GB", {
    timeZone: zone, year: "numeric", month: "short", day: "2-digit",
    hour: "2-digit", minute: "2-digit", second: "2-digit",
  }).format(d);
}

// utc writes t in UTC to the second ("2026-11-29 12:00:00 UTC"): the
// title of every time shown in the console's zone.
export function utc(t) {
  const d = t instanceof Date ? t : new Date(t);
  if (Number.isNaN(d.getTime()) || d.getUTCFullYear() <= 1) return "";
  return `${d.toISOString().slice(0, 19).replace("T", " ")} UTC`;
}

// timeEl is t in the console's time zone, with the UTC time on hover.
export function timeEl(t) {
  const el = document.createElement("time");
  const u = utc(t);
  if (u) {
    el.setAttribute("datetime", new Date(t).toISOString());
    el.title = u;
  }
  el.textContent = time(t);
  return el;
}

// zonedTimes rewrites the UTC times a server message carries (RFC 3339, or
// "2026-11-29 12:00[:00] UTC") in the console's time zone: a list of text
// and <time> nodes (the UTC time in their title), or null when there is none.
const utcInText = /\b(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}(?::\d{2})?)(?:\.\d+)?(?:Z| UTC)/g;
export function zonedTimes(text) {
  const s = String(text ?? "");
  const out = [];
  let last = 0;
  for (const m of s.matchAll(utcInText)) {
    const d = new Date(`${m[1]}T${m[2].length === 5 ? `${m[2]}:00` : m[2]}Z`);
    if (Number.isNaN(d.getTime())) continue;
    out.push(s.slice(last, m.index), timeEl(d));
    last = m.index + m[0].length;
  }
  if (!out.length) return null;
  out.push(s.slice(last));
  return out;
}

export function duration(seconds) {
  if (seconds === null || seconds === undefined || !Number.isFinite(Number(seconds)) || seconds < 0) return "–";
  let s = Math.round(Number(seconds));
  if (s < 60) return `${s}s`;
  const d = Math.floor(s / 86400); s -= d * 86400;
  const hh = Math.floor(s / 3600); s -= hh * 3600;
  const m = Math.floor(s / 60); s -= m * 60;
  if (d) return `${d}d ${hh}h`;
  if (hh) return `${hh}h ${m}m`;
  return `${m}m ${s}s`;
}

export function rate(bytesPerSecond) {
  if (!bytesPerSecond || !Number.isFinite(Number(bytesPerSecond))) return "–";
  let v = Number(bytesPerSecond);
  let i = 0;
  while (Math.abs(v) >= 1000 && i < units.length - 1) { v /= 1024; i += 1; }
  return `${sig3(v)} ${units[i]}/s`;
}

// plural: "1 VM", "3 VMs" (many defaults to one + "s").
export function plural(n, one, many) {
  const k = Number(n) || 0;
  return `${k} ${k === 1 ? one : many || `${one}s`}`;
}

// shortId shortens a long hex id (a restore point's 64 digits) to its
// first 12: enough to tell points apart, short enough for a title.
export function shortId(s) {
  const v = String(s ?? "");
  return /^[0-9a-f]{32,}$/i.test(v) ? `${v.slice(0, 12)}…` : v;
}

// pick returns the first defined field among names (kept for fields that differ between endpoints; the API itself is all camelCase).
export function pick(obj, ...names) {
  if (!obj) return undefined;
  for (const n of names) if (obj[n] !== undefined && obj[n] !== null) return obj[n];
  return undefined;
}

// readableIds rewrites the ids a server message carries as people read
// them: an instance UUID known in vmNames (a Map) as the VM's name, a
// restore point's 64-digit id as its first 12 digits.
export function readableIds(text, vmNames) {
  return String(text ?? "")
    .replace(/\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/gi, (u) => (vmNames && vmNames.get(u)) || u)
    .replace(/\b[0-9a-f]{64}\b/gi, (id) => `${id.slice(0, 12)}…`);
}
