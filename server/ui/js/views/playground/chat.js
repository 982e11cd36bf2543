// Chat: stream an answer from /v1/chat/completions at the chosen priority,
// with a system prompt, temperature, image attachments (for vision models),
// the model's reasoning shown apart, and the answer rendered as markdown
// with copyable code blocks. The proxy's own frames (a top-level `llamaswap`
// object) show as progress, not as the model's text.

import { readSse } from "../../api.js";
import { copyButton } from "../../lib/clipboard.js";
import { field, h, replace } from "../../lib/dom.js";
import { bytes, duration } from "../../lib/format.js";
import { renderMarkdown } from "../../lib/markdown.js";
import { pref, setPref } from "../../prefs.js";
import { modelPicker, priorityPicker, send } from "./common.js";

/** Largest image attached (the request body limit is 32 MiB by default). */
const MAX_IMAGE = 8 * 1024 * 1024;

// The conversation outlives a visit to another tab or view.
const conversation = { messages: [] };

export function mount(root) {
  const model = modelPicker({ id: "pg-model", key: "chat", capability: "vision" });
  const priority = priorityPicker({ id: "pg-priority", key: "chat" });
  const system = h("textarea", { id: "pg-system", rows: 2, placeholder: "You are a helpful assistant." });
  system.value = pref("pg.chat.system", "");
  system.addEventListener("change", () => setPref("pg.chat.system", system.value));
  const temperature = h("input", { type: "number", id: "pg-temperature", min: 0, max: 2, step: 0.1, placeholder: "default" });
  temperature.value = pref("pg.chat.temperature", "");
  temperature.addEventListener("change", () => setPref("pg.chat.temperature", temperature.value));
  const maxTokens = h("input", { type: "number", id: "pg-max-tokens", min: 1, step: 1, placeholder: "default" });
  maxTokens.value = pref("pg.chat.maxTokens", "");
  maxTokens.addEventListener("change", () => setPref("pg.chat.maxTokens", maxTokens.value));
  const prompt = h("textarea", { id: "pg-prompt", rows: 3, placeholder: "Ask something…", required: true });
  const files = h("input", { type: "file", id: "pg-images", accept: "image/*", multiple: true, class: "offscreen", tabindex: "-1", "aria-label": "Images to attach" });
  const attach = h("button", { type: "button", class: "secondary", id: "pg-attach" }, "Attach image");
  const attachments = h("div", { class: "attachments", id: "pg-attachments", "aria-live": "polite" });
  const send_ = h("button", { type: "submit", id: "pg-send" }, "Send");
  const stop = h("button", { type: "button", class: "secondary", id: "pg-stop", disabled: true }, "Stop");
  const clear = h("button", { type: "button", class: "quiet", id: "pg-clear" }, "Clear");
  const chat = h("div", { class: "chat", id: "pg-chat", "aria-live": "polite" });
  const options = h(
    "details",
    { class: "chat-options", open: Boolean(system.value || temperature.value || maxTokens.value) },
    h("summary", {}, "System prompt and sampling"),
    h(
      "div",
      { class: "controls" },
      h("div", { class: "field wide" }, h("label", { for: system.id }, "System prompt"), system),
      field("Temperature", temperature),
      field("Max tokens", maxTokens),
    ),
  );
  const form = h(
    "form",
    { class: "composer panel", id: "pg-form" },
    model.el,
    priority.el,
    h("div", { class: "field prompt" }, h("label", { for: "pg-prompt" }, "Message"), prompt),
    attachments,
    h(
      "div",
      { class: "actions" },
      h("span", { class: "hint" }, "Ctrl+Enter sends"),
      files,
      attach,
      clear,
      stop,
      send_,
    ),
  );
  root.append(options, chat, form);

  /** Images waiting to go with the next message: {name, size, url}. */
  let pending = [];
  let controller = null;

  function renderAttachments() {
    replace(
      attachments,
      pending.map((image, index) =>
        h(
          "figure",
          { class: "attachment" },
          h("img", { src: image.url, alt: image.name }),
          h("figcaption", {}, `${image.name} (${bytes(image.size)})`),
          h(
            "button",
            {
              type: "button",
              class: "quiet small",
              "aria-label": `Remove ${image.name}`,
              onclick: () => {
                pending.splice(index, 1);
                renderAttachments();
              },
            },
            "Remove",
          ),
        ),
      ),
    );
  }

  attach.addEventListener("click", () => files.click());
  files.addEventListener("change", async () => {
    for (const file of files.files) {
      if (!file.type.startsWith("image/")) continue;
      if (file.size > MAX_IMAGE) {
        pending.push({ name: file.name, size: file.size, url: "", error: "too large" });
        continue;
      }
      pending.push({ name: file.name, size: file.size, url: await dataUrl(file) });
    }
    pending = pending.filter((p) => p.url);
    files.value = "";
    renderAttachments();
  });

  function renderChat() {
    replace(
      chat,
      conversation.messages.length
        ? conversation.messages.map(messageEl)
        : h("p", { class: "empty" }, "Pick a model and a priority, then send a message."),
    );
  }

  prompt.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      form.requestSubmit();
    }
  });
  clear.addEventListener("click", () => {
    controller?.abort();
    conversation.messages = [];
    renderChat();
    prompt.focus();
  });
  stop.addEventListener("click", () => controller?.abort());

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const text = prompt.value.trim();
    if ((!text && !pending.length) || !model.select.value || controller) return;
    conversation.messages.push({ role: "user", content: text, images: pending.map((p) => p.url) });
    const answer = {
      role: "assistant",
      content: "",
      reasoning: "",
      model: model.select.value,
      priority: priority.select.value,
      progress: "sending…",
      error: "",
      done: false,
    };
    conversation.messages.push(answer);
    prompt.value = "";
    pending = [];
    renderAttachments();
    renderChat();
    controller = new AbortController();
    send_.disabled = true;
    stop.disabled = false;
    const settings = {
      system: system.value.trim(),
      temperature: temperature.value === "" ? null : Number(temperature.value),
      maxTokens: maxTokens.value === "" ? null : Number(maxTokens.value),
    };
    try {
      await stream(answer, settings, controller.signal, () => update(answer));
    } catch (error) {
      if (error?.name !== "AbortError") answer.error = error.message || String(error);
      else answer.error = "stopped";
    } finally {
      answer.done = true;
      controller = null;
      send_.disabled = false;
      stop.disabled = true;
      update(answer);
      prompt.focus();
    }
  });

  // Re-rendering markdown on every token would be wasteful: once per frame.
  let frame = null;
  function update(answer) {
    if (frame !== null && !answer.done) return;
    if (frame !== null) cancelAnimationFrame(frame);
    frame = requestAnimationFrame(() => {
      frame = null;
      const index = conversation.messages.indexOf(answer);
      const el = chat.children[index];
      if (el) el.replaceWith(messageEl(answer));
      else renderChat();
    });
  }

  renderChat();
  return () => {
    model.destroy();
    controller?.abort();
  };
}

