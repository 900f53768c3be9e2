import type { Sample, SampleColumns, SampleTap } from '../core/sample.js';

/**
 * The console's view of live values: for every variable the last value and, per time bucket, the
 * minimum, maximum and sample count of the last minutes. Fed by a tap on the samples committed to
 * the buffer (the samples are never read back for this), bounded in memory: a fixed number of
 * buckets per variable and a cap on variables. At the start it is seeded with the buckets the
 * buffer kept from before a restart (trend-keeper.ts, src/buffer/trend.ts), which also takes its
 * closed buckets from then on. A min/max ring keeps spikes visible in a trend that
 * has fewer points than samples, which an average or a decimated series would hide.
 */
export const BUCKET_MS = 10_000;
export const BUCKETS = 60; // 10 minutes
/** Variables per block of storage: the buckets of many variables share a few large typed arrays
 * (one small ArrayBuffer per variable costs several times its size in allocator overhead). */
const BLOCK = 1_024;

export interface VariableEntry {
  /** Stable index of this variable for the life of the process (the live stream sends indexes). */
  readonly idx: number;
  readonly id: string;
  last: number;
  lastTs: number;
  /** Samples seen in total, and since the last `takeDirty()`. */
  total: number;
  pending: number;
  /** Bucket number (ts / BUCKET_MS) of the newest bucket held. */
  head: number;
  /**
   * This variable's BUCKETS slots: `cells.min[base + slot]` etc. in its block's shared arrays (an
   * offset, not three subarray views: a view is an object of ~100 bytes, 15 MB at 50,000 variables).
   */
  readonly cells: Cells;
  readonly base: number;
  dirty: boolean;
}

/** The bucket arrays BLOCK variables share. */
interface Cells {
  readonly min: Float32Array;
  readonly max: Float32Array;
  readonly count: Uint16Array;
}

export class ValueRing implements SampleTap {
  private readonly byId = new Map<string, VariableEntry>();
  private readonly list: VariableEntry[] = [];
  private dirty: VariableEntry[] = [];
  private blocks: Cells[] = [];
  /** Variables not tracked because the cap was reached (shown on the overview). */
  untracked = 0;

  constructor(private readonly maxVariables = 50_000) {}

  onSamples(samples: readonly Sample[]): void {
    for (const s of samples) this.add(s.variable, s.ts, s.value);
  }

  onColumns(c: SampleColumns): void {
    for (let i = 0; i < c.count; i++) this.add(c.variables[i], c.ts[i], c.values[i]);
  }

  add(variable: string, ts: number, value: number): void {
    const e = this.byId.get(variable) ?? this.create(variable, ts, value);
    if (!e) {
      this.untracked += 1;
      return;
    }
    e.total += 1;
    e.pending += 1;
    if (ts >= e.lastTs) {
      e.last = value;
      e.lastTs = ts;
    }
    if (!e.dirty) {
      e.dirty = true;
      this.dirty.push(e);
    }
    const b = Math.floor(ts / BUCKET_MS);
    // Older than the ring (a late or replayed sample): last value only.
    if (!this.reach(e, b)) return;
    const i = e.base + (b % BUCKETS);
    const c = e.cells;
    if (!(value >= c.min[i])) c.min[i] = value;
    if (!(value <= c.max[i])) c.max[i] = value;
    if (c.count[i] < 65_535) c.count[i] += 1;
  }

  /**
   * A bucket kept from before a restart (src/console/trend-keeper.ts, read back from the buffer):
   * put where its samples would have gone, but not counted as samples seen (`total`, `pending`)
   * and not marked dirty (the live stream carries new samples only). A bucket already holding
   * samples is left as it is: seeds come newest first, so it holds a newer copy of the same bucket.
   * `last`/`lastTs` (NaN when unknown) become the last value if newer than the one held.
   */
  seed(variable: string, start: number, min: number, max: number, count: number, last: number, lastTs: number): void {
    const e = this.byId.get(variable) ?? this.create(variable, -Infinity, NaN, start);
    if (!e) return;
    if (lastTs > e.lastTs) {
      e.last = last;
      e.lastTs = lastTs;
    }
    const b = Math.floor(start / BUCKET_MS);
    if (!this.reach(e, b)) return;
    const i = e.base + (b % BUCKETS);
    const c = e.cells;
    if (c.count[i] > 0) return;
    c.min[i] = min;
    c.max[i] = max;
    c.count[i] = Math.min(65_535, count);
  }

