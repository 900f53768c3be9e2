import { REFUSALS_KEPT } from './api/live.js';

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

const PER_VARIABLE = 10;
const RECENT = REFUSALS_KEPT;
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
