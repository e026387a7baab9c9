// Shared widgets: toasts, the confirmation dialog, server field errors, progress bars.
import { h, clear, id } from "./dom.js";
import * as fmt from "./fmt.js";

// toast shows a short message; kind: "info" | "success" | "error". Errors are
// announced assertively and stay until dismissed or 10 s.
export function toast(msg, kind = "info") {
  const box = document.getElementById("toasts");
  const close = h("button", { type: "button", class: "toast-close", "aria-label": "Dismiss message" }, "×");
  const el = h("div", { class: `toast toast-${kind}`, role: kind === "error" ? "alert" : "status" },
    h("span", null, msg), close);
  const remove = () => el.remove();
  close.addEventListener("click", remove);
  box.appendChild(el);
  setTimeout(remove, kind === "error" ? 10000 : 6000);
  return el;
}

let confirmBusy = Promise.resolve();

// confirm shows the modal dialog; resolves true when the user confirms.
// opts: {danger: bool, title: string, ok: string (button text)}.
export function confirm(message, opts = {}) {
  const run = () => new Promise((resolve) => {
    const dlg = document.getElementById("confirm");
    const ok = document.getElementById("confirm-ok");
    const cancel = document.getElementById("confirm-cancel");
    document.getElementById("confirm-title").textContent = opts.title || (opts.danger ? "Are you sure?" : "Please confirm");
    document.getElementById("confirm-message").textContent = message;
    ok.textContent = opts.ok || (opts.danger ? "Delete" : "OK");
    ok.className = opts.danger ? "danger" : "primary";
    const back = document.activeElement;
    dlg.returnValue = "";
    const done = () => {
      dlg.removeEventListener("close", done);
      resolve(dlg.returnValue === "ok");
      if (back && back.isConnected && typeof back.focus === "function") back.focus();
    };
    dlg.addEventListener("close", done);
    dlg.showModal();
    // The safe choice has the focus: Enter on a destructive dialog cancels.
    (opts.danger ? cancel : ok).focus();
  });
  const p = confirmBusy.then(run, run);
  confirmBusy = p.then(() => undefined, () => undefined);
  return p;
}

// fieldErrors shows an ApiError's field errors next to the form's controls
// (matched by name, then by data-field). Errors for fields the form does not
// have, or an error with no fields, go to a summary at the top of the form.
// fieldErrors(form, null) clears. Returns the number of errors shown.
export function fieldErrors(form, err) {
  for (const old of form.querySelectorAll(".field-error, .form-error")) old.remove();
  for (const c of form.querySelectorAll("[aria-invalid]")) {
    c.removeAttribute("aria-invalid");
    const ids = (c.getAttribute("aria-describedby") || "").split(" ").filter(x => x && !x.startsWith("err-"));
    if (ids.length) c.setAttribute("aria-describedby", ids.join(" ")); else c.removeAttribute("aria-describedby");
  }
  if (!err) return 0;
  const unmatched = [];
  let first = null;
  const fields = err.fields || [];
  for (const f of fields) {
    const name = f.field;
    let ctl = form.elements.namedItem(name);
    if (ctl && !(ctl instanceof Element)) ctl = ctl[0]; // RadioNodeList
    if (!ctl) ctl = form.querySelector(`[data-field="${CSS.escape(name)}"]`);
    if (!ctl) ctl = form.querySelector(`[name$=".${CSS.escape(name.split(".").pop())}"]`);
    if (!ctl) { unmatched.push(`${name}: ${f.message}`); continue; }
    const eid = id("err");
    const msg = h("p", { class: "field-error", id: eid }, f.message);
    const holder = ctl.closest(".field") || ctl.parentElement;
    holder.appendChild(msg);
    ctl.setAttribute("aria-invalid", "true");
    const desc = ctl.getAttribute("aria-describedby");
    ctl.setAttribute("aria-describedby", desc ? `${desc} ${eid}` : eid);
    if (!first) first = ctl;
  }
  if (!fields.length || unmatched.length) {
    const text = unmatched.length ? unmatched.join("; ") : err.message;
    form.prepend(h("div", { class: "form-error", role: "alert" }, text));
  }
  if (first && typeof first.focus === "function") first.focus();
  return fields.length || 1;
}

// Task subjects are often VM instance UUIDs: names maps them to VM names
// (the shell fills it from GET /vms; onUnknown asks it to refresh).
export const names = new Map();
let onUnknown = null;
export function setNameSource(refresh) { onUnknown = refresh; }
const uuidLike = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

