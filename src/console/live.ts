import type { ServerResponse } from 'node:http';
import type { Clock } from '../core/clock.js';
import type { GatewayStatus } from '../status/model.js';
import type { LiveHello, LiveTick } from './api/live.js';
import { QualityChanges, type QualityTables } from './quality-reads.js';
import type { RefusalLog } from './refusal-log.js';
import type { ValueRing } from './value-ring.js';

/**
 * The console's live stream (server-sent events, HTML Living Standard §9.2): one `tick` event a
 * second to every open console, built once per tick whatever the number of consoles. A tick holds
 * the status and only the variables that received samples since the previous tick, as
 * [index, value, ts, samples] rows (and the refusal counts that changed, as [id, by reason]), so 5,000 variables at 1 Hz cost one small JSON a second and no
 * request per variable. The timer runs only while a console is open.
 */
export class LiveHub {
  private readonly clients = new Set<ServerResponse>();
  private timer: NodeJS.Timeout | null = null;
  private readonly qualities = new QualityChanges();

  constructor(
    private readonly ring: ValueRing,
    private readonly refusals: RefusalLog,
    private readonly status: () => GatewayStatus,
    private readonly boot: string,
    private readonly clock: Clock,
    private readonly quality: QualityTables = () => new Map(),
    private readonly intervalMs = 1_000,
  ) {}

  get size(): number {
    return this.clients.size;
  }

  attach(res: ServerResponse): void {
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', connection: 'keep-alive', 'x-accel-buffering': 'no' });
    // `retry` tells the browser how soon to reconnect after the gateway went away (§9.2.4).
    const hello: LiveHello = { boot: this.boot };
    res.write(`retry: 2000\nevent: hello\ndata: ${JSON.stringify(hello)}\n\n`);
    this.clients.add(res);
    const drop = () => {
      this.clients.delete(res);
      if (this.clients.size === 0) this.stop();
    };
    res.on('close', drop);
    res.on('error', drop);
    if (!this.timer) {
      // What changed before anyone watched is in the snapshot the page loads.
      for (const e of this.ring.takeDirty()) e.pending = 0;
      this.refusals.takeChanged();
      this.qualities.reset(this.quality, this.clock.now());
      this.timer = setInterval(() => this.tick(), this.intervalMs);
      this.timer.unref();
    }
  }

  private tick(): void {
    const changed = this.ring.takeDirty();
    // Written straight into the frame text: no array per variable to allocate and collect.
    const parts: string[] = new Array(changed.length);
    for (let i = 0; i < changed.length; i++) {
      const e = changed[i];
      parts[i] = `[${e.idx},${Number(e.last.toPrecision(7))},${e.lastTs},${e.pending}]`;
      e.pending = 0;
    }
    const v = parts.join(',');
    let status: GatewayStatus | null = null;
    try {
      status = this.status();
    } catch {
      status = null; // a failing status must not stop the values
    }
    // Every field but the values as an object of the shared model (api/live.ts), the values spliced in as text.
    const now = this.clock.now();
    const rest: Omit<LiveTick, 'v'> = { boot: this.boot, t: now, status, r: this.refusals.takeChanged(), q: this.qualities.take(this.quality, now) };
    const frame = `event: tick\ndata: ${JSON.stringify(rest).slice(0, -1)},"v":[${v}]}\n\n`;
    for (const res of this.clients) {
      // A console that cannot keep up (a stalled tab) is dropped rather than buffered without end;
      // its EventSource reconnects and reloads the snapshot.
      if (res.writableLength > 4_000_000) res.destroy();
      else res.write(frame);
    }
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  close(): void {
    this.stop();
    for (const res of this.clients) res.end();
    this.clients.clear();
  }
}
