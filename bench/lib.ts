/** Small helpers shared by the benchmarks: tables, ratios, RSS sampling, timing. */
import { readFileSync } from 'node:fs';

export const NOISY_MACHINE_NOTE =
  'Note: shared machines are noisy (other processes compete for CPU and disk). Compare the ratio, not the absolute figures, and run twice before trusting a small difference.';

export function table(rows: Array<Record<string, string | number>>): string {
  const cols = Object.keys(rows[0] ?? {});
  const cell = (v: string | number) => (typeof v === 'number' ? (Number.isInteger(v) ? v.toLocaleString('en-US') : v.toLocaleString('en-US', { maximumFractionDigits: 2 })) : v);
  const widths = cols.map((c) => Math.max(c.length, ...rows.map((r) => String(cell(r[c])).length)));
  const line = (vals: string[]) => `| ${vals.map((v, i) => v.padEnd(widths[i])).join(' | ')} |`;
  return [line(cols), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.map((r) => line(cols.map((c) => String(cell(r[c])))))].join('\n');
}

/** Resident set size of a process in bytes (from /proc, so it works for children too). */
export function rssOf(pid: number = process.pid): number {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const m = /VmRSS:\s+(\d+) kB/.exec(status);
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/** Samples RSS every `intervalMs` until stopped; returns the peak and the samples. */
export function rssSampler(pid: number = process.pid, intervalMs = 100) {
  let peak = rssOf(pid);
  const samples: number[] = [];
  const timer = setInterval(() => {
    const v = rssOf(pid);
    samples.push(v);
    if (v > peak) peak = v;
  }, intervalMs);
  return {
    stop(): { peak: number; samples: number[] } {
      clearInterval(timer);
      return { peak, samples };
    },
    get peak() {
      return peak;
    },
  };
}

/** CPU seconds used by a process (user + system), from /proc. */
export function cpuSecondsOf(pid: number = process.pid): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    return ticks / 100;
  } catch {
    return 0;
  }
}

export const mb = (bytes: number) => Math.round((bytes / 1024 / 1024) * 10) / 10;

export function verdict(ok: boolean, text: string): string {
  return `${ok ? 'PASS' : 'FAIL'}  ${text}`;
}
