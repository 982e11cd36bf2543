// A modal dialog (<dialog> with showModal: focus is trapped and Escape
// closes it); removed from the page when closed.

import { h, uid } from "./dom.js";

/**
 * Opens a dialog titled `title` holding `body`; `actions` are more buttons
 * beside Close. Returns {el, body, close()}.
 */
export function openDialog({ title, body, actions = [], className = "" }) {
  const titleId = uid("dialog-title");
  const close = h("button", { type: "button", class: "secondary" }, "Close");
  const content = h("div", { class: "dialog-body" }, body);
  const el = h(
    "dialog",
    { class: `wide ${className}`.trim(), "aria-labelledby": titleId },
    h("div", { class: "dialog-head" }, h("h2", { id: titleId }, title)),
    content,
    h("div", { class: "actions" }, ...actions, close),
  );
  close.addEventListener("click", () => el.close());
  el.addEventListener("close", () => el.remove());
  // A click on the backdrop (the dialog element itself, outside its box) closes it.
  el.addEventListener("click", (event) => {
    if (event.target !== el) return;
    const r = el.getBoundingClientRect();
    const inside = event.clientX >= r.left && event.clientX <= r.right && event.clientY >= r.top && event.clientY <= r.bottom;
    if (!inside) el.close();
  });
  document.body.append(el);
  el.showModal();
  return { el, body: content, close: () => el.close() };
}
