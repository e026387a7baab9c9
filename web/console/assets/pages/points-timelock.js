// Time locks on the restore points page: the lock badge ("locked until
// DATE") and the dialog that sets one (a date, then POST
// /restore-points/{id}/lock {until}). A time lock cannot be shortened or
// removed by anyone before its date, so the dialog says so before it asks.
import { h } from "../lib/dom.js";
import { errorText } from "./jobs-common.js";

// lockBadge is the Lock column's content for p.
export function lockBadge(ctx, p) {
  if (!p.locked) return "unlocked";
  if (p.lockedUntil) {
    // The dialog locks until the start of a day: then the day says it
    // (a narrower Lock column); the title has the exact time.
    const day = ctx.fmt.time(p.lockedUntil).replace(/, 00:00:00$/, "");
    return h("span", { class: "badge p2-state-running", "data-locked-until": p.lockedUntil, title: `No one can unlock or delete this point before ${ctx.fmt.time(p.lockedUntil)}.` }, `locked until ${day}`);
  }
  return h("span", { class: "badge p2-state-running" }, "locked");
}

// localDay is a Date's calendar day in the browser's zone, as <input type=date> wants it.
function localDay(d) {
  const pad = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
}

// timeLockButton opens the dialog for p; onLocked gets the point as the
// server answers it.
export function timeLockButton(ctx, p, onLocked) {
  const label = p.lockedUntil ? "Extend lock…" : "Lock until…";
  const b = h("button", { type: "button", "data-action": "timelock", "data-point": p.id, "aria-label": `${label.replace("…", "")}: time-lock the restore point of ${ctx.fmt.time(p.time)}` }, label);
  b.addEventListener("click", async () => {
    const np = await timeLockDialog(ctx, p);
    if (np) onLocked(np);
  });
  return b;
}

// timeLockDialog asks for the date and sets the lock; resolves to the
// locked point, or null when cancelled.
export function timeLockDialog(ctx, p) {
  return new Promise((resolve) => {
    const back = document.activeElement;
    const min = new Date();
    min.setDate(min.getDate() + 1);
    const max = new Date();
    max.setFullYear(max.getFullYear() + 10);
    const current = p.lockedUntil ? new Date(p.lockedUntil) : null;
    const input = h("input", { type: "date", id: "timelock-until", name: "until", required: "", min: localDay(current && current > min ? current : min), max: localDay(max) });
    const err = h("p", { class: "field-error", id: "timelock-error", role: "alert" });
    const cancel = h("button", { type: "button", id: "timelock-cancel" }, "Cancel");
    const ok = h("button", { type: "submit", class: "danger", id: "timelock-ok" }, "Lock until this date");
    const form = h(
      "form",
      { id: "timelock-form", novalidate: "" },
      h("h2", { id: "timelock-title" }, "Time-lock restore point"),
      h("p", { id: "timelock-why" }, `Until the date you choose, no one — administrators included — can unlock or delete the restore point of ${(p.vm && p.vm.name) || "this VM"} taken ${ctx.fmt.time(p.time)}, and retention keeps it. The lock can be extended later, never shortened or removed.`),
      current ? h("p", { class: "hint" }, `Locked until ${ctx.fmt.time(p.lockedUntil)} now.`) : null,
      h("div", { class: "field" }, h("label", { for: "timelock-until" }, "Locked until (the start of that day)"), input),
      err,
      h("div", { class: "actions" }, cancel, ok),
    );
    const dlg = h("dialog", { id: "timelock", "aria-labelledby": "timelock-title", "aria-describedby": "timelock-why" }, form);
    let result = null;
    const close = () => dlg.close();
    dlg.addEventListener("close", () => {
      dlg.remove();
      if (back && back.isConnected && typeof back.focus === "function") back.focus();
      resolve(result);
    });
    cancel.addEventListener("click", close);
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      err.textContent = "";
      if (!input.value) {
        err.textContent = "Choose a date.";
        input.focus();
        return;
      }
      const until = new Date(`${input.value}T00:00:00`);
      ok.disabled = true;
      try {
        const np = await ctx.api("POST", `/restore-points/${encodeURIComponent(p.id)}/lock`, { until: until.toISOString().replace(/\.\d{3}Z$/, "Z") });
        result = np && np.id ? np : null;
        close();
      } catch (x) {
        ok.disabled = false;
        err.textContent = `Not locked: ${x.status === 403 ? x.message : errorText(x)}`;
      }
    });
    document.body.append(dlg);
    dlg.showModal();
    input.focus();
  });
}
