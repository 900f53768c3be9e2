import { GatewayError } from './errors.js';

/**
 * The unit of data that flows from every source to the tracking service.
 *
 * A sample is one value of one machine variable at one instant. The tracking service identifies a
 * stored value by (variable, timestamp) and replaces it when the same pair is sent again
 * (CONTRACT.md, "POST /machine-data/batch", semantics), which is what lets the gateway deliver
 * at-least-once and still converge to exactly-once storage.
 */
export interface Sample {
  /** Machine variable id (`mvr_...`, interface §2.1). */
  readonly variable: string;
  /** Epoch milliseconds, UTC. Sent upstream as ISO 8601 with `Z` and 3 fraction digits. */
  readonly ts: number;
  /** Finite number. Booleans are mapped to 0/1 by the source; strings never reach this point. */
  readonly value: number;
}

/**
 * Where sources put samples. `append` resolves only once every sample is durably committed to the
 * buffer, so a push source can acknowledge upstream (MQTT PUBACK) after the commit and not before.
 *
 * It rejects when the samples were not kept: with a `SamplesRefusedError` (a stable `code` and the
 * reason) when the buffer refused them (full under `buffer.when_full = refuse_new`, its memory
 * queue full, closed), or with another error for a fault. Either way none of the samples of that
 * call were committed, and the caller must not acknowledge them.
 */
export interface SampleSink {
  append(samples: readonly Sample[], options?: AppendOptions): Promise<void>;
}

export interface AppendOptions {
  /**
   * The caller still holds the samples when they are refused and will offer them again: a QoS 1/2
   * publisher redelivers what was not acknowledged, set-aside rows stay set aside, a backfill's gap
   * stays pending. A refusal is then not a loss and is not counted in
   * `gateway_buffer_dropped_samples_total` (it is counted in `gateway_buffer_refused_samples_total`).
   * Without it, refused samples are counted as lost by the full-buffer policy.
   */
  keepsRefused?: boolean;
}

/** Why the buffer refused an append; stable, used in error codes and metric labels. */
export type BufferRefusal =
  /** Over `buffer.max_bytes` or the disk is full, and `buffer.when_full = refuse_new`. */
  | 'BUFFER_FULL'
  /** More samples would wait in memory for a commit than the buffer holds (the disk refuses writes, or one append is too large). */
  | 'BUFFER_PENDING_LIMIT'
  /** The buffer is closed (the gateway is stopping). */
  | 'BUFFER_CLOSED'
  /** A sample's value or timestamp is not a finite number (a caller's bug: sources never offer one). */
  | 'INVALID_SAMPLE';

/** An append the buffer did not take: none of its samples were committed (see SampleSink). */
export class SamplesRefusedError extends GatewayError {
  declare readonly code: BufferRefusal;

  constructor(
    code: BufferRefusal,
    /** For people: starts with "refused: " and says why, naming the setting where one applies. */
    readonly reason: string,
    /** Samples in the refused append. */
    readonly samples: number,
  ) {
    super(code, reason, { details: { samples } });
    this.name = 'SamplesRefusedError';
  }
}

/** The source-side refusal reason (gateway_source_samples_refused_total) for a buffer refusal. */
export function refusalReasonOf(err: SamplesRefusedError): RefusalReason {
  return err.code === 'BUFFER_FULL' ? 'buffer_full' : err.code === 'INVALID_SAMPLE' ? 'not_finite' : 'buffer_unavailable';
}

/** Why a value read from a device was not turned into a sample. Used as a metric label. */
export type RefusalReason =
  | 'bad_status'
  | 'uncertain_status'
  | 'not_numeric'
  | 'not_finite'
  | 'unknown_name'
  | 'unknown_alias'
  | 'malformed'
  | 'oversize'
  | 'bad_timestamp'
  | 'invalid_node'
  | 'decode_error'
  | 'buffer_full'
  | 'buffer_unavailable'
  | (string & {});

/** True when `v` may be sent upstream as a sample value (CONTRACT.md: finite JSON number). */
export function isSampleValue(v: unknown): v is number {
  return typeof v === 'number' && Number.isFinite(v);
}

/**
 * Converts a device value to a sample value: numbers pass when finite, booleans become 0/1,
 * bigints pass when they fit a double exactly enough to be useful. Anything else is `undefined`.
 */
export function toSampleValue(v: unknown): number | undefined {
  if (typeof v === 'number') return Number.isFinite(v) ? v : undefined;
  if (typeof v === 'boolean') return v ? 1 : 0;
  if (typeof v === 'bigint') {
    const n = Number(v);
    return Number.isFinite(n) ? n : undefined;
  }
  return undefined;
}

/**
 * Sees samples after they were committed to the buffer (for example the downtime detector, which
 * watches a machine-state variable). Called synchronously; must be cheap and must not throw.
 */
export interface SampleTap {
  onSamples(samples: readonly Sample[]): void;
}

/** A sink that forwards to `inner` and, once committed, shows the samples to every tap. */
export class TappedSink implements SampleSink {
  private readonly taps = new Set<SampleTap>();

  constructor(private readonly inner: SampleSink) {}

  addTap(tap: SampleTap): () => void {
    this.taps.add(tap);
    return () => this.taps.delete(tap);
  }

  async append(samples: readonly Sample[], options?: AppendOptions): Promise<void> {
    await this.inner.append(samples, options);
    for (const tap of this.taps) {
      try {
        tap.onSamples(samples);
      } catch {
        // A tap is an observer: its failure must never refuse samples that are already committed.
      }
    }
  }
}
