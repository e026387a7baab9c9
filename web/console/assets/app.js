// The console shell: session, login, navigation, hash routing and the ctx
// every page receives. Pages live in pages/*.js and are listed in pages/index.js.
import { h, clear } from "./lib/dom.js";
import { Client, ApiError } from "./lib/api.js";
import { Stream } from "./lib/stream.js";
import * as fmt from "./lib/fmt.js";
import { toast, confirm, fieldErrors, progress, feedProgress, taskTitle, names, setNameSource } from "./lib/ui.js";
import pages from "./pages/index.js";

const roleRank = { "restore-only": 1, operator: 2, administrator: 3 };

const api = new Client();
const stream = new Stream(api);
const main = document.getElementById("main");
const nav = document.getElementById("nav");
const navList = document.getElementById("nav-list");
const navToggle = document.getElementById("nav-toggle");
const narrow = window.matchMedia("(max-width: 760px)");

let me = null;          // {username, role} when signed in
let cleanup = null;     // the current page's cleanup function
let renderSeq = 0;      // drops renders overtaken by a newer route change
let unfeed = null;
let loginMessage = ""; // shown on the login page until the next sign-in

const ctx = {
  api: (method, path, body) => api.call(method, path, body),
  stream: (onTask, onEvent, onScheduler) => stream.subscribe(onTask, onEvent, onScheduler),
  confirm, toast, fieldErrors, progress, fmt, taskTitle,
  navigate: (hash) => {
    if (location.hash === hash) route(); else location.hash = hash;
  },
  me: null,
  can: (role) => !!me && (roleRank[me.role] || 0) >= (roleRank[role] || 99),
  ApiError,
  h,
  params: [],
  query: new URLSearchParams(),
  header: null,
};

function pageFor(hash) {
  const path = hash.split("?")[0];
  let best = null;
  for (const p of pages) {
    if (path === p.route || path.startsWith(p.route + "/")) {
      if (!best || p.route.length > best.route.length) best = p;
    }
  }
  return best;
}

function buildNav() {
  clear(navList);
  for (const p of pages) {
    if (!p.nav) continue;
    if (p.role && !ctx.can(p.role)) continue;
    navList.appendChild(h("li", null, h("a", { href: p.route, "data-route": p.route }, p.title)));
  }
}

function markNav(page) {
  for (const a of navList.querySelectorAll("a")) {
    if (page && a.dataset.route === page.route) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
}

function setNavOpen(open) {
  navToggle.setAttribute("aria-expanded", String(open));
  nav.classList.toggle("open", open);
}

function syncNarrow() {
  navToggle.hidden = !me || !narrow.matches;
  if (!narrow.matches) setNavOpen(false);
}

function showChrome(signedIn) {
  nav.hidden = !signedIn;
  document.getElementById("user").hidden = !signedIn;
  if (signedIn) {
    document.getElementById("user-name").textContent = me.username;
    document.getElementById("user-role").textContent = me.role;
  }
  syncNarrow();
}

async function runCleanup() {
  if (cleanup) {
    const c = cleanup;
    cleanup = null;
    try { await c(); } catch (e) { console.error("page cleanup failed", e); }
  }
}

// route renders the page for location.hash.
async function route() {
  const seq = ++renderSeq;
  if (!location.hash.startsWith("#/")) {
    if (location.hash === "" || location.hash === "#") { history.replaceState(null, "", "#/dashboard"); }
    else return; // an in-page anchor, not a route
  }
  if (!me) {
    if (!location.hash.startsWith("#/login")) {
      sessionStorage.setItem("vmvault.after-login", location.hash);
      history.replaceState(null, "", "#/login");
    }
    await runCleanup();
    if (seq !== renderSeq) return;
    renderLogin(loginMessage);
    return;
  }
  if (location.hash.startsWith("#/login")) { history.replaceState(null, "", "#/dashboard"); }
  let page = pageFor(location.hash);
  await runCleanup();
  if (seq !== renderSeq) return;
  if (narrow.matches) setNavOpen(false);
  const [path, query] = location.hash.split("?");
  clear(main);
  if (!page) {
    page = { title: "Not found", route: "", render: (root) => { root.append(h("p", null, "There is no page at this address. "), h("a", { href: "#/dashboard" }, "Go to the dashboard")); } };
  } else if (page.role && !ctx.can(page.role)) {
    const need = page.role;
    page = { title: page.title, route: page.route, render: (root) => { root.append(h("p", { class: "notice" }, `This page needs the ${need} role; you are signed in as ${me.role}.`)); } };
  }
  const title = h("h1", { tabindex: "-1", id: "page-title" }, page.title);
  const header = h("div", { class: "page-actions" });
  const root = h("div", { class: "page", "aria-labelledby": "page-title" });
  main.append(h("div", { class: "page-head" }, title, header), root);
  document.title = `${page.title} — vmvault`;
  markNav(page);
  const decode = (x) => { try { return decodeURIComponent(x); } catch { return x; } };
  ctx.params = path.slice((page.route || "").length).split("/").filter(Boolean).map(decode);
  ctx.query = new URLSearchParams(query || "");
  ctx.header = header;
  ctx.me = me;
  title.focus();
  try {
    const c = await page.render(root, ctx);
    if (seq !== renderSeq) { if (typeof c === "function") c(); return; }
    cleanup = typeof c === "function" ? c : null;
  } catch (e) {
    if (seq !== renderSeq) return;
    if (e instanceof ApiError && e.status === 401) return; // handled by onUnauthorized
    console.warn("page failed", e);
    root.append(h("div", { class: "form-error", role: "alert" }, `This page could not be loaded: ${e.message}`));
  }
}

function renderLogin(message) {
  showChrome(false);
  clear(main);
  document.title = "Sign in — vmvault";
  const user = h("input", { name: "username", id: "login-user", autocomplete: "username", required: true, autocapitalize: "none", spellcheck: "false" });
  const pass = h("input", { name: "password", id: "login-pass", type: "password", autocomplete: "current-password", required: true });
  const submit = h("button", { type: "submit", class: "primary" }, "Sign in");
  const form = h("form", { class: "login-form", novalidate: true, "aria-labelledby": "login-title" },
    h("h1", { id: "login-title", tabindex: "-1" }, "Sign in to vmvault"),
    message ? h("p", { class: "notice", role: "status" }, message) : null,
    h("div", { class: "field" }, h("label", { for: "login-user" }, "Username"), user),
    h("div", { class: "field" }, h("label", { for: "login-pass" }, "Password"), pass),
    h("p", { class: "hint" }, "A local account, or your vCenter credentials when the appliance is connected to vCenter."),
    submit);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    fieldErrors(form, null);
    const missing = [];
    if (!user.value.trim()) missing.push({ field: "username", message: "Enter your username." });
    if (!pass.value) missing.push({ field: "password", message: "Enter your password." });
    if (missing.length) { fieldErrors(form, new ApiError(0, "validation", "Missing fields", missing)); return; }
    submit.disabled = true;
    submit.textContent = "Signing in…";
    try {
      const res = await api.call("POST", "/auth/login", { username: user.value.trim(), password: pass.value }, { quiet401: true });
      api.csrf = res && (res.csrfToken) || "";
      await loadMe();
      const after = sessionStorage.getItem("vmvault.after-login") || "#/dashboard";
      sessionStorage.removeItem("vmvault.after-login");
      loginMessage = "";
      signedIn();
      if (location.hash === after) route(); else location.hash = after;
    } catch (e) {
      submit.disabled = false;
      submit.textContent = "Sign in";
      let msg = e.message;
      if (e.status === 401) {
        msg = "Wrong username or password.";
        // Said for every failed login while some imported user waits for a password: it names nobody.
        if (/sets their password/.test(e.message || "")) msg += " Users restored from a saved configuration have no password yet: ask an administrator to set yours.";
      }
      else if (e.status === 429) msg = `Too many attempts. ${e.message}`;
      fieldErrors(form, new ApiError(e.status, e.code, msg, e.status === 401 ? [] : e.fields));
      pass.value = "";
      pass.focus();
    }
  });
  main.append(h("div", { class: "login" }, form));
  (user.value ? pass : user).focus();
}

