import type { Clock } from '../../core/clock.js';

/**
 * Trips when `feed()` has not been called for `timeoutMs` (monotonic clock, so an NTP step on
 * the industrial PC neither trips it nor hides a dead link). The OPC UA source feeds it on every
 * data change and every subscription keep-alive (Part 4 §5.13.1: an idle subscription still
 * sends a keep-alive every MaxKeepAliveCount publishing intervals), or on every successful poll.
 * Silence beyond that means the subscription or the connection is dead even if the socket looks
 * open, which is the "subscription silently stops" failure this guards against.
 */
export class Watchdog {
  private last: number;
  private timer: NodeJS.Timeout | null = null;
  private tripped = false;

  constructor(
    readonly timeoutMs: number,
    private readonly clock: Clock,
    private readonly onTrip: (silentForMs: number) => void,
  ) {
    this.last = clock.monotonic();
  }

  start(): void {
    this.last = this.clock.monotonic();
    const every = Math.max(50, Math.min(1_000, Math.floor(this.timeoutMs / 4)));
    this.timer = setInterval(() => this.check(), every);
    this.timer.unref();
  }

  feed(): void {
    this.last = this.clock.monotonic();
  }

  /** Milliseconds since the last feed. */
  silentFor(): number {
    return this.clock.monotonic() - this.last;
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  private check(): void {
    if (this.tripped) return;
    const silent = this.silentFor();
    if (silent >= this.timeoutMs) {
      this.tripped = true;
      this.stop();
      this.onTrip(silent);
    }
  }
}
