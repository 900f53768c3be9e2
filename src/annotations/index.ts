import type { Database } from 'better-sqlite3';
import type { Logger } from 'pino';
import type { Clock } from '../core/clock.js';
import { describeError } from '../core/errors.js';
import { guardedInterval } from '../core/guarded-timer.js';
import type { Metrics } from '../core/metrics.js';
import type { Sample, SampleTap } from '../core/sample.js';
import { toIsoUtc } from '../core/time.js';
import type { LocalHttpServer } from '../http/server.js';
import type { TrackingClient } from '../uplink/client.js';
import type { UplinkHealth } from '../uplink/uplink-health.js';
import { registerAnnotationRoutes } from './api.js';
import type { PanelView } from './api-model.js';
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
  /** The buffer's database (the outbox lives in the same SQLite file). */
  db: Database;
  client: TrackingClient;
  health: UplinkHealth;
  /** The local HTTP server, before it listens; null when http.enabled is false. */
  http: LocalHttpServer | null;
  logger: Logger;
  metrics: Metrics;
  clock: Clock;
  dataDir: string;
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
  const store = new AnnotationStore(deps.db);
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
  const trigger = cfg.mqtt ? new MqttTrigger({ config: cfg.mqtt, service, gatewayName, logger: logger.child({ part: 'mqtt_trigger' }), metrics, clock }) : null;

  const purge = () => {
    try {
      const n = store.purge(clock.now() - cfg.retention);
      if (n > 0) logger.info({ deleted: n }, 'delivered and refused annotations older than annotations.retention deleted from the outbox');
    } catch (err) {
      logger.warn({ err: describeError(err) }, 'outbox clean-up failed; retried later');
    }
  };
  purge();

  const panel = (): PanelView => {
    const h = deps.health.snapshot();
    const detected = detector.active();
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
        };
      }),
      recent: store.recent(cfg.hmi.recent).map(entryView),
      counts: store.counts(),
    };
  };

  if (deps.http) {
    registerAnnotationRoutes(deps.http, { service, store, panel, title: cfg.hmi.title, hmiEnabled: cfg.hmi.enabled, isClosed: () => closed });
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
    onSamples(samples: readonly Sample[]): void {
      if (!closed) detector.onSamples(samples);
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
      };
    },
    async close(): Promise<void> {
      if (closed) return;
      closed = true;
      clearInterval(timer);
      await trigger?.close();
      await sender.stop(2_000);
    },
  };
}
