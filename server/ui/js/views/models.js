// Models: every configured model, selector and peer model with its state,
// live; search, sort and pinning; capability tags and metadata; Load /
// Unload; the active profile; under the memory router each GPU's memory and
// each model's GPUs; a failed model's reason and retry time. Rows are kept by ID and updated in place, and
// buttons are marked aria-disabled rather than disabled, so a button keeps
// its keyboard focus while the state it controls changes.

import { post, putJson } from "../api.js";
import { checkbox, field, h, isOff, replace, select, setOff } from "../lib/dom.js";
import { SORTS, capabilityBadges, matches, modelPath, pinned, setPinned } from "../lib/models.js";
import { failureBox, gpuSummary, placement, setStateBadge } from "../lib/placement.js";
import { onPref, pref, setPref } from "../prefs.js";
import { modelInfo, realModels, state, subscribe } from "../store.js";

const BUSY = new Set(["starting", "stopping"]);

export function mount(root) {
  const search = h("input", {
    type: "search",
    id: "model-search",
    placeholder: "Name, alias, tag…",
    value: pref("modelSearch", ""),
    autocomplete: "off",
  });
  const sort = select({ id: "model-sort" }, SORTS.map(([value, label]) => [value, label]), pref("modelSort", "name"));
  const unlisted = checkbox("Show unlisted", { id: "show-unlisted", checked: pref("showUnlisted", false) });
  const unloadAll = h("button", { type: "button", class: "danger", id: "unload-all" }, "Unload all");
  const profile = h("select", { id: "profile" });
  const profileNote = h("span", { class: "hint", id: "profile-note", "aria-live": "polite" });
  const profileField = h(
    "div",
    { class: "field", hidden: true },
    h("label", { for: "profile" }, "Profile"),
    profile,
    profileNote,
  );
  const message = h("p", { class: "error", role: "alert", hidden: true });
  const count = h("span", { class: "count" });
  const list = h("div", { class: "models", role: "list", "aria-label": "Models" });
  const gpus = h("div", { class: "gpus", id: "gpus", role: "list", "aria-label": "GPUs", hidden: true });
  const empty = h("p", { class: "empty", hidden: true }, "No models are configured.");
  const noMatch = h("p", { class: "empty", hidden: true }, "No model matches the search.");
  root.append(
    h(
      "div",
      { class: "toolbar" },
      h("h1", {}, "Models ", count),
      profileField,
      unloadAll,
    ),
    h(
      "div",
      { class: "toolbar filters" },
      field("Search models", search),
      field("Sort by", sort),
      unlisted.el,
    ),
    message,
    gpus,
    list,
    empty,
    noMatch,
  );

  const rows = new Map();
  let unloadingAll = false;

  function fail(text) {
    message.textContent = text;
    message.hidden = false;
  }

  unloadAll.addEventListener("click", async () => {
    if (isOff(unloadAll)) return;
    unloadingAll = true;
    render();
    message.hidden = true;
    try {
      await post("/api/models/unload");
    } catch (error) {
      fail(`Unload all failed: ${error.message}`);
    } finally {
      unloadingAll = false;
      render();
    }
  });
  search.addEventListener("input", () => {
    setPref("modelSearch", search.value);
    render();
  });
  sort.addEventListener("change", () => {
    setPref("modelSort", sort.value);
    render();
  });
  unlisted.input.addEventListener("change", () => {
    setPref("showUnlisted", unlisted.input.checked);
    render();
  });
  profile.addEventListener("change", async () => {
    message.hidden = true;
    try {
      await putJson("/api/profiles/active", { name: profile.value || null });
    } catch (error) {
      fail(`Switching the profile failed: ${error.message}`);
      renderProfiles();
    }
  });

  function renderProfiles() {
    const { active, profiles } = state.profiles;
    profileField.hidden = profiles.length === 0;
    profileNote.textContent = profiles.find((p) => p.id === active)?.description || "";
    replace(
      profile,
      h("option", { value: "", selected: !active }, "None"),
      profiles.map((p) =>
        h("option", { value: p.id, selected: p.id === active, title: p.description || null }, p.id),
      ),
    );
  }

  function render() {
    const pins = pinned();
    const compare = (SORTS.find(([value]) => value === sort.value) || SORTS[0])[2];
    const visible = state.models
      .map(modelInfo)
      .filter((m) => unlisted.input.checked || !m.unlisted)
      .filter((m) => matches(m, search.value))
      .sort((a, b) => Number(pins.has(b.id)) - Number(pins.has(a.id)) || compare(a, b));
    const models = realModels();
    const running = models.filter((m) => m.state !== "stopped" && m.state !== "failed").length;
    count.textContent = `${running} of ${models.length} running`;
    setOff(unloadAll, unloadingAll || running === 0);
    unloadAll.textContent = unloadingAll ? "Unloading…" : "Unload all";
    empty.hidden = state.models.length > 0;
    noMatch.hidden = state.models.length === 0 || visible.length > 0;
    const seen = new Set();
    let previous = null;
    for (const model of visible) {
      seen.add(model.id);
      let row = rows.get(model.id);
      if (!row) {
        row = createRow(model.id, render);
        rows.set(model.id, row);
      }
      updateRow(row, model, pins.has(model.id));
      // Keep DOM order equal to the list order without moving unchanged rows.
      const next = previous ? previous.nextSibling : list.firstChild;
      if (next !== row.el) list.insertBefore(row.el, next);
      previous = row.el;
    }
    for (const [id, row] of rows) {
      if (!seen.has(id)) {
        row.el.remove();
        rows.delete(id);
      }
    }
  }

  function renderGpus() {
    const cards = gpuSummary(state.gpus, state.models);
    gpus.hidden = !cards;
    replace(gpus, cards);
  }

  const offs = [
    subscribe(["models", "listing"], render),
    subscribe(["models", "gpus"], renderGpus),
    subscribe(["profiles"], renderProfiles),
    onPref("pinnedModels", render),
  ];
  renderProfiles();
  render();
  renderGpus();
  return () => {
    for (const off of offs) off();
  };
}

