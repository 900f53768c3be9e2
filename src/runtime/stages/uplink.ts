import { join } from 'node:path';
import type { Logger } from 'pino';
import type { Clock } from '../../core/clock.js';
import { describeError } from '../../core/errors.js';
import type { Metrics } from '../../core/metrics.js';
import { outlookOf, uplinkStateOf, type StatusReadings } from '../../status/model.js';
import { BackfillManager } from '../../uplink/backfill.js';
import { BacklogMeter, type BacklogTrend } from '../../uplink/backlog-meter.js';
import { OutageTracker } from '../../uplink/outage-tracker.js';
import { RequestBudget } from '../../uplink/budget.js';
import { TrackingClient } from '../../uplink/client.js';
import type { ServiceConfig, UplinkConfig } from '../../uplink/config.js';
import { SyncSender } from '../../uplink/sync-sender.js';
import { UnknownVariables } from '../../uplink/unknown-variables.js';
import { UplinkHealth } from '../../uplink/uplink-health.js';
import type { RuntimeServices, Stage } from './stage.js';
import type { StoreStage } from './store.js';

export interface UplinkSettings {
  service: ServiceConfig;
  uplink: UplinkConfig;
}

/** Builds the shared uplink health (bench/outage-recovery.ts passes the former behaviour as its baseline). */
export type MakeUplinkHealth = (clock: Clock, logger: Logger, metrics: Metrics) => UplinkHealth;

/** The readings of the status this stage owns. */
export type UplinkReadingKeys = 'maxUnsentAgeMs' | 'batchSize' | 'health' | 'budget' | 'sync' | 'backfill' | 'unknownVariables' | 'trend' | 'outage' | 'mappedVariables';

export interface UplinkStage extends Stage {
  readonly budget: RequestBudget;
  readonly health: UplinkHealth;
  readonly client: TrackingClient;
  readonly sync: SyncSender;
  readonly backfill: BackfillManager;
  /** Machine variables the service does not know (issue 24 §1). */
  readonly unknown: UnknownVariables;
  /** What the backlog did, measured once a second (backlog-meter.ts). */
  readonly meter: BacklogMeter;
  /** Distinct machine variables the sources map (set by the runtime once the sources exist). */
  mappedVariables: () => number | null;
  /** Starts sending: the sync path and import jobs (after every stage is assembled, so a fleet budget share is in force first). */
  open(): void;
  status(): Pick<StatusReadings, UplinkReadingKeys>;
}

/**
 * Stage 2, the uplink: one request budget for every call to the tracking service (§8), the client,
 * the live sync path and import-job backfill, both reading the store's buffer. Stopping lets
 * requests in flight finish (3 s at most), then closes the budget and the client's connections.
 */
export function startUplink(settings: UplinkSettings, { logger, metrics, clock }: RuntimeServices, deps: { store: StoreStage; makeHealth?: MakeUplinkHealth }): UplinkStage {
  const { service, uplink } = settings;
  const { buffer } = deps.store;
  const budget = new RequestBudget(uplink.requests_per_minute, clock, metrics);
  const health = (deps.makeHealth ?? ((c, l, m) => new UplinkHealth(c, l, m)))(clock, logger.child({ component: 'uplink' }), metrics);
  const client = new TrackingClient({ service, budget, metrics, logger: logger.child({ component: 'client' }), clock, connections: uplink.max_in_flight + 4 });
  const unknown = new UnknownVariables({
    clock,
    logger: logger.child({ component: 'sync' }),
    // Every page of the organisation's machine variables (§4.10, §8); ahead of data in the budget.
    readCatalog: async (signal) => new Set((await client.listAll('machine_variables', {}, signal)).map((v) => v.id)),
    onCreated: uplink.unknown_variables.requeue_when_created ? (variables) => requeueSetAside(variables, 'variable_created') : undefined,
    // Suspects the catalog lists were refused for another reason: their held samples are tried again.
    onCleared: (variables) => requeueSetAside(variables, 'suspect_cleared'),
  });
  const requeues = setAsideRequeuer(buffer, metrics, logger.child({ component: 'sync' }));
  const requeueSetAside = requeues.requeue;
  const sync = new SyncSender({
    buffer,
    client,
    health,
    batchSize: uplink.batch_size,
    flushIntervalMs: uplink.flush_interval,
    maxInFlight: uplink.max_in_flight,
    itemIdField: service.item_id_field,
    logger: logger.child({ component: 'sync' }),
    metrics,
    clock,
    maxUnsentAgeMs: uplink.max_unsent_age,
    importJobsTakeOldest: (): boolean => backfill.takesOldest(),
    unknown,
    keepUnknownSetAside: uplink.unknown_variables.keep_set_aside,
  });
  const backfill = new BackfillManager({
    buffer,
    ledger: deps.store.importLedger,
    client,
    health,
    config: uplink.backfill,
    // The pace in force: the rate found from 429s, under a fleet share, under the ceiling.
    requestsPerMinute: () => budget.ratePerMinute,
    trend: (): BacklogTrend => figures.meter.trend(),
    batchSize: uplink.batch_size,
    itemIdField: service.item_id_field,
    dir: join(deps.store.dataDir, 'import'),
    logger: logger.child({ component: 'backfill' }),
    metrics,
    clock,
  });
  const figures = uplinkFigures({ uplink, clock, metrics, buffer, budget, health, sync, backfill, unknown });
  const { meter } = figures;

  return {
    budget,
    health,
    client,
    sync,
    backfill,
    unknown,
    meter,
    get mappedVariables() {
      return figures.mappedVariables;
    },
    set mappedVariables(fn: () => number | null) {
      figures.mappedVariables = fn;
    },
    open() {
      figures.start();
      sync.start();
      backfill.start();
    },
    status: figures.readings,
    async stop() {
      figures.stop();
      unknown.stop();
      // A requeue in progress stops at its next step (the buffer refuses once closed); what it did
      // not move stays set aside and is requeued after the next catalog read.
      requeues.stop();
      await Promise.all([sync.stop(3_000), backfill.stop()]);
      budget.close();
      await client.close();
    },
  };
}

