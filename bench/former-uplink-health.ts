/**
 * The uplink health as it was before issue 12 §7 (commit 57a9e8f), kept only as the baseline of
 * bench/outage-recovery.ts: every failed call is a backoff step (so one outage wave of
 * max_in_flight batches, an upload and an annotation moves it several steps), 5xx/network
 * backoff capped at 60 s, and every sender resumes together when a pause ends. Not used by the
 * gateway.
 */
import type { Logger } from 'pino';
import { backoffDelay } from '../src/core/backoff.js';
import type { Clock } from '../src/core/clock.js';
import type { Metrics } from '../src/core/metrics.js';
import { sleep } from '../src/core/clock.js';
import { SERVER_ERROR_BACKOFF, type Decision } from '../src/uplink/retry-policy.js';
import type { UplinkHealth } from '../src/uplink/uplink-health.js';

/** The 5xx/network backoff of that time: 1 s doubling to 60 s. */
const FORMER_SERVER_ERROR_BACKOFF = { ...SERVER_ERROR_BACKOFF, maxMs: 60_000 };

/** A gateway option: `startGateway(config, { uplinkHealth: formerUplinkHealth })`. */
export function formerUplinkHealth(clock: Clock, logger: Logger, metrics: Metrics): UplinkHealth {
  return new FormerUplinkHealth(clock, logger, metrics) as unknown as UplinkHealth;
}

/**
 * The state of the link to the tracking service, shared by every sender (sync batches, import
 * jobs, annotations) because they share one service, one IP and one budget: when the service says
 * "slow down" or is unreachable, all of them wait.
 *
 * - ok:          requests flow.
 * - retrying:    transient errors (429, 5xx, network); everyone waits until `resumeAt`.
 * - auth_failed: the credentials were refused even after a fresh token (401 twice): alert, keep
 *                buffering, try again after a long backoff in case they are fixed upstream.
 * - halted:      the organisation is not authorised (403) or the endpoint does not exist (404):
 *                a configuration error. Stop sending, alert, keep buffering; probe rarely.
 */
type UplinkCondition = 'ok' | 'retrying' | 'auth_failed' | 'halted';

const CONDITION_GAUGE: Record<UplinkCondition, number> = { ok: 0, retrying: 1, auth_failed: 2, halted: 2 };
/** How often a halted uplink probes whether the configuration was fixed upstream. */
const HALT_PROBE_MS = 5 * 60_000;

class FormerUplinkHealth {
  private state: UplinkCondition = 'ok';
  private reasonText = '';
  private sinceMs: number;
  private resumeAtMono = 0;
  private failures = 0;
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

  /** Consecutive failed calls, the `attempt` for the retry policy's next decision. */
  get attempt(): number {
    return this.failures + 1;
  }

  snapshot(): { condition: UplinkCondition; reason: string; since: number; resumeInMs: number; consecutiveFailures: number } {
    return {
      condition: this.state,
      reason: this.reasonText,
      since: this.sinceMs,
      resumeInMs: Math.max(0, Math.round(this.resumeAtMono - this.clock.monotonic())),
      consecutiveFailures: this.failures,
    };
  }

  /** A call succeeded: clear any pause. */
  success(): void {
    this.failures = 0;
    if (this.state !== 'ok') {
      this.logger.info({ after: this.state, reason: this.reasonText }, 'tracking service reachable again; delivery resumes');
      this.set('ok', '');
    }
    this.resumeAtMono = 0;
    this.wake();
  }

  /** Applies a failed call's decision. Returns the pause in ms. */
  failure(decision: Decision, description: string, _ticket?: number): number {
    this.failures += 1;
    let delay = 0;
    switch (decision.action) {
      case 'retry':
        // The callers computed the delay with today's 3 s cap; that time's cap was 60 s.
        delay = decision.reason === 'rate_limited' ? decision.delayMs : backoffDelay(FORMER_SERVER_ERROR_BACKOFF, this.failures);
        this.metrics.uplinkRetries.inc({ reason: decision.reason });
        if (this.state === 'ok' || this.state === 'retrying') this.set('retrying', description);
        break;
      case 'credentials_failed':
        delay = decision.delayMs;
        if (this.state !== 'auth_failed') {
          this.logger.error({ reason: description }, 'the tracking service refuses the credentials; samples keep buffering. Check service.auth');
        }
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
        this.set('halted', description);
        break;
      default:
        return 0;
    }
    this.resumeAtMono = Math.max(this.resumeAtMono, this.clock.monotonic() + delay);
    return delay;
  }

  /** Today's interface: no probe then, everyone waited for the pause alone. */
  async settled(signal?: AbortSignal): Promise<void> {
    await this.ready(signal);
  }

  /** Resolves once sending may go on (immediately when no pause is in force). */
  async ready(signal?: AbortSignal): Promise<number> {
    for (;;) {
      const wait = this.resumeAtMono - this.clock.monotonic();
      if (wait <= 0) return 0;
      await new Promise<void>((resolve, reject) => {
        const done = () => {
          this.waiters.delete(done);
          resolve();
        };
        this.waiters.add(done);
        sleep(wait, signal).then(done, (err) => {
          this.waiters.delete(done);
          reject(err);
        });
      });
    }
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
