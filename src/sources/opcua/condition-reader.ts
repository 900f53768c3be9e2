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
 *   of the event loop (one Publish response), so the consumer writes them in one transaction. A
 *   refused event that names its condition still goes on as "mentioned" (`refused`): a refresh
 *   that sent it did not forget that condition.
 * - Events whose Time is OPC UA's null time (or missing) keep a stand-in time, named in the event
 *   (condition-decode.ts); counted by stand-in and logged (throttled).
 * - The server may revise the queue size asked for (open62541 allows 100 by default): logged once
 *   per source and revision. An EventQueueOverflowEvent (Part 4 §5.12.1.5) is counted, voids a
 *   refresh in progress and asks for a new one after `refresh_retry`.
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

/** The queue revision last logged per source (its LogThrottle outlives the reconnects): "logged once". */
const revisionLogged = new WeakMap<LogThrottle, string>();

export async function startConditionReader(o: ConditionReaderOptions): Promise<ConditionReader> {
  const typeIds = resolveTypes(o);
  const notifier = resolveText(o.cfg.notifier, o.namespaceArray);
  if (!notifier.ok) throw new Error(`${o.path}.notifier: ${notifier.problem}`);
  const { cfg } = o;
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
  const reader = new EventReader(o, subscription, item.monitoringParameters.queueSize);
  item.on('changed', (fields: Variant[]) => reader.onNotification(fields));
  reader.start();
  return reader;
}

function resolveTypes(o: ConditionReaderOptions): string[] {
  return o.cfg.types.map((t, i) => {
    const r = resolveText(eventTypeId(t), o.namespaceArray);
    if (!r.ok) throw new Error(`${o.path}.types[${i}]: ${r.problem}`);
    return r.id;
  });
}

class EventReader implements ConditionReader {
  private terminated = false;
  private readonly counts = { received: 0, refused: {} as Record<string, number>, delivered: 0, not_stored: 0, refreshes_ok: 0, refreshes_failed: 0, queue_overflows: 0, time_fallbacks: {} as Record<string, number> };
  private lastRefresh: { at: number; why: string; status: string } | null = null;
  private lastProblem: { at: number; reason: string; detail: string } | null = null;
  private refreshing = false;
  private again: string | null = null;
  private retryTimer: NodeJS.Timeout | null = null;
  private pending: ConditionNotice[] = [];
  private flushQueued = false;
  private stopListening: () => void = () => undefined;

  constructor(
    private readonly o: ConditionReaderOptions,
    readonly subscription: ClientSubscription,
    /** The queue size the server granted (monitoringParameters after CreateMonitoredItems). */
    private readonly revisedQueueSize: number,
  ) {}

  start(): void {
    this.noteRevisedQueue();
    // A consumer (re)attached (annotations reloaded): its rules may map conditions active now.
    this.stopListening = this.o.sink.onRefreshWanted(() => this.refresh('annotations.alarms attached'));
    this.refresh('subscribed');
  }

  /** Part 4 §5.13.2: the server may grant a smaller queue than asked; a burst beyond it loses the oldest events. */
  private noteRevisedQueue(): void {
    const asked = this.o.cfg.queue_size;
    const got = this.revisedQueueSize;
    if (!(got > 0) || got >= asked) return;
    const revision = `${asked}>${got}`;
    if (revisionLogged.get(this.o.throttle) === revision) return;
    revisionLogged.set(this.o.throttle, revision);
    this.o.logger.warn(
      { source: this.o.source, requested: asked, revised: got },
      `${this.o.path}.queue_size: the server keeps at most ${got} events between two publishes (asked for ${asked}); a longer burst loses the oldest, counted in gateway_opcua_event_queue_overflows_total, and a ConditionRefresh restores the state of the conditions it still retains`,
    );
  }

  onNotification(fields: Variant[]): void {
    const { o, counts } = this;
    const { metrics, source } = o;
    counts.received += 1;
    const now = o.clock.now();
    const d = decodeEventFields(fields, now);
    if (!d.ok) {
      counts.refused[d.reason] = (counts.refused[d.reason] ?? 0) + 1;
      this.lastProblem = { at: now, reason: d.reason, detail: d.detail };
      metrics.alarmEventsRefused.inc({ source, reason: d.reason });
      o.throttle.warn(`event-refused:${source}:${d.reason}`, { source, reason: d.reason, detail: d.detail }, `${o.path}: an event from the server was refused (${d.detail})`);
      // Still sent by the server: a refresh in progress has mentioned its condition.
      if (d.conditionId !== null) this.push({ kind: 'refused', conditionId: d.conditionId, at: now });
      return;
    }
    if ('refreshRequired' in d) return this.refresh('the server sent a RefreshRequiredEvent');
    if ('overflow' in d) return this.onOverflow(now);
    if (d.notice.kind === 'event' && d.notice.event.timeSource !== 'Time') this.noteTimeFallback(d.notice.event.timeSource);
    metrics.alarmEventsReceived.inc({ source });
    this.push(d.notice);
  }

  private onOverflow(at: number): void {
    const { o } = this;
    this.counts.queue_overflows += 1;
    this.lastProblem = { at, reason: 'queue_overflow', detail: `the server discarded events (its queue holds ${this.revisedQueueSize})` };
    o.metrics.opcuaEventQueueOverflows.inc({ source: o.source });
    o.throttle.warn(
      `event-overflow:${o.source}`,
      { source: o.source, queue_size: this.revisedQueueSize },
      `${o.path}: the server discarded condition events (EventQueueOverflowEvent: more than ${this.revisedQueueSize} between two publishes); a ConditionRefresh in ${Math.round(o.cfg.refresh_retry / 1000)} s restores the state of the conditions it retains`,
    );
    this.push({ kind: 'overflow', at });
    this.scheduleRetry('events were lost (queue overflow)');
  }