function messageEl(message) {
  if (message.role === "user") {
    return h(
      "div",
      { class: "message user panel" },
      h("div", { class: "who" }, "You"),
      message.images?.length
        ? h("div", { class: "message-images" }, message.images.map((src) => h("img", { src, alt: "attached image" })))
        : null,
      h("div", { class: "content" }, message.content),
    );
  }
  const thinking = message.reasoning
    ? h("details", { class: "reasoning", open: !message.content && !message.done }, h("summary", {}, "Reasoning"), h("pre", {}, message.reasoning))
    : null;
  const content = h("div", { class: "content markdown" });
  if (message.content) content.append(renderMarkdown(message.content));
  return h(
    "div",
    { class: "message assistant panel", "data-done": message.done ? "true" : "false" },
    h(
      "div",
      { class: "who" },
      `${message.model} · ${message.priority}`,
      message.done && message.content ? copyButton(() => message.content, "Copy", "Copy the answer") : null,
    ),
    thinking,
    content,
    message.progress ? h("div", { class: "progress" }, message.progress) : null,
    message.error ? h("div", { class: "error", role: "alert" }, message.error) : null,
  );
}

/** The conversation as the API wants it: the system prompt first, images as content parts. */
function apiMessages(answer, system) {
  const out = system ? [{ role: "system", content: system }] : [];
  for (const m of conversation.messages) {
    if (m === answer || m.error) continue;
    if (m.role === "user" && m.images?.length) {
      out.push({
        role: "user",
        content: [
          ...(m.content ? [{ type: "text", text: m.content }] : []),
          ...m.images.map((url) => ({ type: "image_url", image_url: { url } })),
        ],
      });
    } else {
      out.push({ role: m.role, content: m.content });
    }
  }
  return out;
}

/** Sends the conversation and streams the answer into `answer`. */
async function stream(answer, settings, signal, onChange) {
  const body = {
    model: answer.model,
    messages: apiMessages(answer, settings.system),
    stream: true,
    stream_options: { include_usage: true },
  };
  if (settings.temperature !== null && !Number.isNaN(settings.temperature)) body.temperature = settings.temperature;
  if (settings.maxTokens > 0) body.max_tokens = settings.maxTokens;
  const started = performance.now();
  const response = await send("/v1/chat/completions", {
    body,
    priority: answer.priority,
    signal,
    accept: "text/event-stream",
  });
  answer.progress = "waiting for the model…";
  onChange();
  let first = null;
  let usage = null;
  for await (const { data } of readSse(response, signal)) {
    if (data === "[DONE]") break;
    let frame;
    try {
      frame = JSON.parse(data);
    } catch {
      continue;
    }
    if (frame.error) {
      throw new Error(frame.error.message || "the stream failed");
    }
    if (frame.llamaswap) {
      answer.progress = describe(frame.llamaswap);
      onChange();
      continue;
    }
    if (frame.usage) usage = frame.usage;
    const delta = frame.choices?.[0]?.delta || {};
    if (delta.content) {
      first ??= performance.now();
      answer.content += delta.content;
    }
    const reasoning = delta.reasoning_content || delta.reasoning;
    if (reasoning) answer.reasoning += reasoning;
    if (delta.content || reasoning) {
      answer.progress = "streaming…";
      onChange();
    }
  }
  const total = performance.now() - started;
  const parts = [`done in ${duration(total)}`];
  if (first !== null) parts.push(`first token after ${duration(first - started)}`);
  if (usage?.completion_tokens) parts.push(`${usage.completion_tokens} tokens`);
  answer.progress = parts.join(" · ");
}

/** The text of a proxy status frame (contract: waiting, queued, loading, ready). */
export function describe(status) {
  switch (status.status) {
    case "waiting":
      return "waiting…";
    case "queued":
      return `queued, position #${status.position}`;
    case "loading":
      return `loading ${status.model || "the model"}…`;
    case "ready":
      return status.waited_ms !== undefined ? `ready after ${duration(status.waited_ms)}` : "ready";
    default:
      return status.status ? String(status.status) : "";
  }
}

function dataUrl(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
}
