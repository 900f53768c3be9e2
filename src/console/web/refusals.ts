import { fmtAgo, fmtNum, fmtTime } from '../../web/format.js';
import { REFUSALS_KEPT, type RefusalRecord } from '../api/live.js';

/** A problem of the Overview: what an engineer has to act on. */
export interface Problem {
  level: 'bad' | 'warn';
  text: string;
  href?: string;
}

/** The window the Overview counts refused values over. */
export const REFUSALS_WINDOW_MS = 10 * 60_000;

/**
 * Values refused in the last REFUSALS_WINDOW_MS, by reason, saying over what window and when the
 * latest was: "12 in the last 10 min, the latest 14 s ago". The gateway keeps its last 200
 * refusals: when all of them fall in the window, the count is "at least".
 */
export function refusalProblems(refusals: readonly RefusalRecord[], now: number): Problem[] {
  const since = now - REFUSALS_WINDOW_MS;
  const recent = refusals.filter((r) => r.at >= since);
  const atLeast = refusals.length >= REFUSALS_KEPT && recent.length === refusals.length ? 'at least ' : '';
  const byReason = new Map<string, { n: number; latest: number }>();
  for (const r of recent) {
    const b = byReason.get(r.reason) ?? { n: 0, latest: 0 };
    b.n += 1;
    b.latest = Math.max(b.latest, r.at);
    byReason.set(r.reason, b);
  }
  const window = `${Math.round(REFUSALS_WINDOW_MS / 60_000)} min`;
  return [...byReason].map(([reason, b]) => ({ level: 'warn' as const, text: `Values refused in the last ${window}: ${reason.replace(/_/g, ' ')}, ${atLeast}${fmtNum(b.n)} (the latest ${fmtAgo(now - b.latest)}, at ${fmtTime(b.latest)}).`, href: '#/variables' }));
}
