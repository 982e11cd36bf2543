// What the views say about a model: its page, its capability tags, pinning
// and the orders the Models list can be sorted in.

import { pref, setPref } from "../prefs.js";
import { contextLength } from "./format.js";
import { h } from "./dom.js";

/** The /ui path of a model's page. */
export function modelPath(id) {
  return `/ui/models/${encodeURIComponent(id)}`;
}

/** llama-swap's capability keys and their labels, in the order they are shown. */
export const CAPABILITIES = [
  ["vision", "Vision"],
  ["audio_transcriptions", "Transcription"],
  ["audio_speech", "Speech"],
  ["image_generation", "Image gen"],
  ["image_to_image", "Img→Img"],
  ["function_calling", "Tools"],
  ["reranker", "Reranker"],
];

/** The capability tags of a model row: [{key, label}], its context window last. */
export function capabilityTags(model) {
  const caps = model?.capabilities || {};
  const tags = CAPABILITIES.filter(([key]) => caps[key]).map(([key, label]) => ({ key, label }));
  const context = contextLength(model?.context_length);
  if (context) tags.push({ key: "context", label: `${context} ctx` });
  return tags;
}

/** True when a model says it has a capability (`vision`, `reranker`, ...). */
export function can(model, key) {
  return Boolean(model?.capabilities?.[key]);
}

/** The tags as badges. */
export function capabilityBadges(model) {
  const tags = capabilityTags(model);
  if (!tags.length) return null;
  return h(
    "span",
    { class: "caps", "aria-label": "Capabilities" },
    tags.map((t) => h("span", { class: `cap cap-${t.key}`, dataset: { cap: t.key } }, t.label)),
  );
}

/** The ids the reader pinned to the top of the Models list. */
export function pinned() {
  const ids = pref("pinnedModels", []);
  return new Set(Array.isArray(ids) ? ids : []);
}

/** Pins or unpins a model. */
export function setPinned(id, on) {
  const ids = pinned();
  if (on) ids.add(id);
  else ids.delete(id);
  setPref("pinnedModels", [...ids].sort());
}

const STATE_RANK = { ready: 0, starting: 1, stopping: 2, sleeping: 3, failed: 4, stopped: 5, unknown: 6 };

/** The orders of the Models list: [value, label, compare]. */
export const SORTS = [
  ["name", "Name", (a, b) => label(a).localeCompare(label(b), undefined, { numeric: true })],
  ["id", "ID", (a, b) => a.id.localeCompare(b.id, undefined, { numeric: true })],
  [
    "state",
    "State",
    (a, b) => (STATE_RANK[a.state] ?? 9) - (STATE_RANK[b.state] ?? 9) || label(a).localeCompare(label(b)),
  ],
  [
    "busy",
    "Busiest",
    (a, b) =>
      (b.in_flight || 0) + (b.waiting || 0) - ((a.in_flight || 0) + (a.waiting || 0)) ||
      label(a).localeCompare(label(b)),
  ],
];

function label(model) {
  return model.name || model.id;
}

/** True when `query` (words, any order, any case) matches the model's id, name, aliases, description or tags. */
export function matches(model, query) {
  const words = query.toLowerCase().split(/\s+/).filter(Boolean);
  if (!words.length) return true;
  const haystack = [
    model.id,
    model.name,
    model.description,
    ...(model.aliases || []),
    ...capabilityTags(model).map((t) => t.label),
    model.peerID,
    model.state,
  ]
    .filter(Boolean)
    .join(" ")
    .toLowerCase();
  return words.every((w) => haystack.includes(w));
}
