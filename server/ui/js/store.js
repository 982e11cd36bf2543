// The page's copy of the server's state, fed by /api/events. Views subscribe
// to the topics they show and re-render (at most once per frame) on change.
//
// Topics: connection, config, profiles, models, queue, inflight, activity,
// logs, version, listing, gpus.

/** Finished requests kept in the page for live views (the history itself is paged from the server). */
export const ACTIVITY_LIMIT = 1000;
/** Log lines kept in the page. */
export const LOG_LIMIT = 5000;

/** llama-swap's default session headers (`ui.activity.session_id`). */
const DEFAULT_SESSION_HEADERS = ["X-Session-ID", "X-Litellm-Session-Id"];

export const state = {
  connection: "connecting",
  config: { version: "", bands: [], activity: { session_id: DEFAULT_SESSION_HEADERS } },
  profiles: { active: null, profiles: [] },
  models: [],
  queue: { total: 0, queue: [], receivedAt: 0 },
  /**
   * The requests holding or waiting for a model, by id. Fed by llama-swap's
   * operations (snapshot, upsert, remove) or by our older whole-list event.
   */
  inflight: { requests: [], total: 0, receivedAt: 0 },
  /** Finished requests seen live, newest last; `activityRevision` counts them. */
  activity: [],
  activityRevision: 0,
  /** {source, model, stream, data, seq}, newest last. */
  logs: [],
  logsDropped: 0,
  /** /api/version: {version, commit, build_date}, when the server has it. */
  version: null,
  /** /v1/models rows by id: capabilities, context length and metadata for the listed models. */
  listing: new Map(),
  /** /running's `gpus` under the memory router: {id, memory, reserve, used, free}; empty otherwise. */
  gpus: [],
};

const listeners = new Map();
const dirty = new Set();
let scheduled = false;

/** Calls `fn` after each change of any of `topics`; returns an unsubscribe function. */
export function subscribe(topics, fn) {
  for (const topic of topics) {
    if (!listeners.has(topic)) listeners.set(topic, new Set());
    listeners.get(topic).add(fn);
  }
  return () => {
    for (const topic of topics) listeners.get(topic)?.delete(fn);
  };
}

/** Marks `topic` changed: its subscribers run on the next frame. */
export function changed(topic) {
  dirty.add(topic);
  if (scheduled) return;
  scheduled = true;
  requestAnimationFrame(flush);
}

function flush() {
  scheduled = false;
  const called = new Set();
  const topics = [...dirty];
  dirty.clear();
  for (const topic of topics) {
    for (const fn of listeners.get(topic) || []) {
      if (called.has(fn)) continue;
      called.add(fn);
      try {
        fn(topics);
      } catch (error) {
        console.error("render failed", error);
      }
    }
  }
}

export function setConnection(value) {
  state.connection = value;
  changed("connection");
}

/** Replaces the /v1/models rows (by id). */
export function setListing(rows) {
  state.listing = new Map((rows || []).map((row) => [row.id, row]));
  changed("listing");
}

/** Keys of `meta.llamaswap` that are the server's own, not the config's `metadata`. */
const INTERNAL_META = new Set(["type", "aliases", "modelID", "peerID", "strategy", "targets", "spillover"]);

/**
 * A model row with what /v1/models adds: `capabilities`, `context_length` and
 * `metadata` (the config's free-form `metadata`). modelStatus's own fields win.
 */
export function modelInfo(model) {
  const row = state.listing.get(model.id);
  const meta = row?.meta?.llamaswap || {};
  const metadata = Object.fromEntries(Object.entries(meta).filter(([key]) => !INTERNAL_META.has(key)));
  return {
    ...model,
    capabilities: model.capabilities || row?.capabilities || {},
    context_length: model.context_length || row?.context_length || row?.meta?.n_ctx || 0,
    metadata,
  };
}

/** Replaces the GPUs (/running's `gpus`). */
export function setGpus(rows) {
  const next = Array.isArray(rows) ? rows : [];
  if (JSON.stringify(next) === JSON.stringify(state.gpus)) return;
  state.gpus = next;
  changed("gpus");
}

export function setVersion(value) {
  state.version = value;
  changed("version");
}

