// Settings: general (time zone, event retention); the vCenter connection,
// mail and the maintenance window, each saved here (winning over the
// configuration file, as each section says) with a test where one makes
// sense; repositories (list, create or open); users and roles, API tokens.
import { h, clear, field, table, badge } from "../lib/dom.js";
import { setTimeZone } from "../lib/fmt.js";

const roles = ["administrator", "operator", "restore-only"];

function roleSelect(name, value, id) {
  const s = h("select", { name, id }, roles.map(r => h("option", { value: r }, r)));
  if (value) s.value = value;
  return s;
}

function busy(btn, on, text) {
  btn.disabled = on;
  if (text) btn.textContent = text;
}

async function general(ctx, box) {
  const st = await ctx.api("GET", "/settings");
  const admin = ctx.can("administrator");
  const zones = typeof Intl.supportedValuesOf === "function" ? Intl.supportedValuesOf("timeZone") : [];
  const tz = h("input", { name: "timeZone", id: "settings-tz", list: "settings-tz-list", value: st.timeZone || "UTC", required: true, autocomplete: "off", disabled: !admin });
  const days = h("input", { name: "eventRetentionDays", id: "settings-retention", type: "number", min: "1", max: "3650", value: String(st.eventRetentionDays ?? 90), required: true, disabled: !admin });
  const save = h("button", { type: "submit", class: "primary" }, "Save");
  const form = h("form", { id: "settings-general", novalidate: true },
    h("datalist", { id: "settings-tz-list" }, zones.map(z => h("option", { value: z }))),
    field("Time zone", tz, "IANA name, e.g. Europe/Paris. Schedules and times in the console use it."),
    field("Keep events for (days)", days),
    admin ? save : h("p", { class: "hint" }, "Only administrators can change settings."));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const errs = [];
    let known = !!tz.value.trim();
    try { new Intl.DateTimeFormat("en", { timeZone: tz.value.trim() }); } catch { known = false; }
    if (!known) errs.push({ field: "timeZone", message: "Choose a time zone from the list (an IANA name such as Europe/Paris)." });
    const n = Number(days.value);
    if (!Number.isInteger(n) || n < 1 || n > 3650) errs.push({ field: "eventRetentionDays", message: "A whole number of days from 1 to 3650." });
    if (errs.length) { ctx.fieldErrors(form, new ctx.ApiError(0, "validation", "", errs)); return; }
    ctx.fieldErrors(form, null);
    busy(save, true);
    try {
      const body = { ...st, timeZone: tz.value.trim(), eventRetentionDays: n };
      const saved = await ctx.api("PUT", "/settings", body);
      Object.assign(st, saved || body);
      setTimeZone(tz.value.trim());
      ctx.toast("Settings saved.", "success");
    } catch (err) {
      ctx.fieldErrors(form, err);
    } finally { busy(save, false); }
  });
  box.append(form);
}

// sourceLine says where a section's values come from and which wins.
function sourceLine(id, source) {
  const text = {
    yaml: "From the configuration file. Saving here makes these values win over the file from then on.",
    console: "Saved in the console: these values win over the configuration file.",
    none: "Not configured, neither in the configuration file nor here.",
  }[source] || "";
  return h("p", { class: "hint settings-source", id, "data-source": source || "" }, h("strong", null, "Source: "), text);
}

// showErrors puts an API error's fields next to the form's controls;
// rename maps API field names to the form's (e.g. to[1] -> to).
function showErrors(ctx, form, err, rename) {
  if (err && err.fields && err.fields.length && rename) {
    err.fields = err.fields.map(f => ({ ...f, field: rename(f.field) }));
  }
  ctx.fieldErrors(form, err);
}

// resetButton offers "use the configuration file's values" for a section saved here.
function resetButton(ctx, section, id, what, reload) {
  const b = h("button", { type: "button", id }, "Use the configuration file's values");
  b.addEventListener("click", async () => {
    if (!await ctx.confirm(`Forget the ${what} saved in the console? The configuration file's values apply again.`, { title: "Use the configuration file?", ok: "Use the file's" })) return;
    try {
      const r = await ctx.api("DELETE", `/settings/${section}`);
      ctx.toast(r && r.message ? r.message : "The configuration file's values apply again.", "success");
      await reload();
    } catch (err) {
      ctx.toast(`Could not reset: ${err.message}`, "error");
    }
  });
  return b;
}

const https = /^https?:\/\/[^/\s]+/;

