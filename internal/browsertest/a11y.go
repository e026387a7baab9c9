package browsertest

// a11yJS lists what keyboard and screen-reader users would miss on the
// page: visible controls without an accessible name, duplicate ids, images
// without alt text, a page without exactly one h1 or main landmark.
const a11yJS = `(() => {
  const out = [];
  const visible = e => !!(e.offsetWidth || e.offsetHeight || e.getClientRects().length) && getComputedStyle(e).visibility !== "hidden";
  const describe = e => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") + (e.name ? "[name=" + e.name + "]" : "") + (e.className && typeof e.className === "string" ? "." + e.className.split(" ").join(".") : "");
  const named = e => {
    if ((e.getAttribute("aria-label") || "").trim()) return true;
    const lb = e.getAttribute("aria-labelledby");
    if (lb && lb.split(/\s+/).some(id => { const l = document.getElementById(id); return l && l.textContent.trim(); })) return true;
    if (e.labels && [...e.labels].some(l => l.textContent.trim())) return true;
    if ((e.tagName === "BUTTON" || e.tagName === "A" || e.tagName === "SUMMARY") && e.textContent.trim()) return true;
    if (e.tagName === "INPUT" && ["submit", "button", "reset"].includes(e.type) && e.value) return true;
    if ((e.getAttribute("title") || "").trim()) return true;
    return false;
  };
  for (const e of document.querySelectorAll("input:not([type=hidden]), select, textarea, button, a[href], [role=button], [role=checkbox], [role=slider], [role=gridcell][tabindex], [tabindex]:not([tabindex='-1'])")) {
    if (!visible(e)) continue;
    if (e.tagName === "DIV" || e.tagName === "SPAN" || e.tagName === "TD") {
      if (!e.getAttribute("role") && !e.getAttribute("aria-label")) out.push("focusable element without a role or name: " + describe(e));
      else if (!named(e)) out.push("unlabelled: " + describe(e));
      continue;
    }
    if (!named(e)) out.push("unlabelled: " + describe(e));
  }
  const ids = new Map();
  for (const e of document.querySelectorAll("[id]")) ids.set(e.id, (ids.get(e.id) || 0) + 1);
  for (const [id, n] of ids) if (n > 1) out.push("duplicate id: " + id + " (" + n + "x)");
  for (const img of document.querySelectorAll("img:not([alt])")) out.push("image without alt: " + (img.src || "").slice(-60));
  const h1 = [...document.querySelectorAll("h1")].filter(visible).length;
  if (h1 !== 1) out.push(h1 + " visible h1 headings, want 1");
  if (document.querySelectorAll("main, [role=main]").length !== 1) out.push("not exactly one main landmark");
  if (!document.documentElement.lang) out.push("no lang on <html>");
  return out;
})()`

// A11yProblems returns what the current page lacks for keyboard and
// screen-reader users (see a11yJS); empty is good.
func (b *Browser) A11yProblems() []string {
	b.t.Helper()
	return Eval[[]string](b, a11yJS)
}
