// ANSI colours in log lines, by the vendored ansi_up (see vendor/README.md).
//
// The page's content security policy refuses inline style attributes, so the
// converter emits classes for the 16 standard colours (styled per theme in
// css/components.css); what it still writes as a style (bold, faint, italic,
// underline, 256- and 24-bit colours) is moved to a data attribute and
// applied through the CSSOM, which the policy allows.

import { AnsiUp } from "../../vendor/ansi_up/ansi_up.js";

/** A converter that remembers the colour state of one stream between its lines. */
export class AnsiStream {
  constructor() {
    this.converter = new AnsiUp();
    this.converter.use_classes = true;
    // Links in a log line are shown as text: the page never points elsewhere.
    this.converter.url_allowlist = {};
  }

  /** A fragment holding `text` with its colours (the text is escaped by ansi_up). */
  fragment(text) {
    const html = this.converter.ansi_to_html(text).replace(/ style="([^"]*)"/g, ' data-ansi-style="$1"');
    const template = document.createElement("template");
    template.innerHTML = html;
    // Into this document first: the styles are then CSSOM changes of its own elements.
    const fragment = document.importNode(template.content, true);
    for (const el of fragment.querySelectorAll("[data-ansi-style]")) {
      el.style.cssText = el.dataset.ansiStyle;
      el.removeAttribute("data-ansi-style");
    }
    return fragment;
  }
}

/** True when `text` has an escape sequence worth converting. */
export function hasAnsi(text) {
  return text.includes("\u001b[") || text.includes("\u001b]");
}

/** `text` without its escape sequences (for searching and copying). */
export function stripAnsi(text) {
  // CSI sequences, then OSC sequences ended by BEL or ST.
  return text
    .replace(/\u001b\[[0-9;?]*[ -/]*[@-~]/g, "")
    .replace(/\u001b\][^\u0007\u001b]*(\u0007|\u001b\\)/g, "");
}
