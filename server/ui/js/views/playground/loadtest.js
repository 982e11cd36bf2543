// Load test: N streaming chat requests sent at once, with a chosen mix of
// Elevated / Normal / Low across the chosen models, and their latency per
// priority live as they run: the page where a person sees priorities work.
// The server sends them (POST /api/loadtest), in the planned order.
//
// By default the Low requests are sent first and the Elevated ones last, so
// an arrival-order queue would serve them in that order; the finish ranks and
// the timeline show the Elevated ones overtaking whatever must wait.

import { SESSION_ID, apiFetch, ensureOk, readSse } from "../../api.js";
import { checkbox, field, h, replace, select, svg } from "../../lib/dom.js";
import { duration } from "../../lib/format.js";
import { labelCells } from "../../lib/table.js";
import { pref, setPref } from "../../prefs.js";
import { realModels, state, subscribe } from "../../store.js";
import { PRIORITIES, priorityHeader } from "./common.js";

const ORDERS = [
  ["low-first", "Low first (shows overtaking)"],
  ["interleaved", "Interleaved"],
  ["elevated-first", "Elevated first"],
];

const TIER_CLASS = { Elevated: "band-high", Normal: "band-mid", Low: "band-low" };

/** The current or last run (kept while the reader visits other views). */
const run = { requests: [], running: false, controller: null, startedAt: 0, finished: 0, error: "" };

export function mount(root) {
  const counts = Object.fromEntries(
    PRIORITIES.map((p) => {
      const input = h("input", {
        type: "number",
        id: `lt-${p.label.toLowerCase()}`,
        min: 0,
        max: 200,
        step: 1,
        value: pref(`pg.load.${p.label}`, 4),
      });
      input.addEventListener("input", () => {
        setPref(`pg.load.${p.label}`, Number(input.value) || 0);
        renderTotal();
      });
      return [p.label, input];
    }),
  );
  const total = h("output", { id: "lt-total", class: "total" });
  const order = select({ id: "lt-order" }, ORDERS, pref("pg.load.order", "low-first"));
  order.addEventListener("change", () => setPref("pg.load.order", order.value));
  const prompt = h("input", {
    type: "text",
    id: "lt-prompt",
    value: pref("pg.load.prompt", "Write a few sentences about queues."),
    autocomplete: "off",
  });
  prompt.addEventListener("change", () => setPref("pg.load.prompt", prompt.value));
  const maxTokens = h("input", { type: "number", id: "lt-max-tokens", min: 1, step: 1, value: pref("pg.load.maxTokens", 64) });
  maxTokens.addEventListener("change", () => setPref("pg.load.maxTokens", Number(maxTokens.value) || 64));
  const modelBox = h("fieldset", { class: "model-choices", id: "lt-models" }, h("legend", {}, "Models (requests go round-robin)"));
  const start = h("button", { type: "submit", id: "lt-start" }, "Start");
  const stop = h("button", { type: "button", class: "secondary", id: "lt-stop", disabled: true }, "Stop");
  const error = h("p", { class: "error", role: "alert", hidden: true });
  const summary = h("div", { class: "table-wrap panel", id: "lt-summary" });
  const timeline = h("div", { class: "timeline panel", id: "lt-timeline" });
  const details = h("div", { class: "table-wrap panel", id: "lt-requests" });
  const progress = h("p", { class: "hint", id: "lt-progress", "aria-live": "polite" });

  const form = h(
    "form",
    { class: "composer panel load-form" },
    h(
      "fieldset",
      { class: "mix" },
      h("legend", {}, "Mix (requests per priority)"),
      PRIORITIES.map((p) => field(p.label, counts[p.label])),
      h("div", { class: "field" }, h("span", { class: "label" }, "Total"), total),
    ),
    modelBox,
    field("Send order", order),
    h("div", { class: "field wide" }, h("label", { for: prompt.id }, "Prompt"), prompt),
    field("Max tokens", maxTokens),
    h("div", { class: "actions" }, progress, stop, start),
  );
  root.append(
    form,
    error,
    h("h2", {}, "Latency by priority"),
    summary,
    h("h2", {}, "Timeline"),
    h("p", { class: "hint" }, "Each bar is one request from when it was sent: waiting (light) until its first token, then generating (dark). The number is its finish rank."),
    timeline,
    h("details", { class: "lt-details" }, h("summary", {}, "Every request"), details),
  );

  const chosen = new Set(pref("pg.load.models", []));
  function renderModels() {
    const models = realModels();
    const boxes = models.map((m) => {
      const box = checkbox(m.id, { checked: chosen.has(m.id), dataset: { model: m.id } });
      box.input.addEventListener("change", () => {
        if (box.input.checked) chosen.add(m.id);
        else chosen.delete(m.id);
        setPref("pg.load.models", [...chosen]);
      });
      return box.el;
    });
    replace(modelBox, h("legend", {}, "Models (requests go round-robin)"), boxes.length ? boxes : h("p", { class: "hint" }, "No models."));
  }

  function renderTotal() {
    total.textContent = String(PRIORITIES.reduce((n, p) => n + (Number(counts[p.label].value) || 0), 0));
  }

  function render() {
    renderSummary(summary);
    renderTimeline(timeline);
    renderDetails(details);
    const done = run.requests.filter((r) => r.doneAt).length;
    progress.textContent = run.requests.length
      ? `${done} of ${run.requests.length} finished${run.running ? "" : " · run over"}`
      : "";
    error.hidden = !run.error;
    if (run.error) error.textContent = `The run failed: ${run.error}`;
    start.disabled = run.running;
    stop.disabled = !run.running;
  }

  let frame = null;
  function schedule() {
    if (frame !== null) return;
    frame = requestAnimationFrame(() => {
      frame = null;
      render();
    });
  }

  stop.addEventListener("click", () => run.controller?.abort());
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (run.running) return;
    const models = realModels().map((m) => m.id).filter((id) => chosen.has(id));
    const mix = Object.fromEntries(PRIORITIES.map((p) => [p.label, Math.max(0, Math.min(200, Number(counts[p.label].value) || 0))]));
    const n = Object.values(mix).reduce((a, b) => a + b, 0);
    error.hidden = true;
    if (!models.length || n === 0) {
      error.textContent = !models.length ? "Choose at least one model." : "Ask for at least one request.";
      error.hidden = false;
      return;
    }
    startRun(plan(mix, models, order.value), prompt.value || "Hello", Number(maxTokens.value) || 64, schedule);
  });

  const timer = setInterval(() => {
    if (run.running) schedule();
  }, 250);
  const offs = [subscribe(["models"], renderModels)];
  renderModels();
  renderTotal();
  render();
  return () => {
    clearInterval(timer);
    for (const off of offs) off();
  };
}

