import type { Logger } from 'pino';
import type { Clock } from '../../core/clock.js';
import { describeError } from '../../core/errors.js';
import type { Metrics } from '../../core/metrics.js';

/** What every stage may use besides its settings and what earlier stages offer. */
export interface RuntimeServices {
  logger: Logger;
  metrics: Metrics;
  clock: Clock;
}

/** A started stage: what it offers (the rest of its fields) and how to stop it. */
export interface Stage {
  stop(): Promise<void>;
}

/**
 * The stages started so far, in order. `stop()` stops them in reverse, so what a stage relies on is
 * still running while it stops: the surfaces close before the sources, the sources commit what they
 * handed over before the uplink stops, the uplink finishes before the buffer closes. One stage that
 * fails to stop does not keep the others running; the first failure is thrown at the end.
 */
export class StageStack {
  private readonly started: Array<{ name: string; stage: Stage }> = [];

  constructor(private readonly logger: Logger) {}

  /** Records a started stage and hands back what it offers. */
  add<T extends Stage>(name: string, stage: T): T {
    this.started.push({ name, stage });
    return stage;
  }

  async stop(): Promise<void> {
    const failures: unknown[] = [];
    for (let next = this.started.pop(); next; next = this.started.pop()) {
      try {
        await next.stage.stop();
      } catch (err) {
        this.logger.error({ stage: next.name, err: describeError(err) }, 'stage failed to stop; stopping the others');
        failures.push(err);
      }
    }
    if (failures.length > 0) throw failures[0];
  }
}

/** Runs `fn` once: later calls get the same promise (a graceful stop is safe to call twice). */
export function once(fn: () => Promise<void>): () => Promise<void> {
  const memo: { running?: Promise<void> } = {};
  return () => (memo.running ??= fn());
}
