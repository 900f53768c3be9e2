import {
  AttributeIds,
  DataType,
  LiteralOperand,
  ObjectTypeIds,
  SimpleAttributeOperand,
  StatusCodes,
  TimestampsToReturn,
  and,
  callConditionRefresh,
  constructEventFilter,
  greaterThanOrEqual,
  makeContentFilter,
  ofType,
  or,
  resolveNodeId as toNodeId,
  type ClientMonitoredItem,
  type ClientSession,
  type ClientSubscription,
  type ContentFilterElement,
  type Variant,
} from 'node-opcua';
import type { Logger } from 'pino';
import type { Clock } from '../../core/clock.js';
import { NoConditionConsumerError, type ConditionEventSink, type ConditionNotice } from '../../core/condition-event.js';
import { describeError } from '../../core/errors.js';
import type { LogThrottle } from '../../core/log-throttle.js';
import type { Metrics } from '../../core/metrics.js';
import { decodeEventFields, SELECTED_FIELDS } from './condition-decode.js';
import { eventTypeId, REFRESH_END_EVENT_TYPE, REFRESH_REQUIRED_EVENT_TYPE, REFRESH_START_EVENT_TYPE, type OpcuaEventsConfig } from './events-config.js';
import { parseNodeId, resolveNodeId } from './node-id.js';

/**
 * The event side of one OPC UA session (Part 9 Alarms & Conditions): its own subscription with one
 * event monitored item on the configured notifier, and ConditionRefresh.
 *
 * - Every notification is decoded (condition-decode.ts); malformed ones are refused here with a
 *   reason, counted and logged (throttled). The rest go to the sink in order, one batch per turn
 *   of the event loop (one Publish response), so the consumer writes them in one transaction.
 * - ConditionRefresh (Part 9 §5.5.7; a Method of ConditionType called with the subscription id)
 *   runs when the item is created, after node-opcua repaired the connection (the subscription may
 *   have been re-created and missed changes), when the server sends a RefreshRequiredEvent, when a
 *   consumer attaches, and again after `refresh_retry` when a refresh failed or its events could
 *   not be stored.
 * - Its own subscription, so a ConditionRefresh replays conditions to it alone and its queue can
 *   hold a burst of events; the source's watchdog is fed by its keep-alives as well.
 */

export interface ConditionReaderOptions {
  session: ClientSession;
  cfg: OpcuaEventsConfig;
  /** `opcua.servers[i].events`, for messages. */
  path: string;
  source: string;
  namespaceArray: readonly string[];
  sink: ConditionEventSink;
  logger: Logger;
  throttle: LogThrottle;
  metrics: Metrics;
  clock: Clock;
  /** Lifetime and keep-alive of the subscription, like the data subscription's. */
  keepAliveCount: number;
  /** A Publish response or keep-alive arrived. */
  onAlive(): void;
}

export interface ConditionReader {
  readonly subscription: ClientSubscription;
  /** Asks for a ConditionRefresh now (coalesced with one in progress). */
  refresh(why: string): void;
  status(): Record<string, unknown>;
  /** Stops refreshing and tells the consumer that a refresh in progress is void; then deletes the subscription. */
  terminate(): Promise<void>;
}

/** Severity as a where-clause operand (BaseEventType/Severity, UInt16). */
function severityOperand(): SimpleAttributeOperand {
  return new SimpleAttributeOperand({ typeDefinitionId: toNodeId(ObjectTypeIds.BaseEventType), browsePath: [{ namespaceIndex: 0, name: 'Severity' }], attributeId: AttributeIds.Value });
}

/** `(OfType(t1) OR ...) AND Severity >= min`, OR the three refresh events (Part 9 §5.11: never filtered out). */
export function whereClause(typeIds: readonly string[], minSeverity: number): ContentFilterElement {
  let types: ContentFilterElement = ofType(typeIds[0]);
  for (const t of typeIds.slice(1)) types = or(types, ofType(t));
  const wanted = minSeverity > 1 ? and(types, greaterThanOrEqual(severityOperand(), new LiteralOperand({ value: { dataType: DataType.UInt16, value: minSeverity } }))) : types;
  // node-opcua's server applies the where clause to the refresh events too, so they are named.
  return or(wanted, or(ofType(REFRESH_START_EVENT_TYPE), or(ofType(REFRESH_END_EVENT_TYPE), ofType(REFRESH_REQUIRED_EVENT_TYPE))));
}

