import { h } from "../lib/dom.js";

export default {
  route: "#/settings",
  title: "Settings",
  nav: true,
  async render(root) {
    root.append(h("p", null, "Coming soon."));
  },
};
