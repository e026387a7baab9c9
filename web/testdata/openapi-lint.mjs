// Runs by `make openapi-lint`: reads `redocly lint --format=json` output on
// stdin and fails unless it has no error and no warning other than the
// request examples named "invalid" (deliberately bad bodies that show the
// validation errors).
let raw = "";
process.stdin.on("data", (c) => (raw += c));
process.stdin.on("end", () => {
  let report;
  try {
    report = JSON.parse(raw);
  } catch (e) {
    console.error("openapi-lint: redocly printed no JSON report:", e.message, raw.slice(0, 400));
    process.exit(2);
  }
  const bad = report.problems.filter(
    (p) => !(p.ruleId === "no-invalid-media-type-examples" && p.severity === "warn" && p.location.every((l) => /\/examples\/invalid\/value(\/|$)/.test(l.pointer))),
  );
  for (const p of bad) console.error(`${p.severity} ${p.ruleId}: ${p.message} at ${p.location.map((l) => l.pointer).join(", ")}`);
  const allowed = report.problems.length - bad.length;
  console.log(`openapi-lint: ${bad.length} problems, ${allowed} deliberately invalid examples`);
  process.exit(bad.length ? 1 : 0);
});
