// Settings: the theme (light, dark or the system's) and accent colour, the
// page title, and what this server is (version, commit, build date).

import { storeKey, storedKey } from "../api.js";
import { field, h, replace, select } from "../lib/dom.js";
import { ACCENTS, DEFAULT_TITLE, THEMES, appTitle, pref, setPref } from "../prefs.js";
import { state, subscribe } from "../store.js";

/** "low below 0, normal 0, elevated 1 and above": the bands by their priorities. */
function bandRanges(bands) {
  return bands
    .map((band, i) => {
      const next = bands[i + 1];
      if (!next) return i === 0 ? band.name : `${band.name} ${band.from} and above`;
      if (i === 0) return `${band.name} below ${next.from}`;
      return next.from - 1 === band.from ? `${band.name} ${band.from}` : `${band.name} ${band.from} to ${next.from - 1}`;
    })
    .join(", ");
}

export function mount(root) {
  const theme = h(
    "div",
    { class: "segmented", role: "radiogroup", "aria-labelledby": "theme-label" },
    THEMES.map(([value, label]) => {
      const id = `theme-${value}`;
      const input = h("input", { type: "radio", name: "theme", id, value, checked: pref("theme", "system") === value });
      input.addEventListener("change", () => setPref("theme", value));
      return h("label", { for: id, class: "segment" }, input, label);
    }),
  );
  const accent = select({ id: "accent" }, ACCENTS, pref("accent", "blue"));
  accent.addEventListener("change", () => setPref("accent", accent.value));
  const title = h("input", { type: "text", id: "page-title", maxlength: 64, value: appTitle(), autocomplete: "off" });
  title.addEventListener("change", () => {
    const value = title.value.replace(/\s+/g, " ").trim();
    setPref("title", value && value !== DEFAULT_TITLE ? value : undefined);
    title.value = appTitle();
  });
  const resetTitle = h("button", { type: "button", class: "quiet small" }, "Reset title");
  resetTitle.addEventListener("click", () => {
    setPref("title", undefined);
    title.value = appTitle();
  });

  const build = h("dl", { class: "pairs", id: "build-info" });
  const key = h("p", { id: "key-state" });
  const forget = h("button", { type: "button", class: "secondary small" }, "Forget the API key");
  forget.addEventListener("click", () => {
    storeKey("");
    renderKey();
  });

  root.append(
    h("h1", {}, "Settings"),
    h(
      "div",
      { class: "settings" },
      h(
        "section",
        { class: "panel card", "aria-labelledby": "appearance-title" },
        h("h2", { id: "appearance-title" }, "Appearance"),
        h("div", { class: "field" }, h("span", { id: "theme-label", class: "label" }, "Theme"), theme),
        field("Accent colour", accent),
        h("div", { class: "field-row" }, field("Page title", title, "Shown in the header and the browser tab."), resetTitle),
      ),
      h(
        "section",
        { class: "panel card", "aria-labelledby": "build-title" },
        h("h2", { id: "build-title" }, "Server"),
        build,
      ),
      h(
        "section",
        { class: "panel card", "aria-labelledby": "key-title-s" },
        h("h2", { id: "key-title-s" }, "API key"),
        key,
        forget,
      ),
    ),
  );

  function renderBuild() {
    const v = state.version || {};
    const rows = [
      ["Version", v.version || state.config.version || "unknown"],
      ["Commit", v.commit ? v.commit.slice(0, 12) : "unknown"],
      ["Build date", v.build_date || "unknown"],
      ["Event stream", state.connection],
      ["Priority bands", bandRanges(state.config.bands || []) || "–"],
    ];
    replace(
      build,
      rows.map(([label, value]) => [h("dt", {}, label), h("dd", { dataset: { key: label.toLowerCase().replace(/ /g, "-") } }, value)]),
    );
  }

  function renderKey() {
    const has = Boolean(storedKey());
    key.textContent = has
      ? "An API key is kept in this browser and sent with every request."
      : "No API key is kept in this browser.";
    forget.hidden = !has;
  }

  const off = subscribe(["version", "config", "connection"], renderBuild);
  renderBuild();
  renderKey();
  return off;
}
