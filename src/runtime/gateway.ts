import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Logger } from 'pino';
import { openBufferDatabase } from '../buffer/database.js';
import { acquireBufferOwner, recordBufferOwner } from '../buffer/owner-lock.js';
import { SampleBuffer } from '../buffer/sample-buffer.js';
import type { GatewayConfig } from '../config/schema.js';
import { systemClock, type Clock } from '../core/clock.js';
import { ConfigError, describeError, errorCode, GatewayError } from '../core/errors.js';
import { createLogger } from '../core/logger.js';
import { createMetrics, type Metrics } from '../core/metrics.js';
import { SourceStats, type Source, type SourceContext, type SourceKind } from '../core/source.js';
import { TappedSink } from '../core/sample.js';
import { ConditionRouter } from '../core/condition-event.js';
import type { AnnotationsRuntime } from '../annotations/index.js';
import type { FleetRuntime } from '../fleet/index.js';
import { LocalHttpServer } from '../http/server.js';
import { connectionLimits } from '../http/config.js';
import { registerOpsRoutes } from '../http/ops-routes.js';
import { registerSetAsideRoutes } from '../http/set-aside-routes.js';
import { registerConsoleRoutes, type ConsoleRuntime } from '../console/routes.js';
import { ValueRing } from '../console/value-ring.js';
import { RefusalLog } from '../console/refusal-log.js';
import { assertUniqueNames, buildSourceSection, buildSources } from '../sources/registry.js';
import { appliedConfig, planReload, type ReloadPlan } from './reload-plan.js';
import { RequestBudget } from '../uplink/budget.js';
import { TrackingClient } from '../uplink/client.js';
import { SyncSender } from '../uplink/sync-sender.js';
import { BackfillManager } from '../uplink/backfill.js';
import { ImportLedger } from '../buffer/import-ledger.js';
import { UplinkHealth } from '../uplink/uplink-health.js';
import { VERSION } from '../version.js';
import type { ConfigStatus, GatewayStatus } from './status.js';
import { GapLedger } from '../buffer/gaps.js';
import { describeSources, GapWatcher } from './gap-watch.js';
import { registerGapRoutes } from '../http/gap-routes.js';
import type { GapAnnotator } from '../annotations/gap-annotator.js';

let lastMemory = { rss_bytes: 0, heap_used_bytes: 0, external_bytes: 0 };
/**
 * process.memoryUsage() opens /proc/self/stat and throws EMFILE when every descriptor is taken
 * (issue 12 §1); /status then shows the last reading instead of failing.
 */
function memoryNow() {
  try {
    const m = process.memoryUsage();
    lastMemory = { rss_bytes: m.rss, heap_used_bytes: m.heapUsed, external_bytes: m.external };
  } catch {
    /* keep the last reading */
  }
  return lastMemory;
}

export interface StartOptions {
  logger?: Logger;
  clock?: Clock;
  metrics?: Metrics;
  /** The file the configuration came from (shown in /status; reloads read it again). */
  configPath?: string | null;
  /** Builds the shared uplink health (bench/outage-recovery.ts passes the former behaviour as its baseline). */
  uplinkHealth?: (clock: Clock, logger: Logger, metrics: Metrics) => UplinkHealth;
}

export interface ReloadResult extends ReloadPlan {
  /** Source names stopped and started again. */
  restartedSources: string[];
}

export interface GatewayHandle {
  /** The configuration in effect (after reloads: the reloadable parts of the newest file). */
  readonly config: GatewayConfig;
  readonly logger: Logger;
  readonly metrics: Metrics;
  readonly buffer: SampleBuffer;
  readonly sources: Source[];
  readonly client: TrackingClient;
  readonly health: UplinkHealth;
  readonly budget: RequestBudget;
  readonly sync: SyncSender;
  readonly backfill: BackfillManager;
  readonly http: LocalHttpServer | null;
  /** Operator annotations (outbox, local API, HMI page, detectors), when configured. */
  readonly annotations: AnnotationsRuntime | null;
  /** The gap ledger (issue 14): intervals without data, and whether history filled them. */
  readonly gaps: GapLedger;
  /** Base URL of the local HTTP server, or null when disabled. */
  readonly httpUrl: string | null;
  status(): GatewayStatus;
  /**
   * Applies a new, already validated configuration without a restart (see reload-plan.ts for what
   * is reloaded in place). Buffered samples are untouched: only sources and annotations are rebuilt.
   * Throws ConfigError, leaving everything as it was, when the new sources cannot be built.
   */
  reload(next: GatewayConfig): Promise<ReloadResult>;
  /** Records a reload refused before it reached the gateway (the new file does not validate). */
  reloadRefused(problems: string[]): void;
  /** Graceful stop: sources closed, pending samples committed, requests finished or abandoned. Safe to call twice. */
  close(): Promise<void>;
}

