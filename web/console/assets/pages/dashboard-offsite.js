// The dashboard's offsite card: how many protected VMs have a restore
// point less than 24 hours old in a copy job's target (GET /dashboard's
// offsite; absent without copy jobs). It returns the cards to append: none
// or one.
import { h } from "../lib/dom.js";

export function offsiteCard(o) {
  if (!o) return [];
  const all = o.copied === o.protected;
  const body = [
    h("span", { class: "value" }, `${o.copied} of ${o.protected}`),
    h("span", { class: "label" }, "Protected VMs copied offsite (< 24 h)"),
  ];
  if (!all && o.missing && o.missing.length) body.push(h("span", { class: "label card-note", id: "offsite-missing" }, `Not yet: ${o.missing.join(", ")}`));
  return [h("div", { class: `card ${all ? "ok" : "warn"}`, "data-card": "Offsite copies", id: "offsite-card" }, h("a", { href: "#/copy-jobs", class: "card-link" }, body))];
}
