/**
 * Recent refusals (values read from a device but not turned into samples), kept for the console:
 * per variable a count by reason and the last few with their detail, and the newest overall.
 * Bounded: a fixed number per variable, a cap on variables, a fixed overall list.
 */
export interface RefusalRecord {
  at: number;
  source: string;
  variable: string | null;
  reason: string;
  detail: string | null;
}

/**
 * A kind of refusal is a current problem while it keeps happening: its newest one is at most this
 * old, and its source has not gone on delivering without it for REFUSALS_QUIET_MS.
 */
export const REFUSALS_CURRENT_MS = 60_000;
/**
 * A source that delivered this long after its last refusal of a kind, without another one, is
 * over it: a blip (an unknown Sparkplug alias until the edge node's rebirth) clears soon after the
 * rebirth, a refusal that comes with every message (an unmapped metric) stays.
 */
export const REFUSALS_QUIET_MS = 10_000;

/** Values of one source refused for one reason, while that goes on (the Overview's problems). */
export interface RefusalCondition {
  source: string;
  reason: string;
  /** Refusals of it among the recent ones, and over what time. */
  count: number;
  first_at: number;
  last_at: number;
  /** A few of the variables concerned (none when the refusal names none: an unknown alias, a malformed message). */
  variables: string[];
}

export interface RefusalsEnd {
  /** The variable has been read fine since `at` (its quality good from later on). */
  readFineSince?(variable: string, at: number): boolean;
  /** When the source last delivered a sample (epoch ms), or null. */
  lastSampleAt?(source: string): number | null;
}

/**
 * The refusals that still describe a condition at `now` (see REFUSALS_CURRENT_MS and
 * REFUSALS_QUIET_MS); a refusal naming a variable that has been read fine since no longer counts.
 * `records` newest first, as `RefusalLog.recent()` gives them.
 */
export function currentRefusals(records: readonly RefusalRecord[], now: number, end: RefusalsEnd = {}): RefusalCondition[] {
  const out = new Map<string, RefusalCondition>();
  for (const r of records) {
    if (now - r.at > REFUSALS_CURRENT_MS) continue;
    if (r.variable !== null && end.readFineSince?.(r.variable, r.at)) continue;
    const key = `${r.source}\u0000${r.reason}`;
    const c = out.get(key);
    if (!c) {
      out.set(key, { source: r.source, reason: r.reason, count: 1, first_at: r.at, last_at: r.at, variables: r.variable ? [r.variable] : [] });
      continue;
    }
    c.count += 1;
    c.first_at = Math.min(c.first_at, r.at);
    c.last_at = Math.max(c.last_at, r.at);
    if (r.variable && c.variables.length < 3 && !c.variables.includes(r.variable)) c.variables.push(r.variable);
  }
  return [...out.values()].filter((c) => {
    const last = end.lastSampleAt?.(c.source) ?? null;
    return last === null || last - c.last_at < REFUSALS_QUIET_MS;
  });
}

const PER_VARIABLE = 10;
const RECENT = 200;
const MAX_VARIABLES = 50_000;

export class RefusalLog {
  private readonly byVariable = new Map<string, { byReason: Record<string, number>; last: RefusalRecord[] }>();
  private readonly recentList: RefusalRecord[] = [];
  private changed = new Set<string>();

  record(r: RefusalRecord, n = 1): void {
    this.recentList.push(r);
    if (this.recentList.length > RECENT) this.recentList.splice(0, this.recentList.length - RECENT);
    if (!r.variable) return;
    let v = this.byVariable.get(r.variable);
    if (!v) {
      if (this.byVariable.size >= MAX_VARIABLES) return;
      v = { byReason: {}, last: [] };
      this.byVariable.set(r.variable, v);
    }
    v.byReason[r.reason] = (v.byReason[r.reason] ?? 0) + n;
    this.changed.add(r.variable);
    v.last.push(r);
    if (v.last.length > PER_VARIABLE) v.last.shift();
  }

  /** Variables with new refusals since the previous call, with their counts by reason. */
  takeChanged(): Array<[string, Record<string, number>]> {
    const out: Array<[string, Record<string, number>]> = [];
    for (const id of this.changed) out.push([id, { ...this.byVariable.get(id)!.byReason }]);
    this.changed.clear();
    return out;
  }

  of(variable: string): { byReason: Record<string, number>; last: RefusalRecord[] } | undefined {
    return this.byVariable.get(variable);
  }

  recent(): RefusalRecord[] {
    return [...this.recentList].reverse();
  }
}
