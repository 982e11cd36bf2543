// The tables of waiting and running requests, shared by the Queue view and a
// model's page: priorities and bands, waits and elapsed times that tick, who
// sent it (its API key's name, address, user agent, session), bytes so far,
// and a Cancel button.

import { post } from "../api.js";
import { h, isOff, setOff } from "./dom.js";
import { bytes, duration, signed, tierName } from "./format.js";
import { modelPath } from "./models.js";
import { dataTable } from "./table.js";
import { toast } from "./toast.js";
import { bandClass, bandOf, cancelId, entryOfQueued, header, sessionOf, state } from "../store.js";

/** Why a request waits, in words for the cell's tooltip. */
function reasonHint(reason) {
  if (reason === "slots full") return "its model is busy: every one of its parallel slots is taken";
  if (reason === "swap") return "a model has to be started or stopped first";
  return "";
}

/** A priority badge: "+10 elevated". */
export function priorityBadge(priority, band = bandOf(priority)) {
  return h(
    "span",
    { class: `badge ${bandClass(band)}`, title: `band ${band}` },
    `${signed(priority)} ${band}`,
  );
}

/**
 * A Cancel button for the request `id` (POST /api/inflight/{id}/cancel): a
 * waiting request leaves the queue, a running one is cut. `what` names it
 * for screen readers.
 */
export function cancelButton(id, what) {
  const button = h(
    "button",
    { type: "button", class: "danger small cancel", "aria-label": `Cancel ${what}`, dataset: { cancel: id } },
    "Cancel",
  );
  button.addEventListener("click", async () => {
    if (isOff(button)) return;
    setOff(button, true);
    button.textContent = "Cancelling…";
    try {
      await post(`/api/inflight/${encodeURIComponent(id)}/cancel`);
      toast(`Cancelled ${what}.`);
    } catch (error) {
      toast(`Cancel failed: ${error.message}`, "error");
      setOff(button, false);
      button.textContent = "Cancel";
    }
  });
  return button;
}

/** The in-flight entry of a queue row (its address, agent, session and cancel id). */
function entryOf(row) {
  return entryOfQueued(row);
}

/** Ticking cells: re-rendered every second by tick(). */
const ticking = new Set();

/** A cell whose text is `fn()`, refreshed by tick(). */
function live(fn) {
  const cell = h("span", { class: "live" }, fn());
  ticking.add({ cell, fn });
  return cell;
}

/** Refreshes every ticking cell still on the page. */
export function tick() {
  for (const item of ticking) {
    if (!item.cell.isConnected) ticking.delete(item);
    else item.cell.textContent = item.fn();
  }
}

function link(model) {
  return h("a", { href: modelPath(model) }, model);
}

/** The waiting table (the queue, in rank order). `withModel` false hides the model column. */
export function waitingTable({ id = "waiting-table", withModel = true } = {}) {
  const columns = [
    { id: "position", label: "Pos.", num: true, hideable: false, cell: (r) => `#${r.position}` },
    withModel ? { id: "model", label: "Model", cell: (r) => link(r.model) } : null,
    { id: "key", label: "Key", cell: (r) => keyCell(r.api_key ?? entryOf(r)?.api_key) },
    {
      id: "effective",
      label: "Effective",
      hideable: false,
      cell: (r) => priorityBadge(r.effective_priority, r.band),
    },
    {
      id: "waited",
      label: "Waited",
      num: true,
      cell: (r) => live(() => duration(r.waited_ms + (performance.now() - (state.queue.receivedAt || performance.now())))),
    },
    { id: "reason", label: "Waiting for", className: "reason", cell: (r) => h("span", { title: reasonHint(r.reason) }, r.reason || "") },
    { id: "aged", label: "Aged", cell: (r) => (r.aged ? h("span", { class: "badge aged" }, "aged") : "") },
    {
      id: "requested",
      label: "Requested",
      num: true,
      cell: (r) => {
        const tier = tierName(r.requested_priority);
        return [signed(r.requested_priority), tier ? h("span", { class: "wide-only" }, ` (${tier})`) : ""];
      },
    },
    { id: "capped", label: "Capped", num: true, cell: (r) => signed(r.capped_priority) },
    { id: "address", label: "Address", hidden: true, cell: (r) => h("span", { class: "mono" }, entryOf(r)?.remote_ip || r.remote_ip || "–") },
    { id: "agent", label: "User agent", hidden: true, cell: (r) => userAgent(entryOf(r) || r) },
    { id: "session", label: "Session", hidden: true, cell: (r) => session(entryOf(r) || r) },
    { id: "seq", label: "Seq", num: true, className: "mono wide-only", cell: (r) => String(r.seq) },
    { id: "cancel", label: "Cancel", hideable: false, bare: true, cell: (r) => cancelCell(r, "waiting") },
  ].filter(Boolean);
  return dataTable({
    id,
    columns,
    label: "Waiting requests",
    empty: "Nobody is waiting.",
    rowAttrs: (r) => ({ class: "queue-row", "data-seq": r.seq, "data-model": r.model, "data-id": cancelId(r) ?? cancelId(entryOf(r)) }),
  });
}

