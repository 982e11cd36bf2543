// The request history as a table: paged and sorted on the server
// (/api/metrics/activity), columns that can be hidden, a filter drawer,
// markdown export of the filtered rows and the capture of a request. Used by
// the Activity view and by a model's page (with the model pinned).

import { getJson } from "../api.js";
import { checkbox, field, h, replace, select, uid } from "./dom.js";
import { absolute, count, duration, speed } from "./format.js";
import { modelPath } from "./models.js";
import { priorityBadge } from "./requests.js";
import * as R from "./rows.js";
import { dataTable } from "./table.js";
import { openCapture } from "./capture.js";
import { openExport } from "./export.js";
import { pref, setPref } from "../prefs.js";
import { bandOf, realModels, state, subscribe } from "../store.js";

export const PAGE_SIZES = [10, 25, 50, 100, 250, 500];

/** Filters and their query parameters (llama-swap's, then ours). */
export function emptyFilters() {
  return { models: [], start: "", end: "", minId: "", maxId: "", status: "", band: "", key: "" };
}

/** The number of filters set (the drawer button shows it). */
export function filterCount(f) {
  return (
    (f.models?.length ? 1 : 0) +
    ["start", "end", "minId", "maxId", "status", "band", "key"].filter((k) => String(f[k] || "").trim() !== "").length
  );
}