  /** A new entry whose newest bucket is that of `at` (null once the cap is reached). */
  private create(variable: string, ts: number, value: number, at = ts): VariableEntry | null {
    if (this.list.length >= this.maxVariables) return null;
    const idx = this.list.length;
    const b = Math.floor(idx / BLOCK);
    if (!this.blocks[b]) this.blocks[b] = { min: new Float32Array(BLOCK * BUCKETS).fill(NaN), max: new Float32Array(BLOCK * BUCKETS).fill(NaN), count: new Uint16Array(BLOCK * BUCKETS) };
    const e: VariableEntry = { idx, id: variable, last: value, lastTs: ts, total: 0, pending: 0, head: Math.floor(at / BUCKET_MS), cells: this.blocks[b], base: (idx % BLOCK) * BUCKETS, dirty: false };
    this.byId.set(variable, e);
    this.list.push(e);
    return e;
  }

  /** Makes bucket `b` part of the ring (moving the newest bucket on to it); false when it is older than the ring. */
  private reach(e: VariableEntry, b: number): boolean {
    if (b > e.head) {
      // Clear the buckets skipped since the newest one (at most the whole ring).
      const c = e.cells;
      for (let k = e.head + 1; k <= b && k <= e.head + BUCKETS; k++) {
        const i = e.base + (k % BUCKETS);
        c.min[i] = NaN;
        c.max[i] = NaN;
        c.count[i] = 0;
      }
      e.head = b;
      return true;
    }
    return b > e.head - BUCKETS;
  }

  get size(): number {
    return this.list.length;
  }

  entries(): readonly VariableEntry[] {
    return this.list;
  }

  get(id: string): VariableEntry | undefined {
    return this.byId.get(id);
  }

  /** Variables that received samples since the previous call, with how many. */
  takeDirty(): VariableEntry[] {
    const out = this.dirty;
    this.dirty = [];
    for (const e of out) e.dirty = false;
    return out;
  }

  /** Samples per second over the last `seconds` (whole buckets up to `now`). */
  rate(e: VariableEntry, now: number, seconds = 60): number {
    const nowB = Math.floor(now / BUCKET_MS);
    const n = Math.max(1, Math.round((seconds * 1000) / BUCKET_MS));
    let sum = 0;
    for (let k = nowB - n + 1; k <= nowB; k++) if (k <= e.head && k > e.head - BUCKETS) sum += e.cells.count[e.base + slotOf(k)];
    const span = Math.min(seconds * 1000, Math.max(BUCKET_MS, now - (nowB - n + 1) * BUCKET_MS));
    return sum / (span / 1000);
  }

  /** Buckets from oldest to newest: [start ms, min, max, count], empty buckets left out. */
  trend(e: VariableEntry, buckets = BUCKETS): Array<[number, number, number, number]> {
    const out: Array<[number, number, number, number]> = [];
    const c = e.cells;
    for (let k = e.head - Math.min(buckets, BUCKETS) + 1; k <= e.head; k++) {
      const i = e.base + slotOf(k);
      if (c.count[i] > 0) out.push([k * BUCKET_MS, c.min[i], c.max[i], c.count[i]]);
    }
    return out;
  }

  /** A short sparkline: the middle of each of the last `n` buckets (null when empty). */
  spark(e: VariableEntry, n: number): Array<number | null> {
    const out: Array<number | null> = [];
    const c = e.cells;
    for (let k = e.head - n + 1; k <= e.head; k++) {
      const i = e.base + slotOf(k);
      out.push(c.count[i] > 0 ? round4((c.min[i] + c.max[i]) / 2) : null);
    }
    return out;
  }
}

/** The slot of bucket number `k` (negative numbers too: a bucket before 1970 in a test). */
export function slotOf(k: number): number {
  return ((k % BUCKETS) + BUCKETS) % BUCKETS;
}

/** Four significant digits: enough for a sparkline, a third of the bytes of a full double. */
export function round4(v: number): number {
  if (v === 0 || !Number.isFinite(v)) return v;
  return Number(v.toPrecision(4));
}
