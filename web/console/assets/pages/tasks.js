import { h } from "../lib/dom.js";

export default {
  route: "#/tasks",
  title: "Tasks",
  nav: true,
  async render(root) {
    root.append(h("p", null, "Coming soon."));
  },
};
