import { RateMeter } from './rate-meter.js';
import type { Clock } from './clock.js';
import { describeError, errorCode } from './errors.js';
import type { Metrics } from './metrics.js';
import { QUALITIES, QualityTable, type QualitySummary } from './quality.js';
import { refusalReasonOf, SamplesRefusedError, type RefusalReason } from './sample.js';

/**
 * The contract every protocol source (OPC UA, Modbus, MQTT, the synthetic generator) follows.
 *
 * Life cycle:
 * - A factory builds the source from its validated config section without doing any I/O; a
 *   configuration the schema cannot catch (for example a Modbus register block too long for one
 *   request) throws a `ConfigError` from the factory, naming the setting and value.
 * - `start()` begins the connect loop (with backoff) and resolves without waiting for the device:
 *   a PLC that is off at start-up must not keep the gateway from buffering the others.
 * - The source puts samples into `ctx.sink` and reports through `ctx.stats`.
 * - `close()` stops everything, is safe to call twice and resolves when sockets are closed.
 */
export interface Source {
  readonly name: string;
  readonly kind: SourceKind;
  start(): Promise<void>;
  close(): Promise<void>;
  status(): SourceStatus;
}

/** A source protocol: the `kind` of a descriptor in sources/plugins.ts ('opcua', 'modbus', ...). */
export type SourceKind = string;

export type SourceState = 'starting' | 'connecting' | 'connected' | 'degraded' | 'disconnected' | 'stopped';

export interface SourceStatus {
  name: string;
  kind: SourceKind;
  state: SourceState;
  /** Wall-clock ms of the last state change. */
  since: number;
  samplesRead: number;
  samplesRefused: Record<string, number>;
  /** Wall-clock ms of the last sample produced, or null. */
  lastSampleAt: number | null;
  /** The last error, with its time; cleared when the source is connected again (issue 24 §1). */
  lastError: { code: string; message: string; at: number } | null;
  /**
   * Wall-clock ms the source last stopped being connected, while it is not; null while it is up.
   * Unlike `since` it does not move at each retry (disconnected → connecting → disconnected).
   */
  downSince: number | null;
  /**
   * The quality of the source's variables (core/quality.ts), counted as shown: while the source is
   * down they are all stale. Absent for a source without variables (the embedded broker).
   */
  variables?: QualitySummary;
  /** Protocol-specific detail (per device state, invalid nodes, alias tables ...). */
  detail?: Record<string, unknown>;
}

/** What a source knows about a refused value: the machine variable it was for, and why in words. */
export interface RefusalInfo {
  variable?: string;
  detail?: string;
}

/**
 * Counters and state of one source, kept for `status()` and mirrored into the shared metrics under
 * the same names for every protocol (DESIGN.md: "every source reports connection state, samples
 * read, samples refused (with a reason) and last error, under the same metric names").
 */
export class SourceStats {
  private state: SourceState = 'starting';
  private since: number;
  private read = 0;
  private readonly refusedByReason: Record<string, number> = {};
  private lastSampleAt: number | null = null;
  private lastError: SourceStatus['lastError'] = null;
  private downSince: number | null = null;
  private readonly labels: { source: string; kind: SourceKind };
  private readonly readRate: RateMeter;
  /** The quality of each variable of this source; the source writes it where readings become values. */
  readonly quality = new QualityTable();
  private unbindQuality: (() => void) | null = null;

  constructor(
    readonly name: string,
    readonly kind: SourceKind,
    private readonly metrics: Metrics,
    private readonly clock: Clock,
  ) {
    this.since = clock.now();
    this.labels = { source: name, kind };
    this.readRate = new RateMeter(() => clock.monotonic(), 30);
    metrics.sourceConnected.set(this.labels, 0);
    metrics.sourceSamplesRead.inc(this.labels, 0);
  }

  /**
   * gateway_source_variables reads this source's table from its start to its stop: a source built
   * for a reload that is then refused never replaces the running one's series.
   */
  private bindQuality(state: SourceState): void {
    if (state === 'stopped') {
      this.unbindQuality?.();
      this.unbindQuality = null;
    } else if (!this.unbindQuality) {
      this.unbindQuality = this.metrics.sourceVariables.readFrom(this.name, () => {
        const s = this.quality.summary(this.clock.now());
        return QUALITIES.map((quality) => ({ labels: { ...this.labels, quality }, value: s[quality] }));
      });
    }
  }

