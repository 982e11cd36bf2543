// Playground: a chat that streams its answer, with a model and a priority
// (Elevated / Normal / Low, as the SDK sends them), so the queue can be felt.
// The proxy's own frames (marked with a top-level `llamaswap` object) show
// as progress, not as the model's text.

import { apiFetch, ensureOk, readSse } from "../api.js";
import { duration, h, replace } from "../dom.js";
import { state, subscribe } from "../store.js";

const PRIORITIES = [
  { label: "Elevated", header: "10" },
  { label: "Normal", header: null },
  { label: "Low", header: "-10" },
];

// The conversation outlives a visit to another view.
const conversation = { model: "", priority: "Normal", messages: [] };

export function mount(root) {
  const model = h("select", { id: "pg-model", required: true });
  const priority = h(
    "select",
    { id: "pg-priority" },
    PRIORITIES.map((p) => h("option", { value: p.label, selected: p.label === conversation.priority }, p.label)),
  );
  const prompt = h("textarea", {
    id: "pg-prompt",
    rows: 3,
    placeholder: "Ask something…",
    required: true,
  });
  const send = h("button", { type: "submit", id: "pg-send" }, "Send");
  const stop = h("button", { type: "button", class: "secondary", id: "pg-stop", disabled: true }, "Stop");
  const clear = h("button", { type: "button", class: "quiet", id: "pg-clear" }, "Clear");
  const chat = h("div", { class: "chat", id: "pg-chat", "aria-live": "polite" });
  const form = h(
    "form",
    { class: "composer panel", id: "pg-form" },
    h("div", { class: "field" }, h("label", { for: "pg-model" }, "Model"), model),
    h("div", { class: "field" }, h("label", { for: "pg-priority" }, "Priority"), priority),
    h("div", { class: "field prompt" }, h("label", { for: "pg-prompt" }, "Message"), prompt),
    h(
      "div",
      { class: "actions" },
      h("span", { class: "hint" }, "Ctrl+Enter sends"),
      clear,
      stop,
      send,
    ),
  );
  root.append(h("div", { class: "playground" }, h("h1", {}, "Playground"), chat, form));

  let controller = null;

  function renderModels() {
    const wanted = model.value || conversation.model;
    const names = state.models.filter((m) => !m.unlisted).map((m) => m.id);
    for (const m of state.models) for (const alias of m.aliases || []) names.push(alias);
    replace(
      model,
      names.map((name) => h("option", { value: name, selected: name === wanted }, name)),
    );
    if (!names.length) model.append(h("option", { value: "" }, "No models"));
  }

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
  model.addEventListener("change", () => (conversation.model = model.value));
  priority.addEventListener("change", () => (conversation.priority = priority.value));
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
    if (!text || !model.value || controller) return;
    conversation.messages.push({ role: "user", content: text });
    const answer = {
      role: "assistant",
      content: "",
      reasoning: "",
      model: model.value,
      priority: priority.value,
      progress: "sending…",
      error: "",
      done: false,
    };
    conversation.messages.push(answer);
    prompt.value = "";
    renderChat();
    controller = new AbortController();
    send.disabled = true;
    stop.disabled = false;
    try {
      await stream(answer, controller.signal, () => update(answer));
    } catch (error) {
      if (error?.name !== "AbortError") answer.error = error.message || String(error);
      else answer.error = "stopped";
    } finally {
      answer.done = true;
      controller = null;
      send.disabled = false;
      stop.disabled = true;
      update(answer);
      prompt.focus();
    }
  });

  function update(answer) {
    const index = conversation.messages.indexOf(answer);
    const el = chat.children[index];
    if (el) el.replaceWith(messageEl(answer));
    else renderChat();
  }

  const off = subscribe(["models"], renderModels);
  renderModels();
  renderChat();
  return () => {
    off();
    // Leaving the view stops the answer (the request is withdrawn if it still waits).
    controller?.abort();
  };
}

function messageEl(message) {
  if (message.role === "user") {
    return h(
      "div",
      { class: "message user panel" },
      h("div", { class: "who" }, "You"),
      h("div", { class: "content" }, message.content),
    );
  }
  const thinking = message.reasoning
    ? h("details", {}, h("summary", {}, "Reasoning"), h("pre", {}, message.reasoning))
    : null;
  return h(
    "div",
    { class: "message assistant panel", "data-done": message.done ? "true" : "false" },
    h("div", { class: "who" }, `${message.model} · ${message.priority}`),
    thinking,
    h("div", { class: "content" }, message.content),
    message.progress ? h("div", { class: "progress" }, message.progress) : null,
    message.error ? h("div", { class: "error", role: "alert" }, message.error) : null,
  );
}

/** Sends the conversation and streams the answer into `answer`. */
async function stream(answer, signal, onChange) {
  const tier = PRIORITIES.find((p) => p.label === answer.priority);
  const headers = { "Content-Type": "application/json", Accept: "text/event-stream" };
  if (tier?.header) headers["X-Priority"] = tier.header;
  const messages = conversation.messages
    .filter((m) => m !== answer && !m.error)
    .map((m) => ({ role: m.role, content: m.content }));
  const started = performance.now();
  const response = await apiFetch("/v1/chat/completions", {
    method: "POST",
    headers,
    body: JSON.stringify({
      model: answer.model,
      messages,
      stream: true,
      stream_options: { include_usage: true },
    }),
    signal,
  });
  await ensureOk(response);
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
    if (delta.reasoning_content) answer.reasoning += delta.reasoning_content;
    if (delta.content || delta.reasoning_content) {
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
function describe(status) {
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
