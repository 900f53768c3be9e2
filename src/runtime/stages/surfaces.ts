import type { FleetMqttConfig } from '../../fleet/config.js';
import type { FleetRuntime } from '../../fleet/index.js';
import { registerConsoleRoutes } from '../../console/routes.js';
import type { DemoDevices } from '../../console/demo-routes.js';
import { RefusalLog } from '../../console/refusal-log.js';
import { consoleBufferReads } from '../../console/buffer-reads.js';
import { TrendKeeper } from '../../console/trend-keeper.js';
import { ValueRing } from '../../console/value-ring.js';
import { describeError } from '../../core/errors.js';
import { connectionLimits, type HttpConfig } from '../../http/config.js';
import { registerGapRoutes } from '../../http/gap-routes.js';
import { registerOpsRoutes } from '../../http/ops-routes.js';
import { LocalHttpServer } from '../../http/server.js';
import { registerSetAsideRoutes } from '../../http/set-aside-routes.js';
import type { GatewayStatus, StatusReadings } from '../../status/model.js';
import type { BudgetSharingConfig } from '../../uplink/config.js';
import type { ConfigReloads } from '../reload.js';
import type { SourcesStage } from './sources.js';
import type { RuntimeServices, Stage } from './stage.js';
import type { StoreStage } from './store.js';
import type { UplinkStage } from './uplink.js';

export interface SurfacesSettings {
  http: HttpConfig;
  /** fleet.mqtt, absent without a plant broker. */
  fleetMqtt: FleetMqttConfig | undefined;
  /** uplink.budget_sharing and uplink.requests_per_minute: the address budget shared over the plant broker. */
  budgetSharing: BudgetSharingConfig;
  requestsPerMinute: number;
  gatewayName: string;
  /** The file the configuration came from (the console edits it). */
  configPath: string | null;
  /** The demo's simulated devices, when the demo runs this gateway (the console's switch). */
  demo?: DemoDevices | null;
}

export interface SurfacesDeps {
  store: StoreStage;
  uplink: UplinkStage;
  sources: SourcesStage;
  reloads: ConfigReloads;
  /** The gateway's status (runtime/status-board.ts), read when someone asks. */
  status: () => GatewayStatus;
}

export interface SurfacesStage extends Stage {
  /** The local HTTP server (routes may still be added until `open`), or null when http.enabled is false. */
  readonly http: LocalHttpServer | null;
  readonly fleet: FleetRuntime | null;
  /** Starts listening. */
  open(): Promise<void>;
  status(): Pick<StatusReadings, 'fleet'>;
}

/**
 * Stage 4, the surfaces: where the gateway shows itself. The plant broker (fleet.mqtt: status
 * publishing, budget sharing, the fleet table) and the local HTTP server with the operations
 * routes (/status, /metrics, /healthz, /readyz, set-aside, gaps) and the commissioning console.
 * The fleet starts here, before the uplink sends, so a shared budget is in force from the first
 * request; the server listens only at `open`, once every route is there.
 */
export async function startSurfaces(settings: SurfacesSettings, services: RuntimeServices, deps: SurfacesDeps): Promise<SurfacesStage> {
  const { logger, metrics, clock } = services;
  const fleet = settings.fleetMqtt
    ? // Loaded only when configured (an MQTT client to the plant broker).
      (await import('../../fleet/index.js')).startFleet({ mqtt: settings.fleetMqtt, sharing: settings.budgetSharing, requestsPerMinute: settings.requestsPerMinute, gatewayName: settings.gatewayName, budget: deps.uplink.budget, status: deps.status, logger: logger.child({ component: 'fleet' }), metrics, clock })
    : null;
  try {
    const http = settings.http.enabled ? localServer(settings.http, services, deps) : null;
    const consoleRuntime = http && settings.http.console ? startConsole(http, { fleet, configPath: settings.configPath, demo: settings.demo ?? null }, services, deps) : null;
    return {
      http,
      fleet,
      async open() {
        await http?.listen();
      },
      status: () => ({ fleet: fleet ? { broker: fleet.broker(), budget_sharing: fleet.sharing() } : null }),
      async stop() {
        consoleRuntime?.stop();
        await http?.close();
        // Gives the budget share back to the other gateways and says "stopped" on the plant broker.
        await fleet?.stop();
      },
    };
  } catch (err) {
    await fleet?.stop();
    throw err;
  }
}