async function loadMe() {
  const m = await api.call("GET", "/auth/me", undefined, { quiet401: true });
  me = { username: m.username || m.user || "", role: m.role || "restore-only" };
  const t = m.csrfToken;
  if (t) api.csrf = t;
  ctx.me = me;
  try {
    const st = await api.call("GET", "/settings");
    if (st && (st.timeZone)) fmt.setTimeZone(st.timeZone);
  } catch { /* settings are optional for display */ }
}

let namesLoaded = 0;
async function loadNames() {
  if (!me || Date.now() - namesLoaded < 10000) return;
  namesLoaded = Date.now();
  try {
    const vms = await api.call("GET", "/vms", undefined, { quiet401: true });
    for (const v of vms || []) names.set(v.instanceUuid, v.name);
  } catch { /* names are a nicety */ }
}
setNameSource(loadNames);

function signedIn() {
  namesLoaded = 0;
  loadNames();
  showChrome(true);
  buildNav();
  if (unfeed) unfeed();
  unfeed = stream.subscribe(feedProgress, null);
}

function signedOut(message) {
  me = null;
  ctx.me = null;
  api.csrf = "";
  if (unfeed) { unfeed(); unfeed = null; }
  stream.stop();
  loginMessage = message || "";
  // replaceState fires no hashchange: exactly one render of the login page.
  if (!location.hash.startsWith("#/login")) history.replaceState(null, "", "#/login");
  route();
}

api.onUnauthorized = () => {
  if (!me) return;
  if (!location.hash.startsWith("#/login")) sessionStorage.setItem("vmvault.after-login", location.hash);
  signedOut("Your session has expired. Please sign in again.");
};

document.getElementById("logout").addEventListener("click", async () => {
  try { await api.call("POST", "/auth/logout", undefined, { quiet401: true }); } catch { /* signed out anyway */ }
  sessionStorage.removeItem("vmvault.after-login");
  signedOut("You have signed out.");
});

navToggle.addEventListener("click", () => {
  const open = navToggle.getAttribute("aria-expanded") !== "true";
  setNavOpen(open);
  if (open) { const a = navList.querySelector("a"); if (a) a.focus(); }
});
nav.addEventListener("keydown", (e) => {
  if (e.key === "Escape" && narrow.matches && nav.classList.contains("open")) { setNavOpen(false); navToggle.focus(); }
});
narrow.addEventListener("change", syncNarrow);
document.getElementById("skip-link").addEventListener("click", (e) => {
  e.preventDefault();
  const t = document.getElementById("page-title") || main;
  t.focus();
});
window.addEventListener("hashchange", route);

async function boot() {
  try {
    await loadMe();
    signedIn();
  } catch (e) {
    me = null;
    if (!(e instanceof ApiError) || (e.status !== 401 && e.status !== 403)) {
      loginMessage = `The appliance did not answer: ${e.message}`;
    }
  }
  await route();
}

boot();