async function vcenter(ctx, box) {
  const st = await ctx.api("GET", "/settings");
  const v = st.vcenter || { source: "none" };
  const url = h("input", { name: "url", id: "vc-url", type: "url", placeholder: "https://vcenter.example.com/sdk", autocomplete: "off", value: v.url || "" });
  const user = h("input", { name: "username", id: "vc-user", autocomplete: "off", value: v.username || "" });
  const pass = h("input", { name: "password", id: "vc-pass", type: "password", autocomplete: "new-password",
    placeholder: v.passwordSet ? "stored: leave empty to keep it" : "" });
  const thumb = h("input", { name: "thumbprint", id: "vc-thumb", autocomplete: "off", value: v.thumbprint || "" });
  const insecure = h("input", { name: "insecure", id: "vc-insecure", type: "checkbox" });
  insecure.checked = !!v.insecure;
  const save = h("button", { type: "submit", class: "primary", id: "vc-save" }, "Save");
  const btn = h("button", { type: "button", id: "vc-test" }, "Test connection");
  const out = h("div", { id: "vc-result", role: "status" });
  const restart = h("div", { id: "vc-restart", "aria-live": "polite" });
  const reload = async () => { clear(box); await vcenter(ctx, box); };
  if (v.restartNeeded && v.source !== "none") {
    restart.append(h("p", { class: "notice" }, "Saved; the appliance connects to this vCenter at its next start (restart the vmvault service).",
      v.active ? ` Running now: ${v.active}.` : " No vCenter is connected now."));
  }
  const form = h("form", { id: "settings-vcenter", novalidate: true },
    sourceLine("vc-source", v.source),
    h("div", { class: "row" }, field("vCenter URL", url), field("Username", user), field("Password", pass)),
    h("div", { class: "row" }, field("Certificate thumbprint (SHA-256)", thumb),
      h("div", { class: "field inline" }, insecure, h("label", { for: "vc-insecure" }, "Skip certificate verification"))),
    h("p", { class: "hint" }, "Test tries these values without saving them. A saved connection is used from the next start; the roles of vCenter users stay in the configuration file."),
    h("div", { class: "actions" }, save, " ", btn, " ", v.source === "console" ? resetButton(ctx, "vcenter", "vc-reset", "vCenter connection", reload) : ""),
    restart, out);
  const body = () => {
    const b = { url: url.value.trim(), username: user.value.trim() };
    if (pass.value) b.password = pass.value;
    if (thumb.value.trim()) b.thumbprint = thumb.value.trim();
    if (insecure.checked) b.insecure = true;
    return b;
  };
  const check = (forSave) => {
    const errs = [];
    if (url.value && !https.test(url.value.trim())) errs.push({ field: "url", message: "An https:// URL, e.g. https://vcenter.example.com/sdk." });
    if (forSave && !url.value.trim()) errs.push({ field: "url", message: "Required." });
    if (forSave && !user.value.trim()) errs.push({ field: "username", message: "Required." });
    if (thumb.value.trim() && insecure.checked) errs.push({ field: "insecure", message: "Pin the certificate or skip verification, not both." });
    if (errs.length) { ctx.fieldErrors(form, new ctx.ApiError(0, "validation", "", errs)); return false; }
    ctx.fieldErrors(form, null);
    return true;
  };
  btn.addEventListener("click", async () => {
    clear(out);
    if (!check(false)) return;
    const b = body();
    for (const k of Object.keys(b)) if (b[k] === "") delete b[k];
    busy(btn, true, "Testing…");
    try {
      const r = await ctx.api("POST", "/settings/vcenter/test", b);
      out.append(r && r.ok
        ? h("p", { class: "notice" }, badge("ok"), ` Connected${r.version ? ` to ${r.version}` : ""}. ${r.message || ""}`)
        : h("p", { class: "form-error" }, `Connection failed: ${(r && r.message) || "no answer"}`));
    } catch (err) {
      if (err.fields.length) ctx.fieldErrors(form, err);
      else out.append(h("p", { class: "form-error" }, err.status === 501 ? "This appliance cannot test vCenter connections." : err.message));
    } finally { busy(btn, false, "Test connection"); }
  });
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    clear(out);
    if (!check(true)) return;
    busy(save, true);
    try {
      const r = await ctx.api("PUT", "/settings/vcenter", body());
      ctx.toast(r.message || "vCenter connection saved.", "success");
      await reload();
    } catch (err) {
      showErrors(ctx, form, err);
    } finally { busy(save, false); }
  });
  box.append(form);
}

const emailLike = /^[^\s@<>]+@[^\s@<>]+$/;

