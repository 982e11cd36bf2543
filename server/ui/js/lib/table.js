// A table with sortable headers (buttons, with aria-sort) and columns the
// reader can hide (a Columns menu whose choice is kept per table), and the
// small popover menu it uses.

import { checkbox, h, replace, uid } from "./dom.js";
import { pref, setPref } from "../prefs.js";

/**
 * Options:
 * - id: the table's id (also the key its hidden columns are kept under)
 * - columns: [{id, label, cell(row) → Node|string, num, sort (a key, or
 *   true for the id), hideable (default true), hidden (hidden by default),
 *   className, title, bare (no label beside the cell when the rows are
 *   stacked at phone width: a button that names itself)}]
 * - rowAttrs(row) → attributes of the <tr>
 * - sort: {key, order} to start with; onSort(key, order) is called on a
 *   header click (the caller sorts, locally or on the server)
 * - empty: the text shown without rows
 * - label: the table's accessible name
 * Returns {el, menu, setRows(rows), setSort(key, order), visibleColumns()}.
 */
export function dataTable({ id, columns, rowAttrs = () => ({}), sort = null, onSort = null, empty = "Nothing yet.", label }) {
  const hiddenByDefault = columns.filter((c) => c.hidden).map((c) => c.id);
  let hidden = new Set(pref(`columns.${id}`, hiddenByDefault));
  let current = sort ? { ...sort } : null;
  let rows = [];
  const wrap = h("div", { class: "table-wrap panel" });

  const menuItems = columns
    .filter((c) => c.hideable !== false)
    .map((c) => {
      const box = checkbox(c.label, { checked: !hidden.has(c.id), dataset: { column: c.id } });
      box.input.addEventListener("change", () => {
        if (box.input.checked) hidden.delete(c.id);
        else hidden.add(c.id);
        setPref(`columns.${id}`, [...hidden]);
        render();
      });
      return box.el;
    });
  const menu = popoverMenu("Columns", h("div", { class: "menu-list", role: "group", "aria-label": "Shown columns" }, menuItems));

  function visibleColumns() {
    return columns.filter((c) => !hidden.has(c.id));
  }

  function header(column) {
    const key = column.sort === true ? column.id : column.sort;
    const attrs = { scope: "col", class: column.num ? "num" : null, dataset: { column: column.id } };
    if (!key || !onSort) return h("th", attrs, column.label);
    const active = current && current.key === key;
    attrs["aria-sort"] = active ? (current.order === "asc" ? "ascending" : "descending") : "none";
    const arrow = active ? (current.order === "asc" ? " ▲" : " ▼") : "";
    return h(
      "th",
      attrs,
      h(
        "button",
        {
          type: "button",
          class: "sort",
          onclick: () => {
            const order = active && current.order === "desc" ? "asc" : "desc";
            current = { key, order };
            onSort(key, order);
            render();
          },
        },
        column.label,
        h("span", { class: "sort-arrow", "aria-hidden": "true" }, arrow),
      ),
    );
  }

  function render() {
    const shown = visibleColumns();
    if (!rows.length) {
      replace(
        wrap,
        h(
          "table",
          { id, "aria-label": label || null },
          h("thead", {}, h("tr", {}, shown.map(header))),
        ),
        h("p", { class: "empty table-empty" }, empty),
      );
      return;
    }
    const body = h(
      "tbody",
      {},
      rows.map((row) =>
        h(
          "tr",
          rowAttrs(row),
          shown.map((c) =>
            h(
              "td",
              {
                class: [c.num ? "num" : "", c.className || ""].join(" ").trim() || null,
                dataset: { column: c.id, label: c.bare ? null : c.label },
              },
              c.cell(row),
            ),
          ),
        ),
      ),
    );
    replace(wrap, h("table", { id, "aria-label": label || null }, h("thead", {}, h("tr", {}, shown.map(header))), body));
  }

  render();
  return {
    el: wrap,
    menu: menu.el,
    setRows(next) {
      rows = next;
      render();
    },
    setSort(key, order) {
      current = key ? { key, order } : null;
      render();
    },
    visibleColumns,
  };
}

/**
 * Gives each body cell of a hand-built table its column's header as
 * `data-label`, which the stacked rows at phone width show beside the value
 * (dataTable's cells carry it already).
 */
export function labelCells(table) {
  const labels = [...table.querySelectorAll("thead th")].map((th) => th.textContent.trim());
  for (const row of table.querySelectorAll("tbody tr")) {
    [...row.cells].forEach((cell, i) => {
      if (labels[i]) cell.dataset.label = labels[i];
    });
  }
  return table;
}

/**
 * A button that opens a small panel (the Popover API: light dismiss, Escape
 * closes, keyboard order kept). Returns {el, button, panel, close()}.
 */
export function popoverMenu(label, content, { className = "" } = {}) {
  const panelId = uid("menu");
  const button = h(
    "button",
    { type: "button", class: "secondary small", popovertarget: panelId, "aria-haspopup": "true" },
    label,
  );
  const panel = h("div", { id: panelId, popover: "auto", class: `menu ${className}`.trim(), "aria-label": label }, content);
  panel.addEventListener("toggle", (event) => {
    button.setAttribute("aria-expanded", event.newState === "open" ? "true" : "false");
    if (event.newState !== "open") return;
    // Below the button, or above it when the room below is short, kept on
    // screen (set through the CSSOM: inline styles are not allowed).
    const rect = button.getBoundingClientRect();
    const width = panel.offsetWidth;
    const height = panel.offsetHeight;
    const left = Math.max(8, Math.min(rect.left, window.innerWidth - width - 8));
    let top = rect.bottom + 4;
    if (top + height > window.innerHeight - 8) {
      top = rect.top - 4 - height >= 8 ? rect.top - 4 - height : Math.max(8, window.innerHeight - height - 8);
    }
    panel.style.left = `${left}px`;
    panel.style.top = `${top}px`;
  });
  button.setAttribute("aria-expanded", "false");
  return {
    el: h("span", { class: "menu-anchor" }, button, panel),
    button,
    panel,
    close: () => panel.hidePopover?.(),
  };
}
