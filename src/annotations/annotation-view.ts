import { toIsoUtc } from '../core/time.js';
import type { AlarmRow, AlarmStore } from './alarm-store.js';
import type { AlarmDetailView, AnnotationDetailView, AnnotationLinkView, OpenAlarmView } from './api-model.js';
import { entryView, type OutboxEntry } from './model.js';
import { CONTRADICTED } from './reconcile.js';
import type { AnnotationStore } from './store.js';

/**
 * The JSON of an annotation for the local API and the console's Annotations page:
 * the outbox entry (model.ts entryView, with `origin_kind`: operator | detector | alarm | gap), and
 *
 * - `alarm`: for an annotation a machine condition produced, the condition and its states
 *   (active, acknowledged, confirmed, as last reported, also after the annotation went out), the
 *   server's times and, when the end was not reported, why it was inferred;
 * - `links`: the annotations of the other side it overlaps (operator ↔ alarm of the same machine);
 * - `flags` and `contradicted_by_machine_state`: an operator's downtime the machine's running
 *   signal contradicts, with the detail.
 */

export function alarmView(r: AlarmRow): AlarmDetailView {
  return {
    server: r.server,
    condition_id: r.conditionId,
    condition_name: r.conditionName,
    source_name: r.sourceName,
    source_node: r.sourceNode,
    event_type: r.eventType,
    event_type_name: r.eventTypeName,
    severity: r.severity,
    message: r.message,
    reason_code: r.reasonCode,
    category: r.category,
    record: r.state,
    active: r.active,
    acked: r.acked,
    confirmed: r.confirmed,
    retain: r.retain,
    active_since: toIsoUtc(r.startedAt),
    ended_at: r.endedAt === null ? null : toIsoUtc(r.endedAt),
    end_inferred: r.endInferred,
    time_sources: r.timeSources,
    last_event_at: toIsoUtc(r.lastEventAt),
    last_known_active_at: toIsoUtc(r.seenAt),
  };
}

export class AnnotationViews {
  constructor(
    private readonly store: AnnotationStore,
    private readonly alarms: AlarmStore,
  ) {}

  /** An outbox entry with its alarm details, links and flags. */
  entry(e: OutboxEntry): AnnotationDetailView {
    const base = entryView(e);
    const alarm = e.origin === 'alarm' ? this.alarms.byExternalId(e.externalId) : undefined;
    const flags = this.alarms.flagsOf(e.externalId);
    const contradicted = flags.find((f) => f.flag === CONTRADICTED);
    return {
      ...base,
      alarm: alarm ? alarmView(alarm) : null,
      links: this.links(e.externalId),
      flags: flags.map((f) => ({ flag: f.flag, detail: f.detail, at: toIsoUtc(f.createdAt) })),
      contradicted_by_machine_state: contradicted ? { detail: contradicted.detail } : null,
    };
  }

  /** Machine conditions active now (their annotation is queued when they end). */
  openAlarms(machine?: string): OpenAlarmView[] {
    return this.alarms
      .allOpen()
      .filter((r) => machine === undefined || r.machine === machine)
      .map((r) => ({ external_id: r.externalId, machine: r.machine, origin: 'alarm' as const, origin_kind: 'alarm' as const, alarm: alarmView(r), links: this.links(r.externalId) }));
  }

  private links(externalId: string): AnnotationLinkView[] {
    return this.alarms.linksOf(externalId).map((l) => {
      const other = l.operator === externalId ? l.alarm : l.operator;
      const entry = this.store.byExternalId(other);
      const open = entry ? undefined : this.alarms.byExternalId(other);
      return {
        external_id: other,
        origin_kind: l.operator === externalId ? ('alarm' as const) : ('operator' as const),
        origin: entry?.origin ?? (open ? 'alarm' : null),
        text: entry?.text ?? (open ? open.conditionName : null),
        started_at: entry?.startedAt != null ? toIsoUtc(entry.startedAt) : open ? toIsoUtc(open.startedAt) : null,
        ended_at: entry?.endedAt != null ? toIsoUtc(entry.endedAt) : null,
        // pending: an operator downtime still open on the panel (linked under its future id)
        state: entry?.state ?? (open ? 'open' : 'pending'),
      };
    });
  }
}