async function smtp(ctx, box) {
  const st = await ctx.api("GET", "/settings");
  const m = st.smtp || { source: "none" };
  const enabled = h("input", { name: "enabled", id: "smtp-enabled", type: "checkbox" });
  enabled.checked = !!m.enabled;
  const host = h("input", { name: "host", id: "smtp-host", autocomplete: "off", placeholder: "smtp.example.com", value: m.host || "" });
  const port = h("input", { name: "port", id: "smtp-port", type: "number", min: "0", max: "65535", value: String(m.port || 0) });
  const tls = h("select", { name: "tls", id: "smtp-tls" },
    h("option", { value: "starttls" }, "STARTTLS (port 587)"), h("option", { value: "implicit" }, "TLS (port 465)"), h("option", { value: "none" }, "None (a local relay only)"));
  tls.value = m.tls || "starttls";
  const user = h("input", { name: "username", id: "smtp-user", autocomplete: "off", value: m.username || "" });
  const pass = h("input", { name: "password", id: "smtp-pass", type: "password", autocomplete: "new-password", placeholder: m.passwordSet ? "stored: leave empty to keep it" : "" });
  const from = h("input", { name: "from", id: "smtp-from", autocomplete: "off", placeholder: "vmvault <vmvault@example.com>", value: m.from || "" });
  const rcpts = h("input", { name: "to", id: "smtp-recipients", autocomplete: "off", placeholder: "ops@example.com, backup@example.com", value: (m.to || []).join(", ") });
  const daily = h("input", { name: "dailyReportAt", id: "smtp-daily", autocomplete: "off", placeholder: "07:00 or off", value: m.dailyReportAt || "07:00" });
  const alerts = h("input", { name: "alerts", id: "smtp-alerts", type: "checkbox" });
  alerts.checked = m.alerts !== false;
  const to = h("input", { name: "testTo", id: "smtp-to", type: "email", autocomplete: "email", placeholder: "ops@example.com" });
  const save = h("button", { type: "submit", class: "primary", id: "smtp-save" }, "Save");
  const btn = h("button", { type: "button", id: "smtp-test" }, "Send test mail");
  const out = h("div", { id: "smtp-result", role: "status" });
  const reload = async () => { clear(box); await smtp(ctx, box); };
  const form = h("form", { id: "settings-smtp", novalidate: true },
    sourceLine("smtp-source", m.source),
    h("div", { class: "field inline" }, enabled, h("label", { for: "smtp-enabled" }, "Send alerts and the daily report by e-mail")),
    h("div", { class: "row" }, field("SMTP server", host), field("Port", port, "0: the encryption's usual port."), field("Encryption", tls)),
    h("div", { class: "row" }, field("Username", user, "Empty: no login."), field("Password", pass)),
    h("div", { class: "row" }, field("From", from), field("Recipients", rcpts, "Separated by commas.")),
    h("div", { class: "row" }, field("Daily report at", daily, "HH:MM in the appliance's time zone, or off."),
      h("div", { class: "field inline" }, alerts, h("label", { for: "smtp-alerts" }, "Mail failure alerts"))),
    h("div", { class: "row" }, field("Test recipient", to, "The test uses the values above, saved or not (or the configured mail when e-mail is off here)."),
      h("div", { class: "field" }, btn)),
    h("div", { class: "actions" }, save, " ", m.source === "console" ? resetButton(ctx, "smtp", "smtp-reset", "mail settings", reload) : ""),
    out);
  const body = () => {
    const b = { enabled: enabled.checked, host: host.value.trim(), port: Number(port.value || 0), tls: tls.value, username: user.value.trim(),
      from: from.value.trim(), to: rcpts.value.split(",").map(x => x.trim()).filter(Boolean), dailyReportAt: daily.value.trim() || "07:00", alerts: alerts.checked };
    if (pass.value) b.password = pass.value;
    return b;
  };
  const rename = f => f.replace(/^to\[\d+\]$/, "to");
  const check = (b) => {
    const errs = [];
    if (b.enabled) {
      if (!b.host) errs.push({ field: "host", message: "Required: the mail server's name or address." });
      if (!b.from) errs.push({ field: "from", message: "Required: the sender's address." });
      if (!b.to.length) errs.push({ field: "to", message: "At least one recipient." });
    }
    const bad = b.to.find(x => !emailLike.test(x.replace(/^.*<(.*)>$/, "$1")));
    if (bad) errs.push({ field: "to", message: `${bad} is not an e-mail address.` });
    if (!Number.isInteger(b.port) || b.port < 0 || b.port > 65535) errs.push({ field: "port", message: "A port from 0 to 65535." });
    if (b.dailyReportAt !== "off" && !/^([01]\d|2[0-3]):[0-5]\d$/.test(b.dailyReportAt)) errs.push({ field: "dailyReportAt", message: "A time such as 07:00, or off." });
    if (errs.length) { ctx.fieldErrors(form, new ctx.ApiError(0, "validation", "", errs)); return false; }
    ctx.fieldErrors(form, null);
    return true;
  };
  btn.addEventListener("click", async () => {
    ctx.fieldErrors(form, null);
    clear(out);
    if (!to.value || !to.checkValidity()) {
      ctx.fieldErrors(form, new ctx.ApiError(0, "validation", "", [{ field: "testTo", message: "One e-mail address, such as ops@example.com." }]));
      return;
    }
    const req = { to: to.value };
    if (enabled.checked) {
      const b = body();
      if (!check(b)) return;
      req.smtp = b;
    }
    busy(btn, true, "Sending…");
    try {
      await ctx.api("POST", "/settings/smtp/test", req);
      out.append(h("p", { class: "notice" }, `Test mail sent to ${to.value}.`));
    } catch (err) {
      if (err.fields.length) showErrors(ctx, form, err, f => (f === "to" && !req.smtp ? "testTo" : rename(f)));
      else if (err.status === 409 || err.status === 503) out.append(h("p", { class: "form-error" }, `SMTP is not configured: ${err.message}`));
      else out.append(h("p", { class: "form-error" }, `Sending failed: ${err.message}`));
    } finally { busy(btn, false, "Send test mail"); }
  });
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    clear(out);
    const b = body();
    if (!check(b)) return;
    busy(save, true);
    try {
      const r = await ctx.api("PUT", "/settings/smtp", b);
      ctx.toast(r.message || "Mail settings saved.", "success");
      await reload();
    } catch (err) {
      showErrors(ctx, form, err, rename);
    } finally { busy(save, false); }
  });
  box.append(form);
}

