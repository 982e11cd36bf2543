// Entry point: the router between the views, the live connection to
// /api/events, the API-key dialog, the page title and the theme.
//
// A view is a module with `mount(root, params) → unmount`; it is loaded on
// its first visit. A view that exports `keepAlive = true` (the playground) is
// hidden rather than unmounted when the reader leaves it, so a running chat
// or load test goes on and is there when they come back.

import { followEvents, getJson, storeKey, storedKey } from "./api.js";
import { appTitle, applyAppearance, onPref } from "./prefs.js";
import { apply, setConnection, setGpus, setListing, setVersion, state, subscribe } from "./store.js";

/** Path segment → view: its module, its nav entry and its title. */
const VIEWS = {
  models: { load: () => import("./views/models.js"), nav: "models", title: "Models" },
  model: { load: () => import("./views/model.js"), nav: "models", title: "Model" },
  queue: { load: () => import("./views/queue.js"), nav: "queue", title: "Queue" },
  activity: { load: () => import("./views/activity.js"), nav: "activity", title: "Activity" },
  logs: { load: () => import("./views/logs.js"), nav: "logs", title: "Logs" },
  playground: { load: () => import("./views/playground/index.js"), nav: "playground", title: "Playground" },
  performance: { load: () => import("./views/performance.js"), nav: "performance", title: "Performance" },
  settings: { load: () => import("./views/settings.js"), nav: "settings", title: "Settings" },
};

/**
 * The route of a /ui/... path: {view, params}. Unknown paths show the models.
 * `/ui/models/<id>` is a model's page (the id URL-encoded, so ids with
 * slashes or dots work); `/ui/playground/<tab>` a playground tab.
 */
function routeOf(pathname) {
  const rest = pathname.replace(/^\/ui\/?/, "");
  const [first, ...more] = rest.split("/");
  const tail = more.join("/");
  if (first === "models" && tail) {
    let id = tail;
    try {
      id = decodeURIComponent(tail);
    } catch {
      // A malformed escape: use it as written.
    }
    return { view: "model", params: { id } };
  }
  if (first === "hardware") return { view: "performance", params: { section: "hardware" } };
  if (first === "playground") return { view: "playground", params: { tab: more[0] || "" } };
  if (Object.hasOwn(VIEWS, first) && first !== "model") return { view: first, params: {} };
  return { view: "models", params: {} };
}

const root = document.getElementById("view");
/** Mounted views: name → {container, unmount, module, key}. */
const mounted = new Map();
let current = null;
let generation = 0;

async function show(route, { focus = false } = {}) {
  const key = `${route.view}:${JSON.stringify(route.params)}`;
  const mine = ++generation;
  const entry = VIEWS[route.view];
  let module;
  try {
    module = await entry.load();
  } catch (error) {
    console.error("view failed to load", error);
    return;
  }
  if (mine !== generation) return;
  if (current && current.key === key) return;
  // Leave the current view: hide a keep-alive one, unmount the rest.
  if (current) {
    if (current.module.keepAlive) current.container.hidden = true;
    else {
      current.unmount?.();
      current.container.remove();
      mounted.delete(current.view);
    }
  }
  let target = mounted.get(route.view);
  if (target && module.keepAlive) {
    target.container.hidden = false;
    target.key = key;
    target.module.update?.(route.params);
  } else {
    const container = document.createElement("div");
    container.className = "view";
    container.dataset.view = route.view;
    // First in <main>, before any kept-alive (hidden) view.
    root.prepend(container);
    target = { view: route.view, container, module, key, unmount: null };
    mounted.set(route.view, target);
    try {
      target.unmount = module.mount(container, route.params) || null;
    } catch (error) {
      console.error("view failed to mount", error);
    }
  }
  current = target;
  current.title = module.title?.(route.params) || entry.title;
  renderTitle();
  for (const link of document.querySelectorAll("nav a[data-view]")) {
    if (link.dataset.view === entry.nav) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  if (focus) root.focus();
}

/** Follows a /ui link inside the page without reloading it. */
function navigate(href, { replace = false } = {}) {
  const url = new URL(href, location.href);
  if (url.pathname + url.search + url.hash === location.pathname + location.search + location.hash) return;
  if (replace) history.replaceState({}, "", url);
  else history.pushState({}, "", url);
  show(routeOf(url.pathname), { focus: !replace });
}

document.addEventListener("click", (event) => {
  const link = event.target.closest?.("a[href]");
  if (!link || link.target || link.hasAttribute("download")) return;
  if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  const url = new URL(link.href, location.href);
  if (url.origin !== location.origin || !url.pathname.startsWith("/ui")) return;
  if (/\.[a-z0-9]+$/i.test(url.pathname) && !url.pathname.startsWith("/ui/models/")) return;
  event.preventDefault();
  navigate(url.href);
});

window.addEventListener("popstate", () => show(routeOf(location.pathname)));

// The title: the view, then the reader's page title (Settings).

const titleEl = document.getElementById("app-title");

function renderTitle() {
  const title = appTitle();
  titleEl.textContent = title;
  const dot = state.connection === "live" ? "" : state.connection === "connecting" ? "… " : "⚠ ";
  document.title = `${dot}${current?.title ? `${current.title} · ` : ""}${title}`;
}

onPref("title", renderTitle);
onPref("theme", applyAppearance);
onPref("accent", applyAppearance);

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
  if (state.connection === "live") fetchVersion();
  renderTitle();
});

/** /api/version, once per connection (a server without it keeps uiConfig's version). */
async function fetchVersion() {
  try {
    setVersion(await getJson("/api/version"));
  } catch {
    // Older servers answer 404: Settings shows what uiConfig says.
  }
}

/** Calls `read` now, and again after the last call, at most once per half second. */
function throttled(read) {
  let busy = false;
  let again = false;
  return async function run() {
    if (busy) {
      again = true;
      return;
    }
    busy = true;
    try {
      await read();
    } catch {
      // Extras: the views work without them.
    }
    setTimeout(() => {
      busy = false;
      if (again) {
        again = false;
        run();
      }
    }, 500);
  };
}

// /v1/models adds capabilities and metadata to the model rows, and /running
// the GPUs' memory under the memory router; both are read again when the
// models change.
subscribe(
  ["models"],
  throttled(async () => setListing((await getJson("/v1/models")).data)),
);
subscribe(
  ["models"],
  throttled(async () => setGpus((await getJson("/running")).gpus)),
);

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

// llama-swap's UI uses hash routes (/ui/#/models/x): an old bookmark lands on the same view.
if (location.hash.startsWith("#/")) {
  const legacy = location.hash.slice(1);
  history.replaceState({}, "", legacy === "/" ? "/ui/activity" : `/ui${legacy}`);
}

applyAppearance();
renderTitle();
show(routeOf(location.pathname));
events = followEvents(apply, setConnection);
