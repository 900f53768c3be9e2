import type { Logger } from 'pino';
import type { Clock } from '../core/clock.js';
import type { ConditionRouter } from '../core/condition-event.js';
import { describeError } from '../core/errors.js';
import { guardedInterval } from '../core/guarded-timer.js';
import type { Metrics } from '../core/metrics.js';
import type { Sample, SampleColumns, SampleTap } from '../core/sample.js';
import { toIsoUtc } from '../core/time.js';
import type { LocalHttpServer } from '../http/server.js';
import type { StoreOwner } from '../store/store.js';
import type { TrackingClient } from '../uplink/client.js';
import type { UplinkHealth } from '../uplink/uplink-health.js';
import { AlarmAnnotator } from './alarm-annotator.js';
import { AlarmStore, type AlarmRow } from './alarm-store.js';
import { AnnotationViews } from './annotation-view.js';
import { registerAnnotationRoutes } from './api.js';
import type { PanelAlarm, PanelView } from './api-model.js';
import { Reconciler } from './reconcile.js';
import { DowntimeDetector } from './detector.js';
import { entryView } from './model.js';
import { MqttTrigger } from './mqtt-trigger.js';
import { OutboxSender } from './sender.js';
import { AnnotationService, downtimeView } from './service.js';
import { AnnotationStore } from './store.js';
import type { AnnotationsSection } from './config.js';

export { annotationsSectionSchema, type AnnotationsSection } from './config.js';

/** What the runtime hands the annotations component. */
export interface AnnotationsDeps {
  /** The annotations section (absent: nothing starts). */
  annotations: AnnotationsSection;
  /** gateway.name: the gateway in annotation texts and the MQTT trigger's topics. */
  gatewayName: string;
  /** Its two owners of the gateway's file (src/store/README.md): the outbox and downtimes, the machine conditions. */
  owners: { annotations: StoreOwner; alarms: StoreOwner };
  client: TrackingClient;
  health: UplinkHealth;
  /** The local HTTP server, before it listens; null when http.enabled is false. */
  http: LocalHttpServer | null;
  logger: Logger;
  metrics: Metrics;
  clock: Clock;
  dataDir: string;
  /** Where OPC UA sources send condition events (issue 26); annotations.alarms attaches to it. */
  conditions?: ConditionRouter;
  /** Names of the OPC UA servers that send condition events (opcua.servers[].events). */
  eventServers?: string[];
}

export interface AnnotationsRuntime extends SampleTap {
  status(): Record<string, unknown>;
  close(): Promise<void>;
  /** Create annotations and drive downtimes in process (what the API, MQTT trigger and tests call). */
  readonly service: AnnotationService;
  readonly store: AnnotationStore;
  readonly sender: OutboxSender;
  readonly detector: DowntimeDetector;
  readonly trigger: MqttTrigger | null;
  /** Machine conditions into annotations (annotations.alarms); null when not configured. */
  readonly alarms: AlarmAnnotator | null;
  readonly alarmStore: AlarmStore;
  readonly reconciler: Reconciler;
  readonly views: AnnotationViews;
}

const HOUSEKEEPING_MS = 10_000;
const PURGE_EVERY_MS = 3_600_000;

/**
 * Starts operator annotations (interface §2.3, §4.1): the durable outbox and its sender, the
 * downtime detectors (fed through `onSamples` by the sources' tapped sink), the MQTT trigger, and —
 * when the local HTTP server is on — the local API and the operator page at `/`.
 * Returns null when the `annotations` section is absent.
 */