/**
 * Set-aside samples of variables found usable again (created upstream, or a suspect the catalog
 * lists) go back into the queue, one variable after the other (a requeue works in steps and yields
 * between them).
 */
function setAsideRequeuer(buffer: StoreStage['buffer'], metrics: Metrics, log: Logger) {
  let requeues = Promise.resolve();
  let stopping = false;
  const requeue = (variables: string[], reason: 'variable_created' | 'suspect_cleared'): void => {
    requeues = requeues
      .then(async () => {
        let total = 0;
        for (const variable of variables) {
          if (stopping) return;
          const r = await buffer.setAsideStore.requeue(buffer, { variable });
          total += r.requeued;
          if (r.refused) {
            if (stopping) return;
            log.warn({ variable, reason: r.refused.reason }, 'a variable can be delivered again, but the buffer refused its set-aside samples; they stay set aside (edge-gateway set-aside requeue)');
            break;
          }
        }
        metrics.setAsideRequeuedSamples.inc({ reason }, total);
        const why = reason === 'variable_created' ? 'now exist upstream' : 'are listed in the catalog (they were refused for another reason)';
        if (total > 0) log.info({ variables: variables.slice(0, 20), count: variables.length, samples: total }, `${variables.length} machine variable(s) ${why}; their ${total} set-aside samples are back in the queue`);
      })
      .catch((err: unknown) => log.error({ err: describeError(err) }, 'requeue of set-aside samples failed; they stay set aside'));
  };
  return { requeue, stop: () => (stopping = true) };
}

/**
 * The figures the status and the metrics read: the backlog meter and the outage tracker, on one beat
 * a second, and the readings of this stage; the metrics read the same functions as /status.
 */
function uplinkFigures(o: { uplink: UplinkConfig; clock: Clock; metrics: Metrics; buffer: StoreStage['buffer']; budget: RequestBudget; health: UplinkHealth; sync: SyncSender; backfill: BackfillManager; unknown: UnknownVariables }) {
  const { uplink, clock, metrics, buffer, budget, health, sync, backfill, unknown } = o;
  const outages = new OutageTracker();
  const meter = new BacklogMeter({
    clock,
    backlog: () => buffer.stats().rows,
    delivered: () => ({ sync: sync.stats().deliveredTotal, import: backfill.stats().delivered_total }),
    tolerance: uplink.batch_size,
  });
  const self = {
    meter,
    mappedVariables: (): number | null => null,
    readings: (): Pick<StatusReadings, UplinkReadingKeys> => ({
      maxUnsentAgeMs: uplink.max_unsent_age,
      batchSize: uplink.batch_size,
      health: health.snapshot(),
      budget: { perMinute: budget.perMinute, usedLastMinute: budget.usedLastMinute(), sharePerMinute: budget.sharePerMinute, pacePerMinute: budget.ratePerMinute, rate: budget.rateSnapshot() },
      sync: sync.stats(),
      backfill: backfill.stats(),
      unknownVariables: unknown.snapshot(),
      trend: meter.trend(),
      outage: outages.snapshot(),
      mappedVariables: self.mappedVariables(),
    }),
    start: () => meter.start(),
    stop: () => {
      clearInterval(beat);
      meter.stop();
      unbind.forEach((u) => u());
    },
  };
  const beat = setInterval(() => {
    try {
      const h = health.snapshot();
      const b = buffer.stats();
      outages.update({ now: clock.now(), unreachable: h.condition === 'retrying', since: h.since, reason: h.reason, backlog: b.rows, oldestAgeS: b.oldestTs === null ? null : Math.max(0, (clock.now() - b.oldestTs) / 1000) });
    } catch {
      /* the buffer is closing */
    }
  }, 1_000);
  beat.unref();
  const unbind = [
    metrics.backlogEtaSeconds.readFrom(() => outlookOf({ ...self.readings(), buffer: buffer.stats(), now: clock.now() }).drain_eta_s ?? -1),
    metrics.uplinkStatus.readFrom(() => uplinkStateOf({ ...self.readings(), buffer: buffer.stats() }).state),
    metrics.uplinkUnknownVariables.readFrom(() => unknown.snapshot().count),
  ];
  return self;
}
