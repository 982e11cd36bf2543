// One finished request (a history row of /api/metrics/activity: llama-swap's
// fields and ours), read the same way everywhere: the tables, the export,
// the histograms. Older event rows (the live `activity` event before the
// history store) use other names; each reader accepts both.

import { absolute, count, duration, signed, speed, toMs } from "./format.js";

/** Epoch milliseconds of the row. */
export const time = (r) => toMs(r.timestamp ?? r.time_ms);
export const path = (r) => r.req_path ?? r.path ?? "";
export const status = (r) => r.resp_status_code ?? r.status ?? 0;
export const errorText = (r) => r.error_msg ?? r.error ?? "";
export const contentType = (r) => r.resp_content_type ?? "";
export const tokens = (r) => r.tokens || {};
export const cached = (r) => tokens(r).cache_tokens ?? null;
export const prompt = (r) => tokens(r).input_tokens ?? r.prompt_tokens ?? null;
export const generated = (r) => tokens(r).output_tokens ?? r.completion_tokens ?? null;
export const drafted = (r) => tokens(r).draft_tokens ?? null;
export const accepted = (r) => tokens(r).draft_acc_tokens ?? null;
export const prefill = (r) => tokens(r).prompt_per_second ?? r.prompt_per_second ?? null;
export const decode = (r) => tokens(r).tokens_per_second ?? r.tokens_per_second ?? null;
export const priority = (r) => r.priority || {};
export const requested = (r) => priority(r).requested ?? r.requested_priority ?? null;
export const capped = (r) => priority(r).capped ?? r.capped_priority ?? null;
export const effective = (r) => priority(r).effective ?? r.effective_priority ?? capped(r);
export const queueWait = (r) => r.queue_ms ?? r.queue_wait_ms ?? priority(r).queue_ms ?? null;
export const keyName = (r) => r.key_name ?? r.api_key ?? r.key ?? "";
export const session = (r) => r.session_id ?? "";
export const requestId = (r) => r.request_id ?? "";
export const ok = (r) => {
  const s = status(r);
  return s >= 200 && s < 400 && !errorText(r);
};

/** "62.5% (5/8)" for drafted and accepted tokens, "–" without a draft model. */
export function draftText(r) {
  const d = drafted(r);
  const a = accepted(r) ?? 0;
  return d > 0 ? `${((a * 100) / d).toFixed(1)}% (${a}/${d})` : "–";
}

/** The requested → effective priority text: "+10", or "0 → +5" when the floor raised it. */
export function priorityText(r) {
  const e = effective(r);
  const q = requested(r);
  if (e === null || e === undefined) return "–";
  return q !== null && q !== undefined && q !== e ? `${signed(q)} → ${signed(e)}` : signed(e);
}

/** A cell's plain text per column id (the export writes these). */
export function cellText(r, column) {
  switch (column) {
    case "id":
      return String(r.id);
    case "time":
      return absolute(time(r));
    case "model":
      return r.model || "";
    case "path":
      return path(r) || "–";
    case "priority":
      return priorityText(r);
    case "status":
      return errorText(r) ? `${status(r)} ${errorText(r)}` : String(status(r) || "–");
    case "content_type":
      return contentType(r) || "–";
    case "queue":
      return duration(queueWait(r));
    case "duration":
      return duration(r.duration_ms);
    case "cached":
      return cached(r) > 0 ? count(cached(r)) : "–";
    case "prompt":
      return count(prompt(r));
    case "generated":
      return count(generated(r));
    case "drafted":
      return draftText(r);
    case "prefill":
      return speed(prefill(r));
    case "decode":
      return speed(decode(r));
    case "key":
      return keyName(r) || "–";
    case "session":
      return session(r) || "–";
    case "request_id":
      return requestId(r) || "–";
    case "capture":
      return r.has_capture ? "yes" : "–";
    default:
      return "";
  }
}

/**
 * A row of our older live `activity` event in the history's shape, so the
 * live views and the history views read the same rows.
 */
export function fromLiveEvent(e) {
  return {
    ...e,
    timestamp: e.timestamp ?? (e.time_ms ? new Date(e.time_ms).toISOString() : ""),
    req_path: path(e),
    resp_status_code: status(e),
    error_msg: errorText(e),
    tokens: e.tokens || {
      input_tokens: e.prompt_tokens ?? 0,
      output_tokens: e.completion_tokens ?? 0,
      tokens_per_second: e.tokens_per_second ?? -1,
    },
    has_capture: Boolean(e.has_capture),
  };
}
