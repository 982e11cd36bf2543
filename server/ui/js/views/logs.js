// Logs: the proxy's log and every model's upstream output, live, with a
// source filter. Follows the end unless the reader scrolled up.

import { h, replace } from "../dom.js";
import { LOG_LIMIT, realModels, state, subscribe } from "../store.js";

export function mount(root) {
  const filter = h("select", { id: "log-source" });
  const follow = h("input", { type: "checkbox", id: "log-follow", checked: true });
  const clear = h("button", { type: "button", class: "secondary" }, "Clear");
  const pane = h("pre", { class: "logs", id: "log-lines", tabindex: "0", "aria-label": "Log lines" });
  root.append(
    h(
      "div",
      { class: "toolbar" },
      h("h1", {}, "Logs"),
      h("div", { class: "field" }, h("label", { for: "log-source" }, "Source"), filter),
      h("label", { class: "check", for: "log-follow" }, follow, "Follow"),
      clear,
    ),
    pane,
  );

  // Positions count every line ever received (the store drops the oldest).
  const total = () => state.logsDropped + state.logs.length;
  let clearedBefore = 0;
  let drawnTotal = 0;

  clear.addEventListener("click", () => {
    clearedBefore = total();
    redraw();
  });
  filter.addEventListener("change", redraw);
  pane.addEventListener("scroll", () => {
    const atEnd = pane.scrollTop + pane.clientHeight >= pane.scrollHeight - 4;
    if (follow.checked !== atEnd) follow.checked = atEnd;
  });
  follow.addEventListener("change", () => {
    if (follow.checked) pane.scrollTop = pane.scrollHeight;
  });

  function sources() {
    const names = new Set();
    for (const model of realModels()) names.add(model.id);
    for (const line of state.logs) if (line.model) names.add(line.model);
    return [...names].sort();
  }

  function renderFilter() {
    const selected = filter.value;
    replace(
      filter,
      h("option", { value: "" }, "All"),
      h("option", { value: "proxy", selected: selected === "proxy" }, "Proxy"),
      sources().map((name) => h("option", { value: name, selected: name === selected }, name)),
    );
  }

  function matches(line) {
    const wanted = filter.value;
    if (!wanted) return true;
    if (wanted === "proxy") return line.source === "proxy";
    return line.model === wanted;
  }

  function lineEl(line) {
    const tag =
      line.source === "proxy"
        ? h("span", { class: "log-proxy" }, line.model ? `[proxy ${line.model}] ` : "[proxy] ")
        : h("span", { class: "log-model" }, `[${line.model}] `);
    return h("span", { class: "log-line", "data-model": line.model || "", "data-source": line.source }, tag, line.data);
  }

  function linesFrom(position) {
    const out = [];
    for (let i = Math.max(position, clearedBefore, state.logsDropped); i < total(); i++) {
      const line = state.logs[i - state.logsDropped];
      if (matches(line)) out.push(lineEl(line));
    }
    drawnTotal = total();
    return out;
  }

  function redraw() {
    const lines = linesFrom(0);
    replace(pane, lines.length ? lines : h("span", { class: "log-note" }, "No log lines yet.\n"));
    if (follow.checked) pane.scrollTop = pane.scrollHeight;
  }

  function append() {
    const fresh = linesFrom(drawnTotal);
    if (!fresh.length) return;
    pane.querySelector(".log-note")?.remove();
    pane.append(...fresh);
    // Keep the pane as bounded as the store.
    while (pane.childElementCount > LOG_LIMIT) pane.firstElementChild.remove();
    if (follow.checked) pane.scrollTop = pane.scrollHeight;
  }

  const offs = [
    subscribe(["logs"], () => {
      if (filter.options.length - 2 !== sources().length) renderFilter();
      append();
    }),
    subscribe(["models"], renderFilter),
  ];
  renderFilter();
  redraw();
  return () => {
    for (const off of offs) off();
  };
}
