// Markdown export of the history under the current filters: a summary
// (range, time, tokens, token-weighted speeds, drafts), then one table row
// per request with the columns shown, ready to paste into an issue or a chat.

import { copyButton } from "./clipboard.js";
import { openDialog } from "./dialog.js";
import { h } from "./dom.js";
import { absolute, count, duration, speed } from "./format.js";
import * as R from "./rows.js";

/** Most rows an export reads (in pages of 999, the API's largest). */
export const EXPORT_LIMIT = 10_000;

/** Opens the export dialog; the rows are read when it opens. */
export async function openExport({ title, query, fetchPage, columns, filters }) {
  const pre = h("pre", { class: "export", id: "export-markdown", tabindex: "0" }, "Reading the rows…");
  const note = h("p", { class: "hint", "aria-live": "polite" });
  let markdown = "";
  // Without an address until the rows are read (an <a> without href is inert).
  const download = h("a", { class: "button secondary", download: "activity.md" }, "Download");
  const copy = copyButton(() => markdown, "Copy", "Copy the markdown");
  copy.classList.remove("quiet", "small");
  openDialog({ title: `Export: ${title}`, body: [note, pre], actions: [download, copy], className: "export-dialog" });
  try {
    const rows = [];
    let page = 1;
    let total = 0;
    for (;;) {
      const q = query();
      q.set("limit", "999");
      q.set("page", String(page));
      const result = await fetchPage(q);
      rows.push(...(result.data || []));
      total = result.total ?? rows.length;
      if (rows.length >= Math.min(total, EXPORT_LIMIT) || !(result.data || []).length) break;
      page += 1;
    }
    markdown = toMarkdown(rows.slice(0, EXPORT_LIMIT), columns, filters);
    pre.textContent = markdown;
    note.textContent =
      total > EXPORT_LIMIT
        ? `The first ${count(EXPORT_LIMIT)} of ${count(total)} rows under the filters.`
        : `${count(rows.length)} row${rows.length === 1 ? "" : "s"} under the filters.`;
    download.href = `data:text/markdown;charset=utf-8,${encodeURIComponent(markdown)}`;
  } catch (error) {
    pre.textContent = "";
    note.textContent = `The rows could not be read: ${error.message}`;
  }
}

function escape(value) {
  return String(value).replace(/\|/g, "\\|").replace(/[\r\n\t]+/g, " ");
}

/** The summary, the table and where it came from. */
export function toMarkdown(rows, columns, filters = "", now = new Date()) {
  const s = summarize(rows);
  const draft = s.drafted > 0 ? `${((s.accepted * 100) / s.drafted).toFixed(1)}% (${s.accepted}/${s.drafted})` : "–";
  const summary = [
    "| Summary | |",
    "| --- | --- |",
    ["Requests", count(rows.length)],
    ["Filters", filters || "none"],
    ["Range", s.first ? `${absolute(s.first)} → ${absolute(s.last)}` : "–"],
    ["Duration (sum)", duration(s.duration)],
    ["Cached", count(s.cached)],
    ["Prompt", `${count(s.prompt)} (${speed(s.prefill)})`],
    ["Generated", `${count(s.generated)} (${speed(s.decode)})`],
    ["Drafted", draft],
  ].map((row) => (Array.isArray(row) ? `| ${row[0]} | ${escape(row[1])} |` : row));
  const table = columns.length
    ? [
        `| ${columns.map((c) => escape(c.label)).join(" | ")} |`,
        `| ${columns.map((c) => (["id", "queue", "duration", "cached", "prompt", "generated", "prefill", "decode"].includes(c.id) ? "---:" : "---")).join(" | ")} |`,
        ...rows.map((r) => `| ${columns.map((c) => escape(R.cellText(r, c.id))).join(" | ")} |`),
      ]
    : [];
  return [summary.join("\n"), table.join("\n"), `Exported from llama-swap-rs at ${absolute(now)}`].filter(Boolean).join("\n\n");
}

/** Totals and token-weighted speeds (tokens over the time they took, not a mean of rates). */
export function summarize(rows) {
  const s = { duration: 0, cached: 0, prompt: 0, generated: 0, drafted: 0, accepted: 0, prefill: -1, decode: -1, first: 0, last: 0 };
  let promptTokens = 0;
  let promptSeconds = 0;
  let genTokens = 0;
  let genSeconds = 0;
  for (const r of rows) {
    const t = R.time(r);
    if (t && (!s.first || t < s.first)) s.first = t;
    if (t && t > s.last) s.last = t;
    s.duration += r.duration_ms || 0;
    s.cached += Math.max(0, R.cached(r) || 0);
    s.prompt += Math.max(0, R.prompt(r) || 0);
    s.generated += Math.max(0, R.generated(r) || 0);
    s.drafted += Math.max(0, R.drafted(r) || 0);
    s.accepted += Math.max(0, R.accepted(r) || 0);
    if (R.prompt(r) > 0 && R.prefill(r) > 0) {
      promptTokens += R.prompt(r);
      promptSeconds += R.prompt(r) / R.prefill(r);
    }
    if (R.generated(r) > 0 && R.decode(r) > 0) {
      genTokens += R.generated(r);
      genSeconds += R.generated(r) / R.decode(r);
    }
  }
  if (promptSeconds > 0) s.prefill = promptTokens / promptSeconds;
  if (genSeconds > 0) s.decode = genTokens / genSeconds;
  return s;
}
