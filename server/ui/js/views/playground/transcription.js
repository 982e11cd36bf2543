// Transcription: an audio file uploaded to /v1/audio/transcriptions
// (multipart, as OpenAI's API takes it); the text comes back to read and copy.

import { copyButton } from "../../lib/clipboard.js";
import { field, h, replace } from "../../lib/dom.js";
import { bytes, duration } from "../../lib/format.js";
import { modelPicker, priorityPicker, send } from "./common.js";

const last = { text: "", note: "" };

export function mount(root) {
  const model = modelPicker({ id: "stt-model", key: "transcription", capability: "audio_transcriptions" });
  const priority = priorityPicker({ id: "stt-priority", key: "transcription" });
  const file = h("input", { type: "file", id: "stt-file", accept: "audio/*,.mp3,.wav,.ogg,.flac,.m4a,.webm", required: true });
  const language = h("input", { type: "text", id: "stt-language", placeholder: "auto", maxlength: 8, autocomplete: "off" });
  const go = h("button", { type: "submit", id: "stt-go" }, "Transcribe");
  const status = h("p", { class: "hint", "aria-live": "polite" });
  const error = h("p", { class: "error", role: "alert", hidden: true });
  const result = h("div", { class: "transcript panel", id: "stt-result", hidden: true });
  const form = h(
    "form",
    { class: "composer panel" },
    model.el,
    priority.el,
    field("Audio file", file),
    field("Language", language, "ISO code, e.g. en; empty lets the model guess"),
    h("div", { class: "actions" }, status, go),
  );
  root.append(form, error, result);

  function render() {
    result.hidden = !last.text;
    replace(
      result,
      last.text
        ? [h("div", { class: "section-head" }, h("h3", {}, "Transcript"), copyButton(() => last.text, "Copy", "Copy the transcript")), h("p", { class: "transcript-text" }, last.text)]
        : null,
    );
    status.textContent = last.note;
  }

  let busy = false;
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const audio = file.files?.[0];
    if (busy || !audio || !model.select.value) return;
    busy = true;
    go.disabled = true;
    error.hidden = true;
    status.textContent = `uploading ${bytes(audio.size)}…`;
    const body = new FormData();
    body.append("file", audio, audio.name);
    body.append("model", model.select.value);
    if (language.value.trim()) body.append("language", language.value.trim());
    const started = performance.now();
    try {
      const response = await send("/v1/audio/transcriptions", { body, priority: priority.select.value });
      const type = response.headers.get("Content-Type") || "";
      const answer = type.includes("json") ? await response.json() : { text: await response.text() };
      last.text = answer.text ?? JSON.stringify(answer);
      last.note = `${audio.name} transcribed in ${duration(performance.now() - started)}`;
    } catch (e) {
      error.textContent = `Transcription failed: ${e.message}`;
      error.hidden = false;
      last.note = "";
    } finally {
      busy = false;
      go.disabled = false;
      render();
    }
  });

  render();
  return () => model.destroy();
}
