// The capture of one request (GET /api/captures/{id}): its request and
// response headers and bodies, JSON pretty-printed, a streamed answer
// assembled into its text, images shown, and the server's redactions marked
// as such (a redacted header is never shown as if it were the value).

import { getJson } from "../api.js";
import { copyButton } from "./clipboard.js";
import { openDialog } from "./dialog.js";
import { h, replace } from "./dom.js";
import { bytes } from "./format.js";
import { header } from "../store.js";

/** Opens the capture of history row `id`. */
export async function openCapture(id) {
  const body = h("div", { class: "capture" }, h("p", { class: "hint" }, "Reading the capture…"));
  const dialog = openDialog({ title: `Capture of request ${id}`, body, className: "capture-dialog" });
  try {
    const capture = await getJson(`/api/captures/${encodeURIComponent(id)}`);
    replace(body, render(capture));
  } catch (error) {
    replace(
      body,
      h(
        "p",
        { class: error?.status === 404 ? "hint" : "error", role: error?.status === 404 ? null : "alert" },
        error?.status === 404
          ? "No capture is kept for this request: the buffer (captureBuffer) may have dropped it, or capturing is off."
          : `The capture could not be read: ${error.message}`,
      ),
    );
  }
}

/** True for a header value the server replaced (it says so in the value). */
export function isRedacted(value) {
  return /^\s*[[<(]?\s*redacted\b/i.test(String(value)) || /^\*{3,}$/.test(String(value).trim());
}

function render(c) {
  const requestType = header(c.req_headers, "Content-Type");
  const responseType = header(c.resp_headers, "Content-Type");
  return [
    c.req_path ? h("p", { class: "mono capture-path" }, `${c.method || "POST"} ${c.req_path}`) : null,
    section("Request headers", headersTable(c.req_headers)),
    section("Request body", bodyView(c.req_body, requestType, "request")),
    section("Response headers", headersTable(c.resp_headers)),
    section("Response body", bodyView(c.resp_body, responseType, "response")),
  ];
}

function section(title, content) {
  return h("details", { class: "capture-section", open: true }, h("summary", {}, title), content);
}

function headersTable(headers) {
  const entries = Object.entries(headers || {});
  if (!entries.length) return h("p", { class: "hint" }, "(none)");
  return h(
    "table",
    { class: "headers" },
    h(
      "tbody",
      {},
      entries.map(([name, value]) => {
        const text = Array.isArray(value) ? value.join(", ") : String(value);
        const redacted = isRedacted(text);
        return h(
          "tr",
          { class: redacted ? "redacted" : null, dataset: { header: name.toLowerCase() } },
          h("th", { scope: "row", class: "mono" }, name),
          h(
            "td",
            { class: "mono" },
            redacted ? h("span", { class: "badge redacted-badge", title: "The server keeps no copy of this value" }, "redacted") : null,
            redacted ? " " : null,
            text,
          ),
        );
      }),
    ),
  );
}

/** Decodes a base64 body into bytes (llama-swap sends bodies base64-encoded). */
function decode(body) {
  if (!body) return new Uint8Array();
  try {
    const binary = atob(body);
    return Uint8Array.from(binary, (ch) => ch.charCodeAt(0));
  } catch {
    return new TextEncoder().encode(body);
  }
}

function isText(type) {
  return !type || type.startsWith("text/") || /json|xml|javascript|x-www-form-urlencoded|event-stream/.test(type);
}

function bodyView(body, type, which) {
  // null: this route's captures leave the body out (audio, images), as llama-swap's.
  if (body == null) return h("p", { class: "hint" }, "(not captured on this route)");
  const raw = decode(body);
  if (!raw.length) return h("p", { class: "hint" }, "(empty)");
  const lower = (type || "").toLowerCase();
  if (lower.startsWith("image/")) {
    return h("img", { class: "capture-image", src: `data:${lower.split(";")[0]};base64,${body}`, alt: `${which} image` });
  }
  if (!isText(lower)) {
    return h("p", { class: "hint" }, `(binary: ${bytes(raw.length)} of ${type || "unknown type"})`);
  }
  const text = new TextDecoder().decode(raw);
  const views = [];
  if (lower.includes("event-stream")) views.push(["Assembled", assembled(text)]);
  if (lower.includes("json") || (!lower && /^\s*[[{]/.test(text))) views.push(["Pretty", pretty(text)]);
  views.push(["Raw", text]);
  const pre = h("pre", { class: "capture-body", dataset: { body: which }, tabindex: "0" });
  const tabs = h("div", { class: "segmented small", role: "group", "aria-label": `${which} body view` });
  let shown = views[0][0];
  function show(name) {
    shown = name;
    pre.textContent = views.find(([n]) => n === name)[1];
    for (const b of tabs.children) b.setAttribute("aria-pressed", String(b.dataset.view === name));
  }
  for (const [name] of views) {
    tabs.append(h("button", { type: "button", class: "quiet small", dataset: { view: name }, onclick: () => show(name) }, name));
  }
  show(shown);
  return h(
    "div",
    { class: "capture-body-box" },
    h("div", { class: "section-head" }, tabs, copyButton(() => pre.textContent, "Copy", `Copy the ${which} body`)),
    pre,
  );
}

function pretty(text) {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

/** A streamed answer put back together: its reasoning, its text, its tool calls, any error. */
export function assembled(text) {
  let reasoning = "";
  let content = "";
  let error = "";
  const tools = new Map();
  for (const line of text.split(/\r?\n/)) {
    if (!line.startsWith("data:")) continue;
    const data = line.slice(5).trim();
    if (!data || data === "[DONE]") continue;
    let frame;
    try {
      frame = JSON.parse(data);
    } catch {
      continue;
    }
    if (frame.llamaswap) continue;
    if (frame.error) error += `${frame.error.message || JSON.stringify(frame.error)}\n`;
    const choice = frame.choices?.[0];
    const delta = choice?.delta || {};
    if (delta.reasoning_content || delta.reasoning) reasoning += delta.reasoning_content || delta.reasoning;
    if (delta.content) content += delta.content;
    if (typeof choice?.text === "string") content += choice.text;
    // Anthropic's stream.
    if (frame.type === "content_block_delta") {
      if (frame.delta?.text) content += frame.delta.text;
      if (frame.delta?.thinking) reasoning += frame.delta.thinking;
    }
    for (const call of delta.tool_calls || []) {
      const entry = tools.get(call.index) || { name: "", args: "" };
      if (call.function?.name) entry.name += call.function.name;
      if (call.function?.arguments) entry.args += call.function.arguments;
      tools.set(call.index, entry);
    }
  }
  const parts = [];
  if (reasoning) parts.push(`Reasoning:\n${reasoning}`);
  if (content || !parts.length) parts.push(reasoning ? `Answer:\n${content}` : content || "(no text)");
  for (const [index, call] of tools) parts.push(`Tool call ${index}: ${call.name}(${call.args})`);
  if (error) parts.push(`Error: ${error.trim()}`);
  return parts.join("\n\n");
}
