import type { Logger } from 'pino';
import type { Clock } from '../../core/clock.js';
import { LogThrottle } from '../../core/log-throttle.js';
import type { Metrics } from '../../core/metrics.js';
import type { BufferRefusal, Sample } from '../../core/sample.js';
import type { FullEpisode } from '../types.js';

/**
 * Loss accounting: samples the buffer refused or dropped, and the full-buffer episodes they make.
 *
 * Keeps:
 *  B1  Every refusal is counted in gateway_buffer_refused_samples_total by its reason; refused
 *      samples whose caller cannot offer them again (no `keepsRefused`) are lost, and also counted
 *      in gateway_buffer_dropped_samples_total and the episode.
 *  B2d Every drop (drop_oldest) is counted exactly, with its policy and sample-time range; an
 *      episode is logged when it starts and, with its total, once it has been quiet for a while.
 */

/** The `policy` label refused samples that are lost count under in gateway_buffer_dropped_samples_total. */
export type LossLabel = FullEpisode['policy'] | 'unwritable_at_stop';

/** Metric label of gateway_buffer_refused_samples_total per refusal code. */
const REFUSAL_LABEL: Record<BufferRefusal, string> = { BUFFER_FULL: 'buffer_full', BUFFER_PENDING_LIMIT: 'pending_limit', BUFFER_CLOSED: 'closed', INVALID_SAMPLE: 'invalid_sample' };

export interface RefusedBatch {
  samples: readonly Sample[];
  keepsRefused: boolean;
}

export class Losses {
  private episodeNow: FullEpisode | null = null;
  private lastDropAt = 0;
  private readonly refusalLog: LogThrottle;
  droppedTotal = 0;

  constructor(
    private readonly o: { logger: Logger; metrics: Metrics; clock: Clock; episodeQuietMs: number; maxBytes: number; usedBytes: () => number },
  ) {
    this.refusalLog = new LogThrottle(o.logger, 60_000, () => o.clock.monotonic());
  }

  get episode(): FullEpisode | null {
    return this.episodeNow ? { ...this.episodeNow } : null;
  }

  /**
   * Counts refused samples. Those whose caller keeps them are refused only; the others are lost,
   * so they also count as dropped by the policy (`refuse_new`, or `memory` for the in-memory limit)
   * and make or extend a full-buffer episode, as before issue 21.
   */
  countRefusal(batch: readonly RefusedBatch[], code: BufferRefusal, reason: string, lostAs: LossLabel = code === 'BUFFER_FULL' ? 'refuse_new' : 'memory'): void {
    if (batch.length === 0) return;
    let kept = 0;
    const lost: number[] = [];
    for (const p of batch) {
      if (p.keepsRefused) kept += p.samples.length;
      else for (const s of p.samples) lost.push(s.ts);
    }
    const total = kept + lost.length;
    if (total === 0) return;
    this.o.metrics.bufferRefusedSamples.inc({ reason: REFUSAL_LABEL[code] }, total);
    if (code === 'INVALID_SAMPLE') {
      // Not a full buffer: no episode, no drop by a policy. The caller's source counts its refusal.
    } else if (lostAs === 'unwritable_at_stop') {
      // At close the episode is over: counted only (see Ingest.close).
      this.droppedTotal += lost.length;
      if (lost.length > 0) this.o.metrics.bufferDroppedSamples.inc({ policy: lostAs }, lost.length);
    } else this.recordDrop(lostAs, lost);
    this.refusalLog.warn(`refused:${code}`, { code, samples: total, kept_by_caller: kept, lost: lost.length }, `buffer refused ${total} samples (${kept} stay with their caller, ${lost.length} are lost): ${reason}`);
  }

  /**
   * Values lost before they reached the buffer (a source's bounded queue, a device's overflow,
   * SampleSink.lost): the source counts them by reason in gateway_source_values_lost_total; here
   * they only join the dropped total, without a full-buffer episode.
   */
  countLostUpstream(count: number): void {
    if (count > 0) this.droppedTotal += count;
  }

  recordDrop(policy: FullEpisode['policy'], timestamps: readonly number[]): void {
    if (timestamps.length === 0) return;
    let min = Infinity;
    let max = -Infinity;
    for (const t of timestamps) {
      if (t < min) min = t;
      if (t > max) max = t;
    }
    this.recordDropCount(policy, timestamps.length, min, max);
  }

  recordDropCount(policy: FullEpisode['policy'], count: number, min: number, max: number): void {
    if (count === 0) return;
    const now = this.o.clock.now();
    if (!this.episodeNow) {
      this.episodeNow = { policy, startedAt: now, samplesLost: 0, fromTs: null, toTs: null };
      this.o.logger.warn(
        { policy, used_bytes: this.o.usedBytes(), max_bytes: this.o.maxBytes },
        policy === 'drop_oldest'
          ? 'buffer is full: dropping the oldest unsent samples to make room (buffer.when_full = drop_oldest)'
          : policy === 'refuse_new'
            ? 'buffer is full: refusing new samples until there is room (buffer.when_full = refuse_new)'
            : 'buffer cannot write and its memory queue is full: dropping new samples',
      );
    }
    const e = this.episodeNow;
    e.samplesLost += count;
    e.fromTs = e.fromTs === null ? min : Math.min(e.fromTs, min);
    e.toTs = e.toTs === null ? max : Math.max(e.toTs, max);
    this.droppedTotal += count;
    this.lastDropAt = this.o.clock.monotonic();
    this.o.metrics.bufferDroppedSamples.inc({ policy }, count);
  }

  /** An episode ends once no drop has happened for a while and the buffer can write again. */
  maybeEndEpisode(writable: boolean, force = false): void {
    const e = this.episodeNow;
    if (!e) return;
    if (!force && (this.o.clock.monotonic() - this.lastDropAt < this.o.episodeQuietMs || !writable)) return;
    this.episodeNow = null;
    this.o.logger.error(
      {
        policy: e.policy,
        samples_lost: e.samplesLost,
        from: e.fromTs === null ? null : new Date(e.fromTs).toISOString(),
        to: e.toTs === null ? null : new Date(e.toTs).toISOString(),
        started_at: new Date(e.startedAt).toISOString(),
      },
      `buffer full episode ended: ${e.samplesLost} samples were lost`,
    );
  }
}
