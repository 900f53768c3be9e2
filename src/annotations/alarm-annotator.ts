import type { Logger } from 'pino';
import type { Clock } from '../core/clock.js';
import type { ConditionEvent, ConditionEventTarget, ConditionNotice, EventTimeSource } from '../core/condition-event.js';
import { describeError } from '../core/errors.js';
import { LogThrottle } from '../core/log-throttle.js';
import type { Metrics } from '../core/metrics.js';
import { toIsoUtc } from '../core/time.js';
import type { AlarmsConfig } from './alarm-config.js';
import { AlarmRules, conditionText, noteTime, type MatchedRule } from './alarm-rules.js';
import type { AlarmRow, AlarmStore, AlarmTimeSources } from './alarm-store.js';
import { alarmExternalId } from './external-id.js';
import type { NewAnnotation, SiteRef } from './model.js';
import type { Reconciler } from './reconcile.js';
import type { Machine } from './service.js';
import type { AnnotationStore } from './store.js';
import { checkPlausible } from './validate.js';

/**
 * Machine conditions into annotations. Receives the decoded events of every OPC UA
 * server with `events:` (through core/condition-event.ts) and keeps `alarm_conditions`
 * (alarm-store.ts) in step:
 *
 * - A condition a rule maps becomes a range annotation: the row opens when the condition becomes
 *   active (started_at = ActiveState/TransitionTime, else the event's Time) and the range is queued
 *   when it becomes inactive (ended_at = the inactive transition's time, the server's clock, never
 *   the gateway's). Acknowledge and confirm update the row (shown in the console), not the range.
 * - An unmapped alarm at least `instant_min_severity` severe becomes an instant annotation when it
 *   becomes active; a plain event (no ActiveState) that a rule maps or that is severe enough, one
 *   at its Time. Everything else is ignored and counted.
 * - Each condition is its own row, so overlapping causes of one machine stay apart (C1).
 * - ConditionRefresh (Part 9 §5.5.7): between RefreshStart and RefreshEnd the server resends every
 *   retained condition. An open row of that server the refresh did not mention is no longer
 *   retained, hence no longer active: it is closed at the refresh's time, and the text says the
 *   end was inferred and when the condition was last known active. A refresh cut by a lost link
 *   closes nothing. A condition reported inactive by the refresh (Retain true, e.g. not yet
 *   acknowledged) is closed at its reported transition time, exactly.
 * - An open row whose condition is reported active again with a later activation time went
 *   inactive unseen: it is closed at the new activation time (inferred) and a new row opens.
 * - Idempotent: rows and annotations are keyed by (server, condition, activation time); a repeat
 *   (refresh, restart, redelivery) finds them and changes nothing but the states.
 * - A server that sends no event Time (OPC UA's null time) gets stand-ins (condition-decode.ts:
 *   ActiveState/TransitionTime, ReceiveTime, the gateway's receive time); the row keeps which one
 *   gave its start and end, and the annotation text names it.
 *
 * One batch (one Publish response) is one transaction (C3). A failing write throws to the source,
 * which refreshes later; the batch's effects are rolled back as a whole.
 */

export interface AlarmAnnotatorOptions {
  config: AlarmsConfig;
  site: SiteRef;
  machines: ReadonlyMap<string, Machine>;
  /** annotations.max_age / max_ahead: event times outside [now - max_age, now + max_ahead] are refused. */
  maxAgeMs: number;
  maxAheadMs: number;
  gatewayName: string;
  store: AnnotationStore;
  alarms: AlarmStore;
  reconciler: Reconciler;
  /** OPC UA servers that have events configured; open rows of others are closed at start. */
  servers: readonly string[];
  onQueued(): void;
  logger: Logger;
  metrics: Metrics;
  clock: Clock;
}

type Outcome = 'opened' | 'closed' | 'updated' | 'instant' | 'ignored';

class Tally {
  readonly outcomes = new Map<string, number>();
  readonly refused = new Map<string, number>();
  queued = 0;
  /** Whether new activations fit, looked at once before the batch (C4 of alarm-store.ts, A4 of store.ts). */
  constructor(readonly room: { alarms: boolean; outbox: boolean } = { alarms: true, outbox: true }) {}
  add(source: string, outcome: Outcome): void {
    const k = `${source}\u0000${outcome}`;
    this.outcomes.set(k, (this.outcomes.get(k) ?? 0) + 1);
  }
  refuse(source: string, reason: string): void {
    const k = `${source}\u0000${reason}`;
    this.refused.set(k, (this.refused.get(k) ?? 0) + 1);
  }
}

