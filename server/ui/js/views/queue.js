// Queue: every waiting request in rank order with its priorities, position,
// what it waits for (a free slot of its model, or a swap), its wait and aged
// flag; the requests running now with llama-swap's in-flight columns; a
// Cancel button on each; and the models in use.

import { h, replace } from "../lib/dom.js";
import { modelPath } from "../lib/models.js";
import { runningTable, tick, waitingTable } from "../lib/requests.js";
import { bandClass, realModels, runningRequests, state, subscribe } from "../store.js";

export function mount(root) {
  const waitingCount = h("span", { class: "count" });
  const runningCount = h("span", { class: "count" });
  const legend = h("div", { class: "legend", "aria-label": "Priority bands" });
  const waiting = waitingTable();
  const running = runningTable();
  const models = h("div", { class: "model-strip", id: "active-models", "aria-label": "Models in use" });
  root.append(
    h("div", { class: "toolbar" }, h("h1", {}, "Queue"), legend),
    h(
      "section",
      { "aria-labelledby": "waiting-title" },
      h("div", { class: "section-head" }, h("h2", { id: "waiting-title" }, "Waiting ", waitingCount), waiting.menu),
      waiting.el,
    ),
    h(
      "section",
      { "aria-labelledby": "running-title", id: "running" },
      h("div", { class: "section-head" }, h("h2", { id: "running-title" }, "Running ", runningCount), running.menu),
      running.el,
    ),
    h("section", { "aria-labelledby": "models-title" }, h("h2", { id: "models-title" }, "Models in use"), models),
  );

  function renderLegend() {
    replace(
      legend,
      h("span", { class: "hint" }, "Bands:"),
      (state.config.bands || []).map((band) => h("span", { class: `badge ${bandClass(band.name)}` }, band.name)),
    );
  }

  function renderWaiting() {
    const { queue, total } = state.queue;
    waitingCount.textContent = `(${total})`;
    waiting.setRows(queue || []);
    const more = total > (queue || []).length;
    waiting.el.dataset.more = more ? String(total - queue.length) : "";
    if (more) waiting.el.append(h("p", { class: "hint" }, `… and ${total - queue.length} more not shown.`));
  }

  function renderRunning() {
    const requests = runningRequests();
    runningCount.textContent = `(${requests.length})`;
    running.setRows(requests);
  }

  function renderModels() {
    const active = realModels().filter((m) => m.state !== "stopped" || m.in_flight || m.waiting);
    if (!active.length) {
      replace(models, h("p", { class: "empty" }, "No model is running."));
      return;
    }
    replace(
      models,
      active.map((m) =>
        h(
          "a",
          { class: "model-chip panel", href: modelPath(m.id), "data-model": m.id },
          h("span", { class: "model-chip-name" }, m.id),
          h("span", { class: `badge state-${m.state}` }, m.state),
          h("span", { class: "hint" }, `${m.in_flight || 0} running · ${m.waiting || 0} waiting`),
        ),
      ),
    );
  }

  const offs = [
    subscribe(["config"], () => {
      renderLegend();
      renderWaiting();
      renderRunning();
    }),
    subscribe(["queue", "inflight"], renderWaiting),
    subscribe(["inflight"], renderRunning),
    subscribe(["models"], renderModels),
  ];
  renderLegend();
  renderWaiting();
  renderRunning();
  renderModels();
  const timer = setInterval(tick, 1000);
  return () => {
    clearInterval(timer);
    for (const off of offs) off();
  };
}
