// The weekly backup window as a 7 x 24 grid of hours, and its conversions to
// and from the API's window JSON ({"location":"Europe/Paris","days":{"monday":["22:00-06:00"]}}).
// Pure functions: no DOM, so the grid page and the jobs list share them and the
// browser tests can import and check them directly.

// Rows run Monday to Sunday (ISO order, as administrators read a week);
// the API names days, so row order never leaks into the JSON.
export const DAYS = [
  { key: "monday", short: "Mon", long: "Monday" },
  { key: "tuesday", short: "Tue", long: "Tuesday" },
  { key: "wednesday", short: "Wed", long: "Wednesday" },
  { key: "thursday", short: "Thu", long: "Thursday" },
  { key: "friday", short: "Fri", long: "Friday" },
  { key: "saturday", short: "Sat", long: "Saturday" },
  { key: "sunday", short: "Sun", long: "Sunday" },
];

const MIN_PER_DAY = 1440;
const MIN_PER_WEEK = 7 * MIN_PER_DAY;

export function emptyGrid() {
  return DAYS.map(() => new Array(24).fill(false));
}

export function cloneGrid(g) {
  return g.map((row) => row.slice());
}

function dayIndex(name) {
  const n = String(name).toLowerCase();
  return DAYS.findIndex((d) => d.key === n || d.key.slice(0, 3) === n);
}

function parseHHMM(s, allow24) {
  const m = /^(\d\d):(\d\d)$/.exec(String(s).trim());
  if (!m) return null;
  const h = Number(m[1]);
  const min = Number(m[2]);
  const v = h * 60 + min;
  if (min > 59) return null;
  if (v === MIN_PER_DAY && allow24) return v;
  if (v >= MIN_PER_DAY) return null;
  return v;
}

// parseRange mirrors policy.ParseRange: "HH:MM-HH:MM", an end of 00:00 means
// midnight at the end of the day, and an end at or before the start crosses
// midnight into the next day.
export function parseRange(s) {
  const parts = String(s).split("-");
  if (parts.length !== 2) return null;
  const start = parseHHMM(parts[0], false);
  let end = parseHHMM(parts[1], true);
  if (start === null || end === null) return null;
  if (end === 0) end = MIN_PER_DAY;
  return { start, end };
}

// intervals turns window JSON into [start, end) minutes of the week (Monday
// 00:00 = 0), splitting ranges that cross midnight or wrap Sunday into Monday.
export function intervals(win) {
  const out = [];
  const days = (win && win.days) || {};
  for (const [name, ranges] of Object.entries(days)) {
    const d = dayIndex(name);
    if (d < 0) continue;
    for (const rs of ranges || []) {
      const r = parseRange(rs);
      if (!r) continue;
      const s = d * MIN_PER_DAY + r.start;
      const len = r.end > r.start ? r.end - r.start : MIN_PER_DAY - r.start + r.end;
      const e = s + len;
      if (e <= MIN_PER_WEEK) {
        out.push([s, e]);
      } else {
        out.push([s, MIN_PER_WEEK]);
        out.push([0, e - MIN_PER_WEEK]);
      }
    }
  }
  out.sort((a, b) => a[0] - b[0]);
  return out;
}

// gridFromWindow marks every hour the window is open in at least partly.
// approximate says some range does not start or end on the hour, so saving
// the painted grid would round it outwards to whole hours.
export function gridFromWindow(win) {
  const grid = emptyGrid();
  let approximate = false;
  for (const [s, e] of intervals(win)) {
    if (s % 60 !== 0 || e % 60 !== 0) approximate = true;
    for (let h = Math.floor(s / 60); h < Math.ceil(e / 60); h++) {
      grid[Math.floor(h / 24) % 7][h % 24] = true;
    }
  }
  return { grid, approximate };
}

function hhmm(min) {
  return `${String(Math.floor(min / 60)).padStart(2, "0")}:${String(min % 60).padStart(2, "0")}`;
}

// dayRanges lists one day's runs of painted hours as [startHour, endHour).
export function dayRanges(row) {
  const out = [];
  let start = -1;
  for (let h = 0; h <= 24; h++) {
    const on = h < 24 && row[h];
    if (on && start < 0) start = h;
    if (!on && start >= 0) {
      out.push([start, h]);
      start = -1;
    }
  }
  return out;
}

