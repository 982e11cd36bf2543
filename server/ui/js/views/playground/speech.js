// Speech: text to /v1/audio/speech in a voice the model lists
// (GET /v1/audio/voices?model=), played in the page and downloadable.

import { getJson } from "../../api.js";
import { field, h, replace } from "../../lib/dom.js";
import { bytes, duration } from "../../lib/format.js";
import { pref, setPref } from "../../prefs.js";
import { modelPicker, priorityPicker, send } from "./common.js";

/** OpenAI's voices: offered when a model lists none. */
const DEFAULT_VOICES = ["alloy", "echo", "fable", "onyx", "nova", "shimmer"];

const last = { url: "", note: "", type: "" };

export function mount(root) {
  const model = modelPicker({ id: "tts-model", key: "speech", capability: "audio_speech" });
  const priority = priorityPicker({ id: "tts-priority", key: "speech" });
  const voice = h("select", { id: "tts-voice" });
  const voiceNote = h("span", { class: "hint", id: "tts-voice-note", "aria-live": "polite" });
  const reload = h("button", { type: "button", class: "quiet small", id: "tts-voices" }, "Reload voices");
  const format = h("select", { id: "tts-format" }, ["mp3", "wav", "opus", "flac"].map((f) => h("option", { value: f }, f)));
  format.value = pref("pg.speech.format", "wav");
  format.addEventListener("change", () => setPref("pg.speech.format", format.value));
  const text = h("textarea", { id: "tts-input", rows: 4, required: true, placeholder: "Text to speak" });
  const go = h("button", { type: "submit", id: "tts-speak" }, "Speak");
  const status = h("p", { class: "hint", "aria-live": "polite" });
  const error = h("p", { class: "error", role: "alert", hidden: true });
  const player = h("div", { class: "player", id: "tts-result" });
  const form = h(
    "form",
    { class: "composer panel" },
    model.el,
    priority.el,
    h("div", { class: "field" }, h("label", { for: voice.id }, "Voice"), h("div", { class: "inline" }, voice, reload), voiceNote),
    field("Format", format),
    h("div", { class: "field prompt" }, h("label", { for: text.id }, "Text"), text),
    h("div", { class: "actions" }, status, go),
  );
  root.append(form, error, player);

  let voicesFor = null;
  async function loadVoices() {
    const name = model.select.value;
    if (!name) return;
    voicesFor = name;
    voiceNote.textContent = "loading voices…";
    let voices = [];
    let note = "";
    try {
      const body = await getJson(`/v1/audio/voices?model=${encodeURIComponent(name)}`);
      voices = voiceIds(body);
      note = voices.length ? `${voices.length} voices from ${name}` : `${name} lists no voices: OpenAI's names offered`;
    } catch (e) {
      note = `voices unavailable (${e.message}): OpenAI's names offered`;
    }
    if (voicesFor !== name) return;
    if (!voices.length) voices = DEFAULT_VOICES;
    const wanted = pref(`pg.speech.voice.${name}`, voices[0]);
    replace(voice, voices.map((v) => h("option", { value: v, selected: v === wanted }, v)));
    voiceNote.textContent = note;
  }

  voice.addEventListener("change", () => setPref(`pg.speech.voice.${model.select.value}`, voice.value));
  model.select.addEventListener("change", loadVoices);
  reload.addEventListener("click", loadVoices);

  function render() {
    replace(
      player,
      last.url
        ? [
            h("audio", { controls: true, src: last.url, id: "tts-audio" }),
            h("a", { href: last.url, download: `speech.${last.type || "audio"}`, class: "button secondary small" }, "Download"),
          ]
        : null,
    );
    status.textContent = last.note;
  }

  let busy = false;
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (busy || !text.value.trim() || !model.select.value) return;
    busy = true;
    go.disabled = true;
    error.hidden = true;
    status.textContent = "speaking…";
    const started = performance.now();
    try {
      const response = await send("/v1/audio/speech", {
        body: { model: model.select.value, input: text.value.trim(), voice: voice.value, response_format: format.value },
        priority: priority.select.value,
      });
      const blob = await response.blob();
      if (last.url) URL.revokeObjectURL(last.url);
      last.url = URL.createObjectURL(blob);
      last.type = (blob.type.split("/")[1] || format.value).replace(/^x-/, "").replace("mpeg", "mp3");
      last.note = `${bytes(blob.size)} of ${blob.type || "audio"} in ${duration(performance.now() - started)}`;
    } catch (e) {
      error.textContent = `Speech failed: ${e.message}`;
      error.hidden = false;
      last.note = "";
    } finally {
      busy = false;
      go.disabled = false;
      render();
    }
  });

  render();
  loadVoices();
  return () => model.destroy();
}

/** Voice ids from the answers servers give: {voices: [..]}, {data: [..]}, or a list; items are names or objects. */
function voiceIds(body) {
  const list = Array.isArray(body) ? body : body?.voices || body?.data || [];
  return list
    .map((v) => (typeof v === "string" ? v : v?.id || v?.voice_id || v?.name || ""))
    .filter(Boolean);
}
