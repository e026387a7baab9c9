import { h } from "../lib/dom.js";

export default {
  route: "#/dashboard",
  title: "Dashboard",
  nav: true,
  async render(root) {
    root.append(h("p", null, "Coming soon."));
  },
};