/** The running table (requests holding a model). `withModel` false hides the model column. */
export function runningTable({ id = "running-table", withModel = true } = {}) {
  const columns = [
    { id: "elapsed", label: "Elapsed", num: true, hideable: false, cell: (r) => live(() => duration(elapsed(r))) },
    withModel ? { id: "model", label: "Model", cell: (r) => link(r.model) } : null,
    { id: "key", label: "Key", cell: (r) => keyCell(r.api_key) },
    {
      id: "priority",
      label: "Priority",
      cell: (r) => {
        const p = r.effective_priority ?? r.capped_priority;
        return p === undefined || p === null ? "–" : priorityBadge(p, r.band || bandOf(p));
      },
    },
    { id: "waited", label: "Waited", num: true, cell: (r) => duration(r.queue_ms) },
    {
      id: "request",
      label: "Request",
      cell: (r) => h("span", { class: "mono" }, `${r.method || "POST"} ${r.req_path || r.path || "–"}`),
    },
    { id: "address", label: "Address", cell: (r) => h("span", { class: "mono" }, r.remote_ip || "–") },
    { id: "agent", label: "User agent", cell: userAgent },
    { id: "session", label: "Session", cell: session },
    { id: "bytes", label: "Bytes", num: true, cell: (r) => (r.resp_bytes === undefined ? "–" : bytes(r.resp_bytes)) },
    { id: "request_id", label: "Request id", hidden: true, cell: (r) => h("span", { class: "mono" }, r.request_id || "–") },
    { id: "cancel", label: "Cancel", hideable: false, bare: true, cell: (r) => cancelCell(r, "running") },
  ].filter(Boolean);
  return dataTable({
    id,
    columns,
    label: "Running requests",
    empty: "Nothing is running.",
    rowAttrs: (r) => ({ class: "running-row", "data-model": r.model, "data-seq": r.seq ?? null, "data-id": cancelId(r) }),
  });
}

function cancelCell(row, kind) {
  const id = cancelId(row) ?? (kind === "waiting" ? cancelId(entryOf(row)) : null);
  if (id === null) return h("span", { class: "hint", title: "This server cannot cancel requests" }, "–");
  return cancelButton(id, `${kind} request ${id} to ${row.model}`);
}

/** Who sent it: the API key's name (the server never sends the key itself). */
function keyCell(name) {
  return name ? h("span", { class: "key-name", title: `API key “${name}”` }, name) : "–";
}

function userAgent(r) {
  const agent = header(r.req_headers, "User-Agent");
  return agent ? h("span", { class: "ellipsis", title: agent }, agent) : "–";
}

function session(r) {
  const id = r.session_id || sessionOf(r.req_headers);
  return id ? h("span", { class: "mono ellipsis", title: id }, id) : "–";
}

/** How long a running request has run: llama-swap's elapsed_ms grown since receipt, or since our granted_ms. */
function elapsed(r) {
  if (typeof r.elapsed_ms === "number") return r.elapsed_ms + (performance.now() - (r.receivedAt || performance.now()));
  if (r.granted_ms) return Math.max(0, Date.now() - r.granted_ms);
  return null;
}
