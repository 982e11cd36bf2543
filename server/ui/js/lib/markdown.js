// Markdown of a model's answer, as HTML that cannot reach outside the page:
// rendered by the vendored marked, sanitised by the vendored DOMPurify (see
// vendor/README.md). HTML the model writes itself is shown as text (as in
// llama-swap's UI), style attributes are dropped (the page's content
// security policy refuses them), images are kept only as data: URLs (others
// become a link), links open in a new tab without a referrer, and each code
// block gets a Copy button.

import { Marked } from "../../vendor/marked/marked.esm.js";
import DOMPurify from "../../vendor/dompurify/purify.es.js";
import { copyButton } from "./clipboard.js";

const parser = new Marked({ gfm: true, breaks: false, async: false });
parser.use({
  renderer: {
    // Raw HTML in the answer is text, not markup.
    html({ text }) {
      return escapeHtml(text);
    },
  },
});

function escapeHtml(text) {
  return text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

const purifier = DOMPurify(window);
purifier.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A" && node.hasAttribute("href")) {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer");
  }
  // An image from elsewhere would be fetched by the page: its address is
  // taken away here (before the fragment joins the page) and it becomes a link.
  if (node.tagName === "IMG") {
    const src = node.getAttribute("src") || "";
    if (!src.startsWith("data:image/")) {
      node.removeAttribute("src");
      node.removeAttribute("srcset");
      node.setAttribute("data-src", src);
    }
  }
});

const CONFIG = {
  FORBID_ATTR: ["style", "srcset"],
  FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "iframe", "object", "embed"],
  RETURN_DOM_FRAGMENT: true,
};

/** The markdown `text` as a sanitised fragment of this document. */
export function renderMarkdown(text) {
  const html = parser.parse(text || "");
  const fragment = purifier.sanitize(html, CONFIG);
  for (const img of fragment.querySelectorAll("img[data-src]")) {
    const link = document.createElement("a");
    const src = img.getAttribute("data-src");
    if (src) {
      link.href = src;
      link.target = "_blank";
      link.rel = "noopener noreferrer";
    }
    link.textContent = img.getAttribute("alt") || src || "image";
    img.replaceWith(link);
  }
  for (const pre of fragment.querySelectorAll("pre")) {
    const code = pre.querySelector("code");
    const language = /language-([\w+-]+)/.exec(code?.className || "")?.[1] || "";
    const box = document.createElement("div");
    box.className = "code-block";
    const bar = document.createElement("div");
    bar.className = "code-bar";
    const name = document.createElement("span");
    name.className = "code-lang";
    name.textContent = language || "code";
    bar.append(name, copyButton(() => (code || pre).textContent, "Copy", `Copy ${language || "code"} block`));
    pre.replaceWith(box);
    box.append(bar, pre);
  }
  return fragment;
}