  private noteTimeFallback(used: string): void {
    const { o } = this;
    this.counts.time_fallbacks[used] = (this.counts.time_fallbacks[used] ?? 0) + 1;
    o.throttle.warn(
      `event-time:${o.source}:${used}`,
      { source: o.source, time_used: used },
      `${o.path}: the server sends events without a Time (OPC UA's null time 1601-01-01, or none); the gateway uses ${used === 'gateway' ? 'its own receive time' : used} instead, and the annotations say so`,
    );
  }

  // ----------------------------------------------------------------------------- delivery

  /** Delivered in order, one batch per turn of the event loop (one Publish response). */
  private push(n: ConditionNotice): void {
    this.pending.push(n);
    if (!this.flushQueued) {
      this.flushQueued = true;
      setImmediate(() => this.flush());
    }
  }

  private flush(): void {
    const { o, counts } = this;
    this.flushQueued = false;
    const batch = this.pending;
    this.pending = [];
    if (batch.length === 0 || this.terminated) return;
    try {
      o.sink.conditionNotices(o.source, batch);
      counts.delivered += batch.length;
    } catch (err) {
      counts.not_stored += batch.length;
      o.metrics.alarmEventsRefused.inc({ source: o.source, reason: 'not_stored' }, batch.length);
      if (err instanceof NoConditionConsumerError) {
        // Annotations are being reloaded (or not configured): a refresh follows the attach.
        o.throttle.warn(`events-no-consumer:${o.source}`, { source: o.source }, `${o.path}: condition events arrive but annotations.alarms does not take them (not configured, or being reloaded); they are dropped and a ConditionRefresh restores the state once it takes them`);
        return;
      }
      o.throttle.error(`events-not-stored:${o.source}`, { source: o.source, err: describeError(err) }, `${o.path}: condition events could not be stored; a ConditionRefresh restores them in ${Math.round(o.cfg.refresh_retry / 1000)} s`);
      this.scheduleRetry('events not stored');
    }
  }

  // ----------------------------------------------------------------------------- refresh

  private scheduleRetry(why: string): void {
    if (this.terminated || this.retryTimer) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      this.refresh(`retry: ${why}`);
    }, this.o.cfg.refresh_retry);
    this.retryTimer.unref();
  }

  refresh(why: string): void {
    if (this.terminated) return;
    if (this.refreshing) {
      this.again = why;
      return;
    }
    this.refreshing = true;
    void this.callRefresh(why).finally(() => {
      this.refreshing = false;
      if (this.again !== null && !this.terminated) {
        const next = this.again;
        this.again = null;
        this.refresh(next);
      }
    });
  }

  private async callRefresh(why: string): Promise<void> {
    const { o, counts } = this;
    const { source, cfg, metrics } = o;
    let status = 'Good';
    try {
      // The subscription id may have changed when node-opcua re-created the subscription.
      const sc = await callConditionRefresh(o.session, this.subscription.subscriptionId);
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
        if (sc.value !== StatusCodes.BadMethodInvalid.value && sc.value !== StatusCodes.BadNotSupported.value) this.scheduleRetry(sc.name);
      }
    } catch (err) {
      status = describeError(err);
      counts.refreshes_failed += 1;
      metrics.opcuaConditionRefreshes.inc({ source, outcome: 'failed' });
      if (!this.terminated) {
        o.throttle.warn(`refresh-error:${source}`, { source, err: status, why }, `${o.path}: ConditionRefresh failed (${status}); retried in ${Math.round(cfg.refresh_retry / 1000)} s`);
        this.scheduleRetry(status);
      }
    } finally {
      this.lastRefresh = { at: o.clock.now(), why, status };
    }
  }

  status(): Record<string, unknown> {
    const { cfg } = this.o;
    const c = this.counts;
    return {
      notifier: cfg.notifier,
      types: cfg.types,
      min_severity: cfg.min_severity,
      subscription_id: this.subscription.subscriptionId ?? null,
      queue_size: { requested: cfg.queue_size, revised: this.revisedQueueSize },
      events_received: c.received,
      events_delivered: c.delivered,
      events_not_stored: c.not_stored,
      events_refused: { ...c.refused },
      queue_overflows: c.queue_overflows,
      time_fallbacks: { ...c.time_fallbacks },
      last_problem: this.lastProblem,
      refreshes: { ok: c.refreshes_ok, failed: c.refreshes_failed, in_progress: this.refreshing },
      last_refresh: this.lastRefresh,
    };
  }

  async terminate(): Promise<void> {
    if (this.terminated) return;
    this.flush();
    this.terminated = true;
    this.stopListening();
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    // A refresh bracket cut in half says nothing about the conditions it did not reach.
    try {
      this.o.sink.conditionNotices(this.o.source, [{ kind: 'link_lost', at: this.o.clock.now() }]);
    } catch {
      // no consumer: nothing to void
    }
    await Promise.race([this.subscription.terminate().catch(() => undefined), new Promise((r) => setTimeout(r, 2_000).unref())]);
  }
}
