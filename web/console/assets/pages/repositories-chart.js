// Usage over time as an inline SVG line chart, built with DOM APIs (no
// library, no inline style: colours come from classes in pages2.css).

const NS = "http://www.w3.org/2000/svg";

function el(name, attrs, text) {
  const e = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

// niceMax rounds a byte maximum up to 1, 2, 4 or 5 (times a power of ten)
// of the binary unit the labels use (KiB, MiB, ...), so the quarter ticks
// read as round numbers.
export function niceMax(v) {
  if (!(v > 0)) return 1;
  let unit = 1;
  while (v / unit >= 1024) unit *= 1024;
  const x = v / unit;
  const p = 10 ** Math.floor(Math.log10(x));
  for (const m of [1, 2, 4, 5, 10]) if (m * p >= x) return m * p * unit;
  return 10 * p * unit;
}

// scaleSeries maps samples to chart coordinates: x by time, y by bytes.
export function scaleSeries(samples, key, box, max) {
  const ts = samples.map((s) => new Date(s.time).getTime());
  const t0 = Math.min(...ts);
  const t1 = Math.max(...ts);
  const span = t1 - t0 || 1;
  return samples.map((s, i) => {
    const x = samples.length === 1 ? box.x + box.w / 2 : box.x + ((ts[i] - t0) / span) * box.w;
    const y = box.y + box.h - ((Number(s[key]) || 0) / max) * box.h;
    return [Math.round(x * 10) / 10, Math.round(y * 10) / 10];
  });
}

// LABEL_CHAR is a wide estimate of one character of an 11 px chart label
// (system-ui digits are about 6.1 px): labels are placed before the chart is
// in the document, where nothing can be measured yet.
const LABEL_CHAR = 6.8;

// xLabels names the first sample, the last and the one in the middle of the
// list, each under its point, leaving out the middle one where it would
// overlap another: points bunched in time (a day of backups, then one three
// days later) put the middle sample next to an end.
export function xLabels(list, pts, fmtDate) {
  if (!list.length) return [];
  if (list.length === 1) return [{ x: pts[0][0], anchor: "middle", text: fmtDate(list[0].time) }];
  const last = list.length - 1;
  const label = (i, anchor) => {
    const text = fmtDate(list[i].time);
    const w = text.length * LABEL_CHAR;
    const x = pts[i][0];
    const from = anchor === "start" ? x : anchor === "end" ? x - w : x - w / 2;
    return { x, anchor, text, from, to: from + w };
  };
  const out = [label(0, "start"), label(last, "end")];
  const mid = Math.floor(last / 2);
  if (mid > 0 && mid < last) {
    const m = label(mid, "middle");
    const gap = 12;
    if (m.from >= out[0].to + gap && m.to + gap <= out[1].from && m.text !== out[0].text && m.text !== out[1].text) out.splice(1, 0, m);
  }
  return out.map(({ x, anchor, text }) => ({ x, anchor, text }));
}

// usageChart draws logical and stored bytes over time. fmtBytes and fmtDate
// format axis labels. It returns the <svg> element.
export function usageChart(samples, { fmtBytes, fmtDate, title = "Repository usage over time" } = {}) {
  const W = 640;
  const H = 240;
  const box = { x: 72, y: 16, w: W - 72 - 16, h: H - 16 - 40 };
  const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", class: "usage-chart", "aria-labelledby": "usage-chart-title usage-chart-desc" });
  const list = (samples || []).filter((s) => s && s.time);
  const last = list[list.length - 1];
  svg.append(el("title", { id: "usage-chart-title" }, title));
  svg.append(
    el(
      "desc",
      { id: "usage-chart-desc" },
      last
        ? `${list.length} samples; latest: ${fmtBytes(last.logicalBytes)} logical, ${fmtBytes(last.storedBytes)} stored.`
        : "No samples yet.",
    ),
  );
  if (!list.length) {
    svg.append(el("text", { x: W / 2, y: H / 2, "text-anchor": "middle", class: "chart-empty" }, "No restore points yet"));
    return svg;
  }
  const max = niceMax(Math.max(...list.map((s) => Math.max(Number(s.logicalBytes) || 0, Number(s.storedBytes) || 0))));
  const grid = el("g", { class: "chart-grid" });
  for (let i = 0; i <= 4; i++) {
    const y = box.y + box.h - (i / 4) * box.h;
    grid.append(el("line", { x1: box.x, x2: box.x + box.w, y1: y, y2: y }));
    grid.append(el("text", { x: box.x - 6, y: y + 4, "text-anchor": "end", class: "chart-label" }, fmtBytes((max * i) / 4)));
  }
  svg.append(grid);
  const xl = el("g", { class: "chart-xlabels" });
  const pts = scaleSeries(list, "logicalBytes", box, max);
  for (const l of xLabels(list, pts, fmtDate)) xl.append(el("text", { x: l.x, y: box.y + box.h + 20, "text-anchor": l.anchor, class: "chart-label" }, l.text));
  svg.append(xl);
  for (const [key, cls, label] of [
    ["logicalBytes", "series-logical", "Logical (protected data)"],
    ["storedBytes", "series-stored", "Stored (after dedup and compression)"],
  ]) {
    const p = scaleSeries(list, key, box, max);
    const g = el("g", { class: `chart-series ${cls}` });
    g.append(el("title", {}, label));
    if (p.length > 1) g.append(el("polyline", { points: p.map((x) => x.join(",")).join(" "), fill: "none" }));
    for (const [x, y] of p) g.append(el("circle", { cx: x, cy: y, r: 3 }));
    svg.append(g);
  }
  const legend = el("g", { class: "chart-legend" });
  legend.append(el("rect", { x: box.x, y: H - 14, width: 10, height: 10, class: "series-logical" }));
  legend.append(el("text", { x: box.x + 14, y: H - 5, class: "chart-label" }, "logical"));
  legend.append(el("rect", { x: box.x + 80, y: H - 14, width: 10, height: 10, class: "series-stored" }));
  legend.append(el("text", { x: box.x + 94, y: H - 5, class: "chart-label" }, "stored"));
  svg.append(legend);
  return svg;
}