export class AlarmAnnotator implements ConditionEventTarget {
  private readonly rules: AlarmRules;
  private readonly throttle: LogThrottle;
  /** Conditions a refresh in progress has mentioned, per server. */
  private readonly refreshing = new Map<string, Set<string>>();
  readonly totals = { events: 0, opened: 0, closed: 0, updated: 0, instant: 0, ignored: 0, refused: 0, inferred_ends: 0 };

  constructor(private readonly o: AlarmAnnotatorOptions) {
    this.rules = new AlarmRules(o.config);
    this.throttle = new LogThrottle(o.logger, 60_000, () => o.clock.monotonic());
  }

  /** Open rows of servers no longer configured for events cannot be closed by them: closed now, inferred. */
  start(): void {
    const known = new Set(this.o.servers);
    const now = this.o.clock.now();
    const orphans = this.o.alarms.allOpen().filter((r) => !known.has(r.server));
    if (orphans.length === 0) {
      this.refreshGauge();
      return;
    }
    this.o.alarms.write('close conditions of servers without events', () => {
      for (const row of orphans) this.closeInferred(row, now, `the server "${row.server}" is no longer configured with events`, new Tally());
    });
    this.o.logger.warn({ closed: orphans.map((r) => ({ server: r.server, condition: r.conditionName, since: toIsoUtc(r.startedAt) })) }, 'open machine conditions of servers no longer configured with events closed (end inferred)');
    this.o.onQueued();
    this.refreshGauge();
  }

  conditionNotices(source: string, notices: readonly ConditionNotice[]): void {
    // Room for new activations is looked at once per batch, outside its write (making room is a write of its own).
    const t = new Tally({ alarms: this.o.alarms.hasRoom(), outbox: this.o.store.hasRoom() });
    try {
      this.o.alarms.write('a batch of condition events', () => {
        for (const n of notices) this.handle(source, n, t);
      });
    } catch (err) {
      // Rolled back as a whole; the source refreshes, which starts a new bracket.
      this.refreshing.delete(source);
      this.o.logger.error({ source, err: describeError(err) }, 'machine conditions could not be stored; nothing of this batch was kept');
      throw err;
    }
    this.totals.events += notices.length;
    for (const [k, n] of t.outcomes) {
      const [src, outcome] = k.split('\u0000');
      this.o.metrics.alarmEventsHandled.inc({ source: src, outcome }, n);
      this.totals[outcome as Outcome] += n;
    }
    for (const [k, n] of t.refused) {
      const [src, reason] = k.split('\u0000');
      this.o.metrics.alarmEventsRefused.inc({ source: src, reason }, n);
      this.totals.refused += n;
    }
    if (t.queued > 0) {
      this.o.metrics.annotationsCreated.inc({ origin: 'alarm' }, t.queued);
      this.o.onQueued();
    }
    this.refreshGauge();
  }

  private refreshGauge(): void {
    try {
      this.o.metrics.alarmConditionsOpen.set(this.o.alarms.countOpen());
    } catch {
      // the database is closing
    }
  }

  private handle(source: string, n: ConditionNotice, t: Tally): void {
    switch (n.kind) {
      case 'refresh_start':
        this.refreshing.set(source, new Set());
        return;
      case 'refresh_end': {
        const seen = this.refreshing.get(source);
        // An end without its start (the start fell before a restart or a failed batch): no conclusion.
        if (!seen) return;
        this.refreshing.delete(source);
        for (const row of this.o.alarms.openOfServer(source)) {
          if (seen.has(row.conditionId)) continue;
          this.closeInferred(row, n.at, `not active any more at the ConditionRefresh of ${noteTime(n.at)}; last known active ${noteTime(row.seenAt)}`, t);
        }
        return;
      }
      case 'refused':
        // Malformed, refused by the source: still sent by the server, so still retained.
        this.refreshing.get(source)?.add(n.conditionId);
        return;
      case 'overflow':
        // The server discarded events: what this refresh did not mention may have been lost.
        this.refreshing.delete(source);
        return;
      case 'link_lost':
        this.refreshing.delete(source);
        // Until now the link would have reported an inactive transition: the open ones were active.
        this.o.alarms.touchServer(source, n.at);
        return;
      case 'event':
        this.event(source, n.event, t);
        return;
    }
  }

