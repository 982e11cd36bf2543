// Small DOM and formatting helpers. No innerHTML with data: text goes in as text.

/**
 * Creates an element: h("button", {class: "x", onclick: f}, "Load").
 * Attributes starting with "on" become listeners; `null`/`false` are skipped.
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value);
    } else if (key === "class") {
      el.className = value;
    } else if (key === "dataset") {
      Object.assign(el.dataset, value);
    } else if (value === true) {
      el.setAttribute(key, "");
    } else {
      el.setAttribute(key, String(value));
    }
  }
  append(el, children);
  return el;
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

/** "850 ms", "12.3 s", "4 min 05 s", "2 h 10 min". */
export function duration(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return "–";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(s < 10 ? 2 : 1)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${String(Math.floor(s % 60)).padStart(2, "0")} s`;
  return `${Math.floor(m / 60)} h ${String(m % 60).padStart(2, "0")} min`;
}

/** Local wall-clock time of a Unix-epoch millisecond value. */
export function clock(ms) {
  if (!ms) return "–";
  const d = new Date(ms);
  return d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
}

/** Signed priority text: "+10", "0", "-10". */
export function signed(n) {
  if (n === null || n === undefined) return "–";
  return n > 0 ? `+${n}` : String(n);
}

/** The SDK's tier name of a header priority, when it is one of them. */
export function tierName(n) {
  if (n === 10) return "Elevated";
  if (n === 0) return "Normal";
  if (n === -10) return "Low";
  return "";
}
