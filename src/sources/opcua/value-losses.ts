import type { Logger } from 'pino';
import type { GapLedger } from '../../buffer/gaps.js';
import type { Clock } from '../../core/clock.js';
import type { Metrics } from '../../core/metrics.js';
import type { SampleSink } from '../../core/sample.js';

/** Why values were lost before the buffer: the server discarded them, or the gateway refused them. */
export type LossReason = 'server_overflow' | 'buffer_full';

/** A loss episode ends (and becomes a gap) once no value has been lost for this long. */
const QUIET_MS = 5_000;
/** A longer episode is written as a gap at least this often, so the ledger shows it while it lasts. */
const MAX_EPISODE_MS = 60_000;
/** Beyond this many variables a gap names none (null: the whole source) rather than a list of all of them. */
const MAX_NAMED = 10_000;

/**
 * Values of one OPC UA source lost before they reached the buffer, counted and recorded so none is
 * lost silently:
 *
 * - **server_overflow**: a value came with the Overflow bit (Part 4 §5.12.1.5): the server's queue of
 *   its monitored item was full and it discarded older values. How many is not said; it is estimated
 *   from the time since the node's previous value and the sampling interval the server revised
 *   (exact for a node that changes at every sampling, an upper bound for one that changes less
 *   often), and at least one.
 * - **buffer_full**: the source's bounded queue refused a value it received (the buffer did not keep
 *   up and the Publish requests held back could not prevent it).
 *
 * Each is counted in gateway_source_values_lost_total{reason} and in the buffer's dropped total
 * (SampleSink.lost: status `dropped_total`), and every episode (losses less than QUIET_MS apart)
 * becomes one closed gap in the ledger (reason `values_lost`) over the values' timestamps, naming
 * the variables that lost values.
 */
export class ValueLosses {
  /** Per configured node (its index), the timestamp of the newest value received; 0 before the first. */
  private readonly last: Float64Array;
  private episode: { from: number; to: number; count: number; variables: Set<string>; startedAt: number; lastAt: number } | null = null;
  private timer: NodeJS.Timeout | null = null;
  totalLost = 0;

  constructor(
    private readonly o: {
      source: string;
      path: string;
      nodes: number;
      sink: SampleSink;
      gaps: GapLedger | null;
      metrics: Metrics;
      logger: Logger;
      clock: Clock;
    },
  ) {
    this.last = new Float64Array(o.nodes);
  }

  /** The node at config position `index` delivered a value stamped `ts`. */
  seen(index: number, ts: number): void {
    if (ts > this.last[index]) this.last[index] = ts;
  }

  /** `seen` for the hot path: the time is `out.ts` (decode.ts SampleOut; no number passed, none boxed). */
  seenOut(index: number, out: { ts: number }): void {
    if (out.ts > this.last[index]) this.last[index] = out.ts;
  }

  /** A value of `variable` (config position `index`) stamped `ts` had the Overflow bit; `samplingMs` as the server revised it. */
  overflowed(index: number, variable: string, ts: number, samplingMs: number): void {
    const prev = this.last[index];
    let lost = 1;
    let from = ts;
    if (samplingMs > 0 && prev > 0 && ts > prev) {
      lost = Math.max(1, Math.round((ts - prev) / samplingMs) - 1);
      from = prev;
    } else if (samplingMs > 0) from = ts - samplingMs;
    this.record('server_overflow', variable, lost, from, ts);
  }

  /** A value the source received and refused (its queue was full). */
  refused(variable: string, ts: number): void {
    this.record('buffer_full', variable, 1, ts, ts);
  }

  private record(reason: LossReason, variable: string, count: number, from: number, to: number): void {
    this.totalLost += count;
    this.o.metrics.sourceValuesLost.inc({ source: this.o.source, kind: 'opcua', reason }, count);
    this.o.sink.lost?.(count);
    const now = this.o.clock.monotonic();
    const e = (this.episode ??= { from, to, count: 0, variables: new Set(), startedAt: now, lastAt: now });
    e.from = Math.min(e.from, from);
    e.to = Math.max(e.to, to);
    e.count += count;
    e.lastAt = now;
    if (e.variables.size <= MAX_NAMED) e.variables.add(variable);
    if (!this.timer) {
      this.timer = setInterval(() => this.maybeEnd(), 1_000);
      this.timer.unref();
    }
  }

  private maybeEnd(): void {
    const e = this.episode;
    const now = this.o.clock.monotonic();
    if (e && now - e.lastAt < QUIET_MS && now - e.startedAt < MAX_EPISODE_MS) return;
    this.flush();
  }

  /** Writes the episode so far as a gap (the source is closing, or the episode ended). */
  flush(): void {
    const e = this.episode;
    this.episode = null;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    if (!e) return;
    const all = e.variables.size > MAX_NAMED;
    const variables = all ? null : [...e.variables].sort();
    try {
      this.o.gaps?.open({ source: this.o.source, variables, from: e.from, to: Math.max(e.from, e.to), reason: 'values_lost', filled: 'no' }, this.o.clock.now());
    } catch (err) {
      this.o.logger.warn({ err: err instanceof Error ? err.message : String(err) }, 'gap of lost values not recorded');
    }
    this.o.logger.warn(
      { code: 'OPCUA_VALUES_LOST', values: e.count, variables: all ? `more than ${MAX_NAMED}` : e.variables.size, from: new Date(e.from).toISOString(), to: new Date(e.to).toISOString() },
      `${this.o.path}: ${e.count} value(s) of ${all ? `more than ${MAX_NAMED}` : e.variables.size} variable(s) were lost between ${new Date(e.from).toISOString()} and ${new Date(e.to).toISOString()} (recorded as a gap; gateway_source_values_lost_total by reason)`,
    );
  }
}
