// What the playground's tabs share: the model picker (filtered by the
// capability a tab needs, when the config says), the priority picker, and
// sending a request with the page's key, session and priority.

import { apiFetch, ensureOk, playgroundHeaders } from "../../api.js";
import { field, h, replace } from "../../lib/dom.js";
import { can } from "../../lib/models.js";
import { pref, setPref } from "../../prefs.js";
import { modelInfo, state, subscribe } from "../../store.js";

/** The three tiers of the SDK and their X-Priority header (Normal sends none). */
export const PRIORITIES = [
  { label: "Elevated", header: 10 },
  { label: "Normal", header: null },
  { label: "Low", header: -10 },
];

/** The header value of a tier label. */
export function priorityHeader(label) {
  return PRIORITIES.find((p) => p.label === label)?.header ?? null;
}

/**
 * A model <select> that follows the server's models: listed models, their
 * aliases, selectors and peer models. With `capability`, the models that
 * declare it come first (all are offered: a config need not declare them).
 * `key` keeps the choice per tab. Returns {el (the field), select, destroy}.
 */
export function modelPicker({ id, key, capability = null, label = "Model" }) {
  const picker = h("select", { id, required: true });
  let wanted = pref(`pg.${key}.model`, "");
  picker.addEventListener("change", () => {
    wanted = picker.value;
    setPref(`pg.${key}.model`, wanted);
  });

  function render() {
    const listed = state.models.filter((m) => !m.unlisted).map(modelInfo);
    const groups = [];
    const local = listed.filter((m) => m.kind !== "selector" && m.kind !== "peer" && !m.peerID);
    const capable = capability ? local.filter((m) => can(m, capability)) : [];
    const rest = capability ? local.filter((m) => !can(m, capability)) : local;
    const names = (models) => models.flatMap((m) => [m.id, ...(m.aliases || [])]);
    if (capable.length) groups.push([`With ${capability.replace(/_/g, " ")}`, names(capable)]);
    if (rest.length) groups.push([capable.length ? "Other models" : "Models", names(rest)]);
    const selectors = listed.filter((m) => m.kind === "selector").map((m) => m.id);
    if (selectors.length) groups.push(["Selectors", selectors]);
    const peers = listed.filter((m) => m.kind === "peer" || m.peerID).map((m) => m.id);
    if (peers.length) groups.push(["Peers", peers]);
    const all = groups.flatMap(([, ids]) => ids);
    const choice = all.includes(picker.value) ? picker.value : all.includes(wanted) ? wanted : all[0] || "";
    replace(
      picker,
      all.length
        ? groups.map(([name, ids]) =>
            h(
              "optgroup",
              { label: name },
              ids.map((value) => h("option", { value, selected: value === choice }, value)),
            ),
          )
        : h("option", { value: "" }, "No models"),
    );
    picker.value = choice;
  }

  const off = subscribe(["models", "listing"], render);
  render();
  return { el: field(label, picker), select: picker, destroy: off };
}

/** A priority <select> (Elevated / Normal / Low), its choice kept per tab. */
export function priorityPicker({ id, key }) {
  const picker = h(
    "select",
    { id },
    PRIORITIES.map((p) => h("option", { value: p.label }, p.label)),
  );
  picker.value = pref(`pg.${key}.priority`, "Normal");
  picker.addEventListener("change", () => setPref(`pg.${key}.priority`, picker.value));
  return { el: field("Priority", picker), select: picker };
}

/**
 * POSTs to a model endpoint with the page's key, session and the priority
 * tier `priority`; throws an HttpError with the server's message unless 2xx.
 * `body` is an object (sent as JSON) or FormData.
 */
export async function send(path, { body, priority = "Normal", signal, accept } = {}) {
  const extra = {};
  if (!(body instanceof FormData)) extra["Content-Type"] = "application/json";
  if (accept) extra.Accept = accept;
  const response = await apiFetch(path, {
    method: "POST",
    headers: playgroundHeaders(priorityHeader(priority), extra),
    body: body instanceof FormData ? body : JSON.stringify(body),
    signal,
  });
  return ensureOk(response);
}

/** A row of form controls. */
export function controls(...children) {
  return h("div", { class: "controls" }, ...children);
}