export async function startAnnotations(deps: AnnotationsDeps): Promise<AnnotationsRuntime | null> {
  const cfg = deps.annotations;
  if (!cfg) return null;
  const { logger, metrics, clock, gatewayName } = deps;
  const store = new AnnotationStore(deps.owners.annotations);
  let closed = false;

  const refreshGauges = () => {
    try {
      metrics.annotationsQueued.set(store.counts().queued);
      const manualOpen = store.downtimes().filter((d) => d.kind === 'manual').length;
      metrics.downtimesOpen.set(manualOpen + detector.active().filter((a) => a.open).length);
    } catch {
      // the database is closing; gauges are refreshed again next time
    }
  };

  const sender: OutboxSender = new OutboxSender({ store, client: deps.client, health: deps.health, logger: logger.child({ part: 'sender' }), metrics, clock, onChange: () => refreshGauges() });
  const service = new AnnotationService({
    config: cfg,
    gatewayName,
    store,
    logger,
    metrics,
    clock,
    onQueued: () => {
      sender.notify();
      refreshGauges();
    },
  });
  const detector = new DowntimeDetector({ rules: cfg.detectors, service, store, gatewayName, logger: logger.child({ part: 'detector' }), clock });
  detector.restore();
  // Issue 26: machine conditions, and their reconciliation with what operators record.
  const alarmStore = new AlarmStore(deps.owners.alarms);
  const reconciler = new Reconciler({ alarms: alarmStore, store, service, detector, logger: logger.child({ part: 'reconcile' }), clock });
  service.reconciler = reconciler;
  const views = new AnnotationViews(store, alarmStore);
  const alarms = startAlarms(deps, { store, alarmStore, reconciler, service, onQueued: () => {
    sender.notify();
    refreshGauges();
  } });
  const trigger = cfg.mqtt ? new MqttTrigger({ config: cfg.mqtt, service, gatewayName, logger: logger.child({ part: 'mqtt_trigger' }), metrics, clock }) : null;

  const purge = () => {
    try {
      const n = store.purge(clock.now() - cfg.retention) + alarmStore.purge(clock.now() - cfg.retention);
      if (n > 0) logger.info({ deleted: n }, 'delivered and refused annotations older than annotations.retention deleted from the outbox');
    } catch (err) {
      logger.warn({ err: describeError(err) }, 'outbox clean-up failed; retried later');
    }
  };
  purge();

  const panel = (): PanelView => {
    const h = deps.health.snapshot();
    const detected = detector.active();
    const alarmsByMachine = panelAlarms(alarmStore.allOpen());
    return {
      title: cfg.hmi.title,
      gateway: gatewayName,
      now: clock.now(),
      site: cfg.site,
      uplink: { condition: h.condition, reason: h.reason },
      reasons: cfg.reasons,
      machines: [...service.machines.values()].map((m) => {
        const open = service.openDowntime(m.key);
        return {
          key: m.key,
          name: m.name,
          reasons: m.reasons,
          downtime: open ? downtimeView(open) : null,
          detected: detected.filter((d) => d.machine === m.key),
          state: detector.machineState(m.key),
          alarms: alarmsByMachine.get(m.key) ?? [],
        };
      }),
      recent: store.recent(cfg.hmi.recent).map(entryView),
      counts: store.counts(),
    };
  };

  if (deps.http) {
    registerAnnotationRoutes(deps.http, { service, store, views, panel, title: cfg.hmi.title, hmiEnabled: cfg.hmi.enabled, isClosed: () => closed });
  } else {
    logger.warn('http.enabled is false: no operator page and no local annotation API (the MQTT trigger and detectors still work)');
  }

  let lastPurge = clock.monotonic();
  const timer = guardedInterval(
    () => {
      refreshGauges();
      if (clock.monotonic() - lastPurge >= PURGE_EVERY_MS) {
        lastPurge = clock.monotonic();
        purge();
      }
    },
    HOUSEKEEPING_MS,
    (err) => logger.warn({ err: describeError(err) }, 'annotations housekeeping failed; retrying at the next tick'),
  );

  sender.start();
  trigger?.start();
  refreshGauges();

  const counts = store.counts();
  const open = store.downtimes();
  logger.info(
    {
      machines: service.machines.size,
      detectors: detector.ruleCount,
      mqtt_trigger: cfg.mqtt ? cfg.mqtt.topic : null,
      queued: counts.queued,
      open_downtimes: open.filter((d) => d.kind === 'manual').map((d) => ({ machine: d.machine, since: toIsoUtc(d.startedAt) })),
    },
    'operator annotations ready',
  );

  return {
    service,
    store,
    sender,
    detector,
    trigger,
    alarms: alarms?.annotator ?? null,
    alarmStore,
    reconciler,
    views,
    onSamples(samples: readonly Sample[]): void {
      if (!closed) detector.onSamples(samples);
    },
    onColumns(columns: SampleColumns): void {
      if (!closed) detector.onColumns(columns);
    },
    status(): Record<string, unknown> {
      const c = store.counts();
      const oldest = store.oldestQueuedCreatedAt();
      return {
        queued: c.queued,
        delivered: c.delivered,
        refused: c.refused,
        oldest_queued_age_s: oldest === null ? null : Math.max(0, (clock.now() - oldest) / 1000),
        created_total: service.createdTotal,
        invalid_total: service.invalidTotal,
        delivered_total: sender.deliveredTotal,
        refused_total: sender.refusedTotal,
        last_refusal: sender.lastRefusal && { ...sender.lastRefusal, at: toIsoUtc(sender.lastRefusal.at) },
        open_downtimes: store.downtimes().filter((d) => d.kind === 'manual').map(downtimeView),
        detectors: detector.status(),
        mqtt_trigger: trigger?.status() ?? null,
        alarms: alarms?.annotator.status() ?? null,
        reconciliation: { linked: reconciler.linked, contradicted: reconciler.flagged },
      };
    },
    async close(): Promise<void> {
      if (closed) return;
      closed = true;
      clearInterval(timer);
      alarms?.detach();
      await trigger?.close();
      await sender.stop(2_000);
    },
  };
}

