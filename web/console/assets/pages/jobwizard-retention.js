// Retention presets and their words. The first three mirror policy's named
// presets (the server knows them by name); the others are common shapes sent
// as custom counts, since the server only accepts its own preset names.

export const FIELDS = [
  { key: "last", label: "Most recent points", unit: "most recent" },
  { key: "daily", label: "Daily points", unit: "daily" },
  { key: "weekly", label: "Weekly points", unit: "weekly" },
  { key: "monthly", label: "Monthly points", unit: "monthly" },
  { key: "quarterly", label: "Quarterly points", unit: "quarterly" },
  { key: "yearly", label: "Yearly points", unit: "yearly" },
];

const zero = { last: 0, daily: 0, weekly: 0, monthly: 0, quarterly: 0, yearly: 0 };

export const PRESETS = [
  { id: "few", server: true, title: "Few", r: { ...zero, last: 7, weekly: 4, monthly: 3 } },
  { id: "more", server: true, title: "More", r: { ...zero, last: 7, weekly: 4, monthly: 6, quarterly: 4, yearly: 1 } },
  { id: "many", server: true, title: "Many", r: { ...zero, last: 15, weekly: 8, monthly: 12, quarterly: 8, yearly: 3 } },
  { id: "daily-weekly-monthly", server: false, title: "Daily, weekly, monthly", r: { ...zero, daily: 7, weekly: 4, monthly: 12 } },
  { id: "fortnight", server: false, title: "Two weeks", r: { ...zero, daily: 14 } },
];

// retentionFor returns the API object for a preset id (custom: the counts given).
export function retentionFor(id, custom) {
  const p = PRESETS.find((x) => x.id === id);
  if (!p) return { preset: "", ...zero, ...normalize(custom) };
  return { preset: p.server ? p.id : "", ...p.r };
}

export function normalize(r) {
  const out = { ...zero };
  for (const f of FIELDS) {
    const raw = r ? r[f.key] : undefined;
    const v = raw === undefined || raw === null || raw === "" ? 0 : Number(raw);
    out[f.key] = Number.isFinite(v) ? v : NaN;
  }
  return out;
}

// presetOf finds the preset a stored retention matches ("custom" if none).
export function presetOf(r) {
  if (!r) return "more";
  if (r.preset) return r.preset;
  const n = normalize(r);
  const p = PRESETS.find((x) => FIELDS.every((f) => x.r[f.key] === n[f.key]));
  return p ? p.id : "custom";
}

// describeRetention: "7 most recent, 4 weekly, 3 monthly".
export function describeRetention(r) {
  const n = normalize(r);
  const parts = FIELDS.filter((f) => n[f.key] > 0).map((f) => `${n[f.key]} ${f.unit}`);
  return parts.length ? parts.join(", ") : "keeps nothing";
}

// validateRetention mirrors policy.Retention.Validate; keys are the API's
// field names so client and server errors land on the same inputs.
export function validateRetention(r) {
  const errs = {};
  const n = normalize(r);
  for (const f of FIELDS) {
    const v = n[f.key];
    if (!Number.isInteger(v)) errs[`retention.${f.key}`] = "a whole number";
    else if (v < 0) errs[`retention.${f.key}`] = "must not be negative";
    else if (v > 10000) errs[`retention.${f.key}`] = "at most 10000";
  }
  if (!Object.keys(errs).length && FIELDS.every((f) => n[f.key] === 0)) {
    errs.retention = "keeps nothing: set at least one count";
  }
  return errs;
}
