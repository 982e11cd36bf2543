// A model's page (/ui/models/<id>): what it is and its state, Load /
// Unload, and tabs for its activity, its logs, its queue and its resolved
// configuration.

import { getJson, post } from "../api.js";
import { h, isOff, replace, setOff, tabList, tabPanel } from "../lib/dom.js";
import { historyTable } from "../lib/history.js";
import { logPane } from "../lib/logpane.js";
import { capabilityBadges } from "../lib/models.js";
import { failureBox, placement, setStateBadge } from "../lib/placement.js";
import { runningTable, tick, waitingTable } from "../lib/requests.js";
import { toast } from "../lib/toast.js";
import { pref, setPref } from "../prefs.js";
import { findModel, modelInfo, runningRequests, state, subscribe } from "../store.js";

const TABS = [
  { id: "activity", label: "Activity" },
  { id: "logs", label: "Logs" },
  { id: "queue", label: "Queue" },
  { id: "config", label: "Config" },
];

export function title(params) {
  return `Model ${params.id}`;
}

export function mount(root, { id: asked }) {
  const heading = h("h1", {});
  const badge = h("span", { class: "badge" });
  const caps = h("div", { class: "model-caps" });
  const facts = h("dl", { class: "pairs facts" });
  const where = h("div", { class: "model-placement" });
  const failure = h("div", { class: "model-failure" });
  const load = h("button", { type: "button", id: "model-load" }, "Load");
  const unload = h("button", { type: "button", class: "secondary", id: "model-unload" }, "Unload");
  const upstream = h("a", { class: "button secondary", target: "_blank", rel: "noopener", id: "model-upstream" }, "Open upstream");
  const missing = h("p", { class: "empty", hidden: true });
  const header = h(
    "section",
    { class: "panel card model-page-head" },
    h("div", { class: "toolbar" }, heading, badge, h("div", { class: "tools" }, upstream, load, unload)),
    caps,
    failure,
    where,
    facts,
  );
  let tab = pref("modelTab", "activity");
  if (!TABS.some((t) => t.id === tab)) tab = "activity";
  const tabs = tabList(
    "Model",
    TABS,
    tab,
    (next) => {
      tab = next;
      setPref("modelTab", next);
      showTab();
    },
    "model-tab",
  );
  const panels = Object.fromEntries(TABS.map((t) => [t.id, tabPanel(tabs, t.id)]));
  root.append(
    h("p", { class: "crumbs" }, h("a", { href: "/ui/models" }, "Models"), " / ", h("span", { class: "mono" }, asked)),
    missing,
    header,
    tabs.el,
    ...Object.values(panels),
  );

  let id = asked;
  let pending = null;
  const cleanups = [];
  const mounted = new Set();

  function model() {
    const m = findModel(asked);
    return m ? modelInfo(m) : null;
  }

  function renderHead() {
    const m = model();
    missing.hidden = Boolean(m) || state.models.length === 0;
    missing.textContent = `No model “${asked}” is configured.`;
    header.hidden = !m;
    tabs.el.hidden = !m;
    for (const panel of Object.values(panels)) if (!m) panel.hidden = true;
    if (!m) return;
    id = m.id;
    heading.textContent = m.name || m.id;
    setStateBadge(badge, m.state);
    const placed = placement(m);
    replace(where, placed);
    where.hidden = !placed;
    const failed = failureBox(m);
    replace(failure, failed);
    failure.hidden = !failed;
    replace(caps, capabilityBadges(m));
    const selector = m.kind === "selector";
    const peer = m.kind === "peer" || Boolean(m.peerID);
    const rows = [
      ["ID", m.id],
      m.aliases?.length ? ["Aliases", m.aliases.join(", ")] : null,
      m.description ? ["Description", m.description] : null,
      selector ? ["Selector", `${m.strategy} → ${(m.targets || []).join(", ")}`] : null,
      peer ? ["Peer", m.peerID] : null,
      ["Requests", `${m.in_flight || 0} running · ${m.waiting || 0} waiting`],
      m.unlisted ? ["Listed", "no (unlisted)"] : null,
      ...Object.entries(m.metadata || {}).map(([k, v]) => [k, typeof v === "string" ? v : JSON.stringify(v)]),
    ].filter(Boolean);
    replace(facts, rows.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
    load.hidden = selector || peer;
    unload.hidden = selector || peer;
    upstream.hidden = selector || peer;
    upstream.href = `/upstream/${encodeURIComponent(m.id)}/`;
    setOff(load, pending !== null || m.state === "ready" || m.state === "starting" || m.state === "stopping");
    setOff(unload, pending !== null || m.state === "stopped" || m.state === "failed");
    load.textContent = pending === "load" ? "Loading…" : "Load";
    unload.textContent = pending === "unload" ? "Unloading…" : "Unload";
    load.setAttribute("aria-label", `Load ${m.id}`);
    unload.setAttribute("aria-label", `Unload ${m.id}`);
    showTab();
  }

  async function act(action, button) {
    if (isOff(button)) return;
    pending = action;
    renderHead();
    try {
      await post(`/api/models/${action}/${encodeURIComponent(id)}`);
    } catch (error) {
      toast(`${action === "load" ? "Load" : "Unload"} failed: ${error.message}`, "error");
    } finally {
      pending = null;
      renderHead();
    }
  }
  load.addEventListener("click", () => act("load", load));
  unload.addEventListener("click", () => act("unload", unload));

  function showTab() {
    if (!model()) return;
    tabs.select(tab);
    for (const [name, panel] of Object.entries(panels)) panel.hidden = name !== tab;
    if (mounted.has(tab)) return;
    mounted.add(tab);
    const panel = panels[tab];
    if (tab === "activity") {
      const table = historyTable({ id: "model", model: id, title: "Requests" });
      panel.append(table.el);
      cleanups.push(table.destroy);
    } else if (tab === "logs") {
      const pane = logPane({
        id: "model-log",
        title: "Logs",
        accept: (line) => line.model === id,
      });
      panel.append(pane.el);
      cleanups.push(pane.destroy);
    } else if (tab === "queue") {
      mountQueue(panel, id, cleanups);
    } else if (tab === "config") {
      mountConfig(panel, id);
    }
  }

  cleanups.push(subscribe(["models", "listing"], renderHead));
  renderHead();
  return () => {
    for (const fn of cleanups) fn();
  };
}

function mountQueue(panel, id, cleanups) {
  const waiting = waitingTable({ id: "model-waiting", withModel: false });
  const running = runningTable({ id: "model-running", withModel: false });
  panel.append(
    h("div", { class: "section-head" }, h("h2", {}, "Waiting"), waiting.menu),
    waiting.el,
    h("div", { class: "section-head" }, h("h2", {}, "Running"), running.menu),
    running.el,
  );
  function render() {
    waiting.setRows((state.queue.queue || []).filter((r) => r.model === id));
    running.setRows(runningRequests().filter((r) => r.model === id));
  }
  const timer = setInterval(tick, 1000);
  cleanups.push(subscribe(["queue", "inflight"], render), () => clearInterval(timer));
  render();
}

/** The model's resolved configuration (GET /api/models/config/{id}), as key and value rows. */
async function mountConfig(panel, id) {
  const box = h("div", { class: "config", id: "model-config" }, h("p", { class: "hint" }, "Reading the configuration…"));
  panel.append(box);
  try {
    const config = await getJson(`/api/models/config/${encodeURIComponent(id)}`);
    replace(box, configView(config));
  } catch (error) {
    replace(
      box,
      h(
        "p",
        { class: error?.status === 404 ? "hint" : "error" },
        error?.status === 404 ? "This server does not show a model's configuration." : `The configuration could not be read: ${error.message}`,
      ),
    );
  }
}

function configView(config) {
  const rows = Object.entries(config).filter(([, v]) => v !== null && v !== undefined && !(Array.isArray(v) && !v.length));
  return h(
    "dl",
    { class: "pairs config-pairs" },
    rows.map(([key, value]) => [
      h("dt", { class: "mono" }, key),
      h(
        "dd",
        {},
        typeof value === "object" ? h("pre", { class: "mono" }, JSON.stringify(value, null, 2)) : h("span", { class: "mono" }, String(value)),
      ),
    ]),
  );
}
