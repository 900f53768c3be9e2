import { readFileSync } from 'node:fs';
import type { Logger } from 'pino';
import type { GatewayConfig } from '../config/schema.js';
import type { Clock } from '../core/clock.js';
import type { Metrics } from '../core/metrics.js';
import type { LocalHttpServer } from '../http/server.js';
import type { GatewayStatus } from '../status/model.js';
import type { TrackingClient } from '../uplink/client.js';
import type { FleetWatch } from '../fleet/index.js';
import { BacklogHistory } from './backlog-history.js';
import { registerBuildRoutes } from './build-routes.js';
import type { ConsoleBufferReads } from './buffer-reads.js';
import { ConsoleCatalog, registerCatalogRoutes } from './catalog.js';
import { ConfigHistory } from './config-history.js';
import { registerConfigRoutes, type ConsoleReload } from './config-routes.js';
import { registerHistoryRoutes } from './history-routes.js';
import { registerDemoRoutes, type DemoDevices } from './demo-routes.js';
import { registerFleetRoutes } from './fleet-routes.js';
import { LiveHub } from './live.js';
import type { QualityTables } from './quality-reads.js';
import { registerMappingRoutes } from './mapping-routes.js';
import { registerLiveRoutes } from './live-routes.js';
import { ConsoleTextWorker } from './text-worker.js';
import type { RefusalLog } from './refusal-log.js';
import { VariableIndexCache } from './variable-index-cache.js';
import { registerVariableRoutes } from './variable-routes.js';
import type { ValueRing } from './value-ring.js';

export interface ConsoleDeps {
  status: () => GatewayStatus;
  metrics: Metrics;
  config: () => GatewayConfig;
  configPath: string | null;
  ring: ValueRing;
  refusals: RefusalLog;
  /** The running sources' quality tables (core/quality.ts); absent: no quality shown (a console without sources). */
  quality?: QualityTables;
  /** What the console reads of the buffer (buffer-reads.ts), nothing more. */
  buffer: ConsoleBufferReads;
  client: TrackingClient;
  /** The gateway's clock: wall time for what the pages show, monotonic time for ages. */
  clock: Clock;
  dataDir: string;
  /** The plant's fleet table (fleet.mqtt configured), else null/absent. */
  fleet?: FleetWatch | null;
  /** The simulated devices of the demo that runs this gateway (commands/demo.ts), else null/absent. */
  demo?: DemoDevices | null;
  /** Applies a validated configuration (the gateway's hot reload); `written`: from a file the console wrote. */
  reload: ConsoleReload;
  logger: Logger;
}

export interface ConsoleRuntime {
  hub: LiveHub;
  close(): void;
}

/**
 * The commissioning console at /console: the page, its bundled script and style, and the JSON and
 * event-stream routes under /console/api it reads, registered page by page (the shapes of their
 * answers are the shared model in api/). Every route is registered on the gateway's server like
 * any other, so the server's guards (rate limit, body limit, tokens for writes and, where
 * configured, reads) apply to them; every write is a POST or PUT with a JSON body.
 *
 *   live-routes.ts      the page, its bundle, the live stream, the Overview
 *   variable-routes.ts  the Variables page
 *   fleet-routes.ts     the Fleet page
 *   build-routes.ts     Build the config: OPC UA browse and snippet, Modbus probe and its
 *                       devices, "Add to configuration" (the merge);
 *   catalog.ts          its catalog of machine variables,
 *   config-routes.ts    its configuration editor,
 *   history-routes.ts   the file's history and rollback, and
 *   mapping-routes.ts   the mappings as CSV (export, import)
 * The configuration texts and CSV files are worked on by the text worker (text-worker.ts), off
 * the gateway's event loop.
 *   demo-routes.ts      the demo's device switch (refused unless the demo runs this gateway)
 */
export function registerConsoleRoutes(http: LocalHttpServer, deps: ConsoleDeps): ConsoleRuntime {
  const { clock } = deps;
  // This process: a page that sees another boot id reloads the variable list (indexes changed).
  const boot = `${process.pid}-${clock.now()}`;
  const quality: QualityTables = deps.quality ?? (() => new Map());
  const hub = new LiveHub(deps.ring, deps.refusals, deps.status, boot, clock, quality);
  const buffer = deps.buffer;
  const backlog = new BacklogHistory(() => buffer.queue().rows, clock);
  // The organisation's catalog: machine names of the variables, the build page's mapping (catalog.ts).
  const catalog = new ConsoleCatalog({ client: deps.client, service: () => deps.config().service, clock });

  registerLiveRoutes(http, { boot, title: deps.config().gateway.name, hub, backlog, status: deps.status, metrics: deps.metrics, refusals: deps.refusals, ring: deps.ring, quality, clock });
  const configText = () => {
    if (!deps.configPath) return null;
    try {
      return readFileSync(deps.configPath, 'utf8');
    } catch {
      return null;
    }
  };
  registerVariableRoutes(http, { boot, clock, index: new VariableIndexCache(deps.config), ring: deps.ring, refusals: deps.refusals, quality, buffer, catalog, configText });
  registerFleetRoutes(http, { clock, self: () => deps.config().gateway.name, fleet: deps.fleet });
  const texts = new ConsoleTextWorker();
  registerBuildRoutes(http, { clock, dataDir: deps.dataDir, config: deps.config, texts });
  registerMappingRoutes(http, { config: deps.config, configText, texts, catalog: () => catalog.current() });
  registerCatalogRoutes(http, catalog);
  const history = new ConfigHistory(deps.dataDir);
  const writer = registerConfigRoutes(http, { config: deps.config, configPath: deps.configPath, reload: deps.reload, texts, history, logger: deps.logger, catalog });
  registerHistoryRoutes(http, { history, writer, texts });
  registerDemoRoutes(http, deps.demo ?? null);

  return {
    hub,
    close() {
      void texts.close();
      backlog.stop();
      deps.fleet?.stop();
      hub.close();
    },
  };
}
