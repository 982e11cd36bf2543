// A live pane of log lines: ANSI colours rendered, a search that filters the
// lines, wrap on or off, and a follow mode that keeps the newest line in view
// until the reader scrolls up (and resumes when they scroll back down).

import { AnsiStream, hasAnsi, stripAnsi } from "./ansi.js";
import { h, replace, uid } from "./dom.js";
import { pref, setPref } from "../prefs.js";
import { LOG_LIMIT, state, subscribe } from "../store.js";

/** Distance from the bottom (px) within which the pane counts as at the end. */
const AT_END = 24;

/**
 * A pane showing the lines of the store that `accept(line)` keeps.
 * Options: id (the <pre>'s id and the key of its stored choices), title,
 * accept, tag(line) → the prefix shown before the text, tools (more toolbar
 * controls). Returns {el, redraw(), destroy()}.
 */
export function logPane({ id, title, accept, tag = defaultTag, tools = [] }) {
  const search = h("input", {
    type: "search",
    class: "log-search",
    placeholder: "Filter (text, or /regex/)",
    autocomplete: "off",
    "aria-label": `Filter ${title}`,
  });
  const wrap = h(
    "button",
    { type: "button", class: "quiet small", "aria-pressed": String(pref(`${id}.wrap`, true)) },
    "Wrap",
  );
  const follow = h("button", { type: "button", class: "quiet small follow", "aria-pressed": "true" }, "Follow");
  const clear = h("button", { type: "button", class: "quiet small" }, "Clear");
  const status = h("span", { class: "hint log-count", "aria-live": "off" });
  const pane = h("pre", {
    class: "logs",
    id,
    tabindex: "0",
    "aria-label": `${title} lines`,
    dataset: { follow: "true" },
  });
  pane.classList.toggle("nowrap", wrap.getAttribute("aria-pressed") !== "true");
  const headingId = uid("log-title");
  const el = h(
    "section",
    { class: "log-panel panel", "aria-labelledby": headingId },
    h("div", { class: "log-tools" }, h("h2", { id: headingId }, title), ...tools, status, follow, wrap, clear),
    search,
    pane,
  );

  // Positions count every line ever received (the store drops the oldest).
  const total = () => state.logsDropped + state.logs.length;
  let clearedBefore = 0;
  let drawnTotal = 0;
  let shown = 0;
  let matcher = () => true;
  let following = true;
  const streams = new Map();

  function stream(line) {
    const key = `${line.source}\u0000${line.model || ""}`;
    let s = streams.get(key);
    if (!s) {
      s = new AnsiStream();
      streams.set(key, s);
    }
    return s;
  }

  function setFollowing(on) {
    following = on;
    follow.setAttribute("aria-pressed", on ? "true" : "false");
    pane.dataset.follow = on ? "true" : "false";
    if (on) pane.scrollTop = pane.scrollHeight;
  }

  function compile(text) {
    const query = text.trim();
    if (!query) return () => true;
    const re = /^\/(.+)\/([a-z]*)$/.exec(query);
    if (re) {
      try {
        const regex = new RegExp(re[1], re[2].includes("i") ? re[2] : `${re[2]}i`);
        search.setCustomValidity("");
        return (plain) => regex.test(plain);
      } catch {
        search.setCustomValidity("not a valid regular expression");
      }
    }
    const lower = query.toLowerCase();
    return (plain) => plain.toLowerCase().includes(lower);
  }

  function lineEl(line) {
    const prefix = tag(line);
    const text = line.data.endsWith("\n") ? line.data : `${line.data}\n`;
    const plain = prefix + stripAnsi(text);
    if (!matcher(plain)) return null;
    const body = hasAnsi(text) ? stream(line).fragment(text) : document.createTextNode(text);
    return h(
      "span",
      { class: "log-line", "data-model": line.model || "", "data-source": line.source },
      prefix ? h("span", { class: line.source === "proxy" ? "log-proxy" : "log-model" }, prefix) : null,
      body,
    );
  }

  function linesFrom(position) {
    const out = [];
    for (let i = Math.max(position, clearedBefore, state.logsDropped); i < total(); i++) {
      const line = state.logs[i - state.logsDropped];
      if (!accept(line)) continue;
      const el = lineEl(line);
      if (el) out.push(el);
    }
    drawnTotal = total();
    return out;
  }

  function redraw() {
    streams.clear();
    const lines = linesFrom(0);
    shown = lines.length;
    replace(
      pane,
      lines.length ? lines : h("span", { class: "log-note" }, search.value ? "No line matches the filter.\n" : "No log lines yet.\n"),
    );
    renderStatus();
    if (following) pane.scrollTop = pane.scrollHeight;
  }

  function appendNew() {
    const fresh = linesFrom(drawnTotal);
    if (!fresh.length) return;
    pane.querySelector(".log-note")?.remove();
    pane.append(...fresh);
    shown += fresh.length;
    // Keep the pane as bounded as the store.
    while (pane.childElementCount > LOG_LIMIT) {
      pane.firstElementChild.remove();
      shown -= 1;
    }
    renderStatus();
    if (following) pane.scrollTop = pane.scrollHeight;
  }

  function renderStatus() {
    status.textContent = `${shown} line${shown === 1 ? "" : "s"}`;
  }

  search.addEventListener("input", () => {
    matcher = compile(search.value);
    redraw();
  });
  wrap.addEventListener("click", () => {
    const on = wrap.getAttribute("aria-pressed") !== "true";
    wrap.setAttribute("aria-pressed", String(on));
    pane.classList.toggle("nowrap", !on);
    setPref(`${id}.wrap`, on);
  });
  follow.addEventListener("click", () => setFollowing(!following));
  clear.addEventListener("click", () => {
    clearedBefore = total();
    redraw();
  });
  // A reader scrolling up stops the following; scrolling back to the end resumes it.
  pane.addEventListener("scroll", () => {
    const atEnd = pane.scrollTop + pane.clientHeight >= pane.scrollHeight - AT_END;
    if (atEnd !== following) setFollowing(atEnd);
  });

  const off = subscribe(["logs"], appendNew);
  redraw();
  return { el, redraw, destroy: off };
}

function defaultTag(line) {
  if (line.source === "proxy") return line.model ? `[proxy ${line.model}] ` : "[proxy] ";
  return line.model ? `[${line.model}] ` : "";
}
