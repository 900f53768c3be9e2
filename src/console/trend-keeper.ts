import type { TrendPut, TrendSource } from '../buffer/trend.js';
import type { TrendBuffer } from '../buffer/views.js';
import { BUCKET_MS, BUCKETS, slotOf, type ValueRing } from './value-ring.js';

/**
 * The console's trend across restarts: at the start the value ring is seeded with
 * the buckets the buffer kept (src/buffer/trend.ts), a row per event-loop turn so that the sources
 * start meanwhile, and a variable's page shows the minutes before the restart; from then on the
 * buffer takes the ring's closed buckets on its maintenance schedule (never inside a commit), and
 * a clean stop writes the open ones too.
 *
 * Which buckets a take hands over, per variable: those up to the newest bucket held, once the
 * clock has passed its end (the buffer's grace included), else up to the one before it (a sample
 * of a later bucket came, so the device has moved on: a device whose clock lags keeps its trend
 * too). A bucket is handed over once; the last one handed over is handed again when it got more
 * samples since (a late sample, or a bucket written open at a stop and completed after the
 * restart: the buffer reads the newest copy).
 */
export class TrendKeeper implements TrendSource {
  readonly bucketMs = BUCKET_MS;
  /** Per ring index: the newest bucket handed over (NEVER: none yet) and its sample count then. */
  private handed = new Float64Array(1_024).fill(NEVER);
  private handedCount = new Uint16Array(1_024);
  /** While seeding, takes hand nothing (the marks are set once it is done). */
  private seeding = false;
  private cancelled = false;

  constructor(private readonly ring: ValueRing) {}

  /**
   * Seeds the ring with the buckets `buffer` kept that are still inside its window, newest row
   * first, one row per event-loop turn, and counts them as handed over. Resolves with the buckets
   * seeded. The ring must receive no sample before then (a bucket already holding samples is taken
   * for a newer copy); `cancel` ends it early (a stop).
   */
  async seed(buffer: TrendBuffer, now: number): Promise<number> {
    this.seeding = true;
    try {
      const since = (Math.floor(now / BUCKET_MS) - BUCKETS + 1) * BUCKET_MS;
      let n = 0;
      const visit = (variable: string, start: number, min: number, max: number, count: number, last: number, lastTs: number) => {
        this.ring.seed(variable, start, min, max, count, last, lastTs);
        n++;
      };
      for (const row of buffer.trendRows(BUCKET_MS, since)) {
        if (this.cancelled) break;
        buffer.readTrendRow(row, BUCKET_MS, since, visit);
        await new Promise<void>((resolve) => setImmediate(resolve));
      }
      for (const e of this.ring.entries()) this.mark(e.idx, e.head, e.cells.count[e.base + slotOf(e.head)]);
      return n;
    } finally {
      this.seeding = false;
    }
  }

  /** Ends a seeding under way after its current row (the console stops). */
  cancel(): void {
    this.cancelled = true;
  }

  take(closedBefore: number, from: number, limit: number, put: TrendPut): number {
    if (this.seeding) return 0;
    const closed = Math.floor(closedBefore / BUCKET_MS); // buckets below this are over by the clock
    const entries = this.ring.entries();
    const end = Math.min(entries.length, from + limit);
    for (let i = from; i < end; i++) {
      const e = entries[i];
      const upTo = e.head < closed ? e.head : e.head - 1;
      const handed = this.at(e.idx);
      let first = Math.max(e.head - BUCKETS + 1, handed + 1);
      // The last bucket handed over got samples since: hand it again (the newest copy wins).
      if (handed > e.head - BUCKETS && handed <= upTo && e.cells.count[e.base + slotOf(handed)] !== this.handedCount[e.idx]) first = handed;
      if (upTo < first) continue;
      let newest = -1;
      for (let k = upTo; k >= first; k--) {
        if (e.cells.count[e.base + slotOf(k)] > 0) {
          newest = k;
          break;
        }
      }
      for (let k = first; k <= upTo; k++) {
        const slot = slotOf(k);
        if (e.cells.count[e.base + slot] === 0) continue;
        // The variable's last value goes with its newest bucket of the take.
        if (k === newest) put(e.idx, e.id, k * BUCKET_MS, e.cells.min[e.base + slot], e.cells.max[e.base + slot], e.cells.count[e.base + slot], e.last, e.lastTs);
        else put(e.idx, e.id, k * BUCKET_MS, e.cells.min[e.base + slot], e.cells.max[e.base + slot], e.cells.count[e.base + slot], NaN, NaN);
      }
      this.mark(e.idx, upTo, e.cells.count[e.base + slotOf(upTo)]);
    }
    return end - from;
  }

  private at(idx: number): number {
    return idx < this.handed.length ? this.handed[idx] : NEVER;
  }

  private mark(idx: number, bucket: number, count: number): void {
    if (idx >= this.handed.length) {
      let size = this.handed.length * 2;
      while (size <= idx) size *= 2;
      const handed = new Float64Array(size).fill(NEVER);
      handed.set(this.handed);
      const counts = new Uint16Array(size);
      counts.set(this.handedCount);
      this.handed = handed;
      this.handedCount = counts;
    }
    this.handed[idx] = bucket;
    this.handedCount[idx] = count;
  }
}

/** No bucket handed over yet. */
const NEVER = -Infinity;