  setState(state: SourceState): void {
    if (state === this.state) return;
    const previous = this.state;
    this.state = state;
    this.since = this.clock.now();
    const up = (s: SourceState) => s === 'connected' || s === 'degraded';
    if (up(state)) {
      // Fully recovered: the error is over (it stays in the log and the error metric). Entering
      // `degraded` keeps it: it is why the source is degraded.
      if (state === 'connected') this.lastError = null;
      this.downSince = null;
    } else if (state === 'disconnected' || state === 'stopped' || up(previous)) {
      // Down from the transport's own event: a link lost goes to `connecting` at once while the
      // library repairs it (OPC UA connection_lost), not `disconnected` seconds later when a
      // watchdog gives up on the repair.
      if (this.downSince === null) this.downSince = this.since;
    }
    this.quality.sourceDownSince = this.downSince;
    this.bindQuality(state);
    this.metrics.sourceConnected.set(this.labels, state === 'connected' || state === 'degraded' ? 1 : 0);
    for (const l of this.stateListeners) {
      try {
        l(state, previous, this.since);
      } catch {
        // an observer (the gap ledger) must never break a source
      }
    }
  }

  private readonly stateListeners = new Set<(state: SourceState, previous: SourceState, at: number) => void>();

  /** Observes state changes (the gap ledger, issue 14). Returns the function that stops it. */
  onStateChange(listener: (state: SourceState, previous: SourceState, at: number) => void): () => void {
    this.stateListeners.add(listener);
    return () => this.stateListeners.delete(listener);
  }

  samplesRead(n: number): void {
    if (n <= 0) return;
    this.read += n;
    this.readRate.add(n);
    this.lastSampleAt = this.clock.now();
    this.metrics.sourceSamplesRead.inc(this.labels, n);
  }

  /** Samples per second read over the last 30 s. */
  readPerSecond(): number {
    return this.readRate.perSecond();
  }

  /** Sees every refusal with its variable and detail when the source knows them (the console's refusal log). */
  onRefused: ((reason: RefusalReason, n: number, info: RefusalInfo) => void) | null = null;

  refused(reason: RefusalReason, n = 1, info: RefusalInfo = {}): void {
    if (n <= 0) return;
    this.refusedByReason[reason] = (this.refusedByReason[reason] ?? 0) + n;
    this.metrics.sourceSamplesRefused.inc({ ...this.labels, reason }, n);
    this.onRefused?.(reason, n, info);
  }

  /**
   * The buffer did not take `n` samples that this source cannot offer again (a poll, a subscription
   * value, QoS 0): counted as refused by reason (buffer_full under refuse_new, else
   * buffer_unavailable), never as read, and the error kept for status (issue 21 §1).
   */
  bufferRefused(err: unknown, n: number): void {
    this.error(err, 'BUFFER_REFUSED');
    const refused = err instanceof SamplesRefusedError;
    this.refused(refused ? refusalReasonOf(err) : 'buffer_unavailable', n, { detail: refused ? err.reason : describeError(err) });
  }

  error(err: unknown, code?: string): void {
    const c = code ?? errorCode(err, 'SOURCE_ERROR');
    this.lastError = { code: c, message: err instanceof Error ? err.message : String(err), at: this.clock.now() };
    this.metrics.sourceErrors.inc({ ...this.labels, code: c });
  }

  reconnecting(): void {
    this.metrics.sourceReconnects.inc(this.labels);
  }

  snapshot(detail?: Record<string, unknown>): SourceStatus {
    if (this.lastSampleAt !== null) {
      this.metrics.sourceLastSampleAge.set(this.labels, Math.max(0, (this.clock.now() - this.lastSampleAt) / 1000));
    }
    return {
      name: this.name,
      kind: this.kind,
      state: this.state,
      since: this.since,
      samplesRead: this.read,
      samplesRefused: { ...this.refusedByReason },
      lastSampleAt: this.lastSampleAt,
      lastError: this.lastError,
      downSince: this.downSince,
      ...(this.quality.size > 0 ? { variables: this.quality.summary(this.clock.now()) } : {}),
      ...(detail ? { detail } : {}),
    };
  }

  get currentState(): SourceState {
    return this.state;
  }
}