// windowFromGrid is the API form of a painted grid. Ranges stay within their
// day ("18:00-24:00" then "00:00-06:00" next day): policy treats touching
// ranges as one opening, so nothing is lost by not crossing midnight.
export function windowFromGrid(grid, location) {
  const days = {};
  grid.forEach((row, d) => {
    const rs = dayRanges(row).map(([a, b]) => `${hhmm(a * 60)}-${hhmm(b * 60)}`);
    if (rs.length) days[DAYS[d].key] = rs;
  });
  return { location: location || "UTC", days };
}

export function hoursOpen(grid) {
  return grid.reduce((n, row) => n + row.filter(Boolean).length, 0);
}

function rangesText(row) {
  const rs = dayRanges(row);
  if (rs.length === 1 && rs[0][0] === 0 && rs[0][1] === 24) return "all day";
  return rs.map(([a, b]) => `${hhmm(a * 60)}–${hhmm(b * 60)}`).join(", ");
}

function dayList(idx) {
  // Consecutive days read as a span ("Monday–Friday"), others as a list.
  const parts = [];
  let i = 0;
  while (i < idx.length) {
    let j = i;
    while (j + 1 < idx.length && idx[j + 1] === idx[j] + 1) j++;
    if (j - i >= 2) parts.push(`${DAYS[idx[i]].long}–${DAYS[idx[j]].long}`);
    else for (let k = i; k <= j; k++) parts.push(DAYS[idx[k]].long);
    i = j + 1;
  }
  if (parts.length <= 1) return parts.join("");
  return `${parts.slice(0, -1).join(", ")} and ${parts[parts.length - 1]}`;
}

// describeGrid says in words when the window is open: days with the same
// hours are grouped, e.g. ["Monday–Friday: 00:00–06:00, 18:00–24:00",
// "Saturday and Sunday: all day"].
export function describeGrid(grid) {
  const total = hoursOpen(grid);
  if (total === 0) return ["Never open: paint at least one hour."];
  if (total === 7 * 24) return ["Always open, around the clock."];
  const groups = new Map();
  grid.forEach((row, d) => {
    const t = rangesText(row);
    if (!t) return;
    if (!groups.has(t)) groups.set(t, []);
    groups.get(t).push(d);
  });
  return [...groups.entries()].map(([t, idx]) => `${dayList(idx)}: ${t}`);
}

// openings lists the stretches the window is open without a break across
// the week (touching hours across midnight join, as in policy), as
// [startHourOfWeek, endHourOfWeek) with Monday 00:00 = 0; a window open all
// week is one opening [0, 168).
export function openings(grid) {
  const on = (h) => grid[Math.floor(h / 24) % 7][h % 24];
  const H = 7 * 24;
  let first = -1;
  for (let h = 0; h < H; h++) if (on(h) && !on((h - 1 + H) % H)) { first = h; break; }
  if (first < 0) return hoursOpen(grid) ? [[0, H]] : [];
  const out = [];
  for (let k = 0; k < H; k++) {
    const h = (first + k) % H;
    if (on(h) && !on((h - 1 + H) % H)) {
      let e = h;
      while (on(e % H) && e - h < H) e++;
      out.push([h, e]);
    }
  }
  return out.sort((a, b) => a[0] - b[0]);
}

function weekHour(h) {
  return `${DAYS[Math.floor(h / 24) % 7].long} ${hhmm((h % 24) * 60)}`;
}

// describeOpenings: ["Monday 22:00 until Tuesday 06:00 (8 h)"].
export function describeOpenings(grid) {
  return openings(grid).map(([s, e]) => {
    const end = e % 24 === 0 ? `${DAYS[(Math.floor(e / 24) - 1 + 7) % 7].long} 24:00` : weekHour(e);
    return `${weekHour(s)} until ${end} (${e - s} h)`;
  });
}