const weekdays = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"];
const rangeRe = /^([01]\d|2[0-3]):[0-5]\d-([01]\d|2[0-4]):[0-5]\d$/;

async function maintenance(ctx, box) {
  const st = await ctx.api("GET", "/settings");
  const m = st.maintenance || { source: "none", window: null };
  const w = m.window || null;
  const enabled = h("input", { name: "enabled", id: "mt-enabled", type: "checkbox" });
  enabled.checked = !!w;
  const tz = h("input", { name: "location", id: "mt-tz", autocomplete: "off", value: (w && w.location) || st.timeZone || "UTC" });
  const days = {};
  const dayFields = weekdays.map((d) => {
    days[d] = h("input", { name: `day-${d}`, id: `mt-day-${d}`, autocomplete: "off", placeholder: "e.g. 01:00-06:00",
      value: ((w && w.days && w.days[d]) || []).join(", ") });
    return field(d[0].toUpperCase() + d.slice(1), days[d]);
  });
  const full = h("input", { name: "fullCheckDays", id: "mt-full", type: "number", min: "0", max: "365", value: String(m.fullCheckDays || 7) });
  const save = h("button", { type: "submit", class: "primary", id: "mt-save" }, "Save");
  const reload = async () => { clear(box); await maintenance(ctx, box); };
  const form = h("form", { id: "settings-maintenance", novalidate: true },
    sourceLine("mt-source", m.source),
    h("p", { class: "hint" }, "Retention, space reclaim and checks run inside this weekly window; backups never wait for them. A change applies at once."),
    h("div", { class: "field inline" }, enabled, h("label", { for: "mt-enabled" }, "Run maintenance in a weekly window")),
    h("fieldset", { class: "field mt-window", "data-field": "window" }, h("legend", null, "Window (ranges separated by commas; 22:00-02:00 runs past midnight)"),
      h("div", { class: "row" }, field("Time zone", tz), field("Full check every (days)", full, "Reads every blob; 0: 7 days.")),
      h("div", { class: "row mt-days" }, dayFields)),
    h("div", { class: "actions" }, save, " ", m.source === "console" ? resetButton(ctx, "maintenance", "mt-reset", "maintenance window", reload) : ""));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const errs = [];
    const win = { location: tz.value.trim() || "UTC", days: {} };
    for (const d of weekdays) {
      const rs = days[d].value.split(",").map(x => x.trim().replace(/\s*-\s*/, "-")).filter(Boolean);
      const bad = rs.find(r => !rangeRe.test(r));
      if (bad) errs.push({ field: `day-${d}`, message: `${bad}: a range such as 01:00-06:00.` });
      if (rs.length) win.days[d] = rs;
    }
    if (enabled.checked && !Object.keys(win.days).length) errs.push({ field: "window", message: "Give at least one range, or untick the window to turn maintenance off." });
    try { new Intl.DateTimeFormat("en", { timeZone: win.location }); } catch { errs.push({ field: "location", message: "An IANA time zone such as Europe/Paris." }); }
    const n = Number(full.value || 0);
    if (!Number.isInteger(n) || n < 0 || n > 365) errs.push({ field: "fullCheckDays", message: "A whole number of days from 0 to 365." });
    if (errs.length) { ctx.fieldErrors(form, new ctx.ApiError(0, "validation", "", errs)); return; }
    ctx.fieldErrors(form, null);
    busy(save, true);
    try {
      const r = await ctx.api("PUT", "/settings/maintenance", { window: enabled.checked ? win : null, fullCheckDays: n });
      ctx.toast(r.message || "Maintenance window saved.", "success");
      await reload();
    } catch (err) {
      showErrors(ctx, form, err);
    } finally { busy(save, false); }
  });
  box.append(form);
}

