/**
 * One event-loop turn's budget for the buffer's sliced work (B7 in src/buffer/README.md): group
 * commits, maintenance slices and a finished import job's deletes each keep to `sliceMs`, but
 * they used to add up when they fell due together. A commit's timer and a maintenance timer
 * expiring in the same timers phase ran back to back (50 + 50 ms and their promise callbacks),
 * and at 100,000 samples/s that made most of the gateway's turns over 100 ms (30 of the
 * 46 turns of 80 ms or more in an 80 s profile were a commit and a maintenance slice together).
 *
 * "The same turn" here is what an event-loop delay monitor sees: work that ran with no timers
 * phase in between. After each piece of work a zero-delay timer is armed; until it fires, later
 * work is counted as part of the same stretch. A slice asks `left()` how much of the budget the
 * stretch has not used, and either does that much or waits for `nextTurn()`.
 */
export class TurnShare {
  /** performance.now() when the current stretch of buffer work began (valid while `busy`). */
  private since = 0;
  private busy = false;
  private marker: NodeJS.Timeout | null = null;

  constructor(readonly sliceMs: number) {}

  /** Milliseconds of the turn's budget not yet used by buffer work since the last timers phase. */
  left(now = performance.now()): number {
    return this.busy ? this.sliceMs - (now - this.since) : this.sliceMs;
  }

  /** Records a piece of buffer work that began at `started` (performance.now()) and has just ended. */
  ran(started: number): void {
    if (!this.busy) {
      this.busy = true;
      this.since = started;
    }
    if (this.marker) return;
    // Fires in the next timers phase, the one an event-loop delay monitor's timer also waits for.
    this.marker = setTimeout(() => {
      this.marker = null;
      this.busy = false;
    }, 0);
    this.marker.unref();
  }

  /**
   * Calls `fn` after the next timers phase (a later turn). Armed after the marker, with the same
   * 1 ms delay, so the marker has fired by then and the stretch is over.
   */
  nextTurn(fn: () => void): NodeJS.Timeout {
    return setTimeout(fn, 1);
  }

  /** Stops the marker (the buffer closed). */
  close(): void {
    if (this.marker) clearTimeout(this.marker);
    this.marker = null;
    this.busy = false;
  }
}
