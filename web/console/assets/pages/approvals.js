// Approvals (#/approvals): administrators' destructive actions (deleting a
// restore point, shortening a job's retention, removing a repository from
// the appliance) that wait for the delay
// configured in approvals.delay. Another administrator approves one (it
// executes at once); any administrator cancels one. Past actions follow
// the pending ones.
import { ensureCSS, errorText } from "./jobs-common.js";

const KINDS = { "delete-point": "Delete restore point", "shorten-retention": "Shorten retention", "remove-repository": "Remove repository" };

// pendingText says what a 202 of a destructive action means, for the pages
// that asked for it (restore points, jobs, repositories).
export function pendingText(ctx, a) {
  return `Waiting for approval: it takes effect ${ctx.fmt.time(a.effectiveAt)} unless another administrator approves it earlier on the Approvals page, or an administrator cancels it.`;
}

export default {
  route: "#/approvals",
  title: "Approvals",
  nav: true,
  role: "administrator",
  async render(root, ctx) {
    await ensureCSS();
    const h = ctx.h;
    const status = h("div", { class: "p2-status", role: "status", "aria-live": "polite", id: "approvals-status" });
    const intro = h("p", { class: "hint" }, "With a delay configured, deleting a restore point, shortening a job's retention or removing a repository waits here. Another administrator's approval executes it at once; any administrator can cancel it.");
    const body = h("div", { id: "approvals-body" }, h("p", { class: "loading" }, "Loading approvals…"));
    root.append(intro, status, body);
    const me = (ctx.me && ctx.me.username) || "";
    const canDecide = ctx.can("administrator");
    let list = [];

    async function load() {
      try {
        list = (await ctx.api("GET", "/approvals")) || [];
        draw();
      } catch (e) {
        status.textContent = `Could not list approvals: ${errorText(e)}`;
      }
    }

    function say(a, text, bad) {
      const m = document.getElementById(`approval-msg-${a.id}`);
      if (m) {
        m.textContent = text;
        m.className = `p2-point-msg ${bad ? "field-error" : "hint"}`;
      }
    }

    async function decide(a, verb) {
      if (verb === "approve") {
        const ok = await ctx.confirm(`${a.summary}: execute it now? This cannot be undone.`, { danger: true, title: "Approve and execute?", ok: "Approve" });
        if (!ok) return;
      }
      try {
        const got = await ctx.api("POST", `/approvals/${encodeURIComponent(a.id)}/${verb}`);
        Object.assign(a, got || {});
        draw();
        status.textContent = verb === "approve" ? `Approved and executed: ${a.summary}.` : `Cancelled: ${a.summary}.`;
      } catch (e) {
        // 403 carries the reason (the requester cannot approve); say it.
        say(a, `Could not ${verb}: ${e.status === 403 || e.status === 409 ? e.message : errorText(e)}`, true);
        if (e.status === 409) load();
      }
    }

    function row(a) {
      const actions = h("div", { class: "p2-actions" });
      if (canDecide && a.status === "pending") {
        const own = me && a.requestedBy && me.toLowerCase() === a.requestedBy.toLowerCase();
        const ap = h("button", { type: "button", class: "primary", "data-action": "approve", "data-approval": a.id, "aria-label": `Approve: ${a.summary}`, "aria-disabled": own ? "true" : null, title: own ? "You asked for it: another administrator must approve it." : null }, "Approve");
        ap.addEventListener("click", () => (own ? say(a, "You asked for this action: another administrator must approve it, or it takes effect by itself when its delay ends.", true) : decide(a, "approve")));
        const ca = h("button", { type: "button", "data-action": "cancel", "data-approval": a.id, "aria-label": `Cancel: ${a.summary}` }, "Cancel");
        ca.addEventListener("click", () => decide(a, "cancel"));
        actions.append(ap, ca);
      }
      const state = { pending: "running", executing: "running", executed: "ok", cancelled: "neutral", failed: "bad" }[a.status] || "neutral";
      let who = a.requestedBy;
      if (a.approvedBy) who += `; approved by ${a.approvedBy}`;
      if (a.cancelledBy) who += `; cancelled by ${a.cancelledBy}`;
      return h(
        "tr",
        { "data-approval": a.id, "data-status": a.status },
        h("td", { "data-label": "Action" }, KINDS[a.kind] || a.kind),
        h("td", { "data-label": "What" }, a.summary),
        h("td", { "data-label": "Asked by" }, who),
        h("td", { "data-label": "Asked" }, h("time", { datetime: a.requestedAt }, ctx.fmt.time(a.requestedAt))),
        h("td", { "data-label": "Takes effect" }, a.status === "pending" ? h("time", { datetime: a.effectiveAt }, ctx.fmt.time(a.effectiveAt)) : a.doneAt ? h("time", { datetime: a.doneAt }, ctx.fmt.time(a.doneAt)) : "—"),
        h("td", { "data-label": "Status" }, h("span", { class: `badge p2-state-${state}` }, a.status), a.error ? h("p", { class: "field-error" }, a.error) : null),
        h("td", { "data-label": "Actions" }, actions, h("div", { class: "p2-point-msg", id: `approval-msg-${a.id}`, role: "status" })),
      );
    }

    function draw() {
      if (!list.length) {
        body.replaceChildren(h("p", { class: "empty" }, "No destructive action is waiting, and none has been asked for."));
        return;
      }
      const open = list.filter((a) => a.status === "pending" || a.status === "executing");
      const past = list.filter((a) => !(a.status === "pending" || a.status === "executing"));
      const tbl = (caption, rows) =>
        h(
          "div",
          { class: "table-wrap" },
          h(
            "table",
            { class: "p2-table" },
            h("caption", null, caption),
            h("thead", null, h("tr", null, ["Action", "What", "Asked by", "Asked", "Takes effect", "Status", "Actions"].map((c) => h("th", { scope: "col" }, c)))),
            h("tbody", null, rows.map(row)),
          ),
        );
      body.replaceChildren(
        open.length ? tbl(`Waiting (${open.length})`, open) : h("p", { class: "empty", id: "approvals-none-pending" }, "Nothing is waiting for approval."),
        past.length ? tbl("Done", past.slice(0, 100)) : null,
      );
    }

    const unsub = ctx.stream(null, (ev) => {
      if (ev && /^approval\./.test(String(ev.kind || ""))) load();
    });
    await load();
    return () => unsub();
  },
};
