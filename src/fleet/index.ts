import type { Logger } from 'pino';
import type { Clock } from '../core/clock.js';
import type { Metrics } from '../core/metrics.js';
import type { FleetBrokerStatus, GatewayStatus } from '../status/model.js';
import type { RequestBudget } from '../uplink/budget.js';
import { BudgetSharing, type SharingStatus } from '../uplink/budget-sharing.js';
import type { BudgetSharingConfig } from '../uplink/config.js';
import type { FleetMqttConfig } from './config.js';
import { FleetLink } from './broker-link.js';
import { StatusPublisher } from './status-publisher.js';
import { FleetView, type FleetRow } from './view.js';

/** A Fleet page nobody asked for this long stops the subscription (each gateway would otherwise receive every status of the plant). */
const WATCH_IDLE_MS = 5 * 60_000;
/** The first question waits this long at most for the retained statuses (like `fleet --wait`). */
const WATCH_SETTLE_MAX_MS = 2_000;

/** The plant's fleet table as this gateway sees it (the console's Fleet page). */
export interface FleetWatch {
  /** The rows; subscribes on the first call after a while without one and waits for the retained statuses. */
  rows(now: () => number): Promise<FleetRow[]>;
  /** subscription: whether the broker granted the read of `<prefix>/+/status` and `/last` (its ACL may not); duplicate_name: see FleetBrokerStatus. */
  broker(): { url: string; connected: boolean; prefix: string; subscription: 'pending' | 'ok' | 'refused'; duplicate_name: string | null };
  stop(): void;
}

export interface FleetRuntime {
  /** Budget sharing state (null when uplink.budget_sharing.mode is off). */
  sharing(): SharingStatus | null;
  broker(): FleetBrokerStatus;
  /**
   * Starts keeping the fleet table from `<prefix>/+/status` and `/last` on this gateway's own
   * plant-broker connection (one client, one table model: view.ts, as `edge-gateway fleet`).
   */
  watch(): FleetWatch;
  /** Withdraws the budget announcement and publishes the stopped status, then disconnects. */
  stop(): Promise<void>;
}

export interface FleetDeps {
  /** fleet.mqtt: the plant broker. */
  mqtt: FleetMqttConfig;
  /** uplink.budget_sharing and uplink.requests_per_minute: the address budget shared with the other gateways. */
  sharing: BudgetSharingConfig;
  requestsPerMinute: number;
  /** gateway.name: this gateway in the status topics and the budget group. */
  gatewayName: string;
  budget: RequestBudget;
  status: () => GatewayStatus;
  logger: Logger;
  metrics: Metrics;
  clock: Clock;
}

/** Starts the fleet side of a gateway: the plant-broker link, status publishing, budget sharing. */
export function startFleet(o: FleetDeps): FleetRuntime {
  const mqttConfig = o.mqtt;
  const share = o.sharing;
  const link = new FleetLink({ config: mqttConfig, gateway: o.gatewayName, sharing: share.mode === 'fleet', logger: o.logger, metrics: o.metrics, clock: o.clock });
  const sharing =
    share.mode === 'fleet'
      ? new BudgetSharing({
          budget: o.budget,
          channel: link,
          self: o.gatewayName,
          group: share.group,
          totalPerMinute: o.requestsPerMinute,
          intervalMs: share.announce_interval,
          leaseMs: share.lease,
          maxGateways: share.max_gateways,
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
    broker: () => ({ url: mqttConfig.url, connected: link.connected, client_id: link.clientId, prefix: mqttConfig.prefix, protocol: link.protocolName, instance: link.instance, duplicate_name: link.duplicateName }),
    watch: () => {
      // Subscribed only while someone looks at the page: with every gateway subscribed all the
      // time, the broker would send N x N statuses per interval.
      let view: FleetView | null = null;
      let unwatch: (() => void) | null = null;
      let askedAt = 0;
      let settled: Promise<void> = Promise.resolve();
      const idle = setInterval(() => {
        if (unwatch && o.clock.monotonic() - askedAt > WATCH_IDLE_MS) {
          unwatch();
          unwatch = null;
          view = null;
        }
      }, 30_000);
      idle.unref();
      const settle = async (): Promise<void> => {
        // The retained statuses follow the SUBACK at once; give them a moment after it.
        const until = o.clock.monotonic() + WATCH_SETTLE_MAX_MS;
        while (o.clock.monotonic() < until && link.connected && link.statusSubscription === 'pending') await new Promise((r) => setTimeout(r, 50));
        if (link.statusSubscription === 'ok') await new Promise((r) => setTimeout(r, Math.max(0, Math.min(300, until - o.clock.monotonic()))));
      };
      return {
        rows: async (now) => {
          askedAt = o.clock.monotonic();
          if (!view) {
            const v = new FleetView(mqttConfig.prefix);
            view = v;
            unwatch = link.watchStatuses((topic, payload) => v.ingest(topic, payload, Date.now()));
            settled = settle();
          }
          const v = view;
          await settled;
          return v.rows(now());
        },
        broker: () => ({ url: mqttConfig.url, connected: link.connected, prefix: mqttConfig.prefix, subscription: link.statusSubscription, duplicate_name: link.duplicateName }),
        stop: () => {
          clearInterval(idle);
          unwatch?.();
          unwatch = null;
          view = null;
        },
      };
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
