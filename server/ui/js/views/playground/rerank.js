// Rerank: a query and documents to /v1/rerank; the documents come back
// ordered by relevance, each with its score drawn as a bar.

import { field, h, replace } from "../../lib/dom.js";
import { duration } from "../../lib/format.js";
import { pref, setPref } from "../../prefs.js";
import { modelPicker, priorityPicker, send } from "./common.js";

const EXAMPLE_DOCUMENTS = [
  "A swap proxy starts the model a request names and stops the ones in its way.",
  "Requests that must wait are ranked by priority, then by arrival.",
  "Sourdough bread needs a starter, flour, water and salt.",
].join("\n");

const last = { results: [], note: "" };

export function mount(root) {
  const model = modelPicker({ id: "rr-model", key: "rerank", capability: "reranker" });
  const priority = priorityPicker({ id: "rr-priority", key: "rerank" });
  const query = h("input", { type: "text", id: "rr-query", required: true, value: pref("pg.rerank.query", "which request goes first"), autocomplete: "off" });
  const docs = h("textarea", { id: "rr-documents", rows: 6, required: true });
  docs.value = pref("pg.rerank.documents", EXAMPLE_DOCUMENTS);
  query.addEventListener("change", () => setPref("pg.rerank.query", query.value));
  docs.addEventListener("change", () => setPref("pg.rerank.documents", docs.value));
  const go = h("button", { type: "submit", id: "rr-go" }, "Rerank");
  const status = h("p", { class: "hint", "aria-live": "polite" });
  const error = h("p", { class: "error", role: "alert", hidden: true });
  const list = h("ol", { class: "rerank-results", id: "rr-results", "aria-label": "Documents by relevance" });
  const form = h(
    "form",
    { class: "composer panel" },
    model.el,
    priority.el,
    h("div", { class: "field prompt" }, h("label", { for: query.id }, "Query"), query),
    h("div", { class: "field prompt" }, h("label", { for: docs.id }, "Documents (one per line)"), docs),
    h("div", { class: "actions" }, status, go),
  );
  root.append(form, error, list);

  function render() {
    const top = Math.max(1e-9, ...last.results.map((r) => r.score));
    replace(
      list,
      last.results.map((r) =>
        h(
          "li",
          { class: "rerank-result panel", dataset: { index: r.index } },
          h("div", { class: "rerank-head" }, h("span", { class: "mono" }, r.score.toFixed(4)), h("span", { class: "hint" }, `document ${r.index + 1}`)),
          h("meter", { min: 0, max: top, value: Math.max(0, r.score), "aria-label": `relevance of document ${r.index + 1}` }),
          h("p", {}, r.text),
        ),
      ),
    );
    status.textContent = last.note;
  }

  let busy = false;
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const documents = docs.value.split("\n").map((d) => d.trim()).filter(Boolean);
    if (busy || !query.value.trim() || !documents.length || !model.select.value) return;
    busy = true;
    go.disabled = true;
    error.hidden = true;
    const started = performance.now();
    try {
      const response = await send("/v1/rerank", {
        body: { model: model.select.value, query: query.value.trim(), documents },
        priority: priority.select.value,
      });
      const body = await response.json();
      last.results = (body.results || body.data || [])
        .map((r) => ({ index: r.index, score: Number(r.relevance_score ?? r.score ?? 0), text: documents[r.index] ?? r.document?.text ?? "" }))
        .sort((a, b) => b.score - a.score);
      last.note = `${last.results.length} documents ranked in ${duration(performance.now() - started)}`;
    } catch (e) {
      error.textContent = `Rerank failed: ${e.message}`;
      error.hidden = false;
      last.note = "";
    } finally {
      busy = false;
      go.disabled = false;
      render();
    }
  });

  render();
  return () => model.destroy();
}
