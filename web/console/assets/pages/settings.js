// Settings: general (time zone, event retention), vCenter connection test,
// SMTP test mail, users and roles, API tokens.
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

function vcenter(ctx, box) {
  const url = h("input", { name: "url", id: "vc-url", type: "url", placeholder: "https://vcenter.example.com/sdk", autocomplete: "off" });
  const user = h("input", { name: "username", id: "vc-user", autocomplete: "off" });
  const pass = h("input", { name: "password", id: "vc-pass", type: "password", autocomplete: "new-password" });
  const thumb = h("input", { name: "thumbprint", id: "vc-thumb", autocomplete: "off" });
  const insecure = h("input", { name: "insecure", id: "vc-insecure", type: "checkbox" });
  const btn = h("button", { type: "submit", class: "primary", id: "vc-test" }, "Test connection");
  const out = h("div", { id: "vc-result", role: "status" });
  const form = h("form", { id: "settings-vcenter", novalidate: true },
    h("p", { class: "hint" }, "Leave the fields empty to test the configured connection, or fill them to test another one. Nothing is saved."),
    h("div", { class: "row" }, field("vCenter URL", url), field("Username", user), field("Password", pass)),
    h("div", { class: "row" }, field("Certificate thumbprint (SHA-256)", thumb),
      h("div", { class: "field inline" }, insecure, h("label", { for: "vc-insecure" }, "Skip certificate verification"))),
    btn, out);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    ctx.fieldErrors(form, null);
    clear(out);
    if (url.value && !/^https:\/\//.test(url.value)) {
      ctx.fieldErrors(form, new ctx.ApiError(0, "validation", "", [{ field: "url", message: "An https:// URL." }]));
      return;
    }
    const body = {};
    if (url.value) body.url = url.value;
    if (user.value) body.username = user.value;
    if (pass.value) body.password = pass.value;
    if (thumb.value) body.thumbprint = thumb.value;
    if (insecure.checked) body.insecure = true;
    busy(btn, true, "Testing…");
    try {
      const r = await ctx.api("POST", "/settings/vcenter/test", body);
      out.append(r && r.ok
        ? h("p", { class: "notice" }, badge("ok"), ` Connected${r.version ? ` to ${r.version}` : ""}. ${r.message || ""}`)
        : h("p", { class: "form-error" }, `Connection failed: ${(r && r.message) || "no answer"}`));
    } catch (err) {
      if (err.fields.length) ctx.fieldErrors(form, err);
      else out.append(h("p", { class: "form-error" }, err.status === 501 ? "This appliance cannot test vCenter connections." : err.message));
    } finally { busy(btn, false, "Test connection"); }
  });
  box.append(form);
}

function smtp(ctx, box) {
  const to = h("input", { name: "to", id: "smtp-to", type: "email", autocomplete: "email", placeholder: "ops@example.com", required: true });
  const btn = h("button", { type: "submit", class: "primary", id: "smtp-test" }, "Send test mail");
  const out = h("div", { id: "smtp-result", role: "status" });
  const form = h("form", { id: "settings-smtp", novalidate: true },
    h("p", { class: "hint" }, "SMTP is set in the appliance's configuration file; this sends one test message through it."),
    h("div", { class: "row" }, field("Recipient", to), h("div", { class: "field" }, btn)), out);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    ctx.fieldErrors(form, null);
    clear(out);
    if (!to.value || !to.checkValidity()) {
      ctx.fieldErrors(form, new ctx.ApiError(0, "validation", "", [{ field: "to", message: "One e-mail address, such as ops@example.com." }]));
      return;
    }
    busy(btn, true, "Sending…");
    try {
      await ctx.api("POST", "/settings/smtp/test", { to: to.value });
      out.append(h("p", { class: "notice" }, `Test mail sent to ${to.value}.`));
    } catch (err) {
      if (err.fields.length) ctx.fieldErrors(form, err);
      else if (err.status === 409 || err.status === 503) out.append(h("p", { class: "form-error" }, `SMTP is not configured: ${err.message}`));
      else out.append(h("p", { class: "form-error" }, `Sending failed: ${err.message}`));
    } finally { busy(btn, false, "Send test mail"); }
  });
  box.append(form);
}

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
        ctx.toast(`Password of ${u.username} changed.`, "success");
        close();
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
      { label: "User", cell: u => u.username },
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
      { label: "Created", cell: u => ctx.fmt.time(u.created) },
      {
        label: "Actions", cell: (u) => {
          if (u.source && u.source !== "local") return "";
          const pw = h("button", { type: "button", class: "user-password", "aria-label": `Set the password of ${u.username}` }, "Set password");
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
          return h("span", { class: "actions" }, pw, " ", del);
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
  const form = h("form", { id: "tokens-create", novalidate: true, "aria-labelledby": "tokens-create-title" },
    h("h3", { id: "tokens-create-title" }, "Create an API token"),
    h("div", { class: "row" }, field("Name", name), field("Role", role), field("Expires", ttl), h("div", { class: "field" }, add)));

  async function load() {
    const all = (await ctx.api("GET", "/auth/tokens")) || [];
    clear(list).append(table("!API tokens", [
      { label: "Name", cell: t => t.name },
      { label: "Role", cell: t => t.role },
      { label: "Owner", cell: t => t.owner || "" },
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
      const r = await ctx.api("POST", "/auth/tokens", { name: name.value.trim(), role: role.value, ttlSeconds: Number(ttl.value) });
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
    const us = h("div");
    const tok = h("div");
    root.append(section("settings-vcenter-title", "vCenter connection", vc), section("settings-smtp-title", "E-mail (SMTP)", mail),
      section("settings-users-title", "Users and roles", us), section("settings-tokens-title", "API tokens", tok));
    vcenter(ctx, vc);
    smtp(ctx, mail);
    await Promise.all([users(ctx, us), tokens(ctx, tok)]);
    return null;
  },
};