function createRow(id, rerender) {
  const row = {
    id,
    pending: null,
    name: h("a", { class: "model-name", href: modelPath(id) }),
    idText: h("span", { class: "model-id mono" }),
    badge: h("span", { class: "badge" }),
    pin: h("button", { type: "button", class: "pin quiet", "aria-label": `Pin ${id}`, "aria-pressed": "false" }, "☆"),
    caps: h("div", { class: "model-caps" }),
    desc: h("p", { class: "model-desc" }),
    meta: h("div", { class: "model-meta" }),
    placement: h("div", { class: "model-placement" }),
    failure: h("div", { class: "model-failure" }),
    counts: h("span", { class: "load-counts" }),
    error: h("p", { class: "error", role: "alert", hidden: true }),
    load: h("button", { type: "button", "aria-label": `Load ${id}` }, "Load"),
    unload: h("button", { type: "button", class: "secondary", "aria-label": `Unload ${id}` }, "Unload"),
  };
  row.el = h(
    "article",
    { class: "model panel", role: "listitem", "data-model": id, "aria-label": id },
    h(
      "div",
      { class: "model-head" },
      h("div", { class: "model-title" }, row.name, row.idText),
      h("div", { class: "model-head-end" }, row.badge, row.pin),
    ),
    row.caps,
    row.desc,
    row.failure,
    row.placement,
    row.meta,
    h("div", { class: "model-foot" }, row.counts, row.load, row.unload),
    row.error,
  );
  row.load.addEventListener("click", () => act(row, "load", row.load));
  row.unload.addEventListener("click", () => act(row, "unload", row.unload));
  row.pin.addEventListener("click", () => {
    setPinned(id, row.pin.getAttribute("aria-pressed") !== "true");
    rerender();
  });
  return row;
}

async function act(row, action, button) {
  if (isOff(button)) return;
  row.pending = action;
  row.error.hidden = true;
  refresh(row);
  try {
    await post(`/api/models/${action}/${encodeURIComponent(row.id)}`);
  } catch (error) {
    row.error.textContent = `${action === "load" ? "Load" : "Unload"} failed: ${error.message}`;
    row.error.hidden = false;
  } finally {
    row.pending = null;
    refresh(row);
  }
}

function refresh(row) {
  const model = state.models.find((m) => m.id === row.id);
  if (model) updateRow(row, modelInfo(model), pinned().has(row.id));
}

function updateRow(row, model, isPinned) {
  const selector = model.kind === "selector";
  const peer = model.kind === "peer" || Boolean(model.peerID);
  row.el.dataset.kind = selector ? "selector" : peer ? "peer" : "model";
  row.el.classList.toggle("pinned", isPinned);
  row.name.textContent = model.name || model.id;
  let idLine = model.name ? model.id : "";
  if (model.aliases?.length) idLine += `${idLine ? " · " : ""}aliases: ${model.aliases.join(", ")}`;
  if (selector) idLine += `${idLine ? " · " : ""}selector (${model.strategy}) → ${(model.targets || []).join(", ")}`;
  if (peer) idLine += `${idLine ? " · " : ""}on peer ${model.peerID}`;
  row.idText.textContent = idLine;
  row.desc.textContent = model.description || "";
  row.desc.hidden = !model.description;
  replace(row.caps, capabilityBadges(model));
  row.caps.hidden = !row.caps.firstChild;
  const metadata = Object.entries(model.metadata || {});
  replace(
    row.meta,
    metadata.length
      ? h(
          "details",
          {},
          h("summary", {}, `Metadata (${metadata.length})`),
          h(
            "dl",
            { class: "pairs" },
            metadata.map(([key, value]) => [
              h("dt", {}, key),
              h("dd", {}, typeof value === "string" ? value : JSON.stringify(value)),
            ]),
          ),
        )
      : null,
  );
  row.meta.hidden = !metadata.length;
  setStateBadge(row.badge, model.state);
  const where = placement(model);
  replace(row.placement, where);
  row.placement.hidden = !where;
  const failure = failureBox(model);
  replace(row.failure, failure);
  row.failure.hidden = !failure;
  row.el.dataset.state = model.state;
  row.pin.setAttribute("aria-pressed", isPinned ? "true" : "false");
  row.pin.textContent = isPinned ? "★" : "☆";
  row.pin.setAttribute("aria-label", `${isPinned ? "Unpin" : "Pin"} ${model.id}`);
  row.pin.title = isPinned ? "Pinned to the top: click to unpin" : "Pin to the top of the list";
  const parts = [];
  if (model.in_flight) parts.push(`${model.in_flight} running`);
  if (model.waiting) parts.push(`${model.waiting} waiting`);
  if (model.unlisted) parts.push("unlisted");
  row.counts.textContent = parts.join(" · ");
  // A selector picks a target per request: its targets are loaded and unloaded themselves.
  // A peer model is loaded and unloaded on its peer.
  row.load.hidden = selector || peer;
  row.unload.hidden = selector || peer;
  const busy = BUSY.has(model.state);
  setOff(row.load, row.pending !== null || model.state === "ready" || busy);
  setOff(row.unload, row.pending !== null || model.state === "stopped" || model.state === "failed");
  replace(row.load, row.pending === "load" ? "Loading…" : "Load");
  replace(row.unload, row.pending === "unload" ? "Unloading…" : "Unload");
}
