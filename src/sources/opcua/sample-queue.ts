import type { Logger } from 'pino';
import { describeError } from '../../core/errors.js';
import type { LogThrottle } from '../../core/log-throttle.js';
import type { Sample, SampleSink } from '../../core/sample.js';
import type { SourceStats } from '../../core/source.js';

/**
 * The bounded hand-off between node-opcua callbacks (one per value) and the buffer (one
 * `append` per batch). Values arriving in the same tick of the event loop (one Publish response
 * carries many) are appended together; while the buffer commits, new values wait here up to
 * `maxPending`, beyond which they are refused and counted (`buffer_full`) instead of growing the
 * heap until the process dies (DESIGN.md: push sources hold a bounded queue).
 */
export class SampleQueue {
  private batch: Sample[] = [];
  private scheduled = false;
  private pending = 0;
  private readonly inflight = new Set<Promise<void>>();

  constructor(
    private readonly sink: SampleSink,
    private readonly stats: SourceStats,
    private readonly throttle: LogThrottle,
    private readonly logger: Logger,
    private readonly maxPending: number,
  ) {}

  push(sample: Sample): void {
    if (this.pending >= this.maxPending) {
      this.stats.refused('buffer_full');
      this.throttle.warn('queue-full', { max_pending_samples: this.maxPending }, 'OPC UA values refused: the buffer is not keeping up (max_pending_samples reached)');
      return;
    }
    this.pending += 1;
    this.batch.push(sample);
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => this.flush());
    }
  }

  get size(): number {
    return this.pending;
  }

  private flush(): void {
    this.scheduled = false;
    const batch = this.batch;
    if (batch.length === 0) return;
    this.batch = [];
    const p = this.sink
      .append(batch)
      .then(() => this.stats.samplesRead(batch.length))
      .catch((err) => {
        this.stats.bufferRefused(err, batch.length);
        this.logger.warn({ err: describeError(err), samples: batch.length }, 'OPC UA samples not buffered');
      })
      .finally(() => {
        this.pending -= batch.length;
        this.inflight.delete(p);
      });
    this.inflight.add(p);
  }

  /** Resolves when everything pushed so far is committed (or refused). */
  async drain(): Promise<void> {
    if (this.scheduled || this.batch.length > 0) this.flush();
    await Promise.allSettled([...this.inflight]);
  }
}
