// The console's pages, in navigation order. Each module's default export is
// {route, title, nav, role?, render(root, ctx) -> cleanup?}; see ../../README.md.
import dashboard from "./dashboard.js";
import inventory from "./inventory.js";
import tasks from "./tasks.js";
import events from "./events.js";
import settings from "./settings.js";
// H6: jobs, job wizard, restore, restore points, repositories.
import jobs from "./jobs.js";
import jobwizard from "./jobwizard.js";
import restore from "./restore.js";
import points from "./points.js";
import repositories from "./repositories.js";
import files from "./files.js";
import vm from "./vm.js";
import approvals from "./approvals.js";
import copyjobs from "./copyjobs.js";
import instant from "./instant.js";

export default [
  dashboard,
  inventory,
  jobs,
  jobwizard,
  restore,
  instant,
  files,
  points,
  approvals,
  repositories,
  copyjobs,
  tasks,
  events,
  settings,
  vm,
];
