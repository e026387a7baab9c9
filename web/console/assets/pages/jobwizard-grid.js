// The paintable weekly window grid: 7 days x 24 hours. Mouse, pen and touch
// paint by dragging (the first cell decides paint or erase); the keyboard
// moves with the arrow keys (Home/End, Page Up/Down for first/last day),
// Space or Enter toggles, and Shift+arrow paints the cell it moves to with
// the value of the cell it leaves. One cell is in the tab order (roving
// tabindex), so the grid is one tab stop.
import { DAYS, cloneGrid } from "./jobwizard-window.js";

// windowGrid(h, grid, onChange) -> element with el.set(grid) and el.get().
export function windowGrid(h, initial, onChange) {
  let grid = cloneGrid(initial);
  let focus = { d: 0, h: 0 };
  let painting = null; // null or the value being painted
  const cells = DAYS.map(() => new Array(24));
  const hours = [...Array(24).keys()];
  const pad = (n) => String(n).padStart(2, "0");

  const table = h(
    "table",
    { role: "grid", class: "p2-grid", id: "window-grid", "aria-label": "Backup window: one row per day, one cell per hour", "aria-multiselectable": "true", "aria-describedby": "window-grid-help" },
    h("thead", null, h("tr", null, h("td", { class: "p2-grid-corner" }), hours.map((x) => h("th", { scope: "col", class: x % 6 ? (x % 3 ? "p2-minor" : "p2-minor6") : null, "aria-label": `${pad(x)}:00` }, h("span", { class: "p2-hl" }, pad(x)))))),
    h(
      "tbody",
      null,
      DAYS.map((day, d) =>
        h(
          "tr",
          null,
          h("th", { scope: "row" }, h("abbr", { title: day.long }, day.short)),
          hours.map((x) => {
            const c = h("td", {
              role: "gridcell",
              tabindex: "-1",
              "data-day": String(d),
              "data-hour": String(x),
              "aria-label": `${day.long} ${pad(x)}:00 to ${pad(x + 1)}:00`,
            });
            cells[d][x] = c;
            return c;
          }),
        ),
      ),
    ),
  );

  function paintCell(d, x, on) {
    grid[d][x] = on;
    const c = cells[d][x];
    c.setAttribute("aria-selected", on ? "true" : "false");
    c.classList.toggle("on", on);
  }

  function render() {
    for (let d = 0; d < 7; d++) for (let x = 0; x < 24; x++) paintCell(d, x, grid[d][x]);
    setFocus(focus.d, focus.h, false);
  }

  function setFocus(d, x, move = true) {
    cells[focus.d][focus.h].setAttribute("tabindex", "-1");
    focus = { d, h: x };
    const c = cells[d][x];
    c.setAttribute("tabindex", "0");
    if (move) c.focus();
  }

  let changeTimer = 0;
  function changed() {
    clearTimeout(changeTimer);
    // Words and the live region follow after a short pause, not per cell of a drag.
    changeTimer = setTimeout(() => onChange && onChange(cloneGrid(grid)), 150);
  }

  function cellOf(target) {
    const c = target && target.closest ? target.closest("td[role=gridcell]") : null;
    return c && table.contains(c) ? { d: Number(c.dataset.day), h: Number(c.dataset.hour) } : null;
  }

  table.addEventListener("pointerdown", (e) => {
    if (e.button !== 0) return;
    const p = cellOf(e.target);
    if (!p) return;
    e.preventDefault();
    painting = !grid[p.d][p.h];
    paintCell(p.d, p.h, painting);
    setFocus(p.d, p.h);
    try {
      table.setPointerCapture(e.pointerId);
    } catch {
      /* capture is an optimisation */
    }
    changed();
  });
  table.addEventListener("pointermove", (e) => {
    if (painting === null) return;
    // With pointer capture the target stays the grid: find the cell under the pointer.
    const p = cellOf(document.elementFromPoint(e.clientX, e.clientY));
    if (!p || grid[p.d][p.h] === painting) return;
    paintCell(p.d, p.h, painting);
    setFocus(p.d, p.h, false);
    changed();
  });
  const stop = () => {
    painting = null;
  };
  table.addEventListener("pointerup", stop);
  table.addEventListener("pointercancel", stop);
  table.addEventListener("lostpointercapture", stop);
  table.addEventListener("focusin", (e) => {
    const p = cellOf(e.target);
    if (p && (p.d !== focus.d || p.h !== focus.h)) setFocus(p.d, p.h, false);
  });

  table.addEventListener("keydown", (e) => {
    const p = cellOf(e.target);
    if (!p) return;
    let { d, h: x } = p;
    switch (e.key) {
      case "ArrowLeft":
        x = Math.max(0, x - 1);
        break;
      case "ArrowRight":
        x = Math.min(23, x + 1);
        break;
      case "ArrowUp":
        d = Math.max(0, d - 1);
        break;
      case "ArrowDown":
        d = Math.min(6, d + 1);
        break;
      case "Home":
        x = 0;
        if (e.ctrlKey) d = 0;
        break;
      case "End":
        x = 23;
        if (e.ctrlKey) d = 6;
        break;
      case "PageUp":
        d = 0;
        break;
      case "PageDown":
        d = 6;
        break;
      case " ":
      case "Enter":
        e.preventDefault();
        paintCell(p.d, p.h, !grid[p.d][p.h]);
        changed();
        return;
      default:
        return;
    }
    e.preventDefault();
    if (e.shiftKey && (d !== p.d || x !== p.h)) {
      paintCell(d, x, grid[p.d][p.h]);
      changed();
    }
    setFocus(d, x);
  });

  const el = h("div", { class: "p2-grid-wrap" }, table);
  el.set = (g) => {
    grid = cloneGrid(g);
    render();
    changed();
  };
  el.get = () => cloneGrid(grid);
  el.focusGrid = () => cells[focus.d][focus.h].focus();
  render();
  return el;
}
