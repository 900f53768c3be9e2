import type { Logger } from 'pino';
import type { GatewayConfig } from '../config/schema.js';
import type { Clock } from '../core/clock.js';
import type { Metrics } from '../core/metrics.js';
import type { GatewayStatus } from '../runtime/status.js';
import type { RequestBudget } from '../uplink/budget.js';
import { BudgetSharing, type SharingStatus } from '../uplink/budget-sharing.js';
import { FleetLink } from './broker-link.js';
import { StatusPublisher } from './status-publisher.js';
import { FleetView, type FleetRow } from './view.js';

/** The plant's fleet table as this gateway sees it (the console's Fleet page). */
export interface FleetWatch {
  rows(now: number): FleetRow[];
  /** subscription: whether the broker granted the read of `<prefix>/+/status` and `/last` (its ACL may not). */
  broker(): { url: string; connected: boolean; prefix: string; subscription: 'pending' | 'ok' | 'refused' };
  stop(): void;
}

export interface FleetRuntime {
  /** Budget sharing state (null when uplink.budget_sharing.mode is off). */
  sharing(): SharingStatus | null;
  broker(): { url: string; connected: boolean; client_id: string; prefix: string };
  /**
   * Starts keeping the fleet table from `<prefix>/+/status` and `/last` on this gateway's own
   * plant-broker connection (one client, one table model: view.ts, as `edge-gateway fleet`).
   */
  watch(): FleetWatch;
  /** Withdraws the budget announcement and publishes the stopped status, then disconnects. */
  stop(): Promise<void>;
}

/** Starts the fleet side of a gateway: the plant-broker link, status publishing, budget sharing. */
export function startFleet(o: { config: GatewayConfig; budget: RequestBudget; status: () => GatewayStatus; logger: Logger; metrics: Metrics; clock: Clock }): FleetRuntime | null {
  const mqttConfig = o.config.fleet?.mqtt;
  if (!mqttConfig) return null;
  const share = o.config.uplink.budget_sharing;
  const link = new FleetLink({ config: mqttConfig, gateway: o.config.gateway.name, sharing: share.mode === 'fleet', logger: o.logger, metrics: o.metrics, clock: o.clock });
  const sharing =
    share.mode === 'fleet'
      ? new BudgetSharing({
          budget: o.budget,
          channel: link,
          self: o.config.gateway.name,
          group: share.group,
          totalPerMinute: o.config.uplink.requests_per_minute,
          intervalMs: share.announce_interval,
          leaseMs: share.lease,
          clock: o.clock,
          logger: o.logger,
          metrics: o.metrics,
        })
      : null;
  const publisher = new StatusPublisher({ link, status: o.status, sharing: () => sharing?.status() ?? null, intervalMs: mqttConfig.interval, clock: o.clock, logger: o.logger });
  link.start();
  sharing?.start();
  publisher.start();
  let stopped: Promise<void> | null = null;
  return {
    sharing: () => sharing?.status() ?? null,
    broker: () => ({ url: mqttConfig.url, connected: link.connected, client_id: link.clientId, prefix: mqttConfig.prefix }),
    watch: () => {
      const view = new FleetView(mqttConfig.prefix);
      const unwatch = link.watchStatuses((topic, payload) => view.ingest(topic, payload, Date.now()));
      return { rows: (now) => view.rows(now), broker: () => ({ url: mqttConfig.url, connected: link.connected, prefix: mqttConfig.prefix, subscription: link.statusSubscription }), stop: unwatch };
    },
    stop: () => {
      if (!stopped) {
        sharing?.stop();
        stopped = publisher.stop();
      }
      return stopped;
    },
  };
}
