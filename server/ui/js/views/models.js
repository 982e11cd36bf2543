// Models: every configured model with its state, live, and Load / Unload.
// Rows are kept by model ID and updated in place, so a button keeps its
// keyboard focus while the state it controls changes.

import { post } from "../api.js";
import { h, replace } from "../dom.js";
import { state, subscribe } from "../store.js";

const BUSY = new Set(["starting", "stopping"]);

export function mount(root) {
  const showUnlisted = h("input", { type: "checkbox", id: "show-unlisted" });
  const unloadAll = h("button", { type: "button", class: "danger", id: "unload-all" }, "Unload all");
  const message = h("p", { class: "error", role: "alert", hidden: true });
  const count = h("span", { class: "count" });
  const list = h("div", { class: "models", role: "list" });
  const empty = h("p", { class: "empty", hidden: true }, "No models are configured.");
  root.append(
    h(
      "div",
      { class: "toolbar" },
      h("h1", {}, "Models ", count),
      h("label", { class: "check", for: "show-unlisted" }, showUnlisted, "Show unlisted"),
      unloadAll,
    ),
    message,
    list,
    empty,
  );

  const rows = new Map();
  let unloadingAll = false;

  unloadAll.addEventListener("click", async () => {
    unloadingAll = true;
    render();
    message.hidden = true;
    try {
      await post("/api/models/unload");
    } catch (error) {
      message.textContent = `Unload all failed: ${error.message}`;
      message.hidden = false;
    } finally {
      unloadingAll = false;
      render();
    }
  });
  showUnlisted.addEventListener("change", render);

  function render() {
    const visible = state.models.filter((m) => showUnlisted.checked || !m.unlisted);
    const running = state.models.filter((m) => m.state !== "stopped").length;
    count.textContent = `${running} of ${state.models.length} running`;
    unloadAll.disabled = unloadingAll || running === 0;
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

  const off = subscribe(["models"], render);
  render();
  return off;
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
  // aria-disabled rather than disabled: a disabled button would drop the
  // keyboard focus the moment it is pressed.
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
  row.name.textContent = model.name || model.id;
  row.idText.textContent = model.name ? model.id : "";
  const aliases = model.aliases?.length ? ` · aliases: ${model.aliases.join(", ")}` : "";
  row.idText.textContent += aliases;
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
  const busy = BUSY.has(model.state);
  setDisabled(row.load, row.pending !== null || model.state === "ready" || busy);
  setDisabled(row.unload, row.pending !== null || model.state === "stopped");
  replace(row.load, row.pending === "load" ? "Loading…" : "Load");
  replace(row.unload, row.pending === "unload" ? "Unloading…" : "Unload");
}

function setDisabled(button, disabled) {
  button.setAttribute("aria-disabled", disabled ? "true" : "false");
}
