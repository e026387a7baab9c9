// The console's pages, in navigation order. Each module's default export is
// {route, title, nav, role?, render(root, ctx) -> cleanup?}; see ../../README.md.
import dashboard from "./dashboard.js";
import inventory from "./inventory.js";
import tasks from "./tasks.js";
import events from "./events.js";
import settings from "./settings.js";

export default [
  dashboard,
  inventory,
  // H6: jobs, restore, restore points, repositories go here.
  tasks,
  events,
  settings,
];
