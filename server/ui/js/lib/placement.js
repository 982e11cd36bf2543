// Where a model runs and why it does not: its GPUs and memory (the memory
// router's placement, from modelStatus and /running), the GPUs' used and free
// memory, and a failed model's reason, last output and retry time. Shared by
// the Models list and a model's page.

import { h } from "./dom.js";
import { bytes, clock, duration } from "./format.js";

/** What a model's state means, for the badge's tooltip. */
const STATE_HINTS = {
  ready: "running and answering",
  starting: "its process is starting",
  stopping: "its process is stopping",
  stopped: "not running",
  sleeping: "asleep: its process is kept and its GPU memory given back; a request (or Load) wakes it",
  failed: "failed too often: not started again until its retry time or an explicit Load",
  unknown: "its state lives on its peer",
};

/** The tooltip of a state badge ("" for a state this page does not know). */
export function stateHint(state) {
  return STATE_HINTS[state] || "";
}

/** Sets a state badge: its text is the state as the server names it. */
export function setStateBadge(badge, state) {
  badge.textContent = state;
  badge.className = `badge state-${state}`;
  badge.title = stateHint(state);
}

/** The measured memory of a model row (bytes over all its GPUs), when the server measured it, else null. */
export function measuredMemory(model) {
  const value = model?.memory_measured ?? model?.measured_memory ?? null;
  return typeof value === "number" && value > 0 ? value : null;
}

/** A GPU's memory as a meter: used of its total, the reserve kept free marked as "high". */
function gpuMeter(label, used, total, reserve = 0) {
  return h("meter", {
    class: "gpu-meter",
    min: 0,
    max: total,
    value: Math.min(used, total),
    high: reserve > 0 ? Math.max(0, total - reserve) : null,
    optimum: 0,
    "aria-label": label,
    title: `${bytes(used)} used of ${bytes(total)}`,
  });
}

/**
 * A model's placement: the memory it holds on each of its GPUs (and what was
 * measured, when the server measured it), then each GPU with its used and free
 * memory. Null when the model is placed on no GPU (any router but `memory`, or
 * not running).
 */
export function placement(model) {
  const gpus = Array.isArray(model?.gpus) ? model.gpus : [];
  if (!gpus.length) return null;
  const measured = measuredMemory(model);
  const ids = gpus.map((g) => (typeof g === "object" ? g.id : g));
  return h(
    "div",
    { class: "placement", dataset: { gpus: ids.join(",") } },
    h(
      "p",
      { class: "placement-memory" },
      h("span", { class: "memory-counted", title: "the memory counted for it on each of its GPUs" }, bytes(model.memory || 0)),
      gpus.length > 1 ? ` on each of GPUs ${ids.join(", ")}` : ` on GPU ${ids[0]}`,
      measured !== null
        ? [" · ", h("span", { class: "memory-measured", title: "what its process was measured to use" }, `measured ${bytes(measured)}${gpus.length > 1 ? " in all" : ""}`)]
        : null,
    ),
    gpus
      .filter((g) => typeof g === "object" && typeof g.used === "number")
      .map((g) => {
        const total = g.used + (g.free || 0);
        return h(
          "div",
          { class: "gpu-line", dataset: { gpu: g.id } },
          h("span", { class: "gpu-name" }, `GPU ${g.id}`),
          gpuMeter(`GPU ${g.id} memory`, g.used, total || 1),
          h("span", { class: "gpu-figures" }, `${bytes(g.used)} used · ${bytes(g.free || 0)} free`),
        );
      }),
  );
}

/**
 * Every GPU of the memory router (/running's `gpus`: id, memory, reserve,
 * used, free) with the models placed on it. Null without GPUs.
 */
export function gpuSummary(gpus, models) {
  if (!Array.isArray(gpus) || !gpus.length) return null;
  return gpus.map((g) => {
    const on = models.filter((m) => (m.gpus || []).some((x) => (typeof x === "object" ? x.id : x) === g.id));
    return h(
      "div",
      { class: "gpu-card panel", role: "listitem", dataset: { gpu: g.id }, "aria-label": `GPU ${g.id}` },
      h(
        "div",
        { class: "gpu-head" },
        h("strong", {}, `GPU ${g.id}`),
        h("span", { class: "gpu-figures" }, `${bytes(g.used)} used · ${bytes(g.free)} free of ${bytes(g.memory)}`),
      ),
      gpuMeter(`GPU ${g.id} memory`, g.used, g.memory || 1, g.reserve || 0),
      h(
        "p",
        { class: "gpu-models hint" },
        on.length ? on.map((m) => `${m.id} (${m.state})`).join(", ") : "no model",
        g.reserve ? ` · ${bytes(g.reserve)} kept free` : "",
      ),
    );
  });
}

/**
 * A failed model's reason, how often it failed, when a request may start it
 * again, and its last output. Null unless the row carries `failure`.
 */
export function failureBox(model, now = Date.now()) {
  const f = model?.failure;
  if (model?.state !== "failed" && !f) return null;
  const failure = f && typeof f === "object" ? f : {};
  const retry = Number(failure.retry_at_ms) || 0;
  const parts = [];
  if (failure.failures) {
    parts.push(`${failure.failures} failure${failure.failures === 1 ? "" : "s"}${failure.window_s ? ` within ${duration(failure.window_s * 1000)}` : ""}`);
  }
  if (failure.failed_at_ms) parts.push(`last at ${clock(failure.failed_at_ms)}`);
  const retryText = retry
    ? retry > now
      ? `A new request starts it again from ${clock(retry)}; Load retries it now.`
      : "A new request starts it again; Load retries it now."
    : "Load retries it now.";
  return h(
    "div",
    { class: "failure", role: "group", "aria-label": `Why ${model.id} failed` },
    h("p", { class: "failure-reason error" }, failure.reason || "It failed to start too often."),
    parts.length ? h("p", { class: "failure-count hint" }, parts.join(" · ")) : null,
    h("p", { class: "failure-retry hint" }, retryText),
    failure.last_output
      ? h(
          "details",
          { class: "failure-output" },
          h("summary", {}, "Last output"),
          h("pre", { class: "mono" }, failure.last_output),
        )
      : null,
  );
}