  private event(source: string, e: ConditionEvent, t: Tally): void {
    // A refresh mentions the condition even when the event is then refused: it is still retained.
    if (e.conditionId !== null) this.refreshing.get(source)?.add(e.conditionId);
    const ctx = { plausible: { now: () => this.o.clock.now(), maxAgeMs: this.o.maxAgeMs, maxAheadMs: this.o.maxAheadMs } };
    const implausible = checkPlausible(e.time, toIsoUtc(e.time), 'Time', ctx) ?? (e.activeTransitionTime === null ? null : checkPlausible(e.activeTransitionTime, toIsoUtc(e.activeTransitionTime), 'ActiveState.TransitionTime', ctx));
    if (implausible) {
      t.refuse(source, 'implausible_time');
      this.throttle.warn(`implausible:${source}`, { source, condition: e.conditionName, event_id: e.eventId }, `an event from ${source} was refused: ${implausible.field} ${implausible.message}`);
      return;
    }
    // Part 9 §5.5.2: a branch reports a previous state still to be acknowledged; the trunk carries the current one.
    if (e.branch) return t.add(source, 'ignored');
    const rule = this.rules.match(source, e);
    if (e.conditionId === null || e.active === null) return this.plainEvent(source, e, rule, t);
    if (rule) return this.mapped(source, e, rule, t);
    return this.unmapped(source, e, t);
  }

  // ------------------------------------------------------------------------------- mapped: ranges

  private mapped(source: string, e: ConditionEvent, rule: MatchedRule, t: Tally): void {
    const now = this.o.clock.now();
    const conditionId = e.conditionId!;
    const { at, standIn } = transitionTime(e);
    const open = this.o.alarms.openFor(source, conditionId);
    if (e.active) {
      if (open && (e.activeTransitionTime === null || e.activeTransitionTime <= open.startedAt)) {
        this.o.alarms.update(this.withStates(open, e, now));
        return t.add(source, 'updated');
      }
      if (open) this.closeInferred(open, at, `active again from ${noteTime(at)}; the server did not report when it became inactive before`, t);
      const key = `${source}|${conditionId}|${at}`;
      const known = this.o.alarms.byKey(key);
      if (known) {
        // This activation was closed already (a late repeat): only the states change.
        this.o.alarms.update(this.withStates(known, e, now));
        return t.add(source, 'updated');
      }
      if (!t.room.alarms) return this.refuseFull(source, e, t, 'alarms');
      const machine = rule.machine;
      const row = this.rowOf({ key, source, e, rule, machine, state: 'open', conditionId, externalId: alarmExternalId(this.o.gatewayName, 'r', source, conditionId, at), at, now, active: true, standIn });
      this.o.alarms.insert(row);
      this.o.logger.info({ source, condition: e.conditionName, machine, reason_code: rule.reasonCode, since: toIsoUtc(at), time_used: standIn ?? null, external_id: row.externalId }, 'machine condition active: downtime range opened');
      return t.add(source, 'opened');
    }
    // Inactive.
    if (open && at < open.startedAt) {
      // A late report about an earlier activation: the open one goes on.
      return t.add(source, 'ignored');
    }
    if (open) {
      const ended = this.withStates(open, e, now);
      this.close(standIn ? { ...ended, timeSources: { ...ended.timeSources, end: standIn } } : ended, Math.max(at, open.startedAt + 1), null, t);
      return;
    }
    const latest = this.o.alarms.latestFor(source, conditionId);
    if (latest && latest.state !== 'open' && latest.startedAt <= at) {
      // Acknowledged or confirmed after the end, or repeated by a refresh (Retain still true).
      this.o.alarms.update(this.withStates(latest, e, now));
      return t.add(source, 'updated');
    }
    // Became active and inactive while the gateway did not look: when it began is unknown.
    t.add(source, 'ignored');
  }

  /**
   * The row with the event's states (acknowledged, confirmed) applied. The message stays the one of
   * the activation (why the machine stopped, not "cleared"); the severity is the highest reported.
   */
  private withStates(row: AlarmRow, e: ConditionEvent, now: number): AlarmRow {
    return {
      ...row,
      severity: Math.max(row.severity, e.severity),
      active: e.active,
      acked: e.acked ?? row.acked,
      confirmed: e.confirmed ?? row.confirmed,
      retain: e.retain,
      lastEventId: e.eventId,
      lastEventAt: Math.max(row.lastEventAt, e.time),
      seenAt: e.active ? now : row.seenAt,
      updatedAt: now,
    };
  }

  private closeInferred(row: AlarmRow, at: number, why: string, t: Tally): void {
    this.totals.inferred_ends += 1;
    this.close({ ...row, updatedAt: this.o.clock.now() }, Math.max(at, row.startedAt + 1), why, t);
  }

