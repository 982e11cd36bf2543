// Short messages at the corner of the page (announced by screen readers):
// what an action did, or why it failed.

import { h } from "./dom.js";

/** Shows `text` for a few seconds; `kind` is "ok" or "error". */
export function toast(text, kind = "ok") {
  const box = document.getElementById("toasts");
  if (!box) return;
  const item = h("div", { class: `toast toast-${kind}`, role: kind === "error" ? "alert" : null }, text);
  box.append(item);
  setTimeout(() => item.remove(), kind === "error" ? 8000 : 4000);
}
