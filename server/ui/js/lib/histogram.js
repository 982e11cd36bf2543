// Histograms as SVG: one bar per bin (its range and count in a tooltip), the
// p50, p95 and p99 marked, the bounds under the axis. The data has
// llama-swap's shape ({bins, min, max, binSize, p50, p95, p99}); histogram()
// computes it from plain values.

import { h, svg } from "./dom.js";

const WIDTH = 600;
const PAD = { top: 8, right: 4, bottom: 4, left: 4 };

/** llama-swap's histogram of `values` in `binCount` bins (null without values). */
export function histogram(values, binCount = 30) {
  const sorted = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  if (!sorted.length) return null;
  const min = sorted[0];
  const max = sorted[sorted.length - 1];
  const span = max - min;
  const bins = new Array(span > 0 ? binCount : 1).fill(0);
  const binSize = span > 0 ? span / binCount : 1;
  for (const v of sorted) {
    const i = span > 0 ? Math.min(binCount - 1, Math.floor((v - min) / binSize)) : 0;
    bins[i] += 1;
  }
  const at = (p) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
  return { bins, min, max, binSize, p50: at(50), p95: at(95), p99: at(99), count: sorted.length };
}

/**
 * The SVG of a histogram. `format(v)` writes a value (with its unit);
 * `label` names the chart for screen readers; `className` colours the bars.
 */
export function histogramChart(data, { label, format = (v) => v.toFixed(1), className = "", height = 170 } = {}) {
  const HEIGHT = height;
  if (!data || !data.bins?.length) return h("p", { class: "empty small" }, "No data yet.");
  const total = data.bins.reduce((a, b) => a + b, 0);
  const most = Math.max(...data.bins, 1);
  const inner = { w: WIDTH - PAD.left - PAD.right, h: HEIGHT - PAD.top - PAD.bottom };
  const barWidth = inner.w / data.bins.length;
  const span = data.max - data.min || 1;
  const x = (v) => PAD.left + ((v - data.min) / span) * inner.w;
  const bars = data.bins.map((n, i) => {
    const height = (n / most) * inner.h;
    const from = data.min + i * data.binSize;
    return svg(
      "rect",
      {
        class: "bar",
        x: PAD.left + i * barWidth + 0.5,
        y: PAD.top + inner.h - height,
        width: Math.max(1, barWidth - 1),
        height,
        "data-count": n,
      },
      svg("title", {}, `${format(from)} – ${format(from + data.binSize)}: ${n}`),
    );
  });
  const marks = [
    ["p50", data.p50],
    ["p95", data.p95],
    ["p99", data.p99],
  ]
    .filter(([, v]) => Number.isFinite(v))
    .map(([name, v]) =>
      svg(
        "g",
        { class: `mark mark-${name}` },
        svg("line", { x1: x(v), x2: x(v), y1: PAD.top - 4, y2: PAD.top + inner.h }),
        svg("title", {}, `${name}: ${format(v)}`),
      ),
    );
  const axis = [svg("line", { class: "axis", x1: PAD.left, x2: WIDTH - PAD.right, y1: PAD.top + inner.h, y2: PAD.top + inner.h })];
  return h(
    "figure",
    { class: `histogram ${className}`.trim() },
    svg(
      "svg",
      { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: "img", "aria-label": `${label}: ${total} values, p50 ${format(data.p50)}, p95 ${format(data.p95)}, p99 ${format(data.p99)}` },
      bars,
      marks,
      axis,
    ),
    // The bounds in HTML, not in the SVG: its text would shrink with the chart.
    h(
      "div",
      { class: "axis-labels" },
      h("span", {}, format(data.min)),
      h("span", { class: "hint" }, `${total} values · tallest bar ${most}`),
      h("span", {}, format(data.max)),
    ),
    h(
      "figcaption",
      { class: "legend" },
      h("span", { class: "key k-p50" }, `p50 ${format(data.p50)}`),
      h("span", { class: "key k-p95" }, `p95 ${format(data.p95)}`),
      h("span", { class: "key k-p99" }, `p99 ${format(data.p99)}`),
    ),
  );
}