/**
 * The composition root: config → components → running gateway. Start order follows the data
 * flow backwards (buffer, uplink, then sources) so the first sample has somewhere to go; stop
 * order follows it forwards so the last sample is committed before the buffer closes.
 */
export async function startGateway(config: GatewayConfig, options: StartOptions = {}): Promise<GatewayHandle> {
  const clock = options.clock ?? systemClock;
  const logger = options.logger ?? createLogger({ level: config.log.level, format: config.log.format, name: config.gateway.name });
  const metrics = options.metrics ?? createMetrics({ defaultMetrics: true });
  const startedAt = clock.now();
  metrics.startTime.set(startedAt / 1000);

  const dataDir = resolve(config.gateway.data_dir);
  try {
    mkdirSync(dataDir, { recursive: true });
  } catch (err) {
    throw new GatewayError(errorCode(err, 'DATA_DIR_UNUSABLE'), `gateway.data_dir: ${dataDir} cannot be created (${errorCode(err, 'error')}); the gateway's user needs write access there`, { cause: err });
  }

  // Taken before the file is opened, so a second gateway neither migrates nor moves aside a
  // buffer another one is using.
  const owner = acquireBufferOwner(config.buffer.path);
  let opened: ReturnType<typeof openBufferDatabase>;
  try {
    opened = openBufferDatabase(config.buffer.path, {
      synchronous: config.buffer.synchronous,
      logger,
      onRecovered: () => metrics.bufferRecoveredDatabases.inc(),
    });
    recordBufferOwner(opened.db);
  } catch (err) {
    owner.release();
    throw err;
  }
  const buffer = new SampleBuffer(opened.db, {
    commitIntervalMs: config.buffer.commit_interval,
    maxBytes: config.buffer.max_bytes,
    whenFull: config.buffer.when_full,
    sealAfterMs: config.buffer.seal_after,
    sealRows: config.buffer.seal_rows,
    compactSamples: config.buffer.compact_samples,
    logger: logger.child({ component: 'buffer' }),
    metrics,
    clock,
  });

  const budget = new RequestBudget(config.uplink.requests_per_minute, clock, metrics);
  const health = (options.uplinkHealth ?? ((c, l, m) => new UplinkHealth(c, l, m)))(clock, logger.child({ component: 'uplink' }), metrics);
  const client = new TrackingClient({ service: config.service, budget, metrics, logger: logger.child({ component: 'client' }), clock, connections: config.uplink.max_in_flight + 4 });
  const sync = new SyncSender({
    buffer,
    client,
    health,
    batchSize: config.uplink.batch_size,
    flushIntervalMs: config.uplink.flush_interval,
    maxInFlight: config.uplink.max_in_flight,
    itemIdField: config.service.item_id_field,
    logger: logger.child({ component: 'sync' }),
    metrics,
    clock,
    maxUnsentAgeMs: config.uplink.max_unsent_age,
    importJobsTakeOldest: () => backfill.takesOldest(),
  });

  // Sources write through a tapped sink so observers (the downtime detector) see committed samples.
  const sink = new TappedSink(buffer);
  // Issue 26: condition events (OPC UA Alarms & Conditions) go to annotations.alarms through this router.
  const conditions = new ConditionRouter();
  const backfill = new BackfillManager({
    buffer,
    ledger: new ImportLedger(opened.db, clock),
    client,
    health,
    config: config.uplink.backfill,
    // The current pace: with a fleet share, the backlog that warrants import jobs shrinks with it.
    requestsPerMinute: () => budget.ratePerMinute,
    batchSize: config.uplink.batch_size,
    itemIdField: config.service.item_id_field,
    dir: join(dataDir, 'import'),
    logger: logger.child({ component: 'backfill' }),
    metrics,
    clock,
  });

  // Issue 14: the gap ledger in the buffer file, fed by the sources' state changes.
  const gaps = new GapLedger(opened.db, metrics);
  let gapAnnotator: GapAnnotator | null = null;
  // Replaced in place by reloads, so `handle.sources` always lists the running ones.
  const sources: Source[] = [];
  let current = config;
  const gapWatcher = new GapWatcher({ ledger: gaps, buffer, sources: () => sources, info: () => describeSources(current), clock, logger: logger.child({ component: 'gaps' }), onClosed: () => gapAnnotator?.run() });
  // The console's live values and refusals (src/console): a tap on committed samples, bounded.
  const consoleOn = config.http.enabled && config.http.console;
  const ring = consoleOn ? new ValueRing() : null;
  const refusals = consoleOn ? new RefusalLog() : null;
  if (ring) sink.addTap(ring);

  const sourceStats = new Map<string, SourceStats>();
  const makeContext = (name: string, kind: SourceKind): SourceContext => {
    const dir = join(dataDir, 'sources', name);
    mkdirSync(dir, { recursive: true });
    const stats = new SourceStats(name, kind, metrics, clock);
    if (refusals) stats.onRefused = (reason, n, info) => refusals.record({ at: clock.now(), source: name, variable: info.variable ?? null, reason, detail: info.detail ?? null }, n);
    sourceStats.set(name, stats);
    gapWatcher.attach(name, stats);
    return { sink, logger: logger.child({ source: name, kind }), stats, metrics, clock, dataDir: dir, history: { lastCommitted: buffer.lastCommitted, gaps }, conditions };
  };
  try {
    sources.push(...(await buildSources(config, makeContext)));
  } catch (err) {
    await buffer.close();
    await client.close();
    owner.release();
    throw err;
  }

  const setAsideCount = opened.db.prepare('SELECT count(*) FROM set_aside').pluck(true);

  let http: LocalHttpServer | null = null;
  let consoleRuntime: ConsoleRuntime | null = null;
  let annotations: AnnotationsRuntime | null = null;
  let fleet: FleetRuntime | null = null;
  let untapAnnotations: (() => void) | null = null;
  let closed = false;
  const configStatus: ConfigStatus = { path: options.configPath ?? null, loaded_at: new Date(startedAt).toISOString(), reloads_applied: 0, reloads_refused: 0, last_reload: null };
  const reloadRefused = (problems: string[], plan?: ReloadPlan): void => {
    configStatus.reloads_refused += 1;
    configStatus.last_reload = { at: new Date(clock.now()).toISOString(), outcome: 'refused', changed: plan?.changed ?? [], restart_required: plan?.restartRequired ?? [], problems };
    metrics.configReloads.inc({ outcome: 'refused' });
  };
  const status = (): GatewayStatus => {
    const b = buffer.stats();
    const s = sync.stats();
    const h = health.snapshot();
    const now = clock.now();
    const setAside = setAsideCount.get() as number;
    metrics.setAsideSamples.set(setAside);
    const bf = backfill.stats();
    const rate = s.ratePerSecond;
    // The backlog shrinks at what is delivered minus what keeps arriving.
    const drain = rate + bf.rate_per_s - buffer.ingestRate();
    const eta = b.rows > 0 && drain > 0 ? b.rows / drain : null;
    metrics.backlogEtaSeconds.set(eta ?? -1);
    return {
      gateway: {
        name: config.gateway.name,
        version: VERSION,
        started_at: new Date(startedAt).toISOString(),
        uptime_s: Math.round((now - startedAt) / 1000),
        pid: process.pid,
        memory: memoryNow(),
      },
      sources: sources.map((src) => src.status()),
      source_rates: Object.fromEntries(sources.map((src) => [src.name, sourceStats.get(src.name)?.readPerSecond() ?? 0])),
      buffer: {
        samples: b.rows,
        available: b.available,
        inflight: b.inflight,
        in_import_jobs: b.reserved,
        pending_commit: b.pendingSamples,
        used_bytes: b.usedBytes,
        max_bytes: b.maxBytes,
        oldest_unsent_age_s: b.oldestTs === null ? null : Math.max(0, (now - b.oldestTs) / 1000),
        max_unsent_age_s: config.uplink.max_unsent_age / 1000,
        live_rows: b.liveRows,
        sealed_samples: b.sealedSamples,
        chunks: b.chunks,
        chunks_sealed_total: b.chunksSealedTotal,
        bytes_per_sample: b.bytesPerSample,
        compression_ratio: b.compressionRatio,
        capacity_s: b.capacitySeconds,
        committed_total: b.committedTotal,
        dropped_total: b.droppedTotal,
        writable: b.writable,
        last_write_error: b.lastWriteError,
        full_episode: b.fullEpisode,
        recovered_from: opened.recovered?.movedTo ?? null,
      },
      uplink: {
        condition: h.condition,
        reason: h.reason,
        since: new Date(h.since).toISOString(),
        resume_in_ms: h.resumeInMs,
        budget_per_minute: budget.perMinute,
        requests_last_minute: budget.usedLastMinute(),
        freshest_delivered_age_s: s.freshestDeliveredTs === null ? null : Math.max(0, (now - s.freshestDeliveredTs) / 1000),
        sync: { rate_per_s: rate, delivered_total: s.deliveredTotal, inflight_batches: s.inflightBatches, set_aside_total: s.setAsideTotal, oldest_first_batches: s.oldestFirstBatches },
      },
      backfill: bf,
      gaps: gapsStatus(),
      set_aside: { samples: setAside },
      backlog_eta_s: eta,
      ...(annotations ? { annotations: annotations.status() } : {}),
      ...(fleet ? { fleet: { broker: fleet.broker(), budget_sharing: fleet.sharing() } } : {}),
      config: structuredClone(configStatus),
    };
  };

  function gapsStatus(): NonNullable<GatewayStatus['gaps']> {
    const open = gaps.list({ state: 'open', limit: 50 });
    gaps.refreshGauge();
    return { open: open.length, recent: gaps.list({ state: 'all', limit: 10 }).map((g) => gaps.view(g)), annotate: current.gaps.annotate };
  }

  async function startAnnotationsFor(cfg: GatewayConfig): Promise<void> {
    if (!cfg.annotations) return;
    // Loaded only when configured: it brings the HMI page and an MQTT client with it.
    const { startAnnotations } = await import('../annotations/index.js');
    annotations = await startAnnotations({ config: cfg, db: opened.db, client, health, http, logger: logger.child({ component: 'annotations' }), metrics, clock, dataDir, conditions });
    if (annotations) untapAnnotations = sink.addTap(annotations);
    gapAnnotator?.stop();
    gapAnnotator = null;
    const running = annotations as AnnotationsRuntime | null;
    if (running && config.gaps.annotate) {
      // Issue 14 §3: unfilled gaps become range annotations through the same outbox.
      const { GapAnnotator } = await import('../annotations/gap-annotator.js');
      gapAnnotator = new GapAnnotator({
        ledger: gaps,
        store: running.store,
        gatewayName: cfg.gateway.name,
        site: cfg.annotations.site,
        machines: cfg.annotations.machines,
        sources: () => describeSources(current),
        minDurationMs: config.gaps.min_duration,
        onQueued: () => running.sender.notify(),
        logger: logger.child({ component: 'gaps' }),
        metrics,
        clock,
      });
      gapAnnotator.start();
    }
  }

  async function startSources(list: readonly Source[]): Promise<void> {
    for (const src of list) {
      try {
        await src.start();
      } catch (err) {
        // A source that cannot start (bad config discovered at start) must not stop the others.
        logger.error({ source: src.name, kind: src.kind, err: describeError(err) }, 'source failed to start');
      }
    }
  }

  // Reloads run one at a time; close() waits for the one under way.
  let reloading: Promise<unknown> = Promise.resolve();
  const reload = (next: GatewayConfig): Promise<ReloadResult> => {
    const run = reloading.then(async (): Promise<ReloadResult> => {
      if (closed) throw new Error('the gateway is stopping');
      const plan = planReload(current, next);
      const target = appliedConfig(current, next);
      // Build first (no I/O): a section that cannot be built refuses the whole reload and nothing
      // running is touched.
      const rebuilt: Source[] = [];
      try {
        for (const section of plan.sourceSections) rebuilt.push(...(await buildSourceSection(section, target, makeContext)));
        assertUniqueNames([...sources.filter((s) => !plan.sourceSections.includes(s.kind)), ...rebuilt]);
      } catch (err) {
        reloadRefused(err instanceof ConfigError ? err.problems : [describeError(err)], plan);
        throw err;
      }
      const stopped = sources.filter((s) => plan.sourceSections.includes(s.kind));
      // Closing a source commits what it already handed over (its appends resolve on commit), so
      // no sample is lost between the old and the new source.
      await Promise.allSettled(stopped.map((s) => s.close()));
      for (const s of stopped) sources.splice(sources.indexOf(s), 1);
      sources.push(...rebuilt);
      if (plan.annotations) {
        untapAnnotations?.();
        untapAnnotations = null;
        await annotations?.close();
        annotations = null;
        await startAnnotationsFor(target);
      }
      if (plan.logLevel) logger.level = target.log.level;
      current = target;
      await startSources(rebuilt);
      const outcome = plan.changed.length === 0 ? 'unchanged' : 'applied';
      if (outcome === 'applied') {
        configStatus.reloads_applied += 1;
        configStatus.loaded_at = new Date(clock.now()).toISOString();
      }
      configStatus.last_reload = { at: new Date(clock.now()).toISOString(), outcome, changed: plan.changed, restart_required: plan.restartRequired };
      metrics.configReloads.inc({ outcome });
      return { ...plan, restartedSources: [...new Set([...stopped, ...rebuilt].map((s) => s.name))] };
    });
    reloading = run.catch(() => undefined);
    return run;
  };

  const close = async (): Promise<void> => {
    if (closed) return;
    closed = true;
    // Sources first, so nothing new arrives; then commit what is pending; then the uplink.
    await Promise.allSettled(sources.map((s) => s.close()));
    gapAnnotator?.stop();
    gapWatcher.stop();
    await buffer.flush();
    await reloading.catch(() => undefined);
    await annotations?.close();
    await Promise.all([sync.stop(3_000), backfill.stop()]);
    // Gives the budget share back to the other gateways and says "stopped" on the plant broker.
    await fleet?.stop();
    budget.close();
    consoleRuntime?.close();
    await http?.close();
    await client.close();
    try {
      await buffer.close();
    } finally {
      owner.release();
    }
    if (buffer.discardedAtClose > 0) logger.error({ discarded_samples: buffer.discardedAtClose }, `gateway stopped; ${buffer.discardedAtClose} samples held in memory could not be written (the disk refused writes) and are lost`);
    else logger.info('gateway stopped');
  };

  try {
    if (config.fleet?.mqtt) {
      // Loaded only when configured (an MQTT client to the plant broker).
      const { startFleet } = await import('../fleet/index.js');
      fleet = startFleet({ config, budget, status, logger: logger.child({ component: 'fleet' }), metrics, clock });
    }
    sync.start();
    backfill.start();
    if (config.http.enabled) {
      http = new LocalHttpServer({
        host: config.http.host,
        port: config.http.port,
        apiToken: config.http.api_token,
        maxBodyBytes: config.http.max_body_bytes,
        rateLimitPerMinute: config.http.rate_limit_per_minute,
        maxConnections: config.http.max_connections,
        limits: connectionLimits(config.http),
        requireTokenForReads: config.http.require_token_for_reads,
        allowedHosts: config.http.allowed_hosts,
        logger: logger.child({ component: 'http' }),
        metrics,
      });
      registerOpsRoutes(http, { status, metrics, buffer, health });
      registerSetAsideRoutes(http, buffer);
      registerGapRoutes(http, gaps);
      if (ring && refusals) {
        consoleRuntime = registerConsoleRoutes(http, { status, metrics, config: () => current, configPath: options.configPath ?? null, ring, refusals, buffer, client, dataDir, reload: (next) => reload(next), fleet: fleet?.watch() ?? null });
      }
    }
    await startAnnotationsFor(config);
    gapWatcher.start(startedAt);
    await startSources(sources);
    await http?.listen();
  } catch (err) {
    await close();
    throw err;
  }

  logger.info(
    { version: VERSION, sources: sources.map((s) => `${s.kind}:${s.name}`), buffer: opened.path, service: config.service.base_url, http: http?.url ?? null },
    'gateway started',
  );

  return {
    get config() {
      return current;
    },
    logger,
    metrics,
    buffer,
    sources,
    client,
    health,
    budget,
    sync,
    backfill,
    http,
    get annotations() {
      return annotations;
    },
    gaps,
    httpUrl: http?.url ?? null,
    status,
    reload,
    reloadRefused: (problems: string[]) => reloadRefused(problems),
    close,
  };
}