/** Resolves nsu= ids against the server's namespace array; returns the problem in words when it cannot. */
function resolveText(text: string, namespaceArray: readonly string[]): { ok: true; id: string } | { ok: false; problem: string } {
  const parsed = parseNodeId(text);
  if ('problem' in parsed) return { ok: false, problem: `${JSON.stringify(text)} ${parsed.problem}` };
  const r = resolveNodeId(parsed, namespaceArray);
  return r.ok ? { ok: true, id: r.nodeId } : { ok: false, problem: r.problem };
}

export async function startConditionReader(o: ConditionReaderOptions): Promise<ConditionReader> {
  const { cfg, metrics, source } = o;
  const notifier = resolveText(cfg.notifier, o.namespaceArray);
  if (!notifier.ok) throw new Error(`${o.path}.notifier: ${notifier.problem}`);
  const typeIds: string[] = [];
  cfg.types.forEach((t, i) => {
    const r = resolveText(eventTypeId(t), o.namespaceArray);
    if (!r.ok) throw new Error(`${o.path}.types[${i}]: ${r.problem}`);
    typeIds.push(r.id);
  });

  const subscription = await o.session.createSubscription2({
    requestedPublishingInterval: cfg.publishing_interval,
    requestedLifetimeCount: Math.max(o.keepAliveCount * 3, Math.ceil(120_000 / cfg.publishing_interval)),
    requestedMaxKeepAliveCount: o.keepAliveCount,
    maxNotificationsPerPublish: 0,
    publishingEnabled: true,
    priority: 20,
  });
  subscription.on('keepalive', () => o.onAlive());
  subscription.on('received_notifications', () => o.onAlive());

  let terminated = false;
  const counts = { received: 0, refused: {} as Record<string, number>, delivered: 0, not_stored: 0, refreshes_ok: 0, refreshes_failed: 0 };
  let lastRefresh: { at: number; why: string; status: string } | null = null;
  let lastProblem: { at: number; reason: string; detail: string } | null = null;
  let refreshing = false;
  let again: string | null = null;
  let retryTimer: NodeJS.Timeout | null = null;

  // ----------------------------------------------------------------------------- delivery
  let pending: ConditionNotice[] = [];
  let flushQueued = false;
  const flush = () => {
    flushQueued = false;
    const batch = pending;
    pending = [];
    if (batch.length === 0 || terminated) return;
    try {
      o.sink.conditionNotices(source, batch);
      counts.delivered += batch.length;
    } catch (err) {
      counts.not_stored += batch.length;
      metrics.alarmEventsRefused.inc({ source, reason: 'not_stored' }, batch.length);
      if (err instanceof NoConditionConsumerError) {
        // Annotations are being reloaded (or not configured): a refresh follows the attach.
        o.throttle.warn(`events-no-consumer:${source}`, { source }, `${o.path}: condition events arrive but annotations.alarms does not take them (not configured, or being reloaded); they are dropped and a ConditionRefresh restores the state once it takes them`);
        return;
      }
      o.throttle.error(`events-not-stored:${source}`, { source, err: describeError(err) }, `${o.path}: condition events could not be stored; a ConditionRefresh restores them in ${Math.round(cfg.refresh_retry / 1000)} s`);
      scheduleRetry('events not stored');
    }
  };
  const push = (n: ConditionNotice) => {
    pending.push(n);
    if (!flushQueued) {
      flushQueued = true;
      setImmediate(flush);
    }
  };

  // makeContentFilter flattens the nested elements into ElementOperands (Part 4 §7.7.4.2).
  const filter = constructEventFilter([...SELECTED_FIELDS], makeContentFilter(whereClause(typeIds, cfg.min_severity)));
  const item: ClientMonitoredItem = await subscription.monitor(
    { nodeId: toNodeId(notifier.id), attributeId: AttributeIds.EventNotifier },
    { samplingInterval: 0, queueSize: cfg.queue_size, discardOldest: true, filter },
    TimestampsToReturn.Neither,
  );
  const itemStatus = item.statusCode;
  if (itemStatus && itemStatus.isNotGood()) {
    await Promise.race([subscription.terminate().catch(() => undefined), new Promise((r) => setTimeout(r, 2_000).unref())]);
    throw new Error(`${o.path}.notifier: the server refused to send the events of "${cfg.notifier}" (${itemStatus.name}); it must be an object whose EventNotifier attribute has SubscribeToEvents (the Server object i=2253 always has)`);
  }

  item.on('changed', (fields: Variant[]) => {
    counts.received += 1;
    const d = decodeEventFields(fields, o.clock.now());
    if (!d.ok) {
      counts.refused[d.reason] = (counts.refused[d.reason] ?? 0) + 1;
      lastProblem = { at: o.clock.now(), reason: d.reason, detail: d.detail };
      metrics.alarmEventsRefused.inc({ source, reason: d.reason });
      o.throttle.warn(`event-refused:${source}:${d.reason}`, { source, reason: d.reason, detail: d.detail }, `${o.path}: an event from the server was refused (${d.detail})`);
      return;
    }
    if ('refreshRequired' in d) {
      refresh('the server sent a RefreshRequiredEvent');
      return;
    }
    metrics.alarmEventsReceived.inc({ source });
    push(d.notice);
  });

  // ----------------------------------------------------------------------------- refresh
  const scheduleRetry = (why: string) => {
    if (terminated || retryTimer) return;
    retryTimer = setTimeout(() => {
      retryTimer = null;
      refresh(`retry: ${why}`);
    }, cfg.refresh_retry);
    retryTimer.unref();
  };

  const refresh = (why: string): void => {
    if (terminated) return;
    if (refreshing) {
      again = why;
      return;
    }
    refreshing = true;
    void (async () => {
      let status = 'Good';
      try {
        // The subscription id may have changed when node-opcua re-created the subscription.
        const sc = await callConditionRefresh(o.session, subscription.subscriptionId);
        status = sc.name;
        if (sc.isGood()) {
          counts.refreshes_ok += 1;
          metrics.opcuaConditionRefreshes.inc({ source, outcome: 'ok' });
          o.logger.info({ source, why }, `${o.path}: ConditionRefresh requested (retained conditions follow)`);
        } else {
          counts.refreshes_failed += 1;
          metrics.opcuaConditionRefreshes.inc({ source, outcome: 'failed' });
          // Part 9 §5.5.7: BadRefreshInProgress when another refresh of this subscription runs.
          o.throttle.warn(`refresh-failed:${source}:${sc.name}`, { source, status: sc.name, why }, `${o.path}: the server refused ConditionRefresh (${sc.name}); retried in ${Math.round(cfg.refresh_retry / 1000)} s`);
          if (sc.value !== StatusCodes.BadMethodInvalid.value && sc.value !== StatusCodes.BadNotSupported.value) scheduleRetry(sc.name);
        }
      } catch (err) {
        status = describeError(err);
        counts.refreshes_failed += 1;
        metrics.opcuaConditionRefreshes.inc({ source, outcome: 'failed' });
        if (!terminated) {
          o.throttle.warn(`refresh-error:${source}`, { source, err: status, why }, `${o.path}: ConditionRefresh failed (${status}); retried in ${Math.round(cfg.refresh_retry / 1000)} s`);
          scheduleRetry(status);
        }
      } finally {
        lastRefresh = { at: o.clock.now(), why, status };
        refreshing = false;
        if (again !== null && !terminated) {
          const next = again;
          again = null;
          refresh(next);
        }
      }
    })();
  };

  // A consumer (re)attached (annotations reloaded): its rules may map conditions active now.
  const stopListening = o.sink.onRefreshWanted(() => refresh('annotations.alarms attached'));
  refresh('subscribed');

  return {
    subscription,
    refresh,
    status: () => ({
      notifier: cfg.notifier,
      types: cfg.types,
      min_severity: cfg.min_severity,
      subscription_id: subscription.subscriptionId ?? null,
      events_received: counts.received,
      events_delivered: counts.delivered,
      events_not_stored: counts.not_stored,
      events_refused: { ...counts.refused },
      last_problem: lastProblem,
      refreshes: { ok: counts.refreshes_ok, failed: counts.refreshes_failed, in_progress: refreshing },
      last_refresh: lastRefresh,
    }),
    async terminate() {
      if (terminated) return;
      flush();
      terminated = true;
      stopListening();
      if (retryTimer) clearTimeout(retryTimer);
      retryTimer = null;
      // A refresh bracket cut in half says nothing about the conditions it did not reach.
      try {
        o.sink.conditionNotices(source, [{ kind: 'link_lost', at: o.clock.now() }]);
      } catch {
        // no consumer: nothing to void
      }
      await Promise.race([subscription.terminate().catch(() => undefined), new Promise((r) => setTimeout(r, 2_000).unref())]);
    },
  };
}
