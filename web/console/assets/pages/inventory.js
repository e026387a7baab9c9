import { h } from "../lib/dom.js";

export default {
  route: "#/inventory",
  title: "Inventory",
  nav: true,
  async render(root) {
    root.append(h("p", null, "Coming soon."));
  },
};