/** Writes the filters onto a query: model (repeated), start/end (RFC 3339), min_id/max_id, status, band, key. */
export function filterParams(query, f) {
  for (const model of f.models || []) query.append("model", model);
  for (const [name, key] of [
    ["start", "start"],
    ["end", "end"],
  ]) {
    const ms = Date.parse(f[key] || "");
    if (!Number.isNaN(ms)) query.set(name, new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z"));
  }
  const id = (v) => (/^\d+$/.test(String(v).trim()) && Number(v) >= 1 ? String(Number(v)) : null);
  if (id(f.minId)) query.set("min_id", id(f.minId));
  if (id(f.maxId)) query.set("max_id", id(f.maxId));
  if (f.status) query.set("status", f.status);
  if (f.band) query.set("band", f.band);
  if (f.key?.trim()) query.set("key", f.key.trim());
}

/** The history's columns: [id, label, sort key or null, cell, options]. */
function columns({ withModel, onCapture }) {
  const c = (id, label, sort, cell, extra = {}) => ({ id, label, sort, cell, ...extra });
  return [
    c("id", "ID", "id", (r) => String(r.id), { num: true, className: "mono" }),
    c("time", "Time", "time", (r) => h("time", { datetime: new Date(R.time(r)).toISOString(), title: absolute(R.time(r)) }, absolute(R.time(r)).slice(11))),
    withModel ? c("model", "Model", "model", (r) => h("a", { href: modelPath(r.model) }, r.model)) : null,
    c("path", "Path", "req_path", (r) => h("span", { class: "mono" }, R.path(r) || "–"), { hidden: true }),
    c("priority", "Priority", "priority", (r) => {
      const e = R.effective(r);
      if (e === null || e === undefined) return "–";
      const q = R.requested(r);
      return [priorityBadge(e, bandOf(e)), q !== null && q !== undefined && q !== e ? h("span", { class: "hint" }, ` asked ${q > 0 ? "+" : ""}${q}`) : null];
    }),
    c("status", "Status", "resp_status_code", (r) =>
      h("span", { class: R.ok(r) ? "status-ok" : "status-err", title: R.errorText(r) || null }, R.errorText(r) ? `${R.status(r)} ${R.errorText(r)}` : String(R.status(r) || "–")),
    ),
    c("content_type", "Content type", "resp_content_type", (r) => R.contentType(r) || "–", { hidden: true }),
    c("queue", "Queue wait", "queue", (r) => duration(R.queueWait(r)), { num: true }),
    c("duration", "Duration", "duration", (r) => duration(r.duration_ms), { num: true }),
    c("cached", "Cached", "cached", (r) => (R.cached(r) > 0 ? count(R.cached(r)) : "–"), { num: true }),
    c("prompt", "Prompt", "prompt", (r) => count(R.prompt(r)), { num: true }),
    c("generated", "Generated", "generated", (r) => count(R.generated(r)), { num: true }),
    c("drafted", "Drafted", "drafted", (r) => R.draftText(r), { num: true, hidden: true }),
    c("prefill", "Prefill", "prompt_speed", (r) => speed(R.prefill(r)), { num: true }),
    c("decode", "Decode", "gen_speed", (r) => speed(R.decode(r)), { num: true }),
    c("key", "Key", null, (r) => R.keyName(r) || "–", { hidden: true }),
    c("session", "Session", null, (r) => (R.session(r) ? h("span", { class: "mono ellipsis", title: R.session(r) }, R.session(r)) : "–"), { hidden: true }),
    c("request_id", "Request id", null, (r) => h("span", { class: "mono" }, R.requestId(r) || "–"), { hidden: true }),
    c("capture", "Capture", null, (r) =>
      r.has_capture
        ? h("button", { type: "button", class: "secondary small", "aria-label": `View the capture of request ${r.id}`, onclick: () => onCapture(r) }, "View")
        : h("span", { class: "hint" }, "–"),
    ),
  ].filter(Boolean);
}

/** Reads a page of the history (/api/metrics/activity with `query`). */
export function fetchPage(query) {
  return getJson(`/api/metrics/activity?${query}`);
}

/**
 * The history browser. Options: id (keeps its choices apart), model (pins
 * the table to one model and hides the model column and filter), title.
 * Returns {el, query(), destroy()}; `onChange(query)` hears the filters.
 */
export function historyTable({ id, model = null, title = "Requests", onChange = () => {} }) {
  const prefKey = `history.${id}`;
  let filters = { ...emptyFilters(), ...pref(`${prefKey}.filters`, {}) };
  let limit = pref(`${prefKey}.limit`, 25);
  if (!PAGE_SIZES.includes(limit)) limit = 25;
  let page = 1;
  let sort = { key: "id", order: "desc" };
  let total = 0;
  let totalPages = 0;
  let rows = [];

  const table = dataTable({
    id: `${id}-table`,
    columns: columns({ withModel: !model, onCapture: (r) => openCapture(r.id) }),
    sort,
    onSort: (key, order) => {
      sort = { key, order };
      page = 1;
      refresh();
    },
    empty: model ? "No requests for this model yet." : "No requests recorded yet.",
    label: title,
    rowAttrs: (r) => ({ class: "activity-row", "data-id": r.id, "data-model": r.model, "data-request-id": R.requestId(r) || null }),
  });

  const countEl = h("span", { class: "count" });
  const drawerId = uid("filters");
  const drawerButton = h("button", { type: "button", class: "secondary small", "aria-expanded": "false", "aria-controls": drawerId }, "Filters");
  const exportButton = h("button", { type: "button", class: "secondary small" }, "Export");
  const drawer = h("div", { class: "drawer panel", id: drawerId, hidden: true, role: "region", "aria-label": "Filters" });
  const error = h("p", { class: "error", role: "alert", hidden: true });
  const pager = h("nav", { class: "pager", "aria-label": `${title} pages` });
  const el = h(
    "section",
    { class: "history", "aria-label": title },
    h("div", { class: "section-head" }, h("h2", {}, title, " ", countEl), h("div", { class: "tools" }, drawerButton, table.menu, exportButton)),
    drawer,
    error,
    table.el,
    pager,
  );

  // The drawer's controls.
  const modelChoices = h("div", { class: "choices" });
  const start = h("input", { type: "datetime-local", step: 1 });
  const end = h("input", { type: "datetime-local", step: 1 });
  const minId = h("input", { type: "number", min: 1, step: 1, inputmode: "numeric", placeholder: "min" });
  const maxId = h("input", { type: "number", min: 1, step: 1, inputmode: "numeric", placeholder: "max" });
  const statusSel = select({}, [["", "Any"], ["ok", "Succeeded"], ["error", "Failed"]], filters.status);
  const band = h("select", {});
  const key = h("input", { type: "text", placeholder: "key name", autocomplete: "off" });
  const size = select({}, PAGE_SIZES.map((n) => [String(n), String(n)]), String(limit));
  const clear = h("button", { type: "button", class: "quiet small" }, "Clear filters");
  replace(
    drawer,
    model ? null : h("fieldset", { class: "drawer-models" }, h("legend", {}, "Models"), modelChoices),
    h(
      "div",
      { class: "controls" },
      field("From", start),
      field("To", end),
      field("ID from", minId),
      field("ID to", maxId),
      field("Status", statusSel),
      field("Priority band", band),
      field("Key", key),
      field("Rows per page", size),
      clear,
    ),
  );

  function syncInputs() {
    start.value = filters.start;
    end.value = filters.end;
    minId.value = filters.minId;
    maxId.value = filters.maxId;
    key.value = filters.key;
    statusSel.value = filters.status;
    renderBands();
    renderModelChoices();
    const n = filterCount(filters) - (model ? 0 : 0);
    drawerButton.textContent = n ? `Filters (${n})` : "Filters";
  }

  function renderBands() {
    replace(
      band,
      h("option", { value: "" }, "Any"),
      (state.config.bands || []).map((b) => h("option", { value: b.name, selected: b.name === filters.band }, b.name)),
    );
  }

  function renderModelChoices() {
    if (model) return;
    const names = new Set(realModels().map((m) => m.id));
    for (const m of filters.models) names.add(m);
    replace(
      modelChoices,
      [...names].sort().map((name) => {
        const box = checkbox(name, { checked: filters.models.includes(name), dataset: { model: name } });
        box.input.addEventListener("change", () => {
          const set = new Set(filters.models);
          if (box.input.checked) set.add(name);
          else set.delete(name);
          update({ models: [...set].sort() });
        });
        return box.el;
      }),
    );
  }

  function update(patch) {
    filters = { ...filters, ...patch };
    setPref(`${prefKey}.filters`, filters);
    page = 1;
    syncInputs();
    refresh();
  }

  for (const [input, name] of [
    [start, "start"],
    [end, "end"],
    [minId, "minId"],
    [maxId, "maxId"],
    [key, "key"],
  ]) {
    input.addEventListener("change", () => update({ [name]: input.value }));
  }
  band.addEventListener("change", () => update({ band: band.value }));
  statusSel.addEventListener("change", () => update({ status: statusSel.value }));
  size.addEventListener("change", () => {
    limit = Number(size.value);
    setPref(`${prefKey}.limit`, limit);
    page = 1;
    refresh();
  });
  clear.addEventListener("click", () => update(emptyFilters()));
  drawerButton.addEventListener("click", () => {
    drawer.hidden = !drawer.hidden;
    drawerButton.setAttribute("aria-expanded", String(!drawer.hidden));
  });
  exportButton.addEventListener("click", () =>
    openExport({
      title,
      query: () => query(),
      fetchPage,
      columns: table.visibleColumns().filter((c) => c.id !== "capture").map((c) => ({ id: c.id, label: c.label })),
      filters: describeFilters(filters, model),
    }),
  );

  /** The query of the current filters, sort and paging. */
  function query() {
    const q = new URLSearchParams();
    if (model) q.append("model", model);
    filterParams(q, model ? { ...filters, models: [] } : filters);
    q.set("limit", String(limit));
    q.set("page", String(page));
    q.set("sort", sort.key);
    q.set("order", sort.order);
    return q;
  }

  let generation = 0;
  async function refresh() {
    const mine = ++generation;
    lastRefresh = Date.now();
    const q = query();
    onChange(q);
    // Busy until the rows of this query are shown (assistive technology waits; so do the tests).
    el.setAttribute("aria-busy", "true");
    try {
      const result = await fetchPage(q);
      if (mine !== generation) return;
      el.setAttribute("aria-busy", "false");
      error.hidden = true;
      rows = result.data || [];
      total = result.total ?? rows.length;
      totalPages = result.total_pages ?? 1;
      if (page > 1 && page > totalPages) {
        page = Math.max(1, totalPages);
        refresh();
        return;
      }
      table.setRows(rows);
      renderPager();
    } catch (e) {
      if (mine !== generation) return;
      el.setAttribute("aria-busy", "false");
      error.textContent = `The history could not be read: ${e.message}`;
      error.hidden = false;
    }
  }

  function renderPager() {
    countEl.textContent = `(${count(total)})`;
    const pages = Math.max(1, totalPages);
    const button = (label, target, name, current = false) =>
      h(
        "button",
        {
          type: "button",
          class: current ? "small current" : "quiet small",
          "aria-label": name,
          "aria-current": current ? "page" : null,
          disabled: target < 1 || target > pages || (target === page && !current),
          onclick: () => {
            if (target === page) return;
            page = target;
            refresh();
          },
        },
        label,
      );
    const first = Math.max(1, Math.min(page - 3, pages - 6));
    const numbers = [];
    for (let p = first; p <= Math.min(pages, first + 6); p++) numbers.push(button(String(p), p, `Page ${p}`, p === page));
    replace(
      pager,
      h("span", { class: "hint" }, `Page ${page} of ${pages} · ${count(total)} rows`),
      h(
        "div",
        { class: "pager-buttons" },
        button("«", 1, "First page"),
        button("‹", page - 1, "Previous page"),
        numbers,
        button("›", page + 1, "Next page"),
        button("»", pages, "Last page"),
      ),
    );
    pager.hidden = total === 0;
  }

  // New requests change page 1 only: while on it, read it again at most once a second.
  let lastRefresh = 0;
  let timer = null;
  function onActivity() {
    if (page !== 1 || timer !== null) return;
    const wait = Math.max(0, 1000 - (Date.now() - lastRefresh));
    timer = setTimeout(() => {
      timer = null;
      refresh();
    }, wait);
  }

  const offs = [
    subscribe(["activity"], onActivity),
    subscribe(["connection"], () => {
      if (state.connection === "live") refresh();
    }),
    subscribe(["models", "config"], () => {
      renderModelChoices();
      renderBands();
    }),
  ];
  syncInputs();
  refresh();
  return {
    el,
    query,
    refresh,
    destroy() {
      clearTimeout(timer);
      for (const off of offs) off();
    },
  };
}

/** The filters in words, for the export's header. */
function describeFilters(f, model) {
  const parts = [];
  if (model) parts.push(`model ${model}`);
  else if (f.models?.length) parts.push(`models ${f.models.join(", ")}`);
  if (f.start) parts.push(`from ${f.start.replace("T", " ")}`);
  if (f.end) parts.push(`to ${f.end.replace("T", " ")}`);
  if (f.minId) parts.push(`id ≥ ${f.minId}`);
  if (f.maxId) parts.push(`id ≤ ${f.maxId}`);
  if (f.status) parts.push(f.status === "ok" ? "succeeded" : "failed");
  if (f.band) parts.push(`band ${f.band}`);
  if (f.key) parts.push(`key ${f.key}`);
  return parts.join(", ");
}

