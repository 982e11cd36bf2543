// Talking to the server: the API key, authorised requests, and Server-Sent
// Events read from a fetch() body (EventSource cannot send the key header).

const KEY_STORAGE = "llamaswap.apiKey";

/** Raised when the server wants a (different) API key. */
export class AuthError extends Error {
  constructor() {
    super("API key required");
    this.name = "AuthError";
  }
}

/** Raised for an error envelope or an unexpected status. */
export class HttpError extends Error {
  constructor(status, message, code) {
    super(message || `HTTP ${status}`);
    this.name = "HttpError";
    this.status = status;
    this.code = code;
  }
}

export function storedKey() {
  try {
    return localStorage.getItem(KEY_STORAGE) || "";
  } catch {
    return "";
  }
}

export function storeKey(key) {
  try {
    if (key) localStorage.setItem(KEY_STORAGE, key);
    else localStorage.removeItem(KEY_STORAGE);
  } catch {
    // Private mode without storage: the key lives until the page closes.
  }
  memoryKey = key;
}

let memoryKey = storedKey();

/** Headers with the key, when there is one. */
export function authHeaders(extra = {}) {
  const headers = { ...extra };
  if (memoryKey) headers.Authorization = `Bearer ${memoryKey}`;
  return headers;
}

/**
 * fetch() with the key. `credentials: "omit"` keeps the browser from opening
 * its own Basic-auth prompt on a 401: the page asks for the key itself.
 */
export async function apiFetch(path, options = {}) {
  const response = await fetch(path, {
    ...options,
    headers: authHeaders(options.headers || {}),
    credentials: "omit",
    cache: "no-store",
  });
  if (response.status === 401) throw new AuthError();
  return response;
}

/** Throws an HttpError carrying the envelope's message (or the body's text) for a non-2xx answer. */
export async function ensureOk(response) {
  if (response.ok) return response;
  let message = "";
  let code;
  let text = "";
  try {
    text = await response.text();
    const body = JSON.parse(text);
    message = body?.error?.message || (typeof body?.error === "string" ? body.error : "") || body?.message || "";
    code = body?.error?.code;
  } catch {
    // Not JSON: a short text body says it best, else the status does.
    if (text && text.length < 300 && !text.trimStart().startsWith("<")) message = text.trim();
  }
  throw new HttpError(response.status, message || `${response.status} ${response.statusText}`, code);
}

/** GETs JSON; throws an HttpError (or AuthError) unless the answer is 2xx. */
export async function getJson(path, options = {}) {
  const response = await apiFetch(path, options);
  await ensureOk(response);
  return response.json();
}

/**
 * The session id of this page's playground requests, sent as `X-Session-ID`
 * (llama-swap's playground does the same), so the history groups them.
 */
export const SESSION_ID = `lspg-${Array.from(crypto.getRandomValues(new Uint8Array(5)), (b) => "abcdefghijklmnopqrstuvwxyz0123456789"[b % 36]).join("")}`;

/** The headers of a playground request: its session and, unless Normal, its priority. */
export function playgroundHeaders(priorityHeader, extra = {}) {
  const headers = { "X-Session-ID": SESSION_ID, ...extra };
  if (priorityHeader !== null && priorityHeader !== undefined) headers["X-Priority"] = String(priorityHeader);
  return headers;
}

/** POSTs and throws unless the answer is 2xx. */
export async function post(path, { headers = {}, body } = {}) {
  const response = await apiFetch(path, { method: "POST", headers, body });
  return ensureOk(response);
}

/** PUTs `value` as JSON and throws unless the answer is 2xx. */
export async function putJson(path, value) {
  const response = await apiFetch(path, {
    method: "PUT",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(value),
  });
  return ensureOk(response);
}

/**
 * The events of an SSE body, as {event, data} objects, until it ends.
 * Handles LF and CRLF, comments, multi-line data and chunks split anywhere.
 */
export async function* readSse(response, signal) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  const abort = () => reader.cancel().catch(() => {});
  signal?.addEventListener("abort", abort, { once: true });
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let boundary;
      while ((boundary = findBoundary(buffer)) !== null) {
        const block = buffer.slice(0, boundary.start);
        buffer = buffer.slice(boundary.end);
        const event = parseBlock(block);
        if (event) yield event;
      }
    }
    const last = parseBlock(buffer);
    if (last) yield last;
  } finally {
    signal?.removeEventListener("abort", abort);
    reader.releaseLock?.();
  }
}

function findBoundary(text) {
  const match = /\r?\n\r?\n|\r\r/.exec(text);
  return match ? { start: match.index, end: match.index + match[0].length } : null;
}

function parseBlock(block) {
  if (!block.trim()) return null;
  let event = "message";
  const data = [];
  for (const line of block.split(/\r?\n|\r/)) {
    if (line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") event = value;
    else if (field === "data") data.push(value);
  }
  if (data.length === 0) return null;
  return { event, data: data.join("\n") };
}

/**
 * Follows /api/events, reconnecting with a growing pause. Calls
 * `onEvent(type, payload)` for each event and `onState(state)` with
 * "connecting", "live", "down" or "auth". Returns a function that stops.
 */
export function followEvents(onEvent, onState) {
  let controller = null;
  let stopped = false;
  let retry = 500;
  let timer = null;
  let generation = 0;

  async function run() {
    if (stopped) return;
    const mine = ++generation;
    controller = new AbortController();
    onState("connecting");
    try {
      const response = await apiFetch("/api/events", {
        signal: controller.signal,
        headers: { Accept: "text/event-stream" },
      });
      await ensureOk(response);
      onState("live");
      retry = 500;
      for await (const { data } of readSse(response, controller.signal)) {
        let envelope;
        try {
          envelope = JSON.parse(data);
        } catch {
          continue;
        }
        let payload = envelope.data;
        if (typeof payload === "string") {
          try {
            payload = JSON.parse(payload);
          } catch {
            // Leave it as text.
          }
        }
        onEvent(envelope.type, payload);
      }
      if (stopped || mine !== generation) return;
      onState("down");
    } catch (error) {
      if (stopped || mine !== generation || error?.name === "AbortError") return;
      if (error instanceof AuthError) {
        onState("auth");
        return; // restarted by restart() once a key is entered
      }
      onState("down");
    }
    if (!stopped && mine === generation) {
      timer = setTimeout(run, retry);
      retry = Math.min(retry * 2, 8000);
    }
  }

  run();
  return {
    stop() {
      stopped = true;
      clearTimeout(timer);
      controller?.abort();
    },
    restart() {
      clearTimeout(timer);
      controller?.abort();
      retry = 500;
      run();
    },
  };
}