/** The machines' conditions active now, most severe first, then the oldest: what each tile lists. */
function panelAlarms(open: readonly AlarmRow[]): Map<string, PanelAlarm[]> {
  const out = new Map<string, PanelAlarm[]>();
  const sorted = [...open].sort((a, b) => b.severity - a.severity || a.startedAt - b.startedAt);
  for (const r of sorted) {
    if (!r.machine) continue;
    const list = out.get(r.machine) ?? [];
    list.push({ external_id: r.externalId, condition: r.conditionName ?? r.eventTypeName ?? 'Alarm', reason: r.ruleText ?? r.reasonCode, message: r.message, severity: r.severity, since: r.startedAt, acked: r.acked });
    out.set(r.machine, list);
  }
  return out;
}

/**
 * annotations.alarms (issue 26): the annotator of machine conditions, attached to the router the
 * OPC UA sources send their events to (attaching asks them for a ConditionRefresh).
 */
function startAlarms(
  deps: AnnotationsDeps,
  parts: { store: AnnotationStore; alarmStore: AlarmStore; reconciler: Reconciler; service: AnnotationService; onQueued: () => void },
): { annotator: AlarmAnnotator; detach: () => void } | null {
  const cfg = deps.annotations!;
  if (!cfg.alarms) return null;
  const annotator = new AlarmAnnotator({
    config: cfg.alarms,
    site: cfg.site,
    machines: parts.service.machines,
    maxAgeMs: cfg.max_age,
    maxAheadMs: cfg.max_ahead,
    gatewayName: deps.gatewayName,
    store: parts.store,
    alarms: parts.alarmStore,
    reconciler: parts.reconciler,
    servers: deps.eventServers ?? [],
    onQueued: parts.onQueued,
    logger: deps.logger.child({ part: 'alarms' }),
    metrics: deps.metrics,
    clock: deps.clock,
  });
  annotator.start();
  if (!deps.conditions) {
    deps.logger.warn('annotations.alarms is configured but nothing delivers condition events in this process');
    return { annotator, detach: () => undefined };
  }
  return { annotator, detach: deps.conditions.attach(annotator) };
}
