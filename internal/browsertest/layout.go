package browsertest

// layoutJS lists what makes a page look broken although every element is
// there: a button or badge whose label wraps onto a second line (a table
// squeezing "Run now" to one letter per line), a short word broken across
// two lines ("Web nightl|y"), and an element with the hidden attribute that
// is displayed anyway (a class's display rule beats the attribute's
// display: none, so "Show 0 more" showed under every list).
//
// A label wraps when its text's line boxes sit at more than one height: the
// text nodes' client rectangles are grouped by their vertical middle.
const layoutJS = `(() => {
  const out = [];
  const visible = e => !!(e.offsetWidth || e.offsetHeight || e.getClientRects().length) && getComputedStyle(e).visibility !== "hidden";
  const describe = e => {
    let s = e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") + (e.className && typeof e.className === "string" && e.className.trim() ? "." + e.className.trim().split(/\s+/).join(".") : "");
    const t = (e.textContent || "").replace(/\s+/g, " ").trim();
    if (t) s += " \"" + t.slice(0, 60) + "\"";
    return s;
  };
  const lines = e => {
    const mids = [];
    const walker = document.createTreeWalker(e, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      if (!n.textContent.trim()) continue;
      const r = document.createRange();
      r.selectNodeContents(n);
      for (const b of r.getClientRects()) {
        if (b.width < 1 || b.height < 1) continue;
        const m = b.top + b.height / 2;
        if (!mids.some(x => Math.abs(x - m) < b.height / 2)) mids.push(m);
      }
    }
    return mids.length;
  };
  for (const e of document.querySelectorAll("button, a.button, [role=button], .badge")) {
    if (!visible(e)) continue;
    const n = lines(e);
    if (n > 1) out.push("label wraps onto " + n + " lines: " + describe(e));
  }
  // Short words broken across two lines ("Web nightl|y"): a table cell with
  // overflow-wrap: anywhere squeezed below its longest word. Tokens longer
  // than 24 characters (ids, paths, run names) may break anywhere; within a
  // shorter one, a run of letters and digits may not ("crash-|consistent"
  // breaks where a hyphen lets it).
  const main = document.querySelector("main") || document.body;
  const walker = document.createTreeWalker(main, NodeFilter.SHOW_TEXT);
  let words = 0;
  const broken = new Set();
  for (let n = walker.nextNode(); n && words < 20000; n = walker.nextNode()) {
    const p = n.parentElement;
    if (!p || !visible(p)) continue;
    for (const tok of n.textContent.matchAll(/\S+/g)) {
      if (tok[0].length > 24) continue;
      for (const m of tok[0].matchAll(/[\p{L}\p{N}]{2,}/gu)) {
        words++;
        const r = document.createRange();
        r.setStart(n, tok.index + m.index);
        r.setEnd(n, tok.index + m.index + m[0].length);
        const rects = [...r.getClientRects()].filter(b => b.width >= 1);
        if (rects.length > 1 && Math.abs(rects[0].top - rects[rects.length - 1].top) > rects[0].height / 2) {
          const what = "word broken across lines: \"" + m[0] + "\" in " + describe(p);
          if (!broken.has(what)) { broken.add(what); out.push(what); }
        }
      }
    }
  }
  for (const e of document.querySelectorAll("[hidden]")) {
    if (getComputedStyle(e).display !== "none") out.push("hidden but displayed (" + getComputedStyle(e).display + "): " + describe(e));
  }
  return out;
})()`

// LayoutProblems returns the wrapped button and badge labels and the hidden
// elements that are displayed on the current page (see layoutJS); empty is
// good.
func (b *Browser) LayoutProblems() []string {
	b.t.Helper()
	return Eval[[]string](b, layoutJS)
}
