import { connect, type Socket } from 'node:net';

/**
 * Attacking clients for the listener limits: raw sockets from a chosen local address (127.0.0.2,
 * 127.0.0.3 ... are all loopback on Linux), so the tests can tell the attacker's address from the
 * PLC's, the health check's and the operator's (127.0.0.1).
 */
export interface Flood {
  /** Sockets that connected. */
  readonly connected: number;
  /** Sockets that closed (by the listener, mostly). */
  readonly closed: number;
  /** Sockets still open. */
  readonly open: number;
  stop(): void;
}

export interface FloodOptions {
  port: number;
  host?: string;
  /** The attacker's address. */
  from: string;
  /** Bytes sent on connect (half a request), or nothing: an idle socket. */
  first?: string;
}

class SocketFlood implements Flood {
  connected = 0;
  closed = 0;
  private readonly sockets = new Set<Socket>();
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly o: FloodOptions) {}

  get open(): number {
    return this.sockets.size;
  }

  /** Opens one socket; resolves when it connected or failed. */
  one(): Promise<void> {
    return new Promise((resolve) => {
      const s = connect({ port: this.o.port, host: this.o.host ?? '127.0.0.1', localAddress: this.o.from });
      this.sockets.add(s);
      // Answers (a 408, a 503) are read and dropped: unread, they would hold back the 'close'.
      s.resume();
      s.on('connect', () => {
        this.connected += 1;
        if (this.o.first) s.write(this.o.first);
        resolve();
      });
      s.on('error', () => resolve());
      s.on('close', () => {
        this.closed += 1;
        this.sockets.delete(s);
        resolve();
      });
    });
  }

  /** Opens `perTick` sockets every `tickMs` until stopped. */
  churn(perTick: number, tickMs: number): void {
    this.timer = setInterval(() => {
      for (let i = 0; i < perTick; i++) void this.one();
    }, tickMs);
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
  }
}

/** Opens `count` sockets at once; resolves when each has connected or failed. */
export async function openSockets(count: number, o: FloodOptions): Promise<Flood> {
  const f = new SocketFlood(o);
  await Promise.all(Array.from({ length: count }, () => f.one()));
  return f;
}

/** Opens `perSecond` idle sockets a second (in ticks of 20 ms) until stopped. */
export function churnSockets(perSecond: number, o: FloodOptions): Flood {
  const f = new SocketFlood(o);
  f.churn(Math.max(1, Math.round(perSecond / 50)), 20);
  return f;
}
