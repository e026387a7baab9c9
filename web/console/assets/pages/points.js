// Restore points (#/restore-points): per VM, with size, unique bytes,
// consistency and lock state; lock, unlock and delete (with confirmation;
// a locked point cannot be deleted and the page says why). The server
// filters and pages (GET /restore-points?limit=&cursor=): the page shows
// the newest PAGE points that match and "Show more" fetches the next page,
// so 30,000 points cost one page to fetch and draw.
import { ensureCSS, pick, errorText } from "./jobs-common.js";
import { consistency, pointVM } from "./restore-timeline.js";
import { lockBadge, timeLockButton } from "./points-timelock.js";
import { pendingText } from "./approvals.js";

const PAGE = 100;

const LOCKED_WHY = "Locked restore points cannot be deleted: retention and deletion leave them alone until they are unlocked.";

// timeLocked: p is locked until a date still ahead (no role can unlock it).
function timeLocked(p) {
  return !!(p.locked && p.lockedUntil && new Date(p.lockedUntil) > new Date());
}

export default {
  route: "#/restore-points",
  title: "Restore points",
  nav: true,
  async render(root, ctx) {
    performance.mark("vmvault:points:start");
    await ensureCSS();
    const h = ctx.h;
    const canLock = ctx.can("operator");
    const canDelete = ctx.can("administrator");
    const status = h("div", { class: "p2-status", role: "status", "aria-live": "polite", id: "points-status" });
    const vmSel = h("select", { id: "points-vm", name: "vm" });
    const repoSel = h("select", { id: "points-repo", name: "repository" });
    const search = h("input", { type: "search", id: "points-q", name: "q", placeholder: "VM name or point id", autocomplete: "off" });
    const fromIn = h("input", { type: "date", id: "points-from", name: "from" });
    const toIn = h("input", { type: "date", id: "points-to", name: "to" });
    const count = h("p", { class: "hint", id: "points-count" });
    const body = h("div", { id: "points-body" }, h("p", { class: "loading" }, "Loading restore points…"));
    const more = h("button", { type: "button", id: "points-more", hidden: true }, "Show more");
    const moreBox = h("div", { class: "row", id: "points-more-box" }, more);
    const form = h(
      "form",
      { class: "row", role: "search", "aria-label": "Filter restore points", id: "points-filter" },
      h("div", { class: "field" }, h("label", { for: "points-vm" }, "VM"), vmSel),
      h("div", { class: "field" }, h("label", { for: "points-repo" }, "Repository"), repoSel),
      h("div", { class: "field" }, h("label", { for: "points-q" }, "Search"), search),
      h("div", { class: "field" }, h("label", { for: "points-from" }, "From"), fromIn),
      h("div", { class: "field" }, h("label", { for: "points-to" }, "To (inclusive)"), toIn),
    );
    root.append(form, status, count, body, moreBox);

    let points = []; // the pages fetched so far of the points matching the filter (the server filters)
    let total = 0; // how many points match the filter, on every page
    let next = ""; // the cursor of the page after the last fetched
    // Unique bytes per point come from each repository's statistics (GET
    // /repositories/{name}: stats.perPoint), fetched once the list is drawn
    // and again when points come or go (a new point makes blocks of the
    // older ones shared). "…" while they load, "–" if they cannot.
    const unique = new Map(); // point id -> unique bytes
    const uniqueAsked = new Map(); // repository -> "loading" | "done" | "failed"
    // A refusal stays under its row when the list is drawn again (a
    // point event redraws it a moment later).
    const messages = new Map(); // point id -> {text, bad}
    const want = ctx.query.get("vm");
    if (ctx.query.get("q")) search.value = ctx.query.get("q");
    // The first page already filtered as the address says (the options
    // are not there yet: the VM list arrives with it).
    const firstQuery = query();
    if (want) firstQuery.set("vm", want);
    if (ctx.query.get("repository")) firstQuery.set("repository", ctx.query.get("repository"));
    const [first, vms, repos, jobs] = await Promise.all([fetchPage(firstQuery, ""), ctx.api("GET", "/vms").catch(() => []), ctx.api("GET", "/repositories").catch(() => []), ctx.api("GET", "/jobs").catch(() => [])]);
    const jobName = new Map((jobs || []).map((j) => [j.id, j.name || j.id]));
    performance.mark("vmvault:points:data");
    const byVM = new Map((vms || []).map((v) => [v.instanceUuid || v.name, v]));
    // Every VM with a point: GET /vms counts them (VMs known only from
    // points included), so the choices need no full list of points.
    const choices = (vms || []).filter((v) => v.points > 0).map((v) => ({ key: v.instanceUuid || v.name, name: v.name, inInventory: !!v.inInventory, points: v.points })).sort((a, b) => String(a.name).localeCompare(String(b.name)));
    // Element.append takes nodes, not arrays: spread the options.
    vmSel.append(h("option", { value: "" }, `All VMs (${choices.length})`), ...choices.map((c) => h("option", { value: c.key }, `${c.name}${c.inInventory ? "" : " (not in vCenter)"} — ${c.points} point${c.points === 1 ? "" : "s"}`)));
    repoSel.append(h("option", { value: "" }, "All repositories"), ...(repos || []).map((r) => h("option", { value: r.name }, r.name)));
    if (want) {
      // Inventory links by instance UUID; a VM with no point yet still
      // filters (to nothing) instead of showing every VM's points.
      if (!choices.some((c) => c.key === want)) {
        const v = (vms || []).find((x) => x.instanceUuid === want || x.name === want);
        vmSel.append(h("option", { value: want }, `${v ? v.name : want} — 0 points`));
      }
      vmSel.value = want;
    }
    if (ctx.query.get("repository")) repoSel.value = ctx.query.get("repository");

    // query is GET /restore-points' filter from the form: dates are local
    // days, the end day included.
    function query() {
      const p = new URLSearchParams();
      if (vmSel.value) p.set("vm", vmSel.value);
      if (repoSel.value) p.set("repository", repoSel.value);
      if (search.value.trim()) p.set("q", search.value.trim());
      if (fromIn.value) p.set("from", new Date(`${fromIn.value}T00:00:00`).toISOString());
      if (toIn.value) {
        const end = new Date(`${toIn.value}T00:00:00`);
        end.setDate(end.getDate() + 1);
        p.set("to", end.toISOString());
      }
      return p;
    }

    // fetchPage asks for one page of q after cursor ("" = the newest).
    async function fetchPage(q, cursor, limit = PAGE) {
      const p = new URLSearchParams(q);
      p.set("limit", String(limit));
      if (cursor) p.set("cursor", cursor);
      const pg = (await ctx.api("GET", `/restore-points?${p}`)) || {};
      return { items: pg.items || [], total: pg.total || 0, next: pg.next || "" };
    }

    let seq = 0;
    async function load() {
      const mine = ++seq;
      const q = query();
      if (fromIn.value && toIn.value && fromIn.value > toIn.value) {
        status.textContent = "The end date is before the start date.";
        return;
      }
      try {
        const pg = await fetchPage(q, "");
        if (mine !== seq) return; // a newer filter answered first
        ({ items: points, total, next } = pg);
        draw();
      } catch (e) {
        if (mine === seq) status.textContent = `Could not list restore points: ${errorText(e)}`;
      }
    }
    ({ items: points, total, next } = first);

    more.addEventListener("click", async () => {
      const mine = seq;
      more.disabled = true;
      try {
        const pg = await fetchPage(query(), next);
        if (mine !== seq) return; // the filter changed meanwhile
        const have = new Set(points.map((p) => p.id));
        points = points.concat(pg.items.filter((p) => !have.has(p.id)));
        total = pg.total;
        next = pg.next;
        draw();
        status.textContent = `${points.length} of ${total} restore points shown.`;
      } catch (e) {
        status.textContent = `Could not list more restore points: ${errorText(e)}`;
      } finally {
        more.disabled = false;
      }
    });

    function row(p) {
      const c = consistency(p);
      const why = h("span", { class: "visually-hidden", id: `why-${p.id}` }, lockedWhy(p));
      const actions = h("div", { class: "p2-actions" });
      actions.append(h("a", { class: "button", href: `#/restore?point=${encodeURIComponent(p.id)}`, "aria-label": `Restore from the point of ${ctx.fmt.time(p.time)}` }, "Restore"));
      // A time lock cannot be removed before its date, by anyone: no
      // Unlock to offer until then (the badge says until when).
      if (canLock && !timeLocked(p)) {
        const b = h("button", { type: "button", "data-action": p.locked ? "unlock" : "lock", "data-point": p.id, "aria-label": `${p.locked ? "Unlock" : "Lock"} the restore point of ${ctx.fmt.time(p.time)}` }, p.locked ? "Unlock" : "Lock");
        b.addEventListener("click", () => setLock(p, !p.locked, b));
        actions.append(b);
      }
      if (canDelete) {
        // A locked point's Delete stays focusable (aria-disabled) so that
        // keyboard and screen reader users learn why it does nothing.
        const d = h(
          "button",
          { type: "button", class: p.locked ? null : "danger", "data-action": "delete", "data-point": p.id, "aria-label": `Delete the restore point of ${ctx.fmt.time(p.time)}`, "aria-disabled": p.locked ? "true" : null, "aria-describedby": p.locked ? `why-${p.id}` : null, title: p.locked ? lockedWhy(p) : null },
          "Delete",
        );
        d.addEventListener("click", () => del(p));
        actions.append(d, why);
        actions.append(timeLockButton(ctx, p, (np) => { Object.assign(p, np); draw(); status.textContent = `Restore point of ${ctx.fmt.time(p.time)} locked until ${ctx.fmt.time(p.lockedUntil)}.`; }));
      }
      const msg = messages.get(p.id);
      return h(
        "tr",
        { "data-point": p.id, "data-locked": p.locked ? "true" : "false" },
        h("td", { "data-label": "Time" }, h("time", { datetime: p.time, title: p.time }, ctx.fmt.time(p.time)), p.partial ? h("span", { class: "badge p2-state-bad" }, " partial") : null),
        h("td", { "data-label": "ID" }, h("code", { class: "point-id", title: p.id }, String(p.id).slice(0, 12))),
        h("td", { "data-label": "Repository" }, p.repository),
        h("td", { "data-label": "Job" }, p.job ? jobName.get(p.job) || p.job : "ad hoc"),
        h("td", { "data-label": "Size", class: "num" }, ctx.fmt.bytes(p.logicalBytes)),
        uniqueCell(p),
        h("td", { "data-label": "Consistency" }, h("span", { class: `badge p2-state-${c.kind || "neutral"}`, title: c.text }, c.label)),
        h("td", { "data-label": "Lock" }, lockBadge(ctx, p)),
        h("td", { "data-label": "Actions" }, actions, h("div", { class: `p2-point-msg ${msg ? (msg.bad ? "field-error" : "hint") : ""}`, id: `msg-${p.id}`, role: "status" }, msg ? msg.text : "")),
      );
    }

    const UNIQUE_WHY = "Bytes no other restore point shares: about what deleting this point (then a reclaim) frees, before compression.";

    function uniqueCell(p) {
      const td = h("td", { "data-label": "Unique", class: "num", "data-unique": p.id, title: UNIQUE_WHY });
      fillUniqueCell(td, p);
      return td;
    }

    function fillUniqueCell(td, p) {
      const u = unique.get(p.id);
      const st = uniqueAsked.get(p.repository);
      if (u !== undefined) td.textContent = ctx.fmt.bytes(u);
      else if (st === "failed" || st === "done") {
        // "done" without the point: a point newer than the statistics.
        td.textContent = "–";
        td.title = st === "failed" ? "The repository's statistics could not be read." : "Not counted yet: the repository's statistics are from before this point.";
      } else td.textContent = "…";
    }

    // loadUnique fetches the statistics of the repositories of the points
    // shown (again with fresh: after points came or went), then fills
    // their cells in place (focus and messages stay).
    function loadUnique(fresh) {
      for (const r of new Set(points.map((p) => p.repository))) {
        if (!r || (!fresh && uniqueAsked.has(r))) continue;
        uniqueAsked.set(r, "loading");
        ctx
          .api("GET", `/repositories/${encodeURIComponent(r)}`)
          .then((d) => {
            for (const ps of (d && d.stats && d.stats.perPoint) || []) unique.set(ps.id, ps.uniqueBytes);
            uniqueAsked.set(r, "done");
          })
          .catch(() => uniqueAsked.set(r, "failed"))
          .finally(() => {
            for (const p of points) {
              if (p.repository !== r) continue;
              const td = body.querySelector(`td[data-unique="${CSS.escape(p.id)}"]`);
              if (td) fillUniqueCell(td, p);
            }
          });
      }
    }

    function draw() {
      loadUnique(false);
      const list = points;
      const filtered = query().toString() !== "";
      const shown = list.length < total ? ` Showing the newest ${list.length}.` : "";
      count.textContent = (filtered ? `${total} restore point${total === 1 ? "" : "s"} match the filter.` : `${total} restore point${total === 1 ? "" : "s"}.`) + shown;
      more.hidden = !next;
      more.textContent = `Show ${Math.min(PAGE, total - list.length)} more`;
      if (!list.length) {
        body.replaceChildren(h("p", { class: "empty" }, filtered ? "No restore point matches the filter." : "No restore points yet: run a backup job first."));
        return;
      }
      const groups = new Map();
      for (const p of list) {
        const k = pointVM(p);
        if (!groups.has(k)) groups.set(k, { name: (p.vm && p.vm.name) || k, points: [] });
        groups.get(k).points.push(p);
      }
      const inInv = new Set((vms || []).filter((x) => x.inInventory).map((x) => x.instanceUuid));
      body.replaceChildren(
        ...[...groups.entries()]
          .sort((a, b) => String(a[1].name).localeCompare(String(b[1].name)))
          .map(([k, g], i) => {
            // What is protected is the VM's newest complete point, not the
            // sum of its points (two points of a 64 MiB VM protect 64 MiB):
            // GET /vms knows it even when this page holds older points only.
            const v = byVM.get(k);
            const newest = (v && v.lastPoint) || g.points.filter((p) => !p.partial).reduce((a, p) => (!a || new Date(p.time) > new Date(a.time) ? p : a), null);
            const all = v && !filtered ? v.points : g.points.length;
            const counted = g.points.length < all ? `${g.points.length} of ${all} restore points shown` : `${all} restore point${all === 1 ? "" : "s"}`;
            const hid = `vm-group-${i}`;
            return h(
              "section",
              { class: "p2-vm-group", "aria-labelledby": hid, "data-vm": k },
              h("h2", { id: hid }, g.name, inInv.has(k) || !(vms || []).length ? "" : h("span", { class: "badge p2-state-warn" }, " not in vCenter")),
              h("p", { class: "hint" }, `${counted}; ${newest ? `${ctx.fmt.bytes(newest.logicalBytes)} protected by the newest, ${ctx.fmt.time(newest.time)}` : "no complete point"}`),
              h(
                "div",
                { class: "table-wrap" },
                h(
                  "table",
                  { class: "p2-table" },
                  h("caption", { class: "visually-hidden" }, `Restore points of ${g.name}`),
                  h("thead", null, h("tr", null, ["Time", "ID", "Repository", "Job", "Size", "Unique", "Consistency", "Lock", "Actions"].map((c) => h("th", { scope: "col", class: c === "Size" || c === "Unique" ? "num" : null }, c)))),
                  h("tbody", null, g.points.map(row)),
                ),
              ),
            );
          }),
      );
    }

    function lockedWhy(p) {
      return timeLocked(p) ? `Time-locked until ${ctx.fmt.time(p.lockedUntil)}: until then no one can unlock or delete it, and retention keeps it.` : LOCKED_WHY;
    }

    // lockError says why the server refused a change to a locked point in
    // the console's words (its message names the point's 64-digit id and
    // an RFC 3339 time). The point was locked elsewhere meanwhile: it is
    // read again, so that its row shows the lock (and its date).
    async function lockError(p, e) {
      if (!e || e.code !== "point_locked") return errorText(e);
      try {
        const np = await ctx.api("GET", `/restore-points/${encodeURIComponent(p.id)}`);
        if (np && np.id) Object.assign(p, np);
      } catch {
        p.locked = true;
      }
      return timeLocked(p) ? lockedWhy(p) : `the restore point is locked. ${LOCKED_WHY}`;
    }

    function say(p, text, bad) {
      messages.set(p.id, { text, bad });
      const m = document.getElementById(`msg-${p.id}`);
      if (m) {
        m.textContent = text;
        m.className = `p2-point-msg ${bad ? "field-error" : "hint"}`;
      }
    }

    async function setLock(p, lock, btn) {
      btn.disabled = true;
      try {
        const np = await ctx.api("POST", `/restore-points/${encodeURIComponent(p.id)}/${lock ? "lock" : "unlock"}`);
        Object.assign(p, np && np.id ? np : { locked: lock });
        p.locked = lock;
        messages.delete(p.id);
        draw();
        status.textContent = `Restore point of ${ctx.fmt.time(p.time)} ${lock ? "locked" : "unlocked"}.`;
        const again = document.querySelector(`button[data-point="${CSS.escape(p.id)}"][data-action="${lock ? "unlock" : "lock"}"]`);
        if (again) again.focus();
      } catch (e) {
        btn.disabled = false;
        const why = await lockError(p, e);
        if (e && e.code === "point_locked") draw();
        say(p, `Could not ${lock ? "lock" : "unlock"}: ${why}`, true);
      }
    }

    async function del(p) {
      if (p.locked) {
        say(p, timeLocked(p) ? `Not deleted. ${lockedWhy(p)}` : `Not deleted. ${LOCKED_WHY} Unlock it first.`, true);
        return;
      }
      const ok = await ctx.confirm(`Delete the restore point of ${(p.vm && p.vm.name) || "this VM"} taken ${ctx.fmt.time(p.time)}? It cannot be restored afterwards; its space is freed by the next reclaim.`, { danger: true, title: "Delete restore point?" });
      if (!ok) return;
      try {
        const res = await ctx.api("DELETE", `/restore-points/${encodeURIComponent(p.id)}`);
        if (res && res.status === "pending") return say(p, `Not deleted yet. ${pendingText(ctx, res)}`, false); // approvals.delay
        points = points.filter((x) => x.id !== p.id);
        total = Math.max(0, total - 1);
        draw();
        status.textContent = `Restore point of ${ctx.fmt.time(p.time)} deleted.`;
        ctx.toast("Restore point deleted.", "success");
      } catch (e) {
        // The server refuses a point locked meanwhile (409 point_locked).
        if (e.code === "point_locked") {
          const why = await lockError(p, e);
          p.locked = true;
          draw();
          say(p, `Not deleted: ${why}`, true);
        } else say(p, `Could not delete: ${errorText(e)}`, true);
      }
    }

    // Live: new restore points (a backup finished) and deletions elsewhere
    // show without a reload; the list is fetched again after a quiet second.
    let refreshTimer = 0;
    const unsub = ctx.stream(null, (ev) => {
      if (!ev || !/^vm\.backed-up|^point\.|^restore-point|^retention/.test(String(ev.kind || ""))) return;
      clearTimeout(refreshTimer);
      refreshTimer = setTimeout(async () => {
        if (document.querySelector("#confirm[open]")) return;
        try {
          // The pages shown, again (new points come first).
          const mine = ++seq;
          const pg = await fetchPage(query(), "", Math.min(1000, Math.max(PAGE, points.length)));
          if (mine !== seq) return;
          ({ items: points, total, next } = pg);
          loadUnique(true);
          const had = document.activeElement && document.activeElement.dataset ? { point: document.activeElement.dataset.point, action: document.activeElement.dataset.action } : null;
          draw();
          if (had && had.point) {
            const again = document.querySelector(`button[data-point="${CSS.escape(had.point)}"][data-action="${had.action}"]`);
            if (again) again.focus();
          }
        } catch {
          /* keep what is shown */
        }
      }, 1000);
    });

    let typing = 0;
    for (const el of [vmSel, repoSel, fromIn, toIn]) el.addEventListener("change", load);
    search.addEventListener("input", () => {
      clearTimeout(typing);
      typing = setTimeout(load, 250);
    });
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      load();
    });
    // The first page was fetched with the address's filter; a filter set
    // from the address the selects did not know (a VM with no point) is in
    // the form now: fetch again only if the form asks for something else.
    const sorted = (q) => {
      const c = new URLSearchParams(q);
      c.sort();
      return c.toString();
    };
    if (sorted(query()) !== sorted(firstQuery)) await load();
    else draw();
    performance.mark("vmvault:points:ready");
    return () => {
      unsub();
      clearTimeout(refreshTimer);
      clearTimeout(typing);
    };
  },
};