/** The requests of a run, in the order they are sent. */
function plan(mix, models, order) {
  const byTier = Object.fromEntries(PRIORITIES.map((p) => [p.label, Array.from({ length: mix[p.label] }, () => p.label)]));
  let tiers;
  if (order === "elevated-first") tiers = [...byTier.Elevated, ...byTier.Normal, ...byTier.Low];
  else if (order === "interleaved") {
    tiers = [];
    const lists = [byTier.Low, byTier.Normal, byTier.Elevated].map((l) => [...l]);
    while (lists.some((l) => l.length)) for (const l of lists) if (l.length) tiers.push(l.pop());
  } else tiers = [...byTier.Low, ...byTier.Normal, ...byTier.Elevated];
  return tiers.map((tier, i) => ({
    index: i + 1,
    tier,
    model: models[i % models.length],
    sentAt: 0,
    firstAt: 0,
    requestId: "",
    doneAt: 0,
    rank: 0,
    status: "planned",
    note: "",
    error: "",
    tokens: 0,
  }));
}

/**
 * Runs the plan on the server (POST /api/loadtest): the server sends the
 * requests itself, so the browser's limit of six connections to one server
 * does not queue them before the priority queue sees them. Its events say
 * when each was sent, queued, answered and done, in its own milliseconds.
 */
