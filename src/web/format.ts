// How the pages write numbers, sizes, ages and times.

export function fmtNum(v: number | null | undefined): string {
  if (v === null || v === undefined) return '–';
  if (!Number.isFinite(v)) return String(v);
  const a = Math.abs(v);
  if (a !== 0 && (a >= 1e7 || a < 1e-3)) return v.toExponential(3);
  return (Number.isInteger(v) ? INTEGER : a < 10 ? FRACTION_3 : a < 1000 ? FRACTION_2 : FRACTION_1).format(v);
}

// Built once: toLocaleString with options builds an Intl.NumberFormat on every call (tens of µs),
// which was most of what a 1 Hz update of the 5,000-variable table cost the page.
const INTEGER = new Intl.NumberFormat('en-US');
const FRACTION_3 = new Intl.NumberFormat('en-US', { maximumFractionDigits: 3 });
const FRACTION_2 = new Intl.NumberFormat('en-US', { maximumFractionDigits: 2 });
const FRACTION_1 = new Intl.NumberFormat('en-US', { maximumFractionDigits: 1 });

/** An age in milliseconds: `now`, `42 s`, `7 min`, `3.5 h`, `2.0 d`. */
export function fmtAge(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return '–';
  const s = Math.max(0, ms / 1000);
  if (s < 1) return 'now';
  if (s < 120) return `${Math.round(s)} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  if (s < 172800) return `${(s / 3600).toFixed(1)} h`;
  return `${(s / 86400).toFixed(1)} d`;
}

/** How long ago, as a phrase: `just now`, `42 s ago` (never "now ago"). */
export function fmtAgo(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return '–';
  return ms < 1000 ? 'just now' : `${fmtAge(ms)} ago`;
}

/** A duration in seconds: `42 s`, `7 min`, `2 h 05 min`. */
export function fmtDuration(s: number | null | undefined): string {
  if (s === null || s === undefined || !Number.isFinite(s)) return '–';
  if (s < 90) return `${Math.round(s)} s`;
  if (s < 5400) return `${Math.round(s / 60)} min`;
  return `${Math.floor(s / 3600)} h ${String(Math.round((s % 3600) / 60)).padStart(2, '0')} min`;
}

/** A time span in milliseconds: under a second in ms (a 0.4 s range is not "0 s"), else as fmtDuration. */
export function fmtSpan(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return '–';
  return ms < 1000 ? `${Math.max(0, Math.round(ms))} ms` : fmtDuration(ms / 1000);
}

export function fmtBytes(n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return '–';
  const u = ['B', 'kB', 'MB', 'GB', 'TB'];
  let i = 0;
  while (n >= 1000 && i < u.length - 1) {
    n /= 1000;
    i++;
  }
  return `${n.toFixed(i === 0 ? 0 : 1)} ${u[i]}`;
}

/** Epoch ms as `2026-11-25 14:03:07Z`. */
export function fmtTime(ms: number | null | undefined): string {
  if (!ms) return '–';
  const d = new Date(ms);
  return d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}

/** Two digits. */
export function pad(n: number): string {
  return (n < 10 ? '0' : '') + n;
}

/** Local time of day, `14:03`. */
export function hhmm(ms: number): string {
  const d = new Date(ms);
  return `${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

/** A running time in milliseconds as a stopwatch shows it: `4:07`, `1:02:09`. */
export function elapsed(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  return `${h > 0 ? `${h}:${pad(m)}` : m}:${pad(s % 60)}`;
}