/** Applies one /api/events event. */
export function apply(type, payload) {
  switch (type) {
    case "uiConfig":
      if (payload && typeof payload === "object") {
        state.config = {
          ...state.config,
          ...payload,
          activity: { session_id: payload.activity?.session_id || DEFAULT_SESSION_HEADERS },
        };
        changed("config");
      }
      break;
    case "profileChanged":
      state.profiles = {
        active: payload?.active ?? null,
        // llama-swap's event carries only `active`; ours carries the list too.
        profiles: Array.isArray(payload?.profiles) ? payload.profiles : state.profiles.profiles,
      };
      changed("profiles");
      break;
    case "modelStatus":
      state.models = Array.isArray(payload) ? payload : [];
      changed("models");
      break;
    case "queue":
      state.queue = { ...payload, receivedAt: performance.now() };
      changed("queue");
      break;
    case "inflight":
      applyInflight(payload);
      changed("inflight");
      break;
    case "activity":
      if (payload && typeof payload.id === "number") {
        const last = state.activity[state.activity.length - 1];
        if (last && last.id >= payload.id) {
          // A reconnect sends the history again: keep what is newer than it.
          state.activity = state.activity.filter((row) => row.id < payload.id);
        }
        state.activity.push(payload);
        if (state.activity.length > ACTIVITY_LIMIT) {
          state.activity.splice(0, state.activity.length - ACTIVITY_LIMIT);
        }
        state.activityRevision += 1;
        changed("activity");
      }
      break;
    case "logData":
      if (payload && typeof payload.data === "string") {
        if (payload.seq !== undefined) {
          const last = lastSeq(payload.source);
          if (last !== null && payload.seq <= last) break; // history sent again
        }
        state.logs.push(payload);
        if (state.logs.length > LOG_LIMIT) {
          const drop = state.logs.length - LOG_LIMIT;
          state.logs.splice(0, drop);
          state.logsDropped += drop;
        }
        changed("logs");
      }
      break;
    default:
      // Unknown event types are for newer pages.
      break;
  }
}

/** The key of an in-flight entry: llama-swap's `id`, else our request id. */
function inflightKey(request) {
  return String(request.id ?? request.request_id ?? request.seq ?? "");
}

function applyInflight(payload) {
  const now = performance.now();
  const stamp = (request) => ({ ...request, receivedAt: now });
  let requests = state.inflight.requests;
  switch (payload?.operation) {
    case "snapshot":
      requests = (payload.requests || []).map(stamp);
      break;
    case "upsert":
    case "add":
    case "update": {
      if (!payload.request) break;
      const fresh = stamp(payload.request);
      const key = inflightKey(fresh);
      const index = requests.findIndex((r) => inflightKey(r) === key);
      requests = index < 0 ? [...requests, fresh] : requests.map((r, i) => (i === index ? fresh : r));
      break;
    }
    case "remove": {
      const key = String(payload.id ?? "");
      requests = requests.filter((r) => inflightKey(r) !== key);
      break;
    }
    default:
      // Our older event: the whole list of running requests.
      requests = (payload?.requests || []).map(stamp);
      break;
  }
  state.inflight = {
    requests,
    total: payload?.operation ? requests.length : (payload?.total ?? requests.length),
    receivedAt: now,
  };
}

/**
 * The requests running now. The in-flight list holds waiting requests too
 * (`state: "queued"`, as llama-swap's holds every request from arrival);
 * the Queue view shows those in their rank order from the `queue` event.
 */
export function runningRequests() {
  return state.inflight.requests.filter((r) => (r.state ?? "running") !== "queued");
}

/** The in-flight entry of a queue row (same `seq`), when the server lists waiting requests. */
export function entryOfQueued(row) {
  if (row?.id !== undefined && row?.id !== null) {
    return state.inflight.requests.find((r) => String(r.id) === String(row.id)) || null;
  }
  if (row?.seq === undefined || row?.seq === null) return null;
  return state.inflight.requests.find((r) => r.seq === row.seq && r.id !== undefined) || null;
}

/** The id to cancel an in-flight entry by (POST /api/inflight/{id}/cancel), if it has one. */
export function cancelId(request) {
  return request?.id === undefined || request?.id === null ? null : String(request.id);
}

function lastSeq(source) {
  for (let i = state.logs.length - 1; i >= 0; i--) {
    const line = state.logs[i];
    if (line.seq !== undefined && line.source === source) return line.seq;
  }
  return null;
}

/** The configured local models, without selectors and peer models. */
export function realModels() {
  return state.models.filter((m) => m.kind !== "selector" && m.kind !== "peer" && !m.peerID);
}

/** A model row by id or alias. */
export function findModel(name) {
  return state.models.find((m) => m.id === name) || state.models.find((m) => (m.aliases || []).includes(name));
}

/** The band class of a band name: the lowest band, the highest, or between. */
export function bandClass(name) {
  const bands = state.config.bands || [];
  const index = bands.findIndex((b) => b.name === name);
  if (index < 0 || bands.length < 2) return "band-mid";
  if (index === 0) return "band-low";
  if (index === bands.length - 1) return "band-high";
  return "band-mid";
}

/** The band a priority falls in (bands are sorted by their lower bound). */
export function bandOf(priority) {
  const bands = state.config.bands || [];
  let name = bands[0]?.name || "";
  for (const band of bands) {
    if (priority >= band.from) name = band.name;
  }
  return name;
}

/** A header's value from a header map, whatever its case. */
export function header(headers, name) {
  if (!headers) return "";
  const wanted = name.toLowerCase();
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() === wanted) return Array.isArray(value) ? value.join(", ") : String(value);
  }
  return "";
}

/** The session id of a request's headers, by the configured session headers. */
export function sessionOf(headers) {
  for (const name of state.config.activity?.session_id || DEFAULT_SESSION_HEADERS) {
    const value = header(headers, name);
    if (value) return value;
  }
  return "";
}