async function startRun(requests, prompt, maxTokens, onChange) {
  run.requests = requests;
  run.running = true;
  run.finished = 0;
  run.controller = new AbortController();
  run.startedAt = performance.now();
  run.error = "";
  onChange();
  const signal = run.controller.signal;
  try {
    const response = await apiFetch("/api/loadtest", {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
      body: JSON.stringify({
        requests: requests.map((r) => ({ model: r.model, priority: priorityHeader(r.tier) })),
        prompt,
        max_tokens: maxTokens,
        session: SESSION_ID,
      }),
      signal,
    });
    await ensureOk(response);
    for await (const { data } of readSse(response, signal)) {
      let event;
      try {
        event = JSON.parse(data);
      } catch {
        continue;
      }
      apply(event);
      onChange();
    }
  } catch (error) {
    if (error?.name !== "AbortError") run.error = error.message || String(error);
  } finally {
    for (const r of run.requests) {
      if (!r.doneAt) {
        r.status = "stopped";
        r.error = "stopped";
        r.doneAt = performance.now();
        if (!r.firstAt) r.firstAt = r.doneAt;
        run.finished += 1;
        r.rank = run.finished;
      }
    }
    run.running = false;
    run.controller = null;
    onChange();
  }
}

/** Applies one event of the server's run (times kept on the page's clock). */
function apply(event) {
  if (event.event === "start") {
    // The server's millisecond 0 is now, on the page's clock.
    run.startedAt = performance.now();
    return;
  }
  const r = run.requests[event.index];
  if (!r) return;
  const at = run.startedAt + (event.ms || 0);
  switch (event.event) {
    case "sent":
      r.sentAt = at;
      r.status = "waiting";
      break;
    case "queued":
      r.status = "queued";
      r.note = `queued, position #${event.position}`;
      break;
    case "first":
      r.firstAt = at;
      r.status = "generating";
      r.note = "";
      break;
    case "done":
      r.doneAt = at;
      if (!r.firstAt) r.firstAt = at;
      r.tokens = event.tokens || 0;
      r.requestId = event.request_id || "";
      r.status = event.status >= 200 && event.status < 300 && !event.error ? "done" : "failed";
      r.error = event.error || (r.status === "failed" ? `HTTP ${event.status}` : "");
      run.finished += 1;
      r.rank = run.finished;
      break;
    default:
      break;
  }
}

/** Nearest-rank percentile of sorted values. */
function percentile(sorted, p) {
  if (!sorted.length) return null;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

function renderSummary(el) {
  const now = performance.now();
  const rows = PRIORITIES.map((p) => {
    const mine = run.requests.filter((r) => r.tier === p.label);
    const ok = mine.filter((r) => r.status === "done");
    const latency = ok.map((r) => r.doneAt - r.sentAt).sort((a, b) => a - b);
    const ttft = ok.map((r) => r.firstAt - r.sentAt).sort((a, b) => a - b);
    const open = mine.filter((r) => !r.doneAt);
    const oldest = open.length ? Math.max(...open.map((r) => now - r.sentAt)) : null;
    const ranks = mine.filter((r) => r.rank).map((r) => r.rank);
    return h(
      "tr",
      { class: "lt-tier", dataset: { tier: p.label } },
      h("th", { scope: "row" }, h("span", { class: `badge ${TIER_CLASS[p.label]}` }, p.label)),
      h("td", { class: "num" }, String(mine.length)),
      h("td", { class: "num", dataset: { key: "waiting" } }, String(mine.filter((r) => !r.doneAt && !r.firstAt).length)),
      h("td", { class: "num", dataset: { key: "generating" } }, String(mine.filter((r) => r.status === "generating").length)),
      h("td", { class: "num", dataset: { key: "done" } }, String(ok.length)),
      h("td", { class: "num", dataset: { key: "failed" } }, String(mine.filter((r) => r.status === "failed" || r.status === "stopped").length)),
      h("td", { class: "num" }, duration(percentile(ttft, 50))),
      h("td", { class: "num", dataset: { key: "p50" } }, duration(percentile(latency, 50))),
      h("td", { class: "num" }, duration(percentile(latency, 95))),
      h("td", { class: "num" }, duration(latency.length ? latency[latency.length - 1] : null)),
      h("td", { class: "num" }, oldest === null ? "–" : duration(oldest)),
      h("td", { class: "num", dataset: { key: "ranks" } }, ranks.length ? `${Math.min(...ranks)}–${Math.max(...ranks)}` : "–"),
    );
  });
  // Why requests failed, each reason once with its count (a 429 says the model's concurrencyLimit was reached).
  const reasons = new Map();
  for (const r of run.requests) {
    if (r.status === "failed") reasons.set(r.error, (reasons.get(r.error) || 0) + 1);
  }
  const failures = reasons.size
    ? h(
        "ul",
        { class: "lt-failures error", id: "lt-failures" },
        [...reasons].map(([reason, n]) => h("li", {}, `${n} failed: ${reason}`)),
      )
    : null;
  const table = h(
    "table",
    { "aria-label": "Latency by priority" },
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        ["Priority", "Sent", "Waiting", "Generating", "Done", "Failed", "First token p50", "Latency p50", "p95", "Max", "Oldest open", "Finish ranks"].map((label, i) =>
          h("th", { scope: "col", class: i ? "num" : null }, label),
        ),
      ),
    ),
    h("tbody", {}, rows),
  );
  replace(el, failures, labelCells(table));
}

