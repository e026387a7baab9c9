// Small DOM helpers. Never build HTML from strings: text goes in as text nodes.

// h("button", {type: "button", onclick: fn, class: "primary"}, "Save")
// Attributes: "class", "for", "aria-*", "data-*" and others are set as attributes;
// on* functions become listeners; booleans set or omit the attribute; null/undefined skip.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === null || v === undefined || v === false) continue;
      if (k.startsWith("on") && typeof v === "function") {
        el.addEventListener(k.slice(2), v);
      } else if (k === "value" && "value" in el) {
        el.value = v;
      } else if (k === "checked" || k === "selected") {
        el[k] = !!v;
        if (v) el.setAttribute(k, "");
      } else if (v === true) {
        el.setAttribute(k, "");
      } else {
        el.setAttribute(k, String(v));
      }
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

// clear removes every child of el.
export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

let uid = 0;
// id returns a unique element id with the given prefix (for label/for pairs).
export function id(prefix = "f") {
  uid += 1;
  return `${prefix}-${uid}`;
}

// field builds a labelled form control: field("Name", h("input", {name: "name"}))
// returns a .field div holding the label and the control (given an id if it has none).
export function field(label, control, hint) {
  if (!control.id) control.id = id(control.name || "f");
  const parts = [h("label", { for: control.id }, label), control];
  if (hint) {
    const hid = id("hint");
    parts.push(h("p", { class: "hint", id: hid }, hint));
    control.setAttribute("aria-describedby", hid);
  }
  return h("div", { class: "field" }, parts);
}

// table builds a data table: columns [{label, cell: row => Node|string, class}].
export function table(caption, columns, rows, empty = "Nothing to show.") {
  if (!rows.length) return h("p", { class: "empty" }, empty);
  return h("div", { class: "table-wrap" },
    h("table", null,
      h("caption", { class: caption.startsWith("!") ? "visually-hidden" : null }, caption.replace(/^!/, "")),
      h("thead", null, h("tr", null, columns.map(c => h("th", { scope: "col", class: c.class }, c.label)))),
      h("tbody", null, rows.map(r => h("tr", null, columns.map(c => h("td", { class: c.class, "data-label": c.label }, c.cell(r))))))));
}

// badge renders a state word with a class for its colour.
export function badge(text, kind) {
  return h("span", { class: `badge badge-${kind || String(text).toLowerCase()}` }, text);
}