async function repositories(ctx, box) {
  const list = h("div", { id: "settings-repos-list" });
  const create = h("input", { type: "radio", name: "mode", id: "repo-mode-create", value: "create" });
  const open = h("input", { type: "radio", name: "mode", id: "repo-mode-open", value: "open" });
  create.checked = true;
  const name = h("input", { name: "name", id: "repo-name", autocomplete: "off", maxlength: "64" });
  const path = h("input", { name: "path", id: "repo-path", autocomplete: "off", placeholder: "/srv/vmvault/offsite" });
  const pass = h("input", { name: "passphrase", id: "repo-pass", type: "password", autocomplete: "new-password" });
  const pass2 = h("input", { name: "passphrase2", id: "repo-pass2", type: "password", autocomplete: "new-password" });
  const confirmField = field("Repeat the passphrase", pass2);
  const add = h("button", { type: "submit", class: "primary", id: "repo-add-submit" }, "Add repository");
  const test = h("button", { type: "button", id: "repo-test" }, "Test");
  const out = h("div", { id: "repo-result", role: "status" });
  const form = h("form", { id: "repo-add", novalidate: true, "aria-labelledby": "repo-add-title" },
    h("h3", { id: "repo-add-title" }, "Add repository"),
    h("fieldset", { class: "row", "data-field": "mode" }, h("legend", { class: "visually-hidden" }, "Create or open"),
      h("div", { class: "field inline" }, create, h("label", { for: "repo-mode-create" }, "Create a new repository")),
      h("div", { class: "field inline" }, open, h("label", { for: "repo-mode-open" }, "Open an existing repository"))),
    h("div", { class: "row" }, field("Name", name, "No spaces or slashes."), field("Directory", path, "An absolute path on the appliance; for a new repository empty or not yet there.")),
    h("div", { class: "row" }, field("Passphrase", pass, "Kept in a file only the appliance reads; it is never shown again. Lose it and the repository cannot be read."), confirmField),
    h("p", { class: "hint" }, "Test checks the name and the directory (and opens an existing repository with its passphrase) without adding anything."),
    h("div", { class: "actions" }, add, " ", test), out);
  const sync = () => { confirmField.hidden = open.checked; };
  create.addEventListener("change", sync);
  open.addEventListener("change", sync);

  async function load() {
    const all = (await ctx.api("GET", "/repositories")) || [];
    clear(list).append(table("!Repositories", [
      { label: "Name", cell: r => r.name },
      { label: "Directory", cell: r => h("span", { class: "mono" }, r.path) },
      { label: "Encrypted", cell: r => (r.encrypted ? "yes" : "no") },
      { label: "Restore points", cell: r => String(r.points ?? 0) },
    ], all, "No repositories."));
  }
  const request = () => {
    const mode = open.checked ? "open" : "create";
    const errs = [];
    if (!name.value.trim()) errs.push({ field: "name", message: "Required." });
    else if (/[\s/\\]/.test(name.value.trim())) errs.push({ field: "name", message: "No spaces or slashes." });
    if (!path.value.trim().startsWith("/")) errs.push({ field: "path", message: "An absolute path, e.g. /srv/vmvault/offsite." });
    if (mode === "create" && pass.value.length < 8) errs.push({ field: "passphrase", message: "At least 8 characters." });
    if (mode === "create" && pass.value !== pass2.value) errs.push({ field: "passphrase2", message: "The two passphrases differ." });
    clear(out);
    if (errs.length) { ctx.fieldErrors(form, new ctx.ApiError(0, "validation", "", errs)); return null; }
    ctx.fieldErrors(form, null);
    return { mode, name: name.value.trim(), path: path.value.trim(), passphrase: pass.value };
  };
  test.addEventListener("click", async () => {
    const req = request();
    if (!req) return;
    busy(test, true, "Testing…");
    try {
      const r = await ctx.api("POST", "/repositories", { ...req, check: true });
      out.append(h("p", { class: "notice" }, badge("ok"), req.mode === "create"
        ? ` A new repository can be created in ${r.path}.`
        : ` Opened ${r.path}: ${r.points} restore point${r.points === 1 ? "" : "s"}, ${r.encrypted ? "encrypted" : "not encrypted"}. Nothing was added yet.`));
    } catch (err) {
      ctx.fieldErrors(form, err);
    } finally { busy(test, false, "Test"); }
  });
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const req = request();
    if (!req) return;
    const mode = req.mode;
    busy(add, true, mode === "create" ? "Creating…" : "Opening…");
    try {
      const r = await ctx.api("POST", "/repositories", req);
      ctx.toast(`Repository ${r.name} ${mode === "create" ? "created" : "opened"}; it opens at every start.`, "success");
      form.reset();
      create.checked = true;
      sync();
      await load();
    } catch (err) {
      ctx.fieldErrors(form, err);
    } finally { busy(add, false, "Add repository"); }
  });
  box.append(list, form);
  await load();
}