/** The local HTTP server with the operations routes (/status, /metrics, /healthz, /readyz, set-aside, gaps). */
function localServer(h: HttpConfig, { logger, metrics }: RuntimeServices, { store, uplink, status }: SurfacesDeps): LocalHttpServer {
  const http = new LocalHttpServer({
    host: h.host,
    port: h.port,
    apiToken: h.api_token,
    maxBodyBytes: h.max_body_bytes,
    rateLimitPerMinute: h.rate_limit_per_minute,
    maxConnections: h.max_connections,
    maxConnectionsPerClient: h.max_connections_per_client,
    headerTimeoutMs: h.header_timeout,
    limits: connectionLimits(h),
    requireTokenForReads: h.require_token_for_reads,
    allowedHosts: h.allowed_hosts,
    logger: logger.child({ component: 'http' }),
    metrics,
  });
  registerOpsRoutes(http, { status, metrics, buffer: store.buffer, health: uplink.health });
  registerSetAsideRoutes(http, store.buffer, { onRequeued: (f) => uplink.unknown.forget(f.variable ? [f.variable] : 'all') });
  registerGapRoutes(http, store.gaps);
  return http;
}

/**
 * The commissioning console (src/console): live values and refusals tapped from the sources
 * (bounded), its routes on the server. The value ring starts with the trend the buffer kept from
 * before a restart (issue 24 §4), read back before it takes the first sample, and hands its closed
 * buckets back to the buffer from then on.
 */
function startConsole(server: LocalHttpServer, o: { fleet: FleetRuntime | null; configPath: string | null; demo: DemoDevices | null }, { logger, metrics, clock }: RuntimeServices, deps: SurfacesDeps): { stop(): void } {
  const { store, uplink, sources, reloads, status } = deps;
  const ring = new ValueRing();
  const refusals = new RefusalLog();
  const untap = [sources.onRefused((source, reason, n, info) => refusals.record({ at: clock.now(), source, variable: info.variable ?? null, reason, detail: info.detail ?? null }, n))];
  // The trend kept from before a restart goes in first, a row per turn (sources start meanwhile;
  // at 50,000 variables it takes seconds), then the ring takes the committed samples and the
  // buffer its closed buckets.
  const trend = new TrendKeeper(ring);
  let keepTrend: (() => void) | null = null;
  let stopped = false;
  void trend
    .seed(store.buffer, clock.now())
    .then(
      (n) => {
        if (n > 0) logger.debug({ buckets: n, variables: ring.size }, 'console trend read back from the buffer');
      },
      (err) => logger.warn({ err: describeError(err) }, 'the console trend kept in the buffer could not be read back; it starts empty'),
    )
    .then(() => {
      if (stopped) return;
      untap.push(sources.sink.addTap(ring));
      keepTrend = store.buffer.keepTrend(trend);
    })
    .catch((err: unknown) => logger.warn({ err: describeError(err) }, 'the console trend is not kept across restarts this time'));
  const runtime = registerConsoleRoutes(server, {
    status,
    metrics,
    config: () => reloads.config,
    configPath: o.configPath,
    ring,
    refusals,
    quality: () => sources.qualityTables(),
    buffer: consoleBufferReads(store.buffer),
    client: uplink.client,
    clock,
    dataDir: store.dataDir,
    reload: (next, written) => reloads.apply(next, written),
    logger: logger.child({ component: 'console' }),
    fleet: o.fleet?.watch() ?? null,
    demo: o.demo,
  });
  return {
    stop() {
      stopped = true;
      trend.cancel();
      untap.forEach((u) => u());
      runtime.close();
      // The open buckets too: a clean restart shows the trend up to the stop.
      keepTrend?.();
    },
  };
}
