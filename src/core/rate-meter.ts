/**
 * Events per second over a sliding window of one-second buckets (monotonic time). Used for the
 * delivery rates in status and the backlog ETA.
 */
export class RateMeter {
  private readonly buckets: Float64Array;
  private head = 0;
  private readonly startedAt: number;
  private headSecond: number;

  constructor(
    private readonly now: () => number,
    private readonly windowSeconds = 30,
  ) {
    this.buckets = new Float64Array(windowSeconds);
    this.startedAt = now();
    this.headSecond = Math.floor(this.startedAt / 1000);
  }

  add(n: number): void {
    this.advance();
    this.buckets[this.head] += n;
  }

  /** Average per second over the window (or over the time since the meter started, if shorter). */
  perSecond(): number {
    this.advance();
    let sum = 0;
    for (const b of this.buckets) sum += b;
    // A young meter divides by the time it has existed (at least 1 s), not by the whole window.
    const seconds = Math.min(this.windowSeconds, Math.max(1, (this.now() - this.startedAt) / 1000));
    return sum / seconds;
  }

  private advance(): void {
    const second = Math.floor(this.now() / 1000);
    const steps = Math.min(this.windowSeconds, second - this.headSecond);
    for (let i = 0; i < steps; i++) {
      this.head = (this.head + 1) % this.windowSeconds;
      this.buckets[this.head] = 0;
    }
    if (second > this.headSecond) this.headSecond = second;
  }
}
