// Activity: the most recent finished requests, newest first, with a model filter.

import { clock, duration, h, replace, signed } from "../dom.js";
import { bandClass, bandOf, realModels, state, subscribe } from "../store.js";

/** Rows drawn at once; the rest are a click away. */
const PAGE = 200;

export function mount(root) {
  const filter = h("select", { id: "activity-model" }, h("option", { value: "" }, "All models"));
  const count = h("span", { class: "count" });
  const table = h("div", { class: "table-wrap panel" });
  const more = h("button", { type: "button", class: "secondary", hidden: true }, "Show more");
  root.append(
    h(
      "div",
      { class: "toolbar" },
      h("h1", {}, "Activity ", count),
      h("div", { class: "field" }, h("label", { for: "activity-model" }, "Model"), filter),
    ),
    table,
    h("p", {}, more),
  );

  let shown = PAGE;
  filter.addEventListener("change", () => {
    shown = PAGE;
    render();
  });
  more.addEventListener("click", () => {
    shown += PAGE;
    render();
  });

  function renderFilter() {
    const selected = filter.value;
    const names = new Set(realModels().map((m) => m.id));
    for (const row of state.activity) names.add(row.model);
    replace(
      filter,
      h("option", { value: "" }, "All models"),
      [...names].sort().map((name) => h("option", { value: name, selected: name === selected }, name)),
    );
  }

  function render() {
    const model = filter.value;
    const rows = state.activity.filter((row) => !model || row.model === model);
    count.textContent = `(${rows.length})`;
    if (!rows.length) {
      replace(table, h("p", { class: "empty" }, "No finished requests yet."));
      more.hidden = true;
      return;
    }
    const body = h("tbody");
    const newestFirst = rows.slice(-shown).reverse();
    for (const row of newestFirst) body.append(line(row));
    more.hidden = rows.length <= shown;
    replace(
      table,
      h(
        "table",
        {},
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            h("th", { scope: "col" }, "Time"),
            h("th", { scope: "col" }, "Model"),
            h("th", { scope: "col" }, "Priority"),
            h("th", { scope: "col" }, "Status"),
            h("th", { class: "num", scope: "col" }, "Queue wait"),
            h("th", { class: "num", scope: "col" }, "Duration"),
            h("th", { class: "num", scope: "col" }, "Tokens"),
            h("th", { class: "num", scope: "col" }, "Tok/s"),
            h("th", { class: "wide-only", scope: "col" }, "Request id"),
          ),
        ),
        body,
      ),
    );
  }

  const offs = [
    subscribe(["activity"], () => {
      renderFilter();
      render();
    }),
    subscribe(["models", "config"], () => {
      renderFilter();
      render();
    }),
  ];
  renderFilter();
  render();
  return () => {
    for (const off of offs) off();
  };
}

function line(row) {
  const effective = row.effective_priority;
  const band = bandOf(effective ?? row.capped_priority);
  const code = row.resp_status_code;
  const ok = code >= 200 && code < 400 && !row.error;
  const status = row.error ? `${code} ${row.error}` : String(code);
  const t = row.tokens;
  const tokens =
    t.input_tokens === 0 && t.output_tokens === 0 ? "–" : `${t.input_tokens} → ${t.output_tokens}`;
  const requested =
    effective !== null && effective !== row.requested_priority
      ? ` (asked ${signed(row.requested_priority)})`
      : "";
  return h(
    "tr",
    { "data-model": row.model, "data-request-id": row.request_id, class: "activity-row" },
    h("td", { title: row.timestamp }, clock(Date.parse(row.timestamp))),
    h("td", {}, row.model, h("div", { class: "hint mono wide-only" }, row.req_path)),
    h(
      "td",
      {},
      h("span", { class: `badge ${bandClass(band)}` }, `${signed(effective ?? row.capped_priority)} ${band}`),
      requested,
    ),
    h("td", { class: ok ? "status-ok" : "status-err" }, status),
    h("td", { class: "num" }, duration(row.queue_ms)),
    h("td", { class: "num" }, duration(row.duration_ms)),
    h("td", { class: "num" }, tokens),
    h("td", { class: "num" }, t.tokens_per_second > 0 ? t.tokens_per_second.toFixed(1) : "–"),
    h("td", { class: "mono wide-only" }, row.request_id),
  );
}
