import { h } from "../lib/dom.js";

export default {
  route: "#/events",
  title: "Events",
  nav: true,
  async render(root) {
    root.append(h("p", null, "Coming soon."));
  },
};
