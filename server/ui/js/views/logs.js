// Logs: the proxy's own log and the models' upstream output, live, in two
// panes (side by side, or one of them), with ANSI colours, a filter per pane,
// and a model filter on the upstream pane.

import { h, replace, tabList } from "../lib/dom.js";
import { logPane } from "../lib/logpane.js";
import { pref, setPref } from "../prefs.js";
import { realModels, state, subscribe } from "../store.js";

const LAYOUTS = [
  { id: "both", label: "Both" },
  { id: "proxy", label: "Proxy" },
  { id: "upstream", label: "Upstream" },
];

export function mount(root) {
  const model = h("select", { id: "log-model", "aria-label": "Model" });
  const proxy = logPane({
    id: "proxy-log",
    title: "Proxy",
    accept: (line) => line.source === "proxy",
    // In the proxy's own pane, only a line about a model needs a tag.
    tag: (line) => (line.model ? `[${line.model}] ` : ""),
  });
  const upstream = logPane({
    id: "upstream-log",
    title: "Upstream",
    accept: (line) => line.source !== "proxy" && (!model.value || line.model === model.value),
    tools: [model],
  });
  let layout = pref("logLayout", "both");
  if (!LAYOUTS.some((l) => l.id === layout)) layout = "both";
  const grid = h("div", { class: "log-grid", id: "log-panes" }, proxy.el, upstream.el);
  const tabs = tabList("Panes", LAYOUTS, layout, (id) => {
    layout = id;
    setPref("logLayout", id);
    tabs.select(id);
    place();
  });
  grid.setAttribute("role", "tabpanel");
  grid.setAttribute("aria-label", "Log panes");
  root.append(h("div", { class: "toolbar" }, h("h1", {}, "Logs"), tabs.el), grid);

  function place() {
    grid.dataset.layout = layout;
    proxy.el.hidden = layout === "upstream";
    upstream.el.hidden = layout === "proxy";
  }

  function sources() {
    const names = new Set();
    for (const m of realModels()) names.add(m.id);
    for (const line of state.logs) if (line.model && line.source !== "proxy") names.add(line.model);
    return [...names].sort();
  }

  let known = "";
  function renderModels() {
    const list = sources();
    const key = list.join("\u0000");
    if (key === known) return;
    known = key;
    const selected = model.value;
    replace(
      model,
      h("option", { value: "" }, "All models"),
      list.map((name) => h("option", { value: name, selected: name === selected }, name)),
    );
  }

  model.addEventListener("change", () => upstream.redraw());
  const offs = [subscribe(["models", "logs"], renderModels)];
  renderModels();
  place();
  return () => {
    proxy.destroy();
    upstream.destroy();
    for (const off of offs) off();
  };
}
