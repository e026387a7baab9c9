// Events: the appliance's event log and audit trail (who did what from
// where, and how it ended), filterable by time range, severity, kind,
// user, outcome, VM and job, exported as CSV or JSON; new events arrive live.
import { h, clear, field, table, badge } from "../lib/dom.js";

const rank = { info: 0, warning: 1, error: 2 };

function localInput(d) {
  const pad = n => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

export default {
  route: "#/events",
  title: "Events",
  nav: true,
  async render(root, ctx) {
    const { fmt } = ctx;
    const q = ctx.query;
    const range = h("select", { name: "range", id: "events-range" },
      h("option", { value: "24h" }, "Last 24 hours"),
      h("option", { value: "7d" }, "Last 7 days"),
      h("option", { value: "30d" }, "Last 30 days"),
      h("option", { value: "all" }, "All"),
      h("option", { value: "custom" }, "Custom range"));
    range.value = q.get("range") || (q.get("from") ? "custom" : "7d");
    const from = h("input", { type: "datetime-local", name: "from", id: "events-from" });
    const to = h("input", { type: "datetime-local", name: "to", id: "events-to" });
    if (q.get("from")) from.value = localInput(new Date(q.get("from")));
    if (q.get("to")) to.value = localInput(new Date(q.get("to")));
    const severity = h("select", { name: "severity", id: "events-severity" },
      h("option", { value: "" }, "All"),
      h("option", { value: "warning" }, "Warnings and errors"),
      h("option", { value: "error" }, "Errors only"));
    severity.value = q.get("severity") || "";
    const vm = h("select", { name: "vm", id: "events-vm" }, h("option", { value: "" }, "All VMs"));
    const job = h("select", { name: "job", id: "events-job" }, h("option", { value: "" }, "All jobs"));
    // Every kind the appliance records (GET /event-kinds), under its group.
    const kind = h("select", { name: "kind", id: "events-kind" }, h("option", { value: "" }, "All kinds"));
    const user = h("input", { type: "search", name: "user", id: "events-user", autocomplete: "off", placeholder: "user name" });
    user.value = q.get("user") || "";
    const outcome = h("select", { name: "outcome", id: "events-outcome" }, h("option", { value: "" }, "Any"),
      h("option", { value: "ok" }, "Succeeded"), h("option", { value: "failed" }, "Failed"));
    outcome.value = q.get("outcome") || "";
    const csvLink = h("a", { class: "button", id: "events-export-csv", download: "", href: "/api/v1/events/export?format=csv" }, "Export CSV");
    const jsonLink = h("a", { class: "button", id: "events-export-json", download: "", href: "/api/v1/events/export?format=json" }, "Export JSON");
    const fromField = field("From", from);
    const toField = field("To", to);
    const form = h("form", { class: "row", "aria-label": "Filter events", id: "events-filter" },
      field("Time range", range), fromField, toField, field("Severity", severity), field("Kind", kind), field("User", user), field("Outcome", outcome), field("VM", vm), field("Job", job),
      h("div", { class: "field" }, h("button", { type: "submit", class: "primary" }, "Apply")),
      h("div", { class: "field" }, csvLink, " ", jsonLink));
    const status = h("p", { class: "muted", role: "status", id: "events-count" });
    const list = h("div", { id: "events-list" });
    root.append(form, status, list);

    const [vms, jobs, kinds] = await Promise.all([
      ctx.api("GET", "/vms").catch(() => []),
      ctx.api("GET", "/jobs").catch(() => []),
      ctx.api("GET", "/event-kinds").catch(() => []),
    ]);
    // Each group offers its kinds and, first, every prefix two or more of
    // them share ("restore": restore.vm and restore.disk; the server
    // matches a prefix).
    const groups = new Map();
    const perPrefix = new Map();
    for (const k of kinds || []) {
      const p = String(k.kind).split(".")[0];
      perPrefix.set(p, (perPrefix.get(p) || 0) + 1);
    }
    const prefixShown = new Set();
    for (const k of kinds || []) {
      if (!groups.has(k.group)) groups.set(k.group, { el: h("optgroup", { label: k.group }), prefixes: [], kinds: [] });
      const g = groups.get(k.group);
      const p = String(k.kind).split(".")[0];
      if (perPrefix.get(p) > 1 && !prefixShown.has(p)) {
        prefixShown.add(p);
        g.prefixes.push(h("option", { value: p }, `Every ${p}.* event`));
      }
      g.kinds.push(h("option", { value: k.kind, title: k.kind }, `${k.label} (${k.kind})`));
    }
    for (const g of groups.values()) g.el.append(...g.prefixes, ...g.kinds);
    kind.append(...[...groups.values()].map(g => g.el));
    const wantKind = q.get("kind") || "";
    // A kind or prefix from a link that the list lacks (an older event's kind) still filters.
    if (wantKind && ![...kind.options].some(o => o.value === wantKind)) kind.append(h("option", { value: wantKind }, wantKind));
    kind.value = wantKind;
    const vmName = new Map();
    // readable shows ids as people read them: a VM's instance UUID as its
    // name, a restore point's 64-digit id by its first 12 digits (the whole
    // text stays in the title, and the exports keep the ids).
    const readable = (text) => {
      const shown = fmt.readableIds(text, vmName);
      const zoned = fmt.zonedTimes(shown);
      if (zoned) return h("span", { title: shown === text ? null : text }, ...zoned);
      return shown === text ? text : h("span", { title: text }, shown);
    };
    // changes is a change event's list of changed fields, from what to what
    // (a secret only as changed).
    const changes = (e) => (e.changes && e.changes.length
      ? h("ul", { class: "event-changes", "aria-label": "Changed fields" }, ...e.changes.map(c => h("li", null,
        h("code", null, c.field), ": ",
        c.secret ? h("em", null, "(changed)") : h("span", null, readable(c.from || "(none)"), " → ", readable(c.to || "(none)")))))
      : null);
    // withoutChanges is the message without the changes it ends with (the
    // list under it shows them; the exports keep the whole message).
    const withoutChanges = (e) => {
      const m = e.message || "";
      const tail = `; ${e.changes.map(c => (c.secret ? `${c.field}: (changed)` : `${c.field}: ${c.from || "(none)"} → ${c.to || "(none)"}`)).join("; ")}`;
      return m.endsWith(tail) ? m.slice(0, -tail.length) : m;
    };
    for (const v of vms || []) {
      const id = v.instanceUuid;
      vmName.set(id, v.name);
      vm.append(h("option", { value: id }, v.name));
    }
    const jobName = new Map();
    for (const j of jobs || []) {
      jobName.set(j.id, j.name || j.id);
      job.append(h("option", { value: j.id }, j.name || j.id));
    }
    vm.value = q.get("vm") || "";
    job.value = q.get("job") || "";

    const syncCustom = () => {
      const custom = range.value === "custom";
      fromField.hidden = !custom;
      toField.hidden = !custom;
    };
    syncCustom();
    range.addEventListener("change", syncCustom);

    let events = [];
    let matched = 0;
    // The API returns the OLDEST matching events first, up to limit: page
    // forward from the last one seen and keep the newest 500.
    const pageSize = 2000;
    const key = e => `${e.time}|${e.kind}|${e.subject}|${e.message}`;
    let open = false; // the range ends now: live events belong in it

    function params() {
      const p = new URLSearchParams();
      const now = Date.now();
      const back = { "24h": 864e5, "7d": 7 * 864e5, "30d": 30 * 864e5 }[range.value];
      if (back) p.set("from", new Date(now - back).toISOString());
      if (range.value === "custom") {
        if (from.value) p.set("from", new Date(from.value).toISOString());
        if (to.value) p.set("to", new Date(to.value).toISOString());
      }
      open = range.value !== "custom" || !to.value;
      if (severity.value) p.set("severity", severity.value);
      if (vm.value) p.set("vm", vm.value);
      if (job.value) p.set("job", job.value);
      if (kind.value) p.set("kind", kind.value);
      if (user.value.trim()) p.set("user", user.value.trim());
      if (outcome.value) p.set("outcome", outcome.value);
      // The export takes the same filter, without the page size.
      for (const [a, f] of [[csvLink, "csv"], [jsonLink, "json"]]) {
        const x = new URLSearchParams(p);
        x.set("format", f);
        a.href = `/api/v1/events/export?${x}`;
      }
      p.set("limit", String(pageSize));
      return p;
    }

    function matches(e) {
      if (!open) return false;
      if (severity.value && (rank[e.severity] ?? 0) < rank[severity.value]) return false;
      if (vm.value && e.vm !== vm.value) return false;
      if (job.value && e.job !== job.value) return false;
      const k = kind.value;
      if (k && e.kind !== k && !String(e.kind || "").startsWith(`${k}.`)) return false;
      if (user.value.trim() && e.user !== user.value.trim()) return false;
      if (outcome.value && e.outcome !== outcome.value) return false;
      return true;
    }

    function draw() {
      status.textContent = matched > events.length
        ? `The newest ${events.length} of ${matched} events; narrow the filter to see older ones.`
        : `${events.length} event${events.length === 1 ? "" : "s"}.`;
      clear(list).append(table("!Events", [
        { label: "Time", cell: e => fmt.timeEl(e.time) },
        { label: "Severity", cell: e => badge(e.severity || "info") },
        { label: "Kind", cell: e => e.kind || "" },
        { label: "Subject", cell: e => readable(e.subject || "") },
        {
          label: "User", cell: e => (e.user ? h("span", { class: "event-who" }, e.user, e.address ? h("span", { class: "event-from" }, ` from ${e.address}`) : "",
            e.outcome ? " " : "", e.outcome ? badge(e.outcome === "ok" ? "ok" : "failed") : "") : ""),
        },
        { label: "VM", cell: e => (e.vm ? vmName.get(e.vm) || e.vm : "") },
        { label: "Job", cell: e => (e.job ? jobName.get(e.job) || e.job : "") },
        { label: "Message", cell: e => (e.changes && e.changes.length ? h("div", null, readable(withoutChanges(e)), changes(e)) : readable(e.message || "")) },
      ], events, "No events match the filter."));
    }

    async function load() {
      ctx.fieldErrors(form, null);
      if (range.value === "custom" && from.value && to.value && new Date(from.value) > new Date(to.value)) {
        ctx.fieldErrors(form, new ctx.ApiError(0, "validation", "", [{ field: "to", message: "The end must be after the start." }]));
        return;
      }
      try {
        const p = params();
        let kept = [];
        let seen = new Set();
        matched = 0;
        for (let page = 0; page < 25; page++) {
          const got = (await ctx.api("GET", `/events?${p}`)) || [];
          const fresh = got.filter(e => !seen.has(key(e)));
          matched += fresh.length;
          kept = kept.concat(fresh).slice(-500);
          if (got.length < pageSize) break;
          const last = got[got.length - 1].time;
          // Events at the boundary time come again on the next page: skip them.
          seen = new Set(got.filter(e => e.time === last).map(key));
          p.set("from", last);
        }
        events = kept.reverse(); // newest first
        draw();
      } catch (e) {
        if (e.status === 401) return;
        ctx.fieldErrors(form, e);
      }
    }

    form.addEventListener("submit", (e) => { e.preventDefault(); load(); });
    await load();
    const unsub = ctx.stream(null, (e) => {
      if (!matches(e)) return;
      events = [e, ...events].slice(0, 500);
      matched += 1;
      draw();
    });
    return unsub;
  },
};
