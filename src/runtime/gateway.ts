import type { Logger } from 'pino';
import type { SampleBuffer } from '../buffer/sample-buffer.js';
import type { GatewayConfig } from '../config/schema.js';
import { systemClock } from '../core/clock.js';
import { createLogger } from '../core/logger.js';
import { createMetrics } from '../core/metrics.js';
import { sourceSections } from '../sources/registry.js';
import { VERSION } from '../version.js';
import type { GatewayHandle, StartOptions } from './handle.js';
import { ConfigReloads } from './reload.js';
import { startFeatures } from './stages/features.js';
import { startSources } from './stages/sources.js';
import { mappedCount, variableSourceLookup } from '../sources/inventory.js';
import { once, StageStack, type RuntimeServices } from './stages/stage.js';
import { startStore } from './stages/store.js';
import { startSurfaces } from './stages/surfaces.js';
import { startUplink } from './stages/uplink.js';
import { StatusBoard } from './status-board.js';

export type { GatewayHandle, StartOptions } from './handle.js';
export type { ReloadResult } from './reload.js';

/**
 * The composition root: config → stages → running gateway. Each stage (./stages/) gets its own
 * settings, the shared services and what earlier stages offer, in order: store → uplink → sources
 * → surfaces → features; they stop in reverse. Traffic starts once all are assembled, so the first
 * sample has somewhere to go and the stop follows the data: sources, then uplink, then the buffer.
 */
export async function startGateway(config: GatewayConfig, options: StartOptions = {}): Promise<GatewayHandle> {
  const clock = options.clock ?? systemClock;
  const logger = options.logger ?? createLogger({ level: config.log.level, format: config.log.format, name: config.gateway.name });
  const metrics = options.metrics ?? createMetrics({ defaultMetrics: true });
  const services: RuntimeServices = { logger, metrics, clock };
  const startedAt = clock.now();
  metrics.startTime.set(startedAt / 1000);
  const configPath = options.configPath ?? null;
  const board = new StatusBoard({ name: config.gateway.name, startedAt, clock });
  const stages = new StageStack(logger);

  const store = stages.add('store', startStore({ dataDir: config.gateway.data_dir, buffer: config.buffer, gaps: config.gaps, store: config.store }, services));
  const stop = async () => {
    await stages.stop();
    logStopped(logger, store.buffer);
  };
  try {
    const uplink = stages.add('uplink', startUplink({ service: config.service, uplink: config.uplink }, services, { store, makeHealth: options.uplinkHealth }));
    const sources = stages.add('sources', await startSources(sourceSections(config), services, { store }));
    // Unknown machine variables are shown with the source that maps them (issue 24 §1).
    uplink.unknown.sourceOf = () => variableSourceLookup(sources.inventory());
    uplink.mappedVariables = mappedCount(() => sources.inventory(), clock);
    const reloads = new ConfigReloads(config, { ...services, sources, configPath, startedAt });
    board.show({ store, uplink, sources, reloads });
    const surfacesSettings = { http: config.http, fleetMqtt: config.fleet?.mqtt, budgetSharing: config.uplink.budget_sharing, requestsPerMinute: config.uplink.requests_per_minute, gatewayName: config.gateway.name, configPath, demo: options.demo ?? null };
    const surfaces = stages.add('surfaces', await startSurfaces(surfacesSettings, services, { store, uplink, sources, reloads, status: board.status }));
    board.show({ surfaces });
    const features = stages.add('features', await startFeatures({ annotations: config.annotations, gaps: config.gaps, gatewayName: config.gateway.name }, services, { store, uplink, sources, surfaces, reloads }));
    board.show({ features });

    // Traffic, against the data flow: the uplink sends, the sources read, the server listens.
    uplink.open();
    await sources.open(startedAt);
    await surfaces.open();
    const http = surfaces.http;
    logger.info({ version: VERSION, sources: sources.list.map((s) => `${s.kind}:${s.name}`), buffer: store.path, service: config.service.base_url, http: http?.url ?? null }, 'gateway started');
    return {
      get config() {
        return reloads.config;
      },
      get annotations() {
        return features.annotations;
      },
      logger, metrics, buffer: store.buffer, gaps: store.gaps, sources: sources.list, http, httpUrl: http?.url ?? null,
      client: uplink.client, health: uplink.health, budget: uplink.budget, sync: uplink.sync, backfill: uplink.backfill, unknown: uplink.unknown,
      status: board.status,
      reload: (next) => reloads.apply(next),
      reloadRefused: (problems) => reloads.refused(problems),
      takeWrittenFile: (digest) => reloads.takeWrittenFile(digest),
      // A reload under way finishes first, so none rebuilds a stage that has stopped.
      close: once(async () => {
        await reloads.close();
        await stop();
      }),
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

function logStopped(logger: Logger, buffer: SampleBuffer): void {
  if (buffer.discardedAtClose > 0) logger.error({ discarded_samples: buffer.discardedAtClose }, `gateway stopped; ${buffer.discardedAtClose} samples held in memory could not be written (the disk refused writes) and are lost`);
  else logger.info('gateway stopped');
}
