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
  /**
   * `append` for samples held as columns: a source that takes tens of thousands of values a
   * second keeps them in typed arrays while they wait for their commit, not as one object each
   * (objects that live through a commit outlive V8's young generation and cost the collector most
   * of all). Optional; without it a source appends `columns.toSamples()`.
   */
  appendColumns?(columns: SampleColumns, options?: AppendOptions): Promise<void>;
  /**
   * `count` values a source received (or was told of) and could not keep: its own bounded queue
   * refused them, or the device discarded them (an OPC UA Overflow bit). Counted in the buffer's
   * dropped total, so the status's `dropped_total` counts every value lost, wherever it was lost.
   */
  lost?(count: number): void;
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

/**
 * Samples as columns: variable names (shared strings), timestamps and values in typed arrays that
 * grow as samples are added. `count` of them are valid.
 */
export class SampleColumns {
  count = 0;
  variables: string[];
  ts: Float64Array;
  values: Float64Array;

  constructor(capacity = 1_024) {
    this.variables = new Array<string>(capacity);
    this.ts = new Float64Array(capacity);
    this.values = new Float64Array(capacity);
  }

  push(variable: string, ts: number, value: number): void {
    const i = this.count;
    if (i === this.ts.length) this.grow();
    this.variables[i] = variable;
    this.ts[i] = ts;
    this.values[i] = value;
    this.count = i + 1;
  }

  /** `push` of `o.ts` and `o.value`: a hot path passes the object, since each number passed to a function V8 did not inline is a new heap object. */
  pushOut(variable: string, o: { ts: number; value: number }): void {
    const i = this.count;
    if (i === this.ts.length) this.grow();
    this.variables[i] = variable;
    this.ts[i] = o.ts;
    this.values[i] = o.value;
    this.count = i + 1;
  }

  /** Empties it for reuse; the arrays are kept (the names left in them are the sources' own strings). */
  clear(): this {
    this.count = 0;
    return this;
  }

  /** The samples as objects (for whoever takes them one by one: taps, a sink without appendColumns). */
  toSamples(): Sample[] {
    const out = new Array<Sample>(this.count);
    for (let i = 0; i < this.count; i++) out[i] = { variable: this.variables[i], ts: this.ts[i], value: this.values[i] };
    return out;
  }

  private grow(): void {
    const n = this.ts.length * 2;
    const ts = new Float64Array(n);
    ts.set(this.ts);
    const values = new Float64Array(n);
    values.set(this.values);
    this.ts = ts;
    this.values = values;
    this.variables.length = n;
  }
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
  /** The same for samples held as columns; without it the tap gets them as objects. */
  onColumns?(columns: SampleColumns): void;
}

/** A sink that forwards to `inner` and, once committed, shows the samples to every tap. */
export class TappedSink implements SampleSink {
  private readonly taps = new Set<SampleTap>();

  constructor(private readonly inner: SampleSink) {}

  addTap(tap: SampleTap): () => void {
    this.taps.add(tap);
    return () => this.taps.delete(tap);
  }

  lost(count: number): void {
    this.inner.lost?.(count);
  }

  async appendColumns(columns: SampleColumns, options?: AppendOptions): Promise<void> {
    if (this.inner.appendColumns) await this.inner.appendColumns(columns, options);
    else await this.inner.append(columns.toSamples(), options);
    let samples: Sample[] | null = null;
    for (const tap of this.taps) {
      try {
        if (tap.onColumns) tap.onColumns(columns);
        else tap.onSamples((samples ??= columns.toSamples()));
      } catch {
        // A tap is an observer: its failure must never refuse samples that are already committed.
      }
    }
  }

  async append(samples: readonly Sample[], options?: AppendOptions): Promise<void> {
    await this.inner.append(samples, options);
    this.tell(samples);
  }

  private tell(samples: readonly Sample[]): void {
    for (const tap of this.taps) {
      try {
        tap.onSamples(samples);
      } catch {
        // A tap is an observer: its failure must never refuse samples that are already committed.
      }
    }
  }
}