// scopeText sums up a user's or token's scope (README, Scoped roles).
function scopeText(sc) {
  const parts = [];
  for (const [k, label] of [["folders", "folders"], ["tags", "tags"], ["vms", "VMs"], ["repositories", "repositories"]]) {
    if (sc && sc[k] && sc[k].length) parts.push(`${label} ${sc[k].join(", ")}`);
  }
  return parts.length ? parts.join("; ") : "Everything";
}

const scopeFields = [["folders", "VM folders", "Inventory paths, e.g. /DC0/vm/finance (and below)."],
  ["tags", "Tags", "category:tag or a tag name."], ["vms", "VM names", "Patterns, e.g. fin-* or db0?."],
  ["repositories", "Repositories", "Repository names."]];

async function users(ctx, box) {
  const list = h("div", { id: "users-list" });
  const name = h("input", { name: "username", id: "user-new-name", autocomplete: "off", required: true });
  const pass = h("input", { name: "password", id: "user-new-pass", type: "password", autocomplete: "new-password", required: true, minlength: "8" });
  const role = roleSelect("role", "operator", "user-new-role");
  const add = h("button", { type: "submit", class: "primary" }, "Add user");
  const form = h("form", { id: "users-create", novalidate: true, "aria-labelledby": "users-create-title" },
    h("h3", { id: "users-create-title" }, "Add a local user"),
    h("div", { class: "row" }, field("Username", name), field("Password", pass, "At least 8 characters."), field("Role", role),
      h("div", { class: "field" }, add)));

  const pwBox = h("div", { id: "user-password" });

  // editScope opens a form under the table for one user's scope: one
  // comma-separated list per kind; all empty means everything.
  function editScope(u, opener) {
    const inputs = {};
    const row = h("div", { class: "row" });
    for (const [k, label, hint] of scopeFields) {
      inputs[k] = h("input", { name: k, id: `user-scope-${k}`, autocomplete: "off", value: ((u.scope && u.scope[k]) || []).join(", ") });
      row.append(field(label, inputs[k], hint));
    }
    const save = h("button", { type: "submit", class: "primary" }, "Save scope");
    const cancel = h("button", { type: "button" }, "Cancel");
    row.append(h("div", { class: "field" }, save), h("div", { class: "field" }, cancel));
    const f = h("form", { class: "panel", id: "user-scope", novalidate: true, "aria-labelledby": "user-scope-title" },
      h("h3", { id: "user-scope-title" }, `Scope of ${u.username}`),
      h("p", { class: "hint" }, "The user sees and restores only the restore points of VMs matching one of these (and only in the repositories listed, if any). Leave all empty for everything."),
      row);
    const close = () => { clear(pwBox); if (opener.isConnected) opener.focus(); };
    cancel.addEventListener("click", close);
    f.addEventListener("keydown", (e) => { if (e.key === "Escape") { e.preventDefault(); close(); } });
    f.addEventListener("submit", async (e) => {
      e.preventDefault();
      const scope = {};
      for (const [k] of scopeFields) {
        const vs = inputs[k].value.split(",").map(v => v.trim()).filter(Boolean);
        if (vs.length) scope[k] = vs;
      }
      busy(save, true);
      try {
        await ctx.api("PUT", `/users/${encodeURIComponent(u.username)}`, { scope });
        ctx.toast(`Scope of ${u.username} saved.`, "success");
        close();
        load();
      } catch (err) {
        ctx.fieldErrors(f, err);
      } finally { busy(save, false); }
    });
    clear(pwBox).append(f);
    inputs.folders.focus();
  }

  // setPassword opens a small form under the table for one user's new password.
  function setPassword(u, opener) {
    const input = h("input", { name: "password", id: "user-set-pass", type: "password", autocomplete: "new-password", minlength: "8" });
    const save = h("button", { type: "submit", class: "primary" }, "Set password");
    const cancel = h("button", { type: "button" }, "Cancel");
    const f = h("form", { class: "panel", novalidate: true, "aria-labelledby": "user-set-pass-title" },
      h("h3", { id: "user-set-pass-title" }, `New password for ${u.username}`),
      h("div", { class: "row" }, field("New password", input, "At least 8 characters."), h("div", { class: "field" }, save), h("div", { class: "field" }, cancel)));
    const close = () => { clear(pwBox); if (opener.isConnected) opener.focus(); };
    cancel.addEventListener("click", close);
    f.addEventListener("keydown", (e) => { if (e.key === "Escape") { e.preventDefault(); close(); } });
    f.addEventListener("submit", async (e) => {
      e.preventDefault();
      if (input.value.length < 8) { ctx.fieldErrors(f, new ctx.ApiError(0, "validation", "", [{ field: "password", message: "At least 8 characters." }])); return; }
      busy(save, true);
      try {
        await ctx.api("PUT", `/users/${encodeURIComponent(u.username)}`, { password: input.value });
        ctx.toast(u.passwordNotSet ? `Password of ${u.username} set: they can sign in now.` : `Password of ${u.username} changed.`, "success");
        close();
        if (u.passwordNotSet) load();
      } catch (err) {
        ctx.fieldErrors(f, err);
      } finally { busy(save, false); }
    });
    clear(pwBox).append(f);
    input.focus();
  }

  async function load() {
    const all = (await ctx.api("GET", "/users")) || [];
    clear(list).append(table("!Users", [
      {
        label: "User", cell: (u) => u.passwordNotSet
          ? h("span", {}, u.username, " ", h("span", { class: "badge badge-warning user-nopass", title: "Imported from a saved configuration: this user cannot sign in until an administrator sets a password." }, "Password not set"))
          : u.username,
      },
      {
        label: "Role", cell: (u) => {
          if (u.source && u.source !== "local") return u.role;
          const sel = roleSelect("role", u.role, `role-${u.username}`);
          sel.setAttribute("aria-label", `Role of ${u.username}`);
          sel.removeAttribute("id");
          sel.addEventListener("change", async () => {
            try {
              await ctx.api("PUT", `/users/${encodeURIComponent(u.username)}`, { role: sel.value });
              ctx.toast(`${u.username} is now ${sel.value}.`, "success");
            } catch (err) {
              sel.value = u.role;
              ctx.toast(`Could not change the role of ${u.username}: ${err.message}`, "error");
            }
            load();
          });
          return sel;
        },
      },
      { label: "Source", cell: u => u.source || "local" },
      { label: "Scope", cell: u => h("span", { class: "user-scope" }, scopeText(u.scope)) },
      { label: "Created", cell: u => ctx.fmt.time(u.created) },
      {
        label: "Actions", cell: (u) => {
          let sc = "";
          if (u.role !== "administrator") { // administrators are never scoped
            sc = h("button", { type: "button", class: "user-scope-edit", "aria-label": `Edit the scope of ${u.username}` }, "Edit scope");
            sc.addEventListener("click", () => editScope(u, sc));
          }
          if (u.source && u.source !== "local") return sc;
          const pw = h("button", { type: "button", class: u.passwordNotSet ? "user-password primary" : "user-password", "aria-label": `Set the password of ${u.username}` }, "Set password");
          pw.addEventListener("click", () => setPassword(u, pw));
          const del = h("button", { type: "button", class: "user-delete", "aria-label": `Delete user ${u.username}` }, "Delete");
          del.addEventListener("click", async () => {
            if (!await ctx.confirm(`Delete the user ${u.username}? They can no longer sign in.`, { danger: true, title: "Delete user?" })) return;
            try {
              await ctx.api("DELETE", `/users/${encodeURIComponent(u.username)}`);
              ctx.toast(`User ${u.username} deleted.`, "success");
            } catch (err) {
              ctx.toast(`Could not delete ${u.username}: ${err.message}`, "error");
            }
            load();
          });
          return h("span", { class: "actions" }, pw, " ", sc, sc ? " " : "", del);
        },
      },
    ], all, "No users."));
  }

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const errs = [];
    if (!name.value.trim()) errs.push({ field: "username", message: "Required." });
    if (pass.value.length < 8) errs.push({ field: "password", message: "At least 8 characters." });
    if (errs.length) { ctx.fieldErrors(form, new ctx.ApiError(0, "validation", "", errs)); return; }
    ctx.fieldErrors(form, null);
    busy(add, true);
    try {
      await ctx.api("POST", "/users", { username: name.value.trim(), password: pass.value, role: role.value });
      ctx.toast(`User ${name.value.trim()} added.`, "success");
      form.reset();
      role.value = "operator";
      await load();
    } catch (err) {
      ctx.fieldErrors(form, err);
    } finally { busy(add, false); }
  });
  box.append(list, pwBox, form);
  await load();
}

