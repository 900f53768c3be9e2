import type { Logger } from 'pino';
import { backoffDelay, type BackoffPolicy } from '../core/backoff.js';
import { describeError } from '../core/errors.js';
import { LogThrottle } from '../core/log-throttle.js';
import type { Metrics } from '../core/metrics.js';
import type { TurnShare } from './turn-share.js';

/**
 * The maintenance schedule: sealing, compaction, giving disk back and WAL truncation run here, on
 * their own clock, a slice at a time, never inside a commit (src/buffer/README.md B7).
 *
 * Keeps B7:
 *  - A slice runs in its own event-loop turn and does at most one transaction; a task stops its
 *    work by the slice's deadline (`sliceMs`, 25 ms by default) and holds what it staged in memory
 *    until its next slice. No transaction is ever open between slices.
 *  - A commit goes first: a slice does not start when a group commit is due, and it ends before the
 *    next one is due (at least MIN_SLICE_MS of work, so it makes progress); a commit that does
 *    fall due during a slice waits for that slice only. The commit's after-commit hook wakes the
 *    schedule, and the slice then runs in a later turn, after the commit's acknowledgements
 *    (promise callbacks) ran.
 *  - Slices share the turn with commits and a job's deletes (turn-share.ts): a slice gets what
 *    they left of `sliceMs` in this turn, and waits for a later turn when that is under MIN_SLICE_MS (a quarter of
 *    a slice when slices are shorter).
 *  - Slices take at most half of the time while work is pending: after a slice of d ms the next
 *    one waits at least d ms. With no work the schedule looks again every `idleMs` (1 s), so an
 *    idle gateway seals its aged rows and gives free pages back without any new commit.
 * Tasks take turns, so one with endless work (sealing a v1 backlog) cannot starve another.
 *
 * A task whose slice fails (a full disk, an I/O error) is put off: FAILED_RETRY, 1 s doubling to
 * a minute, while the others go on; it is said in the log when it first fails, then at most once a
 * minute with the count, and once when it works again. (A failure retried at once wrote 12,000
 * warnings in 20 s on a full disk.)
 */
/** The least a slice works when a commit is due soon. */
const MIN_SLICE_MS = 5;
/** A failed task waits this long before its next slice: 1 s doubling to a minute. */
export const FAILED_RETRY: BackoffPolicy = { initialMs: 1_000, maxMs: 60_000, factor: 2 };

export interface MaintenanceTask {
  /** Label in logs and in gateway_buffer_maintenance_seconds{task}. */
  readonly name: string;
  /** Whether it has work now; called often, so cheap. */
  due(): boolean;
  /** Works until `deadline` (performance.now() ms): at most one transaction. Returns whether it has more now. */
  slice(deadline: number): boolean;
  /** What it is doing, for the log of a slice that ran long. */
  describe?(): string;
}

export interface MaintenanceOptions {
  sliceMs: number;
  idleMs: number;
  logger: Logger;
  metrics: Metrics;
  /** When the next group commit is planned (performance.now() ms, Infinity when none): it goes first. */
  commitDueAt: () => number;
  /** The turn's budget shared with commits and a job's deletes (turn-share.ts). */
  share: TurnShare;
}

export class Maintenance {
  private timer: NodeJS.Timeout | null = null;
  private timerAt = Infinity;
  private immediate: NodeJS.Immediate | null = null;
  private notBefore = 0;
  private turn = 0;
  private stopped = true;
  private running = false;
  private idleWaiters: Array<() => void> = [];
  /** Per failing task: its failures in a row and when it may run again (performance.now() ms). */
  private readonly failing = new Map<MaintenanceTask, { failures: number; retryAt: number }>();
  private readonly failureLog: LogThrottle;

  constructor(
    private readonly tasks: readonly MaintenanceTask[],
    private readonly o: MaintenanceOptions,
  ) {
    this.failureLog = new LogThrottle(o.logger, 60_000, () => performance.now());
  }

  start(): void {
    this.stopped = false;
    this.later(this.o.idleMs);
  }

  stop(): void {
    this.stopped = true;
    this.clear();
    for (const w of this.idleWaiters.splice(0)) w();
  }

  /** After a commit (and whenever there may be work): runs a slice soon, once the pause is over. */
  wake(): void {
    if (this.stopped || this.immediate) return;
    const at = Math.max(performance.now(), this.notBefore);
    if (this.timer && this.timerAt <= at + 1) return; // a slice is already planned by then
    if (at - performance.now() > 1) {
      this.later(at - performance.now());
      return;
    }
    this.clear();
    this.immediate = setImmediate(() => {
      this.immediate = null;
      this.run();
    });
  }

