import type { Clock } from '../core/clock.js';
import type { BacklogPoint } from './api/live.js';

/**
 * The backlog of the last hour for the overview's chart: the queue size sampled every 10 s,
 * whether or not a console is open (the chart has its hour as soon as one opens).
 */
export class BacklogHistory {
  private readonly list: BacklogPoint[] = [];
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly rows: () => number,
    private readonly clock: Clock,
    everyMs = 10_000,
    private readonly max = 360, // one hour
  ) {
    this.sample();
    this.timer = setInterval(() => this.sample(), everyMs);
    this.timer.unref();
  }

  points(): BacklogPoint[] {
    return this.list;
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private sample(): void {
    try {
      this.list.push([this.clock.now(), this.rows()]);
      if (this.list.length > this.max) this.list.shift();
    } catch {
      /* buffer closing */
    }
  }
}
