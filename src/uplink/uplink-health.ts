import type { Logger } from 'pino';
import type { Clock } from '../core/clock.js';
import type { Metrics } from '../core/metrics.js';
import type { Decision } from './retry-policy.js';

/**
 * The state of the link to the tracking service, shared by every sender (sync batches, import
 * jobs, annotations) because they share one service, one IP and one budget: when the service says
 * "slow down" or is unreachable, all of them wait.
 *
 * - ok:          requests flow.
 * - retrying:    the service is unreachable or failing (5xx, network); everyone waits until `resumeAt`.
 *                A 429 is not an outage: the request budget lowers its pace and holds every class
 *                for the §8 backoff (rate-finder.ts), and nothing here changes, so one sender's
 *                success cannot release the others at once.
 * - auth_failed: the credentials were refused even after a fresh token (401 twice): alert, keep
 *                buffering, try again after a long backoff in case they are fixed upstream.
 * - halted:      the organisation is not authorised (403) or the endpoint does not exist (404):
 *                a configuration error. Stop sending, alert, keep buffering; probe rarely.
 *
 * Waves and probes (recovering in seconds, not a minute). Up to max_in_flight batches, an upload,
 * a poll and an annotation can be in flight when the service goes away, and they all fail
 * together. Counting each failure as a step of the shared backoff moved it several steps per
 * outage wave, up to its cap. So:
 * - One wave is one step. `ready()` hands each request a ticket (the epoch it started in; the
 *   epoch advances at every counted failure and every success); a failure whose request started
 *   before the last counted failure is the tail of that wave and moves nothing, and one whose
 *   request started before the last success is stale (the service answered since). A new outage
 *   is noticed by the requests that start after that.
 * - While the condition is not `ok`, the end of a pause lets ONE request through (the probe); the
 *   others wait in `ready()`/`settled()`. The probe's failure is the next step (a new pause); its
 *   success (or any success) resumes everyone at once. A probe that never reports (stop, crash of
 *   its caller) is given up after PROBE_LEASE_MS and another request probes.
 */
export type UplinkCondition = 'ok' | 'retrying' | 'auth_failed' | 'halted';
/** What the service refuses while auth_failed or halted (the status says "refused (authentication)", ...). */
export type RefusalCause = 'authentication' | 'organisation' | 'items' | 'endpoint';

const CONDITION_GAUGE: Record<UplinkCondition, number> = { ok: 0, retrying: 1, auth_failed: 2, halted: 2 };
/** How often a halted uplink probes whether the configuration was fixed upstream. */
export const HALT_PROBE_MS = 5 * 60_000;
/** A probe that has not reported after this long no longer holds back the others. */
export const PROBE_LEASE_MS = 15_000;

export class UplinkHealth {
  private state: UplinkCondition = 'ok';
  private reasonText = '';
  private cause: RefusalCause | null = null;
  private sinceMs: number;
  private resumeAtMono = 0;
  private failures = 0;
  /** Advances at each counted failure and each success: the tickets `ready()` hands out. */
  private epoch = 0;
  /** Monotonic time the probe in flight was let through; null when none. */
  private probeSince: number | null = null;
  private waiters = new Set<() => void>();

  constructor(
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly metrics: Metrics,
  ) {
    this.sinceMs = clock.now();
    metrics.uplinkState.set(0);
  }

  get condition(): UplinkCondition {
    return this.state;
  }

  /** Consecutive failed waves, the `attempt` for the retry policy's next decision. */
  get attempt(): number {
    return this.failures + 1;
  }

  snapshot(): { condition: UplinkCondition; reason: string; refused: RefusalCause | null; since: number; resumeInMs: number; consecutiveFailures: number } {
    return {
      condition: this.state,
      reason: this.reasonText,
      refused: this.state === 'auth_failed' || this.state === 'halted' ? this.cause : null,
      since: this.sinceMs,
      resumeInMs: Math.max(0, Math.round(this.resumeAtMono - this.clock.monotonic())),
      consecutiveFailures: this.failures,
    };
  }

  /** A call succeeded: clear any pause, resume every sender. */
  success(): void {
    this.failures = 0;
    this.epoch += 1;
    this.probeSince = null;
    if (this.state !== 'ok') {
      this.logger.info({ after: this.state, reason: this.reasonText }, 'tracking service reachable again; delivery resumes');
      this.set('ok', '');
    }
    this.resumeAtMono = 0;
    this.wake();
  }