  /** Resolves once no task has work (tests and benchmarks: the schedule caught up). */
  idle(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    return new Promise((resolve) => {
      this.idleWaiters.push(resolve);
      this.wake();
    });
  }

  private clear(): void {
    if (this.timer) clearTimeout(this.timer);
    if (this.immediate) clearImmediate(this.immediate);
    this.timer = null;
    this.timerAt = Infinity;
    this.immediate = null;
  }

  private later(ms: number): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    const delay = Math.max(1, Math.ceil(ms));
    this.timerAt = performance.now() + delay;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.timerAt = Infinity;
      this.run();
    }, delay);
    // The schedule never keeps a process alive (a tool that forgot to close the buffer still exits).
    this.timer.unref();
  }

  private run(): void {
    if (this.stopped || this.running) return;
    const started = performance.now();
    // A commit that is due goes first; its after-commit hook wakes the schedule again.
    const commitDue = this.o.commitDueAt();
    if (commitDue <= started + MIN_SLICE_MS) {
      this.later(Math.max(MIN_SLICE_MS, commitDue - started + MIN_SLICE_MS));
      return;
    }
    // A commit (or a job's delete) already used this turn: a slice of what is left, or a later turn.
    const left = this.o.share.left(started);
    if (left < Math.min(MIN_SLICE_MS, this.o.sliceMs / 4)) {
      this.later(1);
      return;
    }
    const task = this.nextDue();
    if (!task) {
      for (const w of this.idleWaiters.splice(0)) w();
      this.later(this.o.idleMs);
      return;
    }
    this.running = true;
    const doing = task.describe?.();
    let more = false;
    try {
      more = task.slice(Math.min(started + left, commitDue));
      this.succeeded(task);
    } catch (err) {
      this.failed(task, err);
    } finally {
      this.running = false;
      this.o.share.ran(started);
    }
    const took = performance.now() - started;
    this.o.metrics.bufferMaintenanceSeconds.observe({ task: task.name }, took / 1000);
    if (took > 2 * this.o.sliceMs) this.o.logger.debug({ event: 'buffer_maintenance_long_slice', task: task.name, before: doing, after: task.describe?.(), ms: Math.round(took), slice_ms: this.o.sliceMs }, 'a maintenance slice took longer than planned');
    this.notBefore = performance.now() + took;
    if (more || this.tasks.some((t) => this.ready(t))) this.later(took);
    else if (this.failing.size > 0) this.later(Math.max(took, Math.min(this.o.idleMs, this.nextRetryIn())));
    else {
      for (const w of this.idleWaiters.splice(0)) w();
      this.later(this.o.idleMs);
    }
  }

  /** Whether `task` has work and is not put off after a failure. */
  private ready(task: MaintenanceTask): boolean {
    const f = this.failing.get(task);
    return (f === undefined || performance.now() >= f.retryAt) && task.due();
  }

  private nextRetryIn(): number {
    let at = Infinity;
    for (const f of this.failing.values()) at = Math.min(at, f.retryAt);
    return Math.max(1, at - performance.now());
  }

  private failed(task: MaintenanceTask, err: unknown): void {
    const f = this.failing.get(task) ?? { failures: 0, retryAt: 0 };
    f.failures += 1;
    const delay = backoffDelay(FAILED_RETRY, f.failures);
    f.retryAt = performance.now() + delay;
    this.failing.set(task, f);
    this.failureLog.warn(`failed:${task.name}`, { err: describeError(err), task: task.name, failures: f.failures, retry_in_ms: Math.round(delay) }, `a buffer maintenance step (${task.name}) failed; it is tried again in ${Math.round(delay / 1000)} s, the rest of maintenance goes on`);
  }

  private succeeded(task: MaintenanceTask): void {
    const f = this.failing.get(task);
    if (!f) return;
    this.failing.delete(task);
    this.o.logger.info({ task: task.name, failures: f.failures }, `buffer maintenance (${task.name}) works again after ${f.failures} failed attempt${f.failures === 1 ? '' : 's'}`);
  }

  /** The next task with work, taking turns. */
  private nextDue(): MaintenanceTask | null {
    for (let i = 0; i < this.tasks.length; i++) {
      const t = this.tasks[(this.turn + i) % this.tasks.length];
      if (this.ready(t)) {
        this.turn = (this.turn + i + 1) % this.tasks.length;
        return t;
      }
    }
    return null;
  }
}