// taskTitle is a task's human name: "backup web-01".
export function taskTitle(t) {
  if (!t) return "task";
  let subj = t.subject || "";
  if (names.has(subj)) subj = names.get(subj);
  else if (uuidLike.test(subj)) {
    const r = Array.isArray(t.result) ? t.result.find(x => x && x.vm === subj && x.name) : null;
    if (r) subj = r.name; else if (onUnknown) onUnknown();
  }
  // A restore's subject is its point's 64-digit id: the VM's name when the
  // result names it, else the id's first digits.
  if (/^[0-9a-f]{32,}$/i.test(subj)) {
    // An instant recovery's result (a session) names its source VM.
    const r = Array.isArray(t.result) ? t.result.find(x => x && x.name) : (t.result && (t.result.vmName || t.result.name || t.result.sourceVm));
    subj = typeof r === "string" ? r : r && r.name ? r.name : `point ${fmt.shortId(subj)}`;
  }
  let kind = t.kind || "task";
  // A restore to a new VM (or a rehearsal) names the VM it made: two
  // restores of web-01 are "restore web-01" and "restore web-01 as web-01-copy".
  const made = t.kind === "restore" && t.result && !Array.isArray(t.result) && (t.result.mode === "new" || t.result.mode === "rehearsal") && t.result.vm && t.result.vm.name;
  if (made && made !== subj) return `restore ${subj} as ${made}`;
  const instantVM = t.kind === "instant-recovery" && t.result && t.result.vm && t.result.vm.name;
  if (instantVM && instantVM !== subj) return `instant recovery ${subj} as ${instantVM}`;
  // A full check reads and verifies every blob: it must not look like a quick one.
  if (kind === "check" && checkMode(t) === "full") kind = "full check";
  return `${kind} ${subj}`.trim();
}

// checkMode of a check task: "full" (read and verify the data), "quick"
// (the index and packs' presence only) or "" when it does not say.
export function checkMode(t) {
  if (!t || t.kind !== "check") return "";
  const r = t.result || {};
  if (typeof r.readData === "boolean") return r.readData ? "full" : "quick";
  const ph = (t.progress && t.progress.phase) || "";
  if (/^read and verify/.test(ph)) return "full";
  if (/^quick check/.test(ph)) return "quick";
  return "";
}

const finalStates = new Set(["succeeded", "failed", "cancelled", "interrupted"]);
export function isFinal(task) { return !!task && finalStates.has(task.state); }

// percent of a task's progress, 0-100 (100 once it succeeded).
export function percent(task) {
  if (!task) return 0;
  if (task.state === "succeeded") return 100;
  const p = task.progress || {};
  if (p.total > 0) return Math.max(0, Math.min(100, Math.floor((p.done / p.total) * 100)));
  return 0;
}

const live = new Set();

// progress returns a progress bar for task: a <progress> with its label and
// a line with %, rate and ETA. The element updates itself from the shared
// stream (see app.js) while it is in the document; el.update(task) updates it
// by hand. It fires a "taskdone" event (detail: the task) on a final state.
export function progress(task) {
  const pid = id("progress");
  const bar = h("progress", { id: pid, max: "100", value: "0" });
  const label = h("label", { for: pid, class: "progress-label" });
  const info = h("span", { class: "progress-info", "aria-hidden": "true" });
  const el = h("div", { class: "progress", "data-task": task && task.id }, label, bar, info);
  let fired = false;
  el.update = (t) => {
    if (!t) return;
    el.task = t;
    const pc = percent(t);
    const p = t.progress || {};
    const indeterminate = t.state === "running" && !(p.total > 0);
    if (indeterminate) bar.removeAttribute("value"); else bar.value = pc;
    bar.setAttribute("aria-valuetext", `${pc}%`);
    const phase = p.phase ? `${p.phase}` : t.state;
    // The title in a span of its own: a table row that names the task in
    // its first column hides it (the label still names the bar for screen readers).
    clear(label).append(h("span", { class: "progress-title" }, `${taskTitle(t)} — `), phase);
    const parts = [`${pc}%`];
    if (t.state === "running") {
      // Checks and reclaims count points and packs: their rate is no B/s.
      if (p.rate && !/^(check|reclaim)$/.test(t.kind)) parts.push(fmt.rate(p.rate));
      if (p.etaSeconds) parts.push(`ETA ${fmt.duration(p.etaSeconds)}`);
    } else {
      parts.push(t.state);
    }
    info.textContent = parts.join(" · ");
    el.dataset.state = t.state;
    el.dataset.percent = String(pc);
    if (isFinal(t) && !fired) {
      fired = true;
      el.dispatchEvent(new CustomEvent("taskdone", { detail: t }));
    }
  };
  el.update(task);
  live.add(el);
  return el;
}

// feedProgress updates every live progress bar of t.id (called by the shell for each streamed task).
export function feedProgress(t) {
  for (const el of [...live]) {
    if (!el.isConnected) {
      if (el.seen) live.delete(el);
      continue;
    }
    el.seen = true;
    if (el.dataset.task === t.id) el.update(t);
  }
}
