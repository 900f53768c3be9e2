import type { Logger } from 'pino';
import type { Clock } from '../core/clock.js';
import { describeError } from '../core/errors.js';
import type { GatewayStatus } from '../status/model.js';
import type { SharingStatus } from '../uplink/budget-sharing.js';
import type { FleetLink } from './broker-link.js';
import { fleetStatusFrom, type FleetStatusDoc } from './status-doc.js';

/** Publishes this gateway's status on the plant broker every `intervalMs` (and once at start). */
export class StatusPublisher {
  private timer: NodeJS.Timeout | null = null;
  private last: FleetStatusDoc | null = null;

  constructor(
    private readonly o: {
      link: FleetLink;
      status: () => GatewayStatus;
      sharing: () => SharingStatus | null;
      intervalMs: number;
      clock: Clock;
      logger: Logger;
    },
  ) {}

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => this.publish(), this.o.intervalMs);
    this.timer.unref();
    // The first one as soon as the connection is up (publish() is a no-op before).
    const first = setInterval(() => {
      if (this.publish() || !this.timer) clearInterval(first);
    }, 200);
    first.unref();
  }

  /** Stops publishing and says goodbye: the stopped status (with the last figures) replaces the will. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    const final: FleetStatusDoc = { ...(this.last ?? { v: 1, gateway: '' }), state: 'stopped', at: new Date(this.o.clock.now()).toISOString(), reason: 'stopped cleanly' } as FleetStatusDoc;
    await this.o.link.close(this.last ? final : undefined);
  }

  private publish(): boolean {
    // Nothing is built while the broker is away (a queued status would be stale on arrival).
    if (!this.o.link.connected) return false;
    try {
      const doc = fleetStatusFrom(this.o.status(), this.o.sharing(), this.o.intervalMs, this.o.clock.now());
      this.last = doc;
      return this.o.link.publishStatus(doc);
    } catch (err) {
      this.o.logger.warn({ err: describeError(err) }, 'fleet status could not be built');
      return false;
    }
  }
}
