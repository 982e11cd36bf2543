// How numbers, times and sizes are written on the page.

const numberFormat = new Intl.NumberFormat();

/** "850 ms", "12.3 s", "4 min 05 s", "2 h 10 min"; "–" for nothing. */
export function duration(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return "–";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(s < 10 ? 2 : 1)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${String(Math.floor(s % 60)).padStart(2, "0")} s`;
  return `${Math.floor(m / 60)} h ${String(m % 60).padStart(2, "0")} min`;
}

/** Local wall-clock time (hh:mm:ss) of an epoch-millisecond value or a timestamp string. */
export function clock(when) {
  const ms = toMs(when);
  if (!ms) return "–";
  return new Date(ms).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
}

/** "2025-06-01 14:03:22" in local time: what an export or a tooltip shows. */
export function absolute(when) {
  const ms = toMs(when);
  if (!ms) return "–";
  const d = new Date(ms);
  const p = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

/** "5 s ago", "3 min ago", "2 h ago", then the date. */
export function relative(when, now = Date.now()) {
  const ms = toMs(when);
  if (!ms) return "–";
  const s = Math.max(0, Math.round((now - ms) / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return absolute(ms);
}

/** Milliseconds since the epoch of a number, Date or RFC 3339 string (0 when unreadable). */
export function toMs(when) {
  if (when === null || when === undefined || when === "") return 0;
  if (typeof when === "number") return when;
  if (when instanceof Date) return when.getTime();
  const ms = Date.parse(when);
  return Number.isNaN(ms) ? 0 : ms;
}

/** Signed priority text: "+10", "0", "-10". */
export function signed(n) {
  if (n === null || n === undefined) return "–";
  return n > 0 ? `+${n}` : String(n);
}

/** The SDK's tier name of a header priority, when it is one of them. */
export function tierName(n) {
  if (n === 10) return "Elevated";
  if (n === 0) return "Normal";
  if (n === -10) return "Low";
  return "";
}

/** A count with thousands separators; "–" for nothing. */
export function count(n) {
  if (n === null || n === undefined || Number.isNaN(n)) return "–";
  return numberFormat.format(n);
}

/** Tokens per second with one decimal; "–" when unknown (llama-swap sends negative values for that). */
export function speed(tps) {
  if (tps === null || tps === undefined || !(tps > 0)) return "–";
  return `${tps.toFixed(tps < 100 ? 1 : 0)} t/s`;
}

/** "512 B", "1.50 KB", "12.3 MB" (binary units, as llama-swap). */
export function bytes(n) {
  if (n === null || n === undefined || Number.isNaN(n)) return "–";
  if (n < 1024) return `${n} B`;
  const units = ["KB", "MB", "GB", "TB"];
  let value = n / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(value >= 10 ? 1 : 2)} ${units[unit]}`;
}

/** A context window as a badge: 128000 → "128K", 32768 → "32K", 1000000 → "1M". */
export function contextLength(tokens) {
  if (!(tokens > 0)) return "";
  // Powers of two are how model cards name them (32768 is "32K", not "33K").
  if (tokens >= 1024 && tokens % 1024 === 0 && tokens < 1_048_576) return `${tokens / 1024}K`;
  if (tokens >= 1_000_000) {
    const m = tokens / 1_000_000;
    return Number.isInteger(m) ? `${m}M` : `${m.toFixed(1)}M`;
  }
  if (tokens >= 1000) {
    const k = tokens / 1000;
    return Number.isInteger(k) ? `${k}K` : `${Math.round(k)}K`;
  }
  return String(tokens);
}

/** A percentage with one decimal. */
export function percent(value) {
  if (value === null || value === undefined || Number.isNaN(value)) return "–";
  return `${value.toFixed(1)} %`;
}

/** Megabytes as "812 MB" or "23.4 GB". */
export function megabytes(mb) {
  if (mb === null || mb === undefined || Number.isNaN(mb)) return "–";
  if (mb < 1024) return `${Math.round(mb)} MB`;
  return `${(mb / 1024).toFixed(1)} GB`;
}
