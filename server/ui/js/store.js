// The page's copy of the server's state, fed by /api/events. Views subscribe
// to the parts they show and re-render (at most once per frame) on change.

/** Finished requests kept in the page (the server keeps 1000 by default). */
export const ACTIVITY_LIMIT = 1000;
/** Log lines kept in the page. */
export const LOG_LIMIT = 3000;

export const state = {
  connection: "connecting",
  config: { version: "", bands: [] },
  profiles: { active: null, profiles: [] },
  models: [],
  queue: { total: 0, queue: [], receivedAt: 0 },
  inflight: { total: 0, requests: [], receivedAt: 0 },
  /** Newest last. */
  activity: [],
  /** {source, model, stream, data, seq}, newest last. */
  logs: [],
  logsDropped: 0,
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

function changed(topic) {
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

/** Applies one /api/events event. */
export function apply(type, payload) {
  switch (type) {
    case "uiConfig":
      state.config = payload || state.config;
      changed("config");
      break;
    case "profileChanged":
      state.profiles = { active: payload?.active ?? null, profiles: payload?.profiles || [] };
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
      state.inflight = { ...payload, receivedAt: performance.now() };
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
        changed("activity");
      }
      break;
    case "logData":
      if (payload && typeof payload.data === "string") {
        if (payload.seq !== undefined) {
          const last = lastSeq();
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

function lastSeq() {
  for (let i = state.logs.length - 1; i >= 0; i--) {
    if (state.logs[i].seq !== undefined) return state.logs[i].seq;
  }
  return null;
}

/** The configured local models, without selectors and peer models. */
export function realModels() {
  return state.models.filter((m) => m.kind !== "selector" && m.kind !== "peer");
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
