// Copying text: the Clipboard API where the page is a secure context
// (localhost, https), else a selected hidden textarea and execCommand, which
// plain-http LAN pages still allow.

/** Copies `text`; resolves to true when it was copied. */
export async function copyText(text) {
  if (navigator.clipboard && window.isSecureContext) {
    try {
      await navigator.clipboard.writeText(text);
      return true;
    } catch {
      // Refused (no permission, no focus): try the old way.
    }
  }
  const area = document.createElement("textarea");
  area.value = text;
  area.setAttribute("readonly", "");
  area.className = "offscreen";
  document.body.append(area);
  area.select();
  let ok = false;
  try {
    ok = document.execCommand("copy");
  } catch {
    ok = false;
  }
  area.remove();
  return ok;
}

/** A "Copy" button for what `getText()` returns; says "Copied" for a moment. */
export function copyButton(getText, label = "Copy", name = label) {
  const button = document.createElement("button");
  button.type = "button";
  button.className = "quiet small copy";
  button.textContent = label;
  button.setAttribute("aria-label", name);
  button.addEventListener("click", async () => {
    const ok = await copyText(getText());
    button.textContent = ok ? "Copied" : "Press Ctrl+C";
    setTimeout(() => (button.textContent = label), 1500);
  });
  return button;
}
