// Images: a prompt to /v1/images/generations; the pictures come back as
// base64 (shown, and downloadable). A picture given only as a URL on another
// host is offered as a link, not loaded by the page.

import { field, h, replace, select } from "../../lib/dom.js";
import { duration } from "../../lib/format.js";
import { pref, setPref } from "../../prefs.js";
import { modelPicker, priorityPicker, send } from "./common.js";

const SIZES = ["256x256", "512x512", "768x768", "1024x1024", "1024x1536", "1536x1024"];

const last = { images: [], note: "" };

export function mount(root) {
  const model = modelPicker({ id: "img-model", key: "images", capability: "image_generation" });
  const priority = priorityPicker({ id: "img-priority", key: "images" });
  const size = select({ id: "img-size" }, SIZES, pref("pg.images.size", "512x512"));
  size.addEventListener("change", () => setPref("pg.images.size", size.value));
  const n = h("input", { type: "number", id: "img-n", min: 1, max: 4, step: 1, value: pref("pg.images.n", 1) });
  n.addEventListener("change", () => setPref("pg.images.n", Number(n.value) || 1));
  const prompt = h("textarea", { id: "img-prompt", rows: 3, placeholder: "A lighthouse at dusk, oil painting", required: true });
  const go = h("button", { type: "submit", id: "img-generate" }, "Generate");
  const stop = h("button", { type: "button", class: "secondary", disabled: true }, "Stop");
  const status = h("p", { class: "hint", "aria-live": "polite" });
  const error = h("p", { class: "error", role: "alert", hidden: true });
  const gallery = h("div", { class: "gallery", id: "img-results" });
  const form = h(
    "form",
    { class: "composer panel" },
    model.el,
    priority.el,
    field("Size", size),
    field("Images", n),
    h("div", { class: "field prompt" }, h("label", { for: prompt.id }, "Prompt"), prompt),
    h("div", { class: "actions" }, status, stop, go),
  );
  root.append(form, error, gallery);

  let controller = null;

  function render() {
    replace(
      gallery,
      last.images.map((image, i) =>
        h(
          "figure",
          { class: "generated panel" },
          image.src
            ? h("img", { src: image.src, alt: `Generated image ${i + 1}: ${image.prompt}` })
            : h("a", { href: image.url, target: "_blank", rel: "noopener noreferrer" }, "Open the image (on another host)"),
          h(
            "figcaption",
            {},
            image.revised || image.prompt,
            image.src ? h("a", { href: image.src, download: `image-${i + 1}.png`, class: "button secondary small" }, "Download") : null,
          ),
        ),
      ),
    );
    status.textContent = last.note;
  }

  stop.addEventListener("click", () => controller?.abort());
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (controller || !prompt.value.trim() || !model.select.value) return;
    controller = new AbortController();
    go.disabled = true;
    stop.disabled = false;
    error.hidden = true;
    last.note = "generating…";
    render();
    const started = performance.now();
    try {
      const response = await send("/v1/images/generations", {
        body: {
          model: model.select.value,
          prompt: prompt.value.trim(),
          n: Math.max(1, Math.min(4, Number(n.value) || 1)),
          size: size.value,
          response_format: "b64_json",
        },
        priority: priority.select.value,
        signal: controller.signal,
      });
      const body = await response.json();
      last.images = (body.data || []).map((item) => ({
        src: item.b64_json ? `data:image/png;base64,${item.b64_json}` : item.url?.startsWith("data:image/") ? item.url : "",
        url: item.url || "",
        prompt: prompt.value.trim(),
        revised: item.revised_prompt || "",
      }));
      last.note = `${last.images.length} image${last.images.length === 1 ? "" : "s"} in ${duration(performance.now() - started)}`;
    } catch (e) {
      last.note = "";
      if (e?.name !== "AbortError") {
        error.textContent = `Generation failed: ${e.message}`;
        error.hidden = false;
      }
    } finally {
      controller = null;
      go.disabled = false;
      stop.disabled = true;
      render();
    }
  });

  render();
  return () => {
    model.destroy();
    controller?.abort();
  };
}