  /**
   * Applies a failed call's decision. Returns the pause in ms. `ticket` is what `ready()` returned
   * before the call: a failure of a request that started before the last counted failure (the tail
   * of the same wave) or before the last success (stale) changes neither the step nor the pause
   * (0 is returned). Without a ticket every failure counts.
   */
  failure(decision: Decision, description: string, ticket?: number): number {
    if (decision.action === 'retry') this.metrics.uplinkRetries.inc({ reason: decision.reason });
    // The budget paused and slowed every class already (budget.ts answered()).
    if (decision.action === 'retry' && decision.reason === 'rate_limited') return 0;
    if (ticket !== undefined && ticket !== this.epoch) return 0;
    this.failures += 1;
    this.epoch += 1;
    this.probeSince = null;
    let delay = 0;
    switch (decision.action) {
      case 'retry':
        delay = decision.delayMs;
        if (this.state === 'ok' || this.state === 'retrying') this.set('retrying', description);
        break;
      case 'credentials_failed':
        delay = decision.delayMs;
        if (this.state !== 'auth_failed') {
          this.logger.error({ reason: description }, 'the tracking service refuses the credentials; samples keep buffering. Check service.auth');
        }
        this.cause = 'authentication';
        this.set('auth_failed', description);
        break;
      case 'halt':
        delay = HALT_PROBE_MS;
        if (this.state !== 'halted') {
          this.logger.error(
            { reason: description },
            decision.reason === 'forbidden'
              ? 'the tracking service refuses this organisation (403); delivery stops and samples keep buffering. Check service.organisation_id and the credentials\' organisations'
              : decision.reason === 'rejected'
                ? 'the tracking service refuses every item of whole batches (400); delivery stops and samples keep buffering. Check service.item_id_field and the mapped machine variables'
                : 'the tracking service has no such endpoint (404); delivery stops and samples keep buffering. Check service.base_url',
          );
        }
        this.cause = decision.reason === 'forbidden' ? 'organisation' : decision.reason === 'rejected' ? 'items' : 'endpoint';
        this.set('halted', description);
        break;
      default:
        return 0;
    }
    this.resumeAtMono = Math.max(this.resumeAtMono, this.clock.monotonic() + delay);
    // Waiters see the new pause (and that the probe has reported).
    this.wake();
    return delay;
  }

  /**
   * Resolves when this request may go: at once while `ok`; otherwise after the pause, as the one
   * probe. Returns the ticket to give `failure()` for this request.
   */
  async ready(signal?: AbortSignal): Promise<number> {
    for (;;) {
      const wait = this.holdFor();
      if (wait <= 0) {
        if (this.state !== 'ok') this.probeSince = this.clock.monotonic();
        return this.epoch;
      }
      await this.sleepOrWake(wait, signal);
    }
  }

  /**
   * Resolves when a request could go (no pause, and no probe in flight), without going: for a
   * loop that decides what to send next (it then calls `ready()` for the request itself).
   */
  async settled(signal?: AbortSignal): Promise<void> {
    for (;;) {
      const wait = this.holdFor();
      if (wait <= 0) return;
      await this.sleepOrWake(wait, signal);
    }
  }

  /** ms a request must still wait: the pause, then while not ok a probe's lease. */
  private holdFor(): number {
    const now = this.clock.monotonic();
    const pause = this.resumeAtMono - now;
    if (pause > 0) return pause;
    if (this.state === 'ok' || this.probeSince === null) return 0;
    return Math.max(0, this.probeSince + PROBE_LEASE_MS - now);
  }

  /** Waits `ms`, or until woken (success, failure, retryNow); rejects when `signal` aborts. */
  private sleepOrWake(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason ?? new Error('aborted'));
        return;
      }
      const finish = (err?: unknown) => {
        clearTimeout(timer);
        this.waiters.delete(done);
        signal?.removeEventListener('abort', onAbort);
        if (err === undefined) resolve();
        else reject(err);
      };
      const done = () => finish();
      const onAbort = () => finish(signal?.reason ?? new Error('aborted'));
      const timer = setTimeout(done, Math.max(1, ms));
      this.waiters.add(done);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Ends a pause early (a config reload, an operator command). */
  retryNow(): void {
    this.resumeAtMono = 0;
    this.wake();
  }

  private wake(): void {
    for (const w of [...this.waiters]) w();
  }

  private set(state: UplinkCondition, reason: string): void {
    if (state !== this.state) this.sinceMs = this.clock.now();
    this.state = state;
    this.reasonText = reason;
    this.metrics.uplinkState.set(CONDITION_GAUGE[state]);
  }
}
