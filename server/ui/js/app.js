// Entry point: navigation between the five views, the live connection to
// /api/events, and the API-key dialog.

import { followEvents, storeKey, storedKey } from "./api.js";
import { apply, setConnection, state, subscribe } from "./store.js";
import * as models from "./views/models.js";
import * as queue from "./views/queue.js";
import * as activity from "./views/activity.js";
import * as logs from "./views/logs.js";
import * as playground from "./views/playground.js";

const VIEWS = { models, queue, activity, logs, playground };
const TITLES = {
  models: "Models",
  queue: "Queue",
  activity: "Activity",
  logs: "Logs",
  playground: "Playground",
};

const root = document.getElementById("view");
let current = null;
let unmount = null;

/** The view a /ui/... path shows; unknown paths show the models. */
function viewOf(pathname) {
  const rest = pathname.replace(/^\/ui\/?/, "");
  const first = rest.split("/")[0];
  return Object.hasOwn(VIEWS, first) ? first : "models";
}

function show(view, { focus = false } = {}) {
  if (view === current) return;
  unmount?.();
  current = view;
  root.replaceChildren();
  unmount = VIEWS[view].mount(root);
  document.title = `${TITLES[view]} · llama-swap-rs`;
  for (const link of document.querySelectorAll("nav a[data-view]")) {
    if (link.dataset.view === view) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  if (focus) root.focus();
}

document.querySelector("nav").addEventListener("click", (event) => {
  const link = event.target.closest("a[data-view]");
  if (!link || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) {
    return;
  }
  event.preventDefault();
  const view = link.dataset.view;
  if (view !== current) history.pushState({ view }, "", link.getAttribute("href"));
  show(view, { focus: true });
});

window.addEventListener("popstate", () => show(viewOf(location.pathname)));

// Connection status and the API key.

const connection = document.getElementById("connection");
const keyButton = document.getElementById("key-button");
const dialog = document.getElementById("key-dialog");
const keyForm = document.getElementById("key-form");
const keyInput = document.getElementById("key-input");
const keyError = document.getElementById("key-error");
const keyForget = document.getElementById("key-forget");

const CONNECTION_TEXT = {
  connecting: "Connecting…",
  live: "Live",
  down: "Reconnecting…",
  auth: "API key needed",
};

subscribe(["connection"], () => {
  connection.textContent = CONNECTION_TEXT[state.connection] || state.connection;
  connection.dataset.state = state.connection;
  keyButton.hidden = !(storedKey() || state.connection === "auth");
  if (state.connection === "auth") askForKey();
});

let events = null;

function askForKey() {
  const hadKey = Boolean(storedKey());
  keyError.hidden = !hadKey;
  keyError.textContent = hadKey ? "The server did not accept that key." : "";
  keyForget.hidden = !hadKey;
  if (!dialog.open) {
    keyInput.value = "";
    dialog.showModal();
  }
}

keyForm.addEventListener("submit", (event) => {
  event.preventDefault();
  const key = keyInput.value.trim();
  if (!key) return;
  storeKey(key);
  dialog.close();
  events.restart();
});

keyForget.addEventListener("click", () => {
  storeKey("");
  keyError.hidden = true;
  keyForget.hidden = true;
  keyInput.value = "";
  keyInput.focus();
});

keyButton.addEventListener("click", () => {
  keyError.hidden = true;
  keyForget.hidden = !storedKey();
  keyInput.value = "";
  dialog.showModal();
});

show(viewOf(location.pathname));
events = followEvents(apply, setConnection);
