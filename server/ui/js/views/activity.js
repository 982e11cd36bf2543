// Activity: totals and histograms of the history, then the history itself
// (paged, sortable, filterable, exportable, each request's capture a click
// away). The token-speed histograms are the server's (/api/metrics/stats);
// latency and queue wait per priority band are drawn from the latest
// requests under the table's filters.

import { getJson } from "../api.js";
import { h, replace } from "../lib/dom.js";
import { count, duration } from "../lib/format.js";
import { histogram, histogramChart } from "../lib/histogram.js";
import { fetchPage, historyTable } from "../lib/history.js";
import * as R from "../lib/rows.js";
import { pref, setPref } from "../prefs.js";
import { bandClass, bandOf, runningRequests, state, subscribe } from "../store.js";

/** Requests the latency and queue-wait histograms are drawn from. */
const SAMPLE = 999;

export function mount(root) {
  const totals = h("dl", { class: "totals", id: "activity-totals" });
  const speeds = h("div", { class: "charts", id: "speed-histograms" });
  const sizes = h("div", { class: "charts", id: "token-histograms" });
  const latency = h("div", { class: "charts", id: "band-histograms" });
  const sampleNote = h("p", { class: "hint" });
  const hide = h("button", { type: "button", class: "quiet small", "aria-expanded": "true", "aria-controls": "activity-charts" }, "Hide charts");
  const charts = h(
    "div",
    { id: "activity-charts" },
    h("h3", {}, "Token speeds"),
    speeds,
    h("h3", {}, "Tokens per request"),
    sampleNote,
    sizes,
    h("h3", {}, "Latency and queue wait by priority band"),
    latency,
  );
  const inflight = h("p", { class: "hint", id: "activity-inflight" });
  let lastQuery = null;
  // Both follow new requests, at most once every two seconds.
  let timer = null;
  let last = 0;
  const table = historyTable({
    id: "activity",
    title: "Requests",
    onChange: (q) => {
      lastQuery = q;
      scheduleCharts();
    },
  });
  root.append(
    h("div", { class: "toolbar" }, h("h1", {}, "Activity"), inflight),
    h(
      "section",
      { class: "panel card stats", "aria-labelledby": "stats-title" },
      h("div", { class: "section-head" }, h("h2", { id: "stats-title" }, "Statistics"), hide),
      totals,
      charts,
    ),
    table.el,
  );

  function setChartsShown(on) {
    charts.hidden = !on;
    hide.textContent = on ? "Hide charts" : "Show charts";
    hide.setAttribute("aria-expanded", String(on));
  }
  hide.addEventListener("click", () => {
    const on = charts.hidden;
    setPref("activity.charts", on);
    setChartsShown(on);
    if (on) scheduleCharts();
  });
  setChartsShown(pref("activity.charts", true));

  async function renderStats() {
    let stats = null;
    try {
      stats = await getJson("/api/metrics/stats");
    } catch {
      stats = null;
    }
    const rows = [
      ["Requests", stats ? count(stats.total_requests) : count(state.activity.length), "completed"],
      ["Cached", stats ? count(stats.total_cache_tokens) : "–", "tokens"],
      ["Processed", stats ? count(stats.total_input_tokens) : "–", "prompt tokens"],
      ["Generated", stats ? count(stats.total_output_tokens) : "–", "tokens"],
    ];
    replace(
      totals,
      rows.map(([label, value, unit]) =>
        h("div", { class: "total", dataset: { key: label.toLowerCase() } }, h("dt", {}, label), h("dd", {}, h("strong", {}, value), ` ${unit}`)),
      ),
    );
    replace(
      speeds,
      h(
        "div",
        { class: "chart-box", id: "prompt-histogram" },
        h("h4", {}, "Prompt processing (tokens/s)"),
        histogramChart(stats?.prompt_histogram, { label: "Prompt processing speed", format: tps, className: "h-prompt" }),
      ),
      h(
        "div",
        { class: "chart-box", id: "gen-histogram" },
        h("h4", {}, "Generation (tokens/s)"),
        histogramChart(stats?.gen_histogram, { label: "Generation speed", format: tps, className: "h-gen" }),
      ),
    );
  }

  async function renderBands() {
    if (charts.hidden || !lastQuery) return;
    const q = new URLSearchParams(lastQuery);
    q.set("limit", String(SAMPLE));
    q.set("page", "1");
    q.set("sort", "id");
    q.set("order", "desc");
    let rows = [];
    try {
      rows = (await fetchPage(q)).data || [];
    } catch {
      rows = [];
    }
    sampleNote.textContent = rows.length
      ? `These and the band charts: the latest ${count(rows.length)} request${rows.length === 1 ? "" : "s"} under the table's filters.`
      : "";
    const counts = (read) => rows.map(read).filter((v) => v !== null && v > 0);
    replace(
      sizes,
      h(
        "div",
        { class: "chart-box", id: "prompt-tokens-histogram" },
        h("h4", {}, "Prompt tokens"),
        histogramChart(histogram(counts(R.prompt)), { label: "Prompt tokens per request", format: whole, className: "h-prompt", height: 120 }),
      ),
      h(
        "div",
        { class: "chart-box", id: "generated-tokens-histogram" },
        h("h4", {}, "Generated tokens"),
        histogramChart(histogram(counts(R.generated)), { label: "Generated tokens per request", format: whole, className: "h-gen", height: 120 }),
      ),
    );
    const bands = (state.config.bands || []).map((b) => b.name);
    const byBand = new Map();
    for (const r of rows) {
      const e = R.effective(r);
      const band = e === null || e === undefined ? "" : bandOf(e);
      if (!byBand.has(band)) byBand.set(band, []);
      byBand.get(band).push(r);
    }
    const order = [...bands].reverse().filter((b) => byBand.has(b));
    if (byBand.has("")) order.push("");
    replace(
      latency,
      order.length
        ? order.map((band) => {
            const mine = byBand.get(band);
            return h(
              "div",
              { class: "chart-box band-box", dataset: { band: band || "none" } },
              h("h4", {}, band ? h("span", { class: `badge ${bandClass(band)}` }, band) : "no priority", ` ${count(mine.length)} request${mine.length === 1 ? "" : "s"}`),
              h("div", { class: "pair" },
                h("div", {}, h("h5", {}, "Latency"), histogramChart(histogram(mine.map((r) => r.duration_ms)), { label: `Latency, band ${band}`, format: ms, className: "h-latency", height: 120 })),
                h("div", {}, h("h5", {}, "Queue wait"), histogramChart(histogram(mine.map(R.queueWait).filter((v) => v !== null)), { label: `Queue wait, band ${band}`, format: ms, className: "h-queue", height: 120 })),
              ),
            );
          })
        : h("p", { class: "empty small" }, "No requests yet."),
    );
  }

  function scheduleCharts() {
    if (timer !== null) return;
    timer = setTimeout(() => {
      timer = null;
      last = Date.now();
      renderStats();
      renderBands();
    }, Math.max(0, 2000 - (Date.now() - last)));
  }

  function renderInflight() {
    const running = runningRequests().length;
    const waiting = state.queue.total || 0;
    replace(inflight, `${running} running, ${waiting} waiting · `, h("a", { href: "/ui/queue" }, "Queue"));
  }

  const offs = [
    subscribe(["activity"], scheduleCharts),
    subscribe(["config"], scheduleCharts),
    subscribe(["queue", "inflight"], renderInflight),
  ];
  renderInflight();
  renderStats();
  return () => {
    clearTimeout(timer);
    table.destroy();
    for (const off of offs) off();
  };
}

function tps(v) {
  return `${v.toFixed(v < 100 ? 1 : 0)}`;
}

function whole(v) {
  return count(Math.round(v));
}

function ms(v) {
  return duration(v);
}
