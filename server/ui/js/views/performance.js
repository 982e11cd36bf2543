// Performance: CPU, memory, load, network and GPU charts from the server's
// samples (/api/performance, read again every few seconds with ?after=), and
// the machine itself (/api/hardware).

import { getJson } from "../api.js";
import { timeChart } from "../lib/chart.js";
import { copyButton } from "../lib/clipboard.js";
import { h, replace, select } from "../lib/dom.js";
import { megabytes, percent, toMs } from "../lib/format.js";
import { onPref, pref, setPref } from "../prefs.js";
import { state, subscribe } from "../store.js";

const WINDOWS = [
  ["300", "5 min"],
  ["900", "15 min"],
  ["3600", "1 hour"],
];
const INTERVALS = [
  ["0", "Off"],
  ["2", "2 s"],
  ["5", "5 s"],
  ["15", "15 s"],
  ["60", "60 s"],
];

export function mount(root, params) {
  const windowSel = select({ id: "perf-window" }, WINDOWS, pref("perf.window", "900"));
  const every = select({ id: "perf-every" }, INTERVALS, pref("perf.every", "5"));
  const refresh = h("button", { type: "button", class: "secondary small", id: "perf-refresh" }, "Refresh now");
  const status = h("p", { class: "hint", id: "perf-status", "aria-live": "polite" });
  const charts = h("div", { class: "perf-grid", id: "perf-charts" });
  const gpus = h("div", { class: "perf-grid", id: "gpu-charts" });
  const hardware = h("div", { id: "hardware" });
  root.append(
    h(
      "div",
      { class: "toolbar" },
      h("h1", {}, "Performance"),
      h("div", { class: "field" }, h("label", { for: windowSel.id }, "Window"), windowSel),
      h("div", { class: "field" }, h("label", { for: every.id }, "Refresh"), every),
      refresh,
    ),
    status,
    h("section", { "aria-labelledby": "host-title" }, h("h2", { id: "host-title" }, "Host"), charts),
    h("section", { "aria-labelledby": "gpu-title" }, h("h2", { id: "gpu-title" }, "GPUs"), gpus),
    h("section", { "aria-labelledby": "hw-title", id: "hardware-section" }, h("h2", { id: "hw-title" }, "Hardware"), hardware),
  );

  let sys = [];
  let gpu = [];
  let made = null;
  let timer = null;
  let stopped = false;

  async function read(after) {
    try {
      const url = after ? `/api/performance?after=${encodeURIComponent(after)}` : "/api/performance";
      const body = await getJson(url);
      if (stopped) return;
      if (body.enabled === false) {
        status.textContent = "Sampling is off on this server (performance.disabled).";
        return;
      }
      // Two reads may overlap (the timer and Refresh now): keep each sample once.
      const newer = (list, fresh) => {
        const last = list.length ? toMs(list[list.length - 1].timestamp) : -Infinity;
        return list.concat(fresh.filter((x) => toMs(x.timestamp) > last));
      };
      const lastGpu = gpu.length ? toMs(gpu[gpu.length - 1].timestamp) : -Infinity;
      sys = after ? newer(sys, body.sys_stats || []) : body.sys_stats || [];
      gpu = after ? gpu.concat((body.gpu_stats || []).filter((x) => toMs(x.timestamp) > lastGpu)) : body.gpu_stats || [];
      const keep = Date.now() - 3600_000 - 60_000;
      sys = sys.filter((s) => toMs(s.timestamp) >= keep);
      gpu = gpu.filter((g) => toMs(g.timestamp) >= keep);
      status.textContent = sys.length ? `${sys.length} samples; the latest at ${new Date(toMs(sys[sys.length - 1].timestamp)).toLocaleTimeString()}.` : "No samples yet.";
      draw();
    } catch (error) {
      if (stopped) return;
      status.textContent =
        error?.status === 503
          ? "Sampling is off on this server (performance.disabled)."
          : error?.status === 404
            ? "This server does not sample performance."
            : `The samples could not be read: ${error.message}`;
    }
  }

  function windowed(list) {
    const from = Date.now() - Number(windowSel.value) * 1000;
    return list.filter((s) => toMs(s.timestamp) >= from);
  }

  function draw() {
    const s = windowed(sys);
    const g = windowed(gpu);
    const t = s.map((x) => toMs(x.timestamp) / 1000);
    const cores = (x) => x.cpu_util_per_core || [];
    const avg = (a) => (a.length ? a.reduce((p, q) => p + q, 0) / a.length : null);
    const sets = [
      {
        id: "cpu",
        title: "CPU",
        yRange: [0, 100],
        format: (v) => `${Math.round(v)}%`,
        series: [{ label: "average" }, { label: "busiest core" }],
        data: [t, s.map((x) => avg(cores(x))), s.map((x) => (cores(x).length ? Math.max(...cores(x)) : null))],
      },
      {
        id: "memory",
        title: "Memory",
        yRange: [0, 100],
        format: (v) => `${Math.round(v)}%`,
        series: [{ label: "memory used" }, { label: "swap used" }],
        data: [
          t,
          s.map((x) => (x.mem_total_mb ? (x.mem_used_mb / x.mem_total_mb) * 100 : null)),
          s.map((x) => (x.swap_total_mb ? (x.swap_used_mb / x.swap_total_mb) * 100 : 0)),
        ],
      },
      {
        id: "load",
        title: "Load average",
        format: (v) => v.toFixed(1),
        series: [{ label: "1 min" }, { label: "5 min" }, { label: "15 min" }],
        data: [t, s.map((x) => x.load_avg_1 ?? null), s.map((x) => x.load_avg_5 ?? null), s.map((x) => x.load_avg_15 ?? null)],
      },
      {
        id: "network",
        title: "Network (Mbit/s)",
        format: (v) => v.toFixed(v < 10 ? 1 : 0),
        series: [{ label: "in" }, { label: "out" }],
        data: network(s),
      },
    ];
    const latest = s[s.length - 1];
    const subtitle = {
      cpu: latest ? `${(latest.cpu_util_per_core || []).length} cores` : "",
      memory: latest ? `${megabytes(latest.mem_used_mb)} of ${megabytes(latest.mem_total_mb)}` : "",
    };
    // GPUs: one line per GPU in each chart.
    const ids = [...new Set(g.map((x) => x.id))].sort((a, b) => a - b);
    const names = Object.fromEntries(ids.map((id) => [id, g.find((x) => x.id === id)?.name || `GPU ${id}`]));
    const times = [...new Set(g.map((x) => toMs(x.timestamp)))].sort((a, b) => a - b);
    const column = (field, scale = (v) => v) =>
      ids.map((id) => {
        const by = new Map(g.filter((x) => x.id === id).map((x) => [toMs(x.timestamp), x[field]]));
        return times.map((ms) => (by.has(ms) && by.get(ms) !== null ? scale(by.get(ms), id) : null));
      });
    const gpuSets = ids.length
      ? [
          { id: "gpu-util", title: "GPU utilisation", yRange: [0, 100], format: (v) => `${Math.round(v)}%`, field: "gpu_util_pct" },
          { id: "gpu-mem", title: "GPU memory used", format: (v) => megabytes(v), field: "mem_used_mb" },
          { id: "gpu-temp", title: "GPU temperature", format: (v) => `${Math.round(v)} °C`, field: "temp_c" },
          { id: "gpu-power", title: "GPU power", format: (v) => `${Math.round(v)} W`, field: "power_draw_w" },
        ].map((set) => ({ ...set, series: ids.map((id) => ({ label: names[id] })), data: [times.map((ms) => ms / 1000), ...column(set.field)] }))
      : [];
    const latestGpu = ids.map((id) => g.filter((x) => x.id === id).pop());
    subtitle["gpu-mem"] = latestGpu.map((x) => `${names[x.id]}: ${megabytes(x.mem_used_mb)} of ${megabytes(x.mem_total_mb)}`).join(" · ");
    subtitle["gpu-util"] = latestGpu.map((x) => `${names[x.id]}: ${percent(x.gpu_util_pct)}`).join(" · ");

    const key = `${sets.map((x) => x.series.length).join()}|${ids.join()}`;
    if (!made || made.key !== key) build(sets, gpuSets, subtitle, key);
    else {
      for (const set of [...sets, ...gpuSets]) {
        made.charts.get(set.id)?.setData(set.data);
        const sub = made.subs.get(set.id);
        if (sub) sub.textContent = subtitle[set.id] || "";
      }
    }
  }

  function build(sets, gpuSets, subtitle, key) {
    destroyCharts();
    made = { key, charts: new Map(), subs: new Map() };
    const place = (target, list) =>
      replace(
        target,
        list.map((set) => {
          const box = h("div", { class: "chart", dataset: { chart: set.id } });
          const sub = h("span", { class: "hint" }, subtitle[set.id] || "");
          made.subs.set(set.id, sub);
          const figure = h("figure", { class: "panel chart-card" }, h("figcaption", {}, h("h3", {}, set.title), sub), box);
          return { figure, box, set };
        }).map(({ figure, box, set }) => {
          queueMicrotask(() => made?.charts.set(set.id, timeChart(box, set)));
          return figure;
        }),
      );
    place(charts, sets);
    if (gpuSets.length) place(gpus, gpuSets);
    else replace(gpus, h("p", { class: "empty" }, "No GPU samples: none was found, or none can be read (nvidia-smi, rocm-smi, sysfs)."));
  }

  function destroyCharts() {
    if (!made) return;
    for (const chart of made.charts.values()) chart.destroy();
    made = null;
  }

  function schedule() {
    clearInterval(timer);
    const seconds = Number(every.value);
    if (seconds > 0) {
      timer = setInterval(() => {
        if (document.hidden) return;
        const last = sys[sys.length - 1]?.timestamp;
        read(last);
      }, seconds * 1000);
    }
  }

  windowSel.addEventListener("change", () => {
    setPref("perf.window", windowSel.value);
    draw();
  });
  refresh.addEventListener("click", () => read(sys[sys.length - 1]?.timestamp));
  every.addEventListener("change", () => {
    setPref("perf.every", every.value);
    schedule();
  });
  const offs = [
    onPref("theme", () => {
      if (made) made.key = "";
      draw();
    }),
    subscribe(["connection"], () => {
      if (state.connection === "live") read();
    }),
  ];

  read().then(schedule);
  loadHardware(hardware);
  if (params?.section === "hardware") queueMicrotask(() => document.getElementById("hardware-section")?.scrollIntoView());
  return () => {
    stopped = true;
    clearInterval(timer);
    destroyCharts();
    for (const off of offs) off();
  };
}

