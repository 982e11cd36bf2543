// Queue: every waiting request in rank order with its priorities, position,
// what it waits for (a free slot of its model, or a swap), wait and aged flag,
// and beside it the requests each model is serving.

import { duration, h, replace, signed, tierName } from "../dom.js";
import { bandClass, bandOf, realModels, state, subscribe } from "../store.js";

// Why a request waits, in words for the cell's tooltip.
function reasonHint(reason) {
  if (reason === "slots full") return "its model is busy: every one of its parallel slots is taken";
  if (reason === "swap") return "a model has to be started or stopped first";
  return "";
}

export function mount(root) {
  const waitingCount = h("span", { class: "count" });
  const runningCount = h("span", { class: "count" });
  const legend = h("div", { class: "legend", "aria-label": "Priority bands" });
  const waiting = h("div", { class: "table-wrap panel" });
  const running = h("div", { id: "running" });
  root.append(
    h("div", { class: "toolbar" }, h("h1", {}, "Queue"), legend),
    h(
      "div",
      { class: "queue-grid" },
      h(
        "section",
        { "aria-labelledby": "waiting-title" },
        h("h2", { id: "waiting-title" }, "Waiting ", waitingCount),
        waiting,
      ),
      h(
        "section",
        { "aria-labelledby": "running-title" },
        h("h2", { id: "running-title" }, "Running ", runningCount),
        running,
      ),
    ),
  );

  let waitedCells = [];
  let runningCells = [];

  function renderLegend() {
    replace(
      legend,
      h("span", { class: "hint" }, "Bands:"),
      (state.config.bands || []).map((band) =>
        h("span", { class: `badge ${bandClass(band.name)}` }, band.name),
      ),
    );
  }

  function renderWaiting() {
    const { queue, total } = state.queue;
    waitingCount.textContent = `(${total})`;
    waitedCells = [];
    if (!queue.length) {
      replace(waiting, h("p", { class: "empty" }, "Nobody is waiting."));
      return;
    }
    const body = h("tbody");
    for (const row of queue) {
      const waited = h("td", { class: "num" });
      waitedCells.push({ cell: waited, base: row.waited_ms });
      const tier = tierName(row.requested_priority);
      body.append(
        h(
          "tr",
          { "data-seq": row.seq, "data-model": row.model, class: "queue-row" },
          h("td", { class: "num" }, `#${row.position}`),
          h("td", {}, row.model),
          h(
            "td",
            {},
            h(
              "span",
              { class: `badge ${bandClass(row.band)}`, title: `band ${row.band}` },
              `${signed(row.effective_priority)} ${row.band}`,
            ),
          ),
          waited,
          h(
            "td",
            { class: "reason", title: reasonHint(row.reason) },
            row.reason || "",
          ),
          h("td", {}, row.aged ? h("span", { class: "badge aged" }, "aged") : ""),
          h(
            "td",
            { class: "num" },
            signed(row.requested_priority),
            tier ? h("span", { class: "wide-only" }, ` (${tier})`) : "",
          ),
          h("td", { class: "num" }, signed(row.capped_priority)),
          h("td", { class: "num wide-only mono" }, row.seq),
        ),
      );
    }
    const more =
      total > queue.length
        ? h("p", { class: "hint" }, `… and ${total - queue.length} more not shown.`)
        : null;
    replace(
      waiting,
      h(
        "table",
        {},
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            h("th", { class: "num", scope: "col" }, "Pos."),
            h("th", { scope: "col" }, "Model"),
            h("th", { scope: "col" }, "Effective"),
            h("th", { class: "num", scope: "col" }, "Waited"),
            h("th", { scope: "col" }, "Waiting for"),
            h("th", { scope: "col" }, "Aged"),
            h("th", { class: "num", scope: "col" }, "Requested"),
            h("th", { class: "num", scope: "col" }, "Capped"),
            h("th", { class: "num wide-only", scope: "col" }, "Seq"),
          ),
        ),
        body,
      ),
      more,
    );
    tick();
  }

  function renderRunning() {
    const { requests, total } = state.inflight;
    runningCount.textContent = `(${total})`;
    runningCells = [];
    const byModel = new Map();
    for (const model of realModels()) {
      if (model.state !== "stopped") byModel.set(model.id, { model, requests: [] });
    }
    for (const request of requests) {
      if (!byModel.has(request.model)) byModel.set(request.model, { model: null, requests: [] });
      byModel.get(request.model).requests.push(request);
    }
    if (!byModel.size) {
      replace(running, h("p", { class: "empty" }, "No model is running."));
      return;
    }
    const cards = [];
    for (const [id, { model, requests: mine }] of byModel) {
      const items = mine.map((request) => {
        const elapsed = h("span", { class: "mono" });
        runningCells.push({ cell: elapsed, since: request.granted_ms });
        const band = request.band || bandOf(request.effective_priority ?? request.capped_priority);
        return h(
          "li",
          { "data-seq": request.seq ?? "", class: "running-request" },
          h(
            "span",
            { class: `badge ${bandClass(band)}` },
            `${signed(request.effective_priority ?? request.capped_priority)} ${band}`,
          ),
          h("span", {}, "running for ", elapsed),
          h("span", { class: "hint" }, `waited ${duration(request.queue_ms)}`),
          h("span", { class: "hint mono wide-only" }, request.request_id),
        );
      });
      cards.push(
        h(
          "article",
          { class: "running-model panel", "data-model": id },
          h(
            "h3",
            {},
            id,
            model ? h("span", { class: `badge state-${model.state}` }, model.state) : null,
            h("span", { class: "count" }, `${mine.length} request${mine.length === 1 ? "" : "s"}`),
          ),
          items.length ? h("ul", {}, items) : h("p", { class: "hint" }, "Idle."),
        ),
      );
    }
    replace(running, cards);
    tick();
  }

  function tick() {
    const sinceReceipt = performance.now() - (state.queue.receivedAt || performance.now());
    for (const { cell, base } of waitedCells) cell.textContent = duration(base + sinceReceipt);
    const now = Date.now();
    for (const { cell, since } of runningCells) cell.textContent = duration(Math.max(0, now - since));
  }

  const offs = [
    subscribe(["config"], () => {
      renderLegend();
      renderWaiting();
      renderRunning();
    }),
    subscribe(["queue"], renderWaiting),
    subscribe(["inflight", "models"], renderRunning),
  ];
  renderLegend();
  renderWaiting();
  renderRunning();
  const timer = setInterval(tick, 1000);
  return () => {
    clearInterval(timer);
    for (const off of offs) off();
  };
}
