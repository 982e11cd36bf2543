// Playground: try the server's models by hand, at a chosen priority. One tab
// per kind of request, each at /ui/playground/<tab>. The view is kept alive
// when the reader leaves it (app.js), and each tab stays mounted once opened,
// so a streaming answer or a running load test goes on in the background.

import { h, tabList, tabPanel } from "../../lib/dom.js";
import { pref, setPref } from "../../prefs.js";
import * as chat from "./chat.js";
import * as images from "./images.js";
import * as speech from "./speech.js";
import * as transcription from "./transcription.js";
import * as rerank from "./rerank.js";
import * as loadtest from "./loadtest.js";

export const keepAlive = true;

const TABS = [
  { id: "chat", label: "Chat", module: chat },
  { id: "images", label: "Images", module: images },
  { id: "speech", label: "Speech", module: speech },
  { id: "transcription", label: "Transcription", module: transcription },
  { id: "rerank", label: "Rerank", module: rerank },
  { id: "load-test", label: "Load test", module: loadtest },
];

let select = null;

/** The tab a route names, else the last one used. */
function tabOf(params) {
  const wanted = params?.tab || pref("pg.tab", "chat");
  return TABS.some((t) => t.id === wanted) ? wanted : "chat";
}

export function title(params) {
  const tab = TABS.find((t) => t.id === tabOf(params));
  return `Playground · ${tab.label}`;
}

export function mount(root, params) {
  const panels = new Map();
  const unmounts = [];
  const tabs = tabList("Playground", TABS, tabOf(params), (id) => {
    const path = `/ui/playground/${id}`;
    if (location.pathname !== path) history.pushState({}, "", path);
    show(id);
  }, "pg-tab");
  root.append(h("div", { class: "toolbar" }, h("h1", {}, "Playground"), tabs.el));
  const body = h("div", { class: "playground" });
  root.append(body);

  function show(id) {
    tabs.select(id);
    setPref("pg.tab", id);
    for (const [tab, panel] of panels) panel.hidden = tab !== id;
    if (!panels.has(id)) {
      const panel = tabPanel(tabs, id);
      panel.dataset.tab = id;
      body.append(panel);
      panels.set(id, panel);
      const tab = TABS.find((t) => t.id === id);
      unmounts.push(tab.module.mount(panel));
    }
    const label = TABS.find((t) => t.id === id).label;
    document.title = document.title.replace(/Playground( · [^·]+)?/, `Playground · ${label}`);
  }

  select = show;
  show(tabOf(params));
  settle(params);
  return () => {
    select = null;
    for (const fn of unmounts) fn?.();
  };
}

/** A route change to another tab while the view is kept alive. */
export function update(params) {
  select?.(tabOf(params));
  settle(params);
}

/** /ui/playground (no tab) becomes the tab's own address, so Back returns to that tab. */
function settle(params) {
  if (!params?.tab) history.replaceState({}, "", `/ui/playground/${tabOf(params)}`);
}