/** Received and sent Mbit/s summed over the interfaces, from the byte counters of consecutive samples. */
function network(samples) {
  const t = [];
  const rx = [];
  const tx = [];
  for (let i = 1; i < samples.length; i++) {
    const dt = (toMs(samples[i].timestamp) - toMs(samples[i - 1].timestamp)) / 1000;
    if (dt <= 0) continue;
    const sum = (s, f) => (s.net_io || []).reduce((n, x) => n + (x[f] || 0), 0);
    t.push(toMs(samples[i].timestamp) / 1000);
    rx.push(Math.max(0, ((sum(samples[i], "bytes_recv") - sum(samples[i - 1], "bytes_recv")) * 8) / dt / 1e6));
    tx.push(Math.max(0, ((sum(samples[i], "bytes_sent") - sum(samples[i - 1], "bytes_sent")) * 8) / dt / 1e6));
  }
  return [t, rx, tx];
}

async function loadHardware(box) {
  replace(box, h("p", { class: "hint" }, "Reading the hardware…"));
  let hw;
  try {
    hw = await getJson("/api/hardware");
  } catch (error) {
    replace(
      box,
      h(
        "p",
        { class: "empty" },
        error?.status === 503 || error?.status === 404 ? "The hardware could not be detected on this server." : `The hardware could not be read: ${error.message}`,
      ),
    );
    return;
  }
  const shown = (v) => (v === null || v === undefined || v === "" ? "not detected" : String(v));
  const title = (v) => String(v || "").replace(/_/g, " ").replace(/\b\w/g, (c) => c.toUpperCase());
  const gib = (b) => (b ? `${(b / 1024 ** 3).toFixed(1)} GiB` : "not detected");
  const os = hw.operating_system || {};
  const cpu = hw.cpu || {};
  const env = hw.environment || {};
  const sections = [
    [
      "System",
      [
        ["Operating system", [os.name || title(os.family), os.version].filter(Boolean).join(" ") || "not detected"],
        ["Kernel", shown(os.kernel)],
        ["Architecture", shown(hw.architecture?.name)],
        ["Environment", env.kind ? `${title(env.kind)}${env.name ? ` (${env.name})` : ""}${env.version ? ` ${env.version}` : ""}` : "not detected"],
      ],
    ],
    [
      "CPU",
      [
        ["Model", shown(cpu.model)],
        ["Vendor", shown(cpu.vendor)],
        ["Sockets", shown(cpu.socket_count)],
        ["Cores", shown(cpu.physical_core_count)],
        ["Threads", shown(cpu.logical_thread_count)],
      ],
    ],
    ["Memory", [["Capacity", gib(hw.memory?.capacity_bytes)]]],
    ...(hw.accelerators || []).map((a) => [
      `${title(a.kind || "accelerator")} ${(a.index ?? 0) + 1}: ${a.model || "unknown model"}`,
      [
        ["Vendor", shown(a.vendor)],
        ["Architecture", shown(a.architecture)],
        ["Memory", `${gib(a.memory?.capacity_bytes)}${a.memory?.kind ? ` (${title(a.memory.kind)})` : ""}`],
        ["Driver", a.driver ? [a.driver.name, a.driver.version].filter(Boolean).join(" ") || "not detected" : "not detected"],
        ["Power limit", a.power_limit_watts === null || a.power_limit_watts === undefined ? "not detected" : `${a.power_limit_watts} W`],
      ],
    ]),
  ];
  const summary = sections.map(([name, rows]) => [name, ...rows.map(([k, v]) => `  ${k}: ${v}`)].join("\n")).join("\n\n");
  replace(
    box,
    h(
      "div",
      { class: "hw-grid" },
      sections.map(([name, rows]) =>
        h("section", { class: "panel card hw-card" }, h("h3", {}, name), h("dl", { class: "pairs" }, rows.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]))),
      ),
    ),
    (hw.accelerators || []).length ? null : h("p", { class: "hint" }, "No accelerators were detected or exposed to this process."),
    h("p", {}, copyButton(() => `Hardware\n\n${summary}`, "Copy summary", "Copy the hardware summary")),
  );
}