  /** Queues the range annotation and closes the row in one transaction (C2), linking operator downtimes it overlaps. */
  private close(row: AlarmRow, endedAt: number, inferred: string | null, t: Tally): void {
    const now = this.o.clock.now();
    const notes: string[] = [];
    if (inferred) notes.push(`End inferred: ${inferred}`);
    const times = timeSourcesNote(row.timeSources);
    if (times) notes.push(times);
    const operator = row.machine ? this.o.reconciler.alarmClosing(row, row.startedAt, endedAt) : [];
    if (operator.length > 0) notes.push(`Operator recorded ${operator.map((o) => `"${o.text}" ${o.endedAt === null ? `since ${noteTime(o.startedAt)}` : `${noteTime(o.startedAt)}–${noteTime(o.endedAt)}`}`).join(', ')}`);
    const annotation: NewAnnotation = {
      type: 'range',
      occurredAt: null,
      startedAt: row.startedAt,
      endedAt,
      text: conditionText(row, notes),
      machineVariables: row.machineVariables,
      site: this.o.site,
      machine: row.machine,
      externalId: row.externalId,
      origin: 'alarm',
    };
    // The end of an admitted activation is always taken (C4), whatever room the outbox has left.
    const { created } = this.o.store.insert(annotation, now, { completes: true });
    this.o.alarms.update({ ...row, state: 'closed', endedAt, endInferred: inferred, active: inferred ? row.active : false, updatedAt: now });
    for (const o of operator) this.o.alarms.link(o.externalId, row.externalId, now);
    if (created) t.queued += 1;
    t.add(row.server, 'closed');
    this.o.logger.info(
      { source: row.server, condition: row.conditionName, machine: row.machine, started_at: toIsoUtc(row.startedAt), ended_at: toIsoUtc(endedAt), end_inferred: inferred, external_id: row.externalId },
      'machine condition ended: range annotation queued',
    );
  }

  // ------------------------------------------------------------------------------- instants

  private unmapped(source: string, e: ConditionEvent, t: Tally): void {
    const now = this.o.clock.now();
    const conditionId = e.conditionId!;
    const { at, standIn } = transitionTime(e);
    const min = this.rules.instantMinSeverity;
    if (!e.active) {
      const latest = this.o.alarms.latestFor(source, conditionId);
      if (latest && latest.state === 'instant' && latest.startedAt <= at) {
        this.o.alarms.update({ ...this.withStates(latest, e, now), endedAt: latest.endedAt ?? at });
        return t.add(source, 'updated');
      }
      return t.add(source, 'ignored');
    }
    const key = `${source}|${conditionId}|${at}`;
    const known = this.o.alarms.byKey(key);
    if (known) {
      this.o.alarms.update(this.withStates(known, e, now));
      return t.add(source, 'updated');
    }
    if (min === null || e.severity < min) return t.add(source, 'ignored');
    this.instant(source, e, null, key, alarmExternalId(this.o.gatewayName, 'i', source, conditionId, at), at, standIn, t);
  }

  private plainEvent(source: string, e: ConditionEvent, rule: MatchedRule | null, t: Tally): void {
    const min = this.rules.instantMinSeverity;
    if (!rule && (min === null || e.severity < min)) return t.add(source, 'ignored');
    const id = e.conditionId ?? e.eventId;
    const key = `${source}|${id}|${e.eventId}`;
    if (this.o.alarms.byKey(key)) return t.add(source, 'updated');
    this.instant(source, e, rule, key, alarmExternalId(this.o.gatewayName, 'e', source, `${id}|${e.eventId}`, 0), e.time, standInOf(e.timeSource), t);
  }

  /** A condition's row as its first event describes it (an opened range or an instant). */
  private rowOf(o: {
    key: string;
    source: string;
    e: ConditionEvent;
    rule: MatchedRule | null;
    machine: string | null;
    state: 'open' | 'instant';
    conditionId: string;
    externalId: string;
    at: number;
    now: number;
    active: boolean | null;
    standIn: EventTimeSource | undefined;
  }): AlarmRow {
    const { e, rule, machine, now } = o;
    return {
      key: o.key,
      server: o.source,
      conditionId: o.conditionId,
      state: o.state,
      externalId: o.externalId,
      machine,
      conditionName: e.conditionName,
      sourceName: e.sourceName,
      sourceNode: e.sourceNode,
      eventType: e.eventType,
      eventTypeName: e.eventTypeName,
      severity: e.severity,
      message: e.message,
      reasonCode: rule?.reasonCode ?? null,
      category: rule?.category ?? null,
      ruleText: rule?.text ?? null,
      machineVariables: rule?.machineVariables ?? (machine ? (this.o.machines.get(machine)?.machineVariables ?? []) : []),
      startedAt: o.at,
      endedAt: null,
      endInferred: null,
      timeSources: o.standIn ? { start: o.standIn } : null,
      active: o.active,
      acked: e.acked,
      confirmed: e.confirmed,
      retain: e.retain,
      firstEventId: e.eventId,
      lastEventId: e.eventId,
      lastEventAt: e.time,
      seenAt: now,
      createdAt: now,
      updatedAt: now,
    };
  }