async function tokens(ctx, box) {
  const list = h("div", { id: "tokens-list" });
  const secretBox = h("div", { id: "token-created", "aria-live": "polite" });
  const name = h("input", { name: "name", id: "token-name", autocomplete: "off", required: true, maxlength: "128" });
  const role = roleSelect("role", "operator", "token-role");
  const ttl = h("select", { name: "ttlSeconds", id: "token-ttl" },
    h("option", { value: "0" }, "Never"),
    h("option", { value: String(86400) }, "1 day"),
    h("option", { value: String(30 * 86400) }, "30 days"),
    h("option", { value: String(365 * 86400) }, "1 year"));
  const add = h("button", { type: "submit", class: "primary" }, "Create token");
  const scopeIn = {};
  const scopeRow = h("div", { class: "row" });
  for (const [k, label, hint] of scopeFields) {
    scopeIn[k] = h("input", { name: k, id: `token-scope-${k}`, autocomplete: "off" });
    scopeRow.append(field(label, scopeIn[k], hint));
  }
  const form = h("form", { id: "tokens-create", novalidate: true, "aria-labelledby": "tokens-create-title" },
    h("h3", { id: "tokens-create-title" }, "Create an API token"),
    h("div", { class: "row" }, field("Name", name), field("Role", role), field("Expires", ttl), h("div", { class: "field" }, add)),
    h("p", { class: "hint" }, "Optional scope (comma-separated; all empty: everything): the token sees only the restore points of matching VMs, in the repositories listed if any. Not for administrator tokens."),
    scopeRow);

  async function load() {
    const all = (await ctx.api("GET", "/auth/tokens")) || [];
    clear(list).append(table("!API tokens", [
      { label: "Name", cell: t => t.name },
      { label: "Role", cell: t => t.role },
      { label: "Owner", cell: t => t.owner || "" },
      { label: "Scope", cell: t => h("span", { class: "token-scope" }, scopeText(t.scope)) },
      { label: "Created", cell: t => ctx.fmt.time(t.created) },
      { label: "Expires", cell: t => (t.expires && !t.expires.startsWith("0001") ? ctx.fmt.time(t.expires) : "never") },
      {
        label: "Actions", cell: (t) => {
          const b = h("button", { type: "button", class: "token-revoke", "aria-label": `Revoke token ${t.name}` }, "Revoke");
          b.addEventListener("click", async () => {
            if (!await ctx.confirm(`Revoke the token ${t.name}? Scripts using it stop working at once.`, { danger: true, title: "Revoke token?", ok: "Revoke" })) return;
            try {
              await ctx.api("DELETE", `/auth/tokens/${encodeURIComponent(t.id)}`);
              ctx.toast(`Token ${t.name} revoked.`, "success");
            } catch (err) {
              ctx.toast(`Could not revoke ${t.name}: ${err.message}`, "error");
            }
            load();
          });
          return b;
        },
      },
    ], all, "No API tokens."));
  }

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    clear(secretBox);
    if (!name.value.trim()) { ctx.fieldErrors(form, new ctx.ApiError(0, "validation", "", [{ field: "name", message: "Required." }])); return; }
    ctx.fieldErrors(form, null);
    busy(add, true);
    try {
      const body = { name: name.value.trim(), role: role.value, ttlSeconds: Number(ttl.value) };
      const scope = {};
      for (const [k] of scopeFields) {
        const vs = scopeIn[k].value.split(",").map(v => v.trim()).filter(Boolean);
        if (vs.length) scope[k] = vs;
      }
      if (Object.keys(scope).length) body.scope = scope;
      const r = await ctx.api("POST", "/auth/tokens", body);
      const secret = h("input", { id: "token-secret", class: "mono", readonly: true, value: r.token, size: "60" });
      const copy = h("button", { type: "button" }, "Copy");
      copy.addEventListener("click", async () => {
        secret.select();
        try { await navigator.clipboard.writeText(r.token); ctx.toast("Token copied.", "success"); } catch { ctx.toast("Select the token and copy it by hand.", "info"); }
      });
      secretBox.append(h("div", { class: "token-secret", role: "status" },
        h("p", null, h("strong", null, `Token ${r.detail ? r.detail.name : name.value} created.`), " Copy it now: it is shown only once. Send it as ", h("code", null, "Authorization: Bearer <token>"), "."),
        h("div", { class: "row" }, field("Token", secret), copy)));
      form.reset();
      role.value = "operator";
      secret.focus();
      secret.select();
      await load();
    } catch (err) {
      ctx.fieldErrors(form, err);
    } finally { busy(add, false); }
  });
  box.append(secretBox, list, form);
  await load();
}

function section(id, title, content) {
  return h("section", { class: "panel", "aria-labelledby": id }, h("h2", { id }, title), content);
}

export default {
  route: "#/settings",
  title: "Settings",
  nav: true,
  async render(root, ctx) {
    const gen = h("div");
    root.append(section("settings-general-title", "General", gen));
    await general(ctx, gen);
    if (!ctx.can("administrator")) return null;
    const vc = h("div");
    const mail = h("div");
    const mt = h("div");
    const repos = h("div");
    const us = h("div");
    const tok = h("div");
    root.append(section("settings-vcenter-title", "vCenter connection", vc), section("settings-smtp-title", "Mail (SMTP)", mail),
      section("settings-maintenance-title", "Maintenance window", mt), section("settings-repos-title", "Repositories", repos),
      section("settings-users-title", "Users and roles", us), section("settings-tokens-title", "API tokens", tok));
    await Promise.all([vcenter(ctx, vc), smtp(ctx, mail), maintenance(ctx, mt), repositories(ctx, repos), users(ctx, us), tokens(ctx, tok)]);
    return null;
  },
};
