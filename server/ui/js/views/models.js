// Models: every configured model (and selector) with its state, live, and
// Load / Unload; the active profile when the config has profiles. Rows are
// kept by ID and updated in place, and buttons are marked aria-disabled
// rather than disabled, so a button keeps its keyboard focus while the state
// it controls changes.

import { post, putJson } from "../api.js";
import { h, replace } from "../dom.js";
import { realModels, state, subscribe } from "../store.js";

const BUSY = new Set(["starting", "stopping"]);

export function mount(root) {
  const showUnlisted = h("input", { type: "checkbox", id: "show-unlisted" });
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
  const list = h("div", { class: "models", role: "list" });
  const empty = h("p", { class: "empty", hidden: true }, "No models are configured.");
  root.append(
    h(
      "div",
      { class: "toolbar" },
      h("h1", {}, "Models ", count),
      profileField,
      h("label", { class: "check", for: "show-unlisted" }, showUnlisted, "Show unlisted"),
      unloadAll,
    ),
    message,
    list,
    empty,
  );

  const rows = new Map();
  let unloadingAll = false;

  function fail(text) {
    message.textContent = text;
    message.hidden = false;
  }

  unloadAll.addEventListener("click", async () => {
    if (unloadAll.getAttribute("aria-disabled") === "true") return;
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
  showUnlisted.addEventListener("change", render);
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
    const visible = state.models.filter((m) => showUnlisted.checked || !m.unlisted);
    const models = realModels();
    const running = models.filter((m) => m.state !== "stopped").length;
    count.textContent = `${running} of ${models.length} running`;
    setDisabled(unloadAll, unloadingAll || running === 0);
    unloadAll.textContent = unloadingAll ? "Unloading…" : "Unload all";
    empty.hidden = state.models.length > 0;
    const seen = new Set();
    let previous = null;
    for (const model of visible) {
      seen.add(model.id);
      let row = rows.get(model.id);
      if (!row) {
        row = createRow(model.id);
        rows.set(model.id, row);
      }
      updateRow(row, model);
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

  const offs = [subscribe(["models"], render), subscribe(["profiles"], renderProfiles)];
  renderProfiles();
  render();
  return () => {
    for (const off of offs) off();
  };
}

function createRow(id) {
  const row = {
    id,
    pending: null,
    name: h("span", { class: "model-name" }),
    idText: h("span", { class: "model-id mono" }),
    badge: h("span", { class: "badge" }),
    desc: h("p", { class: "model-desc" }),
    counts: h("span", { class: "load-counts" }),
    error: h("p", { class: "error", role: "alert", hidden: true }),
    load: h("button", { type: "button", "aria-label": `Load ${id}` }, "Load"),
    unload: h("button", { type: "button", class: "secondary", "aria-label": `Unload ${id}` }, "Unload"),
  };
  row.el = h(
    "article",
    { class: "model panel", role: "listitem", "data-model": id, "aria-label": id },
    h("div", { class: "model-head" }, h("div", { class: "model-title" }, row.name, row.idText), row.badge),
    row.desc,
    h("div", { class: "model-foot" }, row.counts, row.load, row.unload),
    row.error,
  );
  row.load.addEventListener("click", () => act(row, "load", row.load));
  row.unload.addEventListener("click", () => act(row, "unload", row.unload));
  return row;
}

async function act(row, action, button) {
  if (button.getAttribute("aria-disabled") === "true") return;
  row.pending = action;
  row.error.hidden = true;
  refresh(row);
  const path = `/api/models/${action}/${encodeURIComponent(row.id)}`;
  try {
    await post(path);
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
  if (model) updateRow(row, model);
}

function updateRow(row, model) {
  const selector = model.kind === "selector";
  const peer = model.kind === "peer";
  row.el.dataset.kind = model.kind || "model";
  row.name.textContent = model.name || model.id;
  let idLine = model.name ? model.id : "";
  if (model.aliases?.length) idLine += `${idLine ? " · " : ""}aliases: ${model.aliases.join(", ")}`;
  if (selector) idLine += `${idLine ? " · " : ""}selector (${model.strategy}) → ${model.targets.join(", ")}`;
  if (peer) idLine += `${idLine ? " · " : ""}on peer ${model.peerID}`;
  row.idText.textContent = idLine;
  row.desc.textContent = model.description || "";
  row.desc.hidden = !model.description;
  row.badge.textContent = model.state;
  row.badge.className = `badge state-${model.state}`;
  row.el.dataset.state = model.state;
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
  setDisabled(row.load, row.pending !== null || model.state === "ready" || busy);
  setDisabled(row.unload, row.pending !== null || model.state === "stopped");
  replace(row.load, row.pending === "load" ? "Loading…" : "Load");
  replace(row.unload, row.pending === "unload" ? "Unloading…" : "Unload");
}

function setDisabled(button, disabled) {
  button.setAttribute("aria-disabled", disabled ? "true" : "false");
}