  private instant(source: string, e: ConditionEvent, rule: MatchedRule | null, key: string, externalId: string, at: number, standIn: EventTimeSource | undefined, t: Tally): void {
    if (!t.room.alarms) return this.refuseFull(source, e, t, 'alarms');
    if (!t.room.outbox) return this.refuseFull(source, e, t, 'annotations');
    const now = this.o.clock.now();
    const machine = rule?.machine ?? this.rules.machineOf(source);
    const row = this.rowOf({ key, source, e, rule, machine, state: 'instant', conditionId: e.conditionId ?? e.eventId, externalId, at, now, active: e.active, standIn });
    this.o.alarms.insert(row);
    const times = timeSourcesNote(row.timeSources, true);
    const { created } = this.o.store.insert(
      { type: 'instant', occurredAt: at, startedAt: null, endedAt: null, text: conditionText(row, times ? [times] : []), machineVariables: row.machineVariables, site: this.o.site, machine, externalId, origin: 'alarm' },
      now,
    );
    if (created) t.queued += 1;
    t.add(source, 'instant');
  }

  /** A new activation while `space` is full (C4): refused, counted (event and store) and said at most once a minute. */
  private refuseFull(source: string, e: ConditionEvent, t: Tally, space: 'alarms' | 'annotations'): void {
    t.refuse(source, 'store_full');
    if (space === 'alarms') this.o.alarms.refused();
    this.throttle.warn(`store_full:${space}`, { source, condition: e.conditionName, event_id: e.eventId, space }, `a new machine condition from ${source} was refused: the ${space} space is full (store.${space}_max_bytes); conditions already active still end and are annotated`);
  }

  status(): Record<string, unknown> {
    return {
      rules: this.o.config.rules.length,
      instant_min_severity: this.o.config.instant_min_severity,
      open: this.o.alarms.allOpen().map((r) => ({
        server: r.server,
        condition: r.conditionName,
        source: r.sourceName,
        machine: r.machine,
        reason_code: r.reasonCode,
        since: toIsoUtc(r.startedAt),
        acked: r.acked,
        confirmed: r.confirmed,
        external_id: r.externalId,
      })),
      totals: { ...this.totals },
      refreshes_in_progress: [...this.refreshing.keys()],
    };
  }
}

/** Stand-ins worth a note: the server's own times (Time, ActiveState/TransitionTime) need none. */
function standInOf(source: EventTimeSource): EventTimeSource | undefined {
  return source === 'ReceiveTime' || source === 'gateway' ? source : undefined;
}

/** When the condition changed state (ActiveState/TransitionTime, else the event's time), and the stand-in that gave it. */
function transitionTime(e: ConditionEvent): { at: number; standIn: EventTimeSource | undefined } {
  if (e.activeTransitionTime !== null) return { at: e.activeTransitionTime, standIn: undefined };
  return { at: e.time, standIn: standInOf(e.timeSource) };
}

const STAND_IN_WORDS: Partial<Record<EventTimeSource, string>> = { ReceiveTime: 'ReceiveTime', gateway: "the gateway's receive time" };

/**
 * Which time the annotation took where the server sent none, e.g. `Start and end from ReceiveTime
 * (the server sent no event Time)`, `Time from ...` for an instant; null when every time is the
 * server's own.
 */
export function timeSourcesNote(s: AlarmTimeSources | null, instant = false): string | null {
  const start = s?.start && STAND_IN_WORDS[s.start];
  const end = s?.end && STAND_IN_WORDS[s.end];
  if (!start && !end) return null;
  let which: string;
  if (instant) which = `Time from ${start}`;
  else if (start && end) which = start === end ? `Start and end from ${start}` : `Start from ${start}, end from ${end}`;
  else which = start ? `Start from ${start}` : `End from ${end}`;
  return `${which} (the server sent no event Time)`;
}
