// Helpers shared by the jobs, job wizard, restore, restore points and
// repositories pages: their stylesheet, state badges, task watching and the
// mapping of server field errors onto the forms of a multi-step page.

// ensureCSS links pages2.css once and resolves when it has loaded (or after
// 2 s), so a page does not flash unstyled. A <link> from 'self' is allowed by
// the console's CSP (style-src 'self'); nothing is inlined.
let cssLoaded = null;
export function ensureCSS() {
  if (cssLoaded) return cssLoaded;
  cssLoaded = new Promise((resolve) => {
    const l = document.createElement("link");
    l.id = "pages2-css";
    l.rel = "stylesheet";
    l.href = "/assets/pages/pages2.css";
    l.addEventListener("load", () => resolve());
    l.addEventListener("error", () => resolve());
    setTimeout(resolve, 2000);
    document.head.appendChild(l);
  });
  return cssLoaded;
}

// pick returns the first present field: kept for fields that differ between endpoints; the API itself is all camelCase.
export function pick(o, ...names) {
  if (!o) return undefined;
  for (const n of names) if (o[n] !== undefined && o[n] !== null) return o[n];
  return undefined;
}

const stateKinds = {
  succeeded: "ok", success: "ok", ok: "ok", complete: "ok", completed: "ok",
  running: "running", queued: "running", pending: "running",
  "backed up": "ok", retrying: "warn",
  failed: "bad", error: "bad", interrupted: "bad",
  cancelled: "warn", partial: "warn", missed: "warn", "not-run": "warn", skipped: "warn",
};

// stateBadge renders a state word with a colour class; the word itself
// carries the meaning (colour is never the only signal).
export function stateBadge(h, state) {
  const s = String(state || "unknown");
  return h("span", { class: `badge p2-state p2-state-${stateKinds[s] || "neutral"}` }, s);
}

// runState derives a job run's state from either the API's run shape
// ({state}) or policy.JobRun ({end, missed, interrupted, vms[].status}).
export function runState(r) {
  if (!r) return "";
  const st = pick(r, "state", "status");
  if (st) return st;
  if (r.missed) return "missed";
  if (r.interrupted) return "interrupted";
  const end = pick(r, "finished", "end", "ended");
  const vms = r.vms || [];
  if (!end || String(end).startsWith("0001")) return "running";
  if (vms.some((v) => vmState(v) === "failed")) return "failed";
  if (vms.some((v) => ["cancelled", "not-run"].includes(vmState(v)))) return "partial";
  return "succeeded";
}

export function vmState(v) {
  return String(pick(v, "state", "status") || "");
}

const finalVM = new Set(["succeeded", "failed", "cancelled", "interrupted", "not-run", "skipped"]);

// runPercent is the share of a run's VMs that finished (0-100).
export function runPercent(r) {
  const st = runState(r);
  if (st === "succeeded") return 100;
  const vms = (r && r.vms) || [];
  if (!vms.length) return st === "running" ? 0 : 100;
  const done = vms.filter((v) => finalVM.has(vmState(v))).length;
  return Math.floor((done / vms.length) * 100);
}

export function isRunFinal(r) {
  return runState(r) !== "running" && runState(r) !== "queued";
}

// watchTask shows a task's live progress bar (the shell's, fed by the shared
// stream) and resolves with the final task. A slow poll backs the stream up
// so a missed update never leaves a bar hanging. Returns {el, done, stop}.
export function watchTask(ctx, task) {
  const el = ctx.progress(task);
  let timer = 0;
  let stopped = false;
  const done = new Promise((resolve) => {
    el.addEventListener("taskdone", (e) => {
      stopped = true;
      clearTimeout(timer);
      resolve(e.detail);
    });
  });
  const poll = async () => {
    if (stopped) return;
    try {
      const t = await ctx.api("GET", `/tasks/${encodeURIComponent(task.id)}`);
      if (!stopped && t) el.update(t);
    } catch {
      /* the next poll or the stream catches up */
    }
    if (!stopped) timer = setTimeout(poll, 2500);
  };
  timer = setTimeout(poll, 2500);
  return {
    el,
    done,
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}

// taskOf finds a task in a POST answer: the task itself or {task: ...}.
export function taskOf(res) {
  if (!res) return null;
  if (res.task && res.task.id) return res.task;
  if (res.id && res.state) return res;
  return null;
}

// scopedErrors keeps the field errors whose field starts with one of the
// prefixes, with indexes dropped so "selection.exclude.names[2]" lands on
// the input named "selection.exclude.names".
export function scopedErrors(err, prefixes) {
  const fields = (err.fields || [])
    .filter((f) => prefixes.some((p) => f.field === p || f.field.startsWith(p + ".") || f.field.startsWith(p + "[")))
    .map((f) => ({ field: f.field.replace(/\[\d+\]/g, ""), message: f.message }));
  return { status: err.status, code: err.code, message: err.message, fields };
}

// slug makes a job id from a name: lower case, letters, digits and dashes.
export function slug(s) {
  return String(s)
    .toLowerCase()
    .normalize("NFKD")
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 64);
}

// errorText is a short message for an API error, with a hint for the
// statuses an administrator can act on.
export function errorText(e) {
  if (!e) return "";
  if (e.status === 503) return `${e.message} (the appliance is not connected to vCenter, or it is starting)`;
  if (e.status === 501) return `${e.message} (not available on this appliance)`;
  if (e.status === 403) return "Your role does not allow this.";
  return e.message;
}