function renderTimeline(el) {
  const requests = run.requests;
  if (!requests.length) {
    replace(el, h("p", { class: "empty" }, "Choose the mix and the models, then Start."));
    return;
  }
  const now = performance.now();
  const end = Math.max(now - run.startedAt, ...requests.map((r) => (r.doneAt || now) - run.startedAt), 1);
  const rowHeight = 14;
  const width = 1000;
  const labelWidth = 70;
  const scale = (ms) => labelWidth + (Math.max(0, ms) / end) * (width - labelWidth - 30);
  const height = requests.length * rowHeight + 4;
  const bars = requests.map((r, i) => {
    const y = i * rowHeight + 2;
    const sent = r.sentAt ? r.sentAt - run.startedAt : 0;
    const first = (r.firstAt || now) - run.startedAt;
    const done = (r.doneAt || now) - run.startedAt;
    const cls = TIER_CLASS[r.tier];
    return svg(
      "g",
      { class: `lt-bar ${cls} ${r.status}` },
      svg("text", { x: 2, y: y + 10, class: "lt-label" }, `${r.tier[0]} ${r.model}`.slice(0, 12)),
      svg("rect", { x: scale(sent), y, width: Math.max(1, scale(first) - scale(sent)), height: rowHeight - 3, class: "lt-wait" }),
      r.firstAt && r.firstAt !== r.doneAt
        ? svg("rect", { x: scale(first), y, width: Math.max(1, scale(done) - scale(first)), height: rowHeight - 3, class: "lt-gen" })
        : null,
      r.rank ? svg("text", { x: scale(done) + 3, y: y + 10, class: "lt-rank" }, String(r.rank)) : null,
      svg("title", {}, `#${r.index} ${r.tier} → ${r.model}: ${r.status}${r.rank ? `, finished ${r.rank}.` : ""} ${r.note || r.error || ""}`),
    );
  });
  replace(
    el,
    svg(
      "svg",
      { viewBox: `0 0 ${width} ${height}`, class: "lt-svg", role: "img", "aria-label": `Timeline of ${requests.length} requests over ${duration(end)}` },
      bars,
    ),
  );
}

function renderDetails(el) {
  const now = performance.now();
  const table = h(
    "table",
    { "aria-label": "Every request" },
    h(
      "thead",
      {},
      h("tr", {}, ["#", "Priority", "Model", "Status", "Waited", "Latency", "Finish rank"].map((l, i) => h("th", { scope: "col", class: i === 0 || i > 3 ? "num" : null }, l))),
    ),
    h(
      "tbody",
      {},
      run.requests.map((r) =>
        h(
          "tr",
          { class: "lt-request", dataset: { tier: r.tier, rank: r.rank || "", status: r.status, model: r.model } },
          h("td", { class: "num" }, String(r.index)),
          h("td", {}, h("span", { class: `badge ${TIER_CLASS[r.tier]}` }, r.tier)),
          h("td", {}, r.model),
          h("td", {}, r.status, r.note ? h("span", { class: "hint" }, ` · ${r.note}`) : null, r.error ? h("span", { class: "error" }, ` · ${r.error}`) : null),
          h("td", { class: "num" }, duration((r.firstAt || now) - r.sentAt)),
          h("td", { class: "num" }, duration((r.doneAt || now) - r.sentAt)),
          h("td", { class: "num" }, r.rank ? String(r.rank) : "–"),
        ),
      ),
    ),
  );
  replace(el, labelCells(table));
}
