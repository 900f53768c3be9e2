import type { Logger } from 'pino';
import { describeError } from '../../core/errors.js';
import type { LogThrottle } from '../../core/log-throttle.js';
import { SampleColumns, type Sample, type SampleSink } from '../../core/sample.js';
import type { SourceStats } from '../../core/source.js';

/**
 * The bounded hand-off between node-opcua callbacks (one per value) and the buffer (one
 * `append` per batch). Values arriving in the same tick of the event loop (one Publish response
 * carries many) are appended together; while the buffer commits, new values wait here up to
 * `maxPending`, beyond which they are refused and counted (`buffer_full`, and as lost through
 * `onLost`) instead of growing the heap until the process dies (DESIGN.md: push sources hold a
 * bounded queue). The subscription holds its Publish requests back by `room()` so that this
 * should not happen (publish-pipeline.ts); `onDrained` says when there is room again.
 */
/** Batches kept for reuse: a few commits' worth in flight at once is the most a source has. */
const SPARE_BATCHES = 8;

export class SampleQueue {
  /** Values taken since the last flush, as columns (SampleSink.appendColumns) so they wait for their commit as typed arrays. */
  private batch = new SampleColumns();
  /**
   * Batches whose commit is done, kept for the next ones: a batch's arrays are as large as the
   * largest burst, and allocating (and zeroing) them anew for every turn's values cost more than
   * filling them.
   */
  private readonly spare: SampleColumns[] = [];
  private scheduled = false;
  private pending = 0;
  private readonly inflight = new Set<Promise<void>>();

  constructor(
    private readonly sink: SampleSink,
    private readonly stats: SourceStats,
    private readonly throttle: LogThrottle,
    private readonly logger: Logger,
    private readonly maxPending: number,
    private readonly hooks: { onLost?: (variable: string, ts: number) => void; onDrained?: () => void } = {},
  ) {}

  /** Values that can still be taken before one is refused. */
  room(): number {
    return this.maxPending - this.pending;
  }

  push(sample: Sample): void {
    this.pushValue(sample.variable, sample.ts, sample.value);
  }

  /** `pushValue` for the hot path: the time and value are `out.ts`, `out.value` (decode.ts SampleOut; no number passed, none boxed). */
  pushOut(variable: string, out: { ts: number; value: number }): void {
    if (this.pending >= this.maxPending) {
      this.refuse(variable, out.ts);
      return;
    }
    this.pending += 1;
    this.batch.pushOut(variable, out);
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(this.flushSoon);
    }
  }

  pushValue(variable: string, ts: number, value: number): void {
    if (this.pending >= this.maxPending) {
      this.refuse(variable, ts);
      return;
    }
    this.take(variable, ts, value);
  }

  private take(variable: string, ts: number, value: number): void {
    this.pending += 1;
    this.batch.push(variable, ts, value);
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(this.flushSoon);
    }
  }

  private readonly flushSoon = () => this.flush();

  private refuse(variable: string, ts: number): void {
    this.stats.refused('buffer_full', 1, { variable, detail: 'max_pending_samples reached' });
    this.hooks.onLost?.(variable, ts);
    this.throttle.warn('queue-full', { max_pending_samples: this.maxPending }, 'OPC UA values refused: the buffer is not keeping up (max_pending_samples reached); they are counted as lost (dropped_total) and recorded as a gap');
  }

  get size(): number {
    return this.pending;
  }

  private flush(): void {
    this.scheduled = false;
    const batch = this.batch;
    const n = batch.count;
    if (n === 0) return;
    this.batch = this.spare.pop() ?? new SampleColumns();
    const appended = this.sink.appendColumns ? this.sink.appendColumns(batch) : this.sink.append(batch.toSamples());
    const p = appended
      .then(() => this.stats.samplesRead(n))
      .catch((err) => {
        this.stats.bufferRefused(err, n);
        this.logger.warn({ err: describeError(err), samples: n }, 'OPC UA samples not buffered');
      })
      .finally(() => {
        this.pending -= n;
        this.inflight.delete(p);
        // Committed (or refused) and seen by the taps: nobody holds the batch any more.
        if (this.spare.length < SPARE_BATCHES) this.spare.push(batch.clear());
        this.hooks.onDrained?.();
      });
    this.inflight.add(p);
  }

  /** Resolves when everything pushed so far is committed (or refused). */
  async drain(): Promise<void> {
    if (this.scheduled || this.batch.count > 0) this.flush();
    await Promise.allSettled([...this.inflight]);
  }
}
