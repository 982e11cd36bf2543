// What the reader chose, kept in this browser (localStorage): theme, title,
// pinned models, hidden columns, page sizes, the playground's last inputs.
// A value that cannot be read (private mode, an older page's format) falls
// back to its default.

const PREFIX = "llamaswap.";
const listeners = new Map();

/** The stored value of `name`, or `fallback`. */
export function pref(name, fallback) {
  try {
    const raw = localStorage.getItem(PREFIX + name);
    if (raw === null) return fallback;
    const value = JSON.parse(raw);
    if (fallback !== undefined && fallback !== null && typeof value !== typeof fallback) return fallback;
    return value;
  } catch {
    return fallback;
  }
}

/** Stores `value` for `name` (undefined removes it) and tells its listeners. */
export function setPref(name, value) {
  try {
    if (value === undefined) localStorage.removeItem(PREFIX + name);
    else localStorage.setItem(PREFIX + name, JSON.stringify(value));
  } catch {
    // No storage: the choice lasts until the page closes (listeners still hear it).
  }
  for (const fn of listeners.get(name) || []) fn(value);
}

/** Calls `fn(value)` when `name` is set; returns an unsubscribe function. */
export function onPref(name, fn) {
  if (!listeners.has(name)) listeners.set(name, new Set());
  listeners.get(name).add(fn);
  return () => listeners.get(name)?.delete(fn);
}

// Appearance.

export const THEMES = [
  ["system", "System"],
  ["light", "Light"],
  ["dark", "Dark"],
];

export const ACCENTS = [
  ["blue", "Blue"],
  ["violet", "Violet"],
  ["green", "Green"],
  ["amber", "Amber"],
];

export const DEFAULT_TITLE = "llama-swap-rs";

/** Applies the stored theme and accent to the document (before the first paint when possible). */
export function applyAppearance() {
  const root = document.documentElement;
  const theme = pref("theme", "system");
  if (theme === "light" || theme === "dark") root.dataset.theme = theme;
  else delete root.dataset.theme;
  const accent = pref("accent", "blue");
  if (accent && accent !== "blue") root.dataset.accent = accent;
  else delete root.dataset.accent;
}

/** The page title the reader set (llama-swap's editable title), or the default. */
export function appTitle() {
  const title = pref("title", DEFAULT_TITLE);
  return typeof title === "string" && title.trim() ? title.trim().slice(0, 64) : DEFAULT_TITLE;
}

/** True when the page is dark now (the theme, or the system's when it follows the system). */
export function isDark() {
  const theme = pref("theme", "system");
  if (theme === "dark") return true;
  if (theme === "light") return false;
  return window.matchMedia?.("(prefers-color-scheme: dark)").matches ?? false;
}
