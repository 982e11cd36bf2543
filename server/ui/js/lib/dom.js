// Small DOM helpers. No innerHTML with data: text goes in as text (the two
// places that insert HTML, markdown and ANSI logs, sanitise or escape first).

/**
 * Creates an element: h("button", {class: "x", onclick: f}, "Load").
 * Attributes starting with "on" become listeners; `null`/`false` are skipped;
 * `dataset` takes an object. There is no `style`: the page's content security
 * policy refuses inline styles, so looks come from classes.
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

/** An SVG element (same rules as h). */
export function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

function setAttrs(el, attrs) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value);
    } else if (key === "class") {
      el.setAttribute("class", value);
    } else if (key === "dataset") {
      for (const [name, v] of Object.entries(value)) {
        if (v !== null && v !== undefined) el.dataset[name] = String(v);
      }
    } else if (key === "value" && "value" in el && el.tagName !== "BUTTON" && el.tagName !== "OPTION") {
      el.value = value;
    } else if (key === "checked" && "checked" in el) {
      el.checked = Boolean(value);
    } else if (value === true) {
      el.setAttribute(key, "");
    } else {
      el.setAttribute(key, String(value));
    }
  }
}

function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else if (child instanceof Node) el.appendChild(child);
    else el.appendChild(document.createTextNode(String(child)));
  }
}

/** Replaces every child of `el`. */
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

/** A labelled form field: <div class="field"><label>…</label>control</div>. */
export function field(label, control, hint) {
  if (!control.id) control.id = uid("f");
  return h(
    "div",
    { class: "field" },
    h("label", { for: control.id }, label),
    control,
    hint ? h("span", { class: "hint" }, hint) : null,
  );
}

/** A <select> of `options` ([value, label] pairs or strings). */
export function select(attrs, options, selected) {
  return h(
    "select",
    attrs,
    options.map((o) => {
      const [value, label] = Array.isArray(o) ? o : [o, o];
      return h("option", { value, selected: value === selected }, label);
    }),
  );
}

/** A checkbox with its label after it. */
export function checkbox(label, attrs = {}) {
  const input = h("input", { type: "checkbox", ...attrs });
  if (!input.id) input.id = uid("c");
  return { input, el: h("label", { class: "check", for: input.id }, input, label) };
}

let counter = 0;
/** An id no other element of the page has. */
export function uid(prefix = "id") {
  counter += 1;
  return `${prefix}-${counter}`;
}

/**
 * Marks a button busy or idle without disabling it, so it keeps the keyboard
 * focus while the state it controls changes (click handlers check `isOff`).
 */
export function setOff(button, off) {
  button.setAttribute("aria-disabled", off ? "true" : "false");
}

/** True for a button marked off by setOff. */
export function isOff(button) {
  return button.getAttribute("aria-disabled") === "true";
}

/**
 * A row of tabs (real buttons with role="tab") over panels: `tabs` is a list
 * of {id, label}; `onSelect(id)` is called on a click or arrow key. Returns
 * {el, select(id)}.
 */
export function tabList(label, tabs, selected, onSelect, idPrefix = uid("tab")) {
  const buttons = tabs.map((tab) =>
    h(
      "button",
      {
        type: "button",
        role: "tab",
        id: `${idPrefix}-${tab.id}`,
        "aria-controls": `${idPrefix}-${tab.id}-panel`,
        dataset: { tab: tab.id },
        class: "tab",
      },
      tab.label,
    ),
  );
  const el = h("div", { class: "tabs", role: "tablist", "aria-label": label }, buttons);
  function mark(id) {
    for (const button of buttons) {
      const on = button.dataset.tab === id;
      button.setAttribute("aria-selected", on ? "true" : "false");
      button.tabIndex = on ? 0 : -1;
    }
  }
  el.addEventListener("click", (event) => {
    const button = event.target.closest("button[role=tab]");
    if (button) onSelect(button.dataset.tab);
  });
  el.addEventListener("keydown", (event) => {
    const index = buttons.indexOf(document.activeElement);
    if (index < 0) return;
    let next = -1;
    if (event.key === "ArrowRight") next = (index + 1) % buttons.length;
    else if (event.key === "ArrowLeft") next = (index - 1 + buttons.length) % buttons.length;
    else if (event.key === "Home") next = 0;
    else if (event.key === "End") next = buttons.length - 1;
    if (next < 0) return;
    event.preventDefault();
    buttons[next].focus();
    onSelect(buttons[next].dataset.tab);
  });
  mark(selected);
  return { el, select: mark, panelId: (id) => `${idPrefix}-${id}-panel`, tabId: (id) => `${idPrefix}-${id}` };
}

/** A panel for a tab of tabList. */
export function tabPanel(tabs, id, ...children) {
  return h("div", { role: "tabpanel", id: tabs.panelId(id), "aria-labelledby": tabs.tabId(id), class: "tab-panel" }, ...children);
}

/** Calls every function of a list (the unmount of a view that subscribed to several things). */
export function all(fns) {
  return () => {
    for (const fn of fns) {
      try {
        fn?.();
      } catch (error) {
        console.warn("cleanup failed", error);
      }
    }
  };
}
