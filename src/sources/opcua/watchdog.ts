import type { Clock } from '../../core/clock.js';

/**
 * Trips when `feed()` has not been called for `timeoutMs` (monotonic clock, so an NTP step on
 * the industrial PC neither trips it nor hides a dead link). The OPC UA source feeds it on every
 * data change and every subscription keep-alive (Part 4 §5.13.1: an idle subscription still
 * sends a keep-alive every MaxKeepAliveCount publishing intervals), or on every successful poll.
 * Silence beyond that means the subscription or the connection is dead even if the socket looks
 * open, which is the "subscription silently stops" failure this guards against.
 *
 * Silence is counted only while the gateway could listen: when its own event loop was blocked (a
 * check runs late), what the server sent meanwhile is still unread in the socket, and Node runs
 * expired timers before it reads sockets. The time the checks were late is not counted, so a long
 * synchronous job in the gateway does not drop a healthy session and record a false gap (issue 21
 * §2: a 3.5 s block tripped it); a dead link still trips, that much later.
 */
export class Watchdog {
  private last: number;
  private lastCheck: number;
  private every = 1_000;
  private timer: NodeJS.Timeout | null = null;
  private tripped = false;

  constructor(
    readonly timeoutMs: number,
    private readonly clock: Clock,
    private readonly onTrip: (silentForMs: number) => void,
    /** While this says so, silence is the gateway's own doing (it holds its Publish requests back) and is not counted. */
    private readonly excused: () => boolean = () => false,
  ) {
    this.last = clock.monotonic();
    this.lastCheck = this.last;
  }

  start(): void {
    this.last = this.clock.monotonic();
    this.lastCheck = this.last;
    this.every = Math.max(50, Math.min(1_000, Math.floor(this.timeoutMs / 4)));
    this.timer = setInterval(() => this.check(), this.every);
    this.timer.unref();
  }

  feed(): void {
    this.last = this.clock.monotonic();
    this.extra = 0;
  }

  /** Extra silence allowed until the next `feed` (node-opcua is reconnecting a closed connection). */
  private extra = 0;

  /**
   * The connection is known closed and node-opcua is reconnecting it, with attempts at most
   * `reconnectMaxMs` apart: its repair gets that much beyond the timeout (at most the timeout again)
   * before the link is rebuilt from scratch. Without it a server that restarts in a little less
   * than the timeout was always rebuilt (its repair could not finish in what was left), which at
   * 20,000 items took 2.7 times what a bare node-opcua client's repair takes (bench/opcua-recovery.ts
   * with open62541).
   */
  allow(reconnectMaxMs: number): void {
    this.extra = Math.max(this.extra, Math.min(reconnectMaxMs, this.timeoutMs));
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
    const now = this.clock.monotonic();
    const late = now - this.lastCheck - this.every;
    this.lastCheck = now;
    // Late by more than an interval: the event loop was blocked, not listening; not silence.
    if (late > this.every) this.last = Math.min(now, this.last + late);
    // No Publish request at the server: it cannot send anything, keep-alives included.
    if (this.excused()) this.last = now;
    const silent = this.silentFor();
    if (silent >= this.timeoutMs + this.extra) {
      this.tripped = true;
      this.stop();
      this.onTrip(silent);
    }
  }
}
