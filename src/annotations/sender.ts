import type { Logger } from 'pino';
import type { Clock } from '../core/clock.js';
import { describeError } from '../core/errors.js';
import { LogThrottle } from '../core/log-throttle.js';
import type { Metrics } from '../core/metrics.js';
import { WakeSignal } from '../core/signal.js';
import { annotationResponseSchema, describeResult, outcomeOf, type TrackingClient } from '../uplink/client.js';
import { decide } from '../uplink/retry-policy.js';
import type { UplinkHealth } from '../uplink/uplink-health.js';
import { requestBody, type OutboxEntry } from './model.js';
import type { AnnotationStore } from './store.js';

export interface SenderOptions {
  store: AnnotationStore;
  client: TrackingClient;
  health: UplinkHealth;
  logger: Logger;
  metrics: Metrics;
  clock: Clock;
  /** Called after an entry changed state (delivered, refused) or an attempt failed. */
  onChange?: (entry: OutboxEntry) => void;
}

/**
 * Delivers the outbox with `POST /machine-data-annotations` (§4.1), one at a time in creation
 * order. Annotations take the 'annotation' priority of the shared request budget, so they go out
 * ahead of sample traffic; transient failures pause every sender through the shared UplinkHealth
 * (capped exponential backoff with jitter, CONTRACT.md error table).
 *
 * Per response (retry-policy.ts decides):
 * - 2xx: delivered (the service's `mda_` id is kept).
 * - 409: the external_id exists: an earlier attempt arrived and only its answer was lost:
 *   delivered (§4.1, CONTRACT.md).
 * - 400 (and other refusals, 413): refused, with the service's message; the next entry goes on.
 *   The one rule the gateway cannot check locally is "machine variables available at the site".
 * - 429, 5xx, network, 401 twice, 403, 404: the entry stays queued, attempts + 1, and every
 *   sender waits as the shared health says.
 */
export class OutboxSender {
  private readonly wake = new WakeSignal();
  private readonly idle = new WakeSignal();
  private readonly abort = new AbortController();
  private stopping = false;
  private inflight = false;
  private loopDone: Promise<void> | null = null;
  deliveredTotal = 0;
  refusedTotal = 0;
  lastRefusal: { external_id: string; message: string; at: number } | null = null;

  /** A repeating failure is logged once a minute (with a count). */
  private readonly throttle: LogThrottle;

  constructor(private readonly o: SenderOptions) {
    this.throttle = new LogThrottle(o.logger, 60_000, () => o.clock.monotonic());
  }

  start(): void {
    if (!this.loopDone) this.loopDone = this.loop();
  }

  /** Something was queued: look now instead of at the next poll. */
  notify(): void {
    this.wake.notify();
  }

  /**
   * Stops: a request in flight may finish for up to `graceMs`, then it is abandoned. Its entry
   * stays queued and goes out again next start with the same external_id (A1): a 409 then.
   */
  async stop(graceMs = 2_000): Promise<void> {
    if (this.stopping) return this.loopDone ?? undefined;
    this.stopping = true;
    this.wake.notify();
    const deadline = this.o.clock.monotonic() + graceMs;
    while (this.inflight && this.o.clock.monotonic() < deadline) await this.idle.wait(Math.max(1, deadline - this.o.clock.monotonic()));
    this.abort.abort(new Error('gateway stopping'));
    await this.loopDone;
  }

  private async loop(): Promise<void> {
    while (!this.stopping) {
      try {
        const entry = this.o.store.nextQueued();
        if (!entry) {
          await this.wake.wait(5_000);
          continue;
        }
        const ticket = await this.o.health.ready(this.abort.signal);
        if (this.stopping) break;
        this.inflight = true;
        try {
          await this.deliver(entry, ticket);
        } finally {
          this.inflight = false;
          this.idle.notify();
        }
      } catch (err) {
        if (this.stopping) break;
        this.throttle.error('loop', { err: describeError(err) }, 'annotation sender error; the outbox is kept and retried');
        await this.wake.wait(1_000);
      }
    }
  }

  /** `ticket`: what health.ready() returned for this request (one outage wave is one backoff step). */
  private async deliver(entry: OutboxEntry, ticket?: number): Promise<void> {
    const { store, clock, metrics, logger, health } = this.o;
    const r = await this.o.client.postAnnotation(requestBody(entry), this.abort.signal);
    if (this.abort.signal.aborted && !r.ok) return; // stopping: stays queued, not an attempt against it
    const d = decide(outcomeOf(r), health.attempt);
    const now = clock.now();
    switch (d.action) {
      case 'done': {
        health.success();
        const parsed = annotationResponseSchema.safeParse(r.body);
        store.markDelivered(entry.seq, parsed.success ? parsed.data.id : null, r.requestId ?? null, null, now);
        this.delivered(entry, parsed.success ? parsed.data.id : null);
        return;
      }
      case 'conflict':
        health.success();
        store.markDelivered(entry.seq, null, r.requestId ?? null, 'the service already had this external_id (409): delivered by an earlier attempt', now);
        this.delivered(entry, null);
        return;
      case 'isolate':
      case 'split': {
        // The service answered, so the link is fine; only this annotation is refused.
        health.success();
        const message = r.error?.message || describeResult(r);
        store.markRefused(entry.seq, message, r.requestId ?? null, now);
        this.refusedTotal += 1;
        this.lastRefusal = { external_id: entry.externalId, message, at: now };
        metrics.annotationsRefused.inc({ origin: entry.origin });
        logger.warn(
          { external_id: entry.externalId, origin: entry.origin, status: r.status, message, request_id: r.requestId },
          'the tracking service refused an annotation; it is kept as refused with the service\'s message (edge-gateway annotate list --state refused)',
        );
        this.changed(entry.seq);
        return;
      }
      default: {
        const description = describeResult(r);
        health.failure(d.action === 'renew_token' ? { action: 'credentials_failed', delayMs: 30_000 } : d, description, ticket);
        store.markAttemptFailed(entry.seq, description, r.requestId ?? null, now);
        this.changed(entry.seq);
      }
    }
  }

  private delivered(entry: OutboxEntry, serviceId: string | null): void {
    this.deliveredTotal += 1;
    this.o.metrics.annotationsDelivered.inc({ origin: entry.origin });
    this.o.logger.info({ external_id: entry.externalId, id: serviceId, origin: entry.origin, type: entry.type, attempts: entry.attempts + 1 }, 'annotation delivered');
    this.changed(entry.seq);
  }

  private changed(seq: number): void {
    const e = this.o.store.bySeq(seq);
    if (e) this.o.onChange?.(e);
  }
}