// dailyAt: a window open all day but the hour before h, so its one opening
// a day begins at h: a run starts at h every day and retries failed VMs for
// the next 23 hours ("daily at 22:00").
export function dailyAt(h) {
  const g = emptyGrid();
  for (let d = 0; d < 7; d++) for (let x = 0; x < 24; x++) g[d][x] = x !== (h + 23) % 24;
  return g;
}

// runStarts lists when runs start in each opening, as the scheduler cuts
// them (policy.Job.Slot): at the opening and every everyHours in it, or
// every 24 h when everyHours is 0. ["Friday 18:00, Saturday 18:00, Sunday 18:00"].
export function runStarts(grid, everyHours) {
  const step = everyHours > 0 ? everyHours : 24;
  return openings(grid).map(([s, e]) => {
    const out = [];
    for (let t = s; t < e; t += step) out.push(weekHour(t));
    return out.join(", ");
  });
}

export function describeWindow(win) {
  if (!win || !win.days) return "no window";
  const { grid, approximate } = gridFromWindow(win);
  const s = describeGrid(grid).join("; ");
  return approximate ? `${s} (rounded to whole hours)` : s;
}

// ---- time zone arithmetic for "next run": wall-clock minutes of the week
// in the window's location, through Intl (no library).

const fmtCache = new Map();
function formatter(tz) {
  if (!fmtCache.has(tz)) {
    fmtCache.set(
      tz,
      new Intl.DateTimeFormat("en-US", {
        timeZone: tz,
        hourCycle: "h23",
        weekday: "short",
        year: "numeric",
        month: "2-digit",
        day: "2-digit",
        hour: "2-digit",
        minute: "2-digit",
        second: "2-digit",
      }),
    );
  }
  return fmtCache.get(tz);
}

// wallClock returns the wall time of instant t in tz: minute of the week
// (Monday 00:00 = 0) and the zone's offset from UTC in minutes.
export function wallClock(t, tz) {
  let f;
  try {
    f = formatter(tz || "UTC");
  } catch {
    f = formatter("UTC");
  }
  const p = Object.fromEntries(f.formatToParts(t).map((x) => [x.type, x.value]));
  const wd = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"].indexOf(p.weekday);
  const hour = Number(p.hour) % 24;
  const minute = Number(p.minute);
  const asUTC = Date.UTC(Number(p.year), Number(p.month) - 1, Number(p.day), hour, minute, Number(p.second));
  const offset = Math.round((asUTC - Math.floor(t.getTime() / 1000) * 1000) / 60000);
  return { weekMinute: wd * MIN_PER_DAY + hour * 60 + minute, offset };
}

function isOpen(iv, m) {
  return iv.some(([s, e]) => m >= s && m < e);
}

// nextOpening finds when the window next opens after now (touching ranges
// count as one opening, as in policy) and whether it is open now and until
// when. DST shifts inside the coming week are corrected once, which is
// exact except for openings inside a skipped or repeated hour.
export function nextOpening(win, now = new Date()) {
  const iv = intervals(win);
  if (!iv.length) return { openNow: false, next: null, closes: null };
  const tz = (win && win.location) || "UTC";
  const here = wallClock(now, tz);
  const toInstant = (deltaMin) => {
    const guess = new Date(now.getTime() + deltaMin * 60000);
    const w = wallClock(guess, tz);
    return new Date(guess.getTime() - (w.offset - here.offset) * 60000);
  };
  const starts = iv.map(([s]) => s).filter((s) => !isOpen(iv, (s - 1 + MIN_PER_WEEK) % MIN_PER_WEEK));
  const openNow = isOpen(iv, here.weekMinute);
  let next = null;
  let best = Infinity;
  for (const s of starts) {
    let d = (s - here.weekMinute + MIN_PER_WEEK) % MIN_PER_WEEK;
    if (d === 0) d = MIN_PER_WEEK;
    if (d < best) best = d;
  }
  if (best !== Infinity) next = toInstant(best);
  let closes = null;
  if (openNow) {
    for (let d = 1; d <= MIN_PER_WEEK; d++) {
      if (!isOpen(iv, (here.weekMinute + d) % MIN_PER_WEEK)) {
        closes = toInstant(d);
        break;
      }
    }
  }
  return { openNow, next, closes };
}
