// Time-series charts by the vendored uPlot (see vendor/README.md), sized to
// their box and coloured from the page's theme.

import uPlot from "../../vendor/uplot/uPlot.esm.js";
import { h } from "./dom.js";

/** Line colours that read on light and dark backgrounds alike. */
export const PALETTE = ["#3b82f6", "#ef4444", "#10b981", "#f59e0b", "#8b5cf6", "#ec4899", "#06b6d4", "#84cc16"];

/** A colour of the theme resolved to rgb() (canvas cannot read CSS variables). */
function themeColor(name) {
  const probe = h("span", { class: "offscreen" });
  probe.style.color = `var(${name})`;
  document.body.append(probe);
  const color = getComputedStyle(probe).color;
  probe.remove();
  return color;
}

/**
 * A chart in `box`: `series` is [{label, color?, unit?}], `data` uPlot's
 * columns ([times in seconds, ...values]). Options: yRange [min, max] (fixed,
 * e.g. 0–100 for percentages), format(v) for the axis and the legend.
 * Returns {setData(data), destroy()}.
 */
export function timeChart(box, { series, data, yRange = null, format = (v) => String(v) }) {
  const text = themeColor("--muted");
  const grid = themeColor("--border");
  const opts = {
    width: Math.max(200, box.clientWidth || 600),
    height: 190,
    legend: { live: true },
    cursor: { drag: { x: false, y: false } },
    scales: { x: { time: true }, y: yRange ? { range: yRange } : { range: (u, min, max) => [Math.min(0, min), max > 0 ? max * 1.1 : 1] } },
    axes: [
      { stroke: text, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid } },
      { stroke: text, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid }, size: 56, values: (u, ticks) => ticks.map((v) => format(v)) },
    ],
    series: [
      {},
      ...series.map((s, i) => ({
        label: s.label,
        stroke: s.color || PALETTE[i % PALETTE.length],
        width: 1.5,
        points: { show: false },
        value: (u, v) => (v === null || v === undefined ? "–" : format(v)),
      })),
    ],
  };
  const chart = new uPlot(opts, data, box);
  box.dataset.points = String(data[0]?.length || 0);
  const observer = new ResizeObserver(() => {
    const width = box.clientWidth;
    if (width > 0 && Math.abs(width - chart.width) > 2) chart.setSize({ width, height: 190 });
  });
  observer.observe(box);
  return {
    setData(next) {
      chart.setData(next);
      box.dataset.points = String(next[0]?.length || 0);
    },
    destroy() {
      observer.disconnect();
      chart.destroy();
    },
  };
}
