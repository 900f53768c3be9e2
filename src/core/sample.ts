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
 * buffer (or deliberately dropped by the configured full-buffer policy, which is counted), so a
 * push source can acknowledge upstream (MQTT PUBACK) after the commit and not before.
 *
 * It rejects only when the samples could not be taken at all (for example the buffer is closed);
 * the caller must then not acknowledge them.
 */
export interface SampleSink {
  append(samples: readonly Sample[]): Promise<void>;
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

  async append(samples: readonly Sample[]): Promise<void> {
    await this.inner.append(samples);
    for (const tap of this.taps) {
      try {
        tap.onSamples(samples);
      } catch {
        // A tap is an observer: its failure must never refuse samples that are already committed.
      }
    }
  }
}
