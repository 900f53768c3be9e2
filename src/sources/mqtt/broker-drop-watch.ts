import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';

/**
 * Mosquitto's count of dropped messages, read to warn when the broker visibly lost messages while
 * the gateway was away. With its default `max_queued_messages 1000`, a persistent
 * session queues at most 1,000 messages while the gateway is stopped and mosquitto drops the rest
 * ("Outgoing messages are being dropped for client ..." in its log only).
 *
 * `$SYS/broker/publish/messages/dropped` (mosquitto(8), "Broker Status") counts every PUBLISH
 * dropped for inflight/queue limits, for all clients together: it cannot name the client, so the
 * warning says so. The last value seen is kept in the source's data folder, so the increase across
 * a gateway restart is seen too. Brokers without the topic (aedes, most others) send nothing and
 * nothing is reported.
 */
export const DROPPED_TOPIC = '$SYS/broker/publish/messages/dropped';

/** Values arriving this soon after a connect describe what happened while we were away ($SYS is published every sys_interval, 10 s by default). */
const AWAY_WINDOW_MS = 60_000;

export class BrokerDropWatch {
  private last: number | null;
  private connectedAt = 0;
  droppedWhileAway = 0;

  constructor(
    private readonly dir: string,
    private readonly logger: Logger,
    private readonly fields: Record<string, unknown>,
    private readonly monotonic: () => number,
  ) {
    this.last = this.read();
  }

  connected(): void {
    this.connectedAt = this.monotonic();
  }

  /** A value of DROPPED_TOPIC arrived. */
  value(payload: Buffer): void {
    const n = Number(payload.toString('utf8').trim());
    if (!Number.isFinite(n) || n < 0) return;
    const before = this.last;
    this.last = n;
    this.write(n);
    if (before === null || n <= before) return; // first sight, or the broker restarted (counter reset)
    const delta = n - before;
    if (this.monotonic() - this.connectedAt <= AWAY_WINDOW_MS) {
      this.droppedWhileAway += delta;
      this.logger.warn(
        { ...this.fields, broker_dropped: delta },
        `the MQTT broker dropped ${delta} messages while this gateway was disconnected (its $SYS count for all clients; mosquitto drops beyond max_queued_messages, default 1000, per client). Messages for this gateway's persistent session may be lost: raise max_queued_messages in mosquitto.conf`,
      );
    } else {
      this.logger.info({ ...this.fields, broker_dropped: delta }, `the MQTT broker reports ${delta} more dropped messages (for all its clients)`);
    }
  }

  private file(): string {
    return join(this.dir, 'broker-dropped.txt');
  }

  private read(): number | null {
    try {
      const n = Number(readFileSync(this.file(), 'utf8').trim());
      return Number.isFinite(n) ? n : null;
    } catch {
      return null;
    }
  }

  private write(n: number): void {
    try {
      writeFileSync(this.file(), `${n}\n`);
    } catch {
      /* best effort: only the warning across a restart depends on it */
    }
  }
}
