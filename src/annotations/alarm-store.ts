import type { Statement } from 'better-sqlite3';
import type { EventTimeSource } from '../core/condition-event.js';
import type { StoreOwner, WriteTx } from '../store/store.js';
import type { AlarmCategory } from './alarm-config.js';

/**
 * Machine conditions in the gateway's SQLite file, an owner of its own beside the annotation outbox
 * (src/store/README.md: the `alarms` owner, with its own space, store.alarms_max_bytes):
 *
 * - `alarm_conditions`: one row per activation of a condition. `open` while the condition is
 *   active (its range annotation is queued when it ends), then `closed`; `instant` for an unmapped
 *   alarm recorded as an instant annotation. The row keeps the condition's states (acknowledged,
 *   confirmed) for the console after the annotation went out, and why an end was inferred.
 * - `annotation_links`: an operator's downtime and a machine condition of the same machine that
 *   overlap (both annotations are kept).
 * - `annotation_flags`: an operator's downtime the machine's running signal contradicts.
 *
 * INVARIANTS
 *  C1  At most one `open` row per (server, condition_id): an activation is closed before the next
 *      one of the same condition opens (overlapping causes of one machine are different
 *      conditions, hence different rows).
 *  C2  A row leaves `open` in the same transaction that queues its range annotation (A3 of
 *      store.ts for conditions): a crash leaves the open row or the queued annotation, never both
 *      and never neither. The row's external_id is derived from (gateway, server, condition, the
 *      time it became active), so a condition seen again after a restart or a ConditionRefresh maps
 *      to the same row and the same annotation.
 *  C3  Written only inside the caller's transaction of a batch of events (`write`), so one Publish
 *      response costs one commit (synchronous = FULL: one fsync) whatever its number of events.
 *  C4  Bounded by store.alarms_max_bytes: at the bound, rows that ended (their annotation is in the
 *      outbox already) and old links and flags go, oldest first (`makeRoom`); beyond that the
 *      annotator refuses new activations (counted), while active conditions still end (C2).
 *
 * The tables are schema/ALARMS_SCHEMA (idempotent statements, no step of the file's schema).
 */

export type AlarmRowState = 'open' | 'closed' | 'instant';

/** Which stand-in gave the start or end when the server sent no event Time (null: the server's own times). */
export interface AlarmTimeSources {
  start?: EventTimeSource;
  end?: EventTimeSource;
}

export interface AlarmRow {
  key: string;
  server: string;
  conditionId: string;
  state: AlarmRowState;
  externalId: string;
  machine: string | null;
  conditionName: string | null;
  sourceName: string;
  sourceNode: string | null;
  eventType: string;
  eventTypeName: string | null;
  severity: number;
  message: string;
  reasonCode: string | null;
  category: AlarmCategory | null;
  ruleText: string | null;
  machineVariables: string[];
  /** When the condition became active (epoch ms). */
  startedAt: number;
  endedAt: number | null;
  /** Why the end is not the server's inactive transition, or null when it is. */
  endInferred: string | null;
  /** The stand-ins for the server's times the start or end came from, or null when there were none. */
  timeSources: AlarmTimeSources | null;
  active: boolean | null;
  acked: boolean | null;
  confirmed: boolean | null;
  retain: boolean | null;
  firstEventId: string;
  lastEventId: string;
  lastEventAt: number;
  /** Gateway time the condition was last known active (an event, a refresh, the link's end). */
  seenAt: number;
  createdAt: number;
  updatedAt: number;
}

export interface AnnotationLink {
  operator: string;
  alarm: string;
  createdAt: number;
}

export interface AnnotationFlag {
  externalId: string;
  flag: string;
  detail: string;
  createdAt: number;
}



interface DbRow {
  key: string;
  server: string;
  condition_id: string;
  state: AlarmRowState;
  external_id: string;
  machine: string | null;
  condition_name: string | null;
  source_name: string;
  source_node: string | null;
  event_type: string;
  event_type_name: string | null;
  severity: number;
  message: string;
  reason_code: string | null;
  category: AlarmCategory | null;
  rule_text: string | null;
  machine_variables: string;
  started_at: number;
  ended_at: number | null;
  end_inferred: string | null;
  time_sources: string | null;
  active: number | null;
  acked: number | null;
  confirmed: number | null;
  retain: number | null;
  first_event_id: string;
  last_event_id: string;
  last_event_at: number;
  seen_at: number;
  created_at: number;
  updated_at: number;
}

const bool = (v: number | null): boolean | null => (v === null ? null : v === 1);
const int = (v: boolean | null): number | null => (v === null ? null : v ? 1 : 0);

function toRow(r: DbRow): AlarmRow {
  return {
    key: r.key,
    server: r.server,
    conditionId: r.condition_id,
    state: r.state,
    externalId: r.external_id,
    machine: r.machine,
    conditionName: r.condition_name,
    sourceName: r.source_name,
    sourceNode: r.source_node,
    eventType: r.event_type,
    eventTypeName: r.event_type_name,
    severity: r.severity,
    message: r.message,
    reasonCode: r.reason_code,
    category: r.category,
    ruleText: r.rule_text,
    machineVariables: JSON.parse(r.machine_variables) as string[],
    startedAt: r.started_at,
    endedAt: r.ended_at,
    endInferred: r.end_inferred,
    timeSources: r.time_sources ? (JSON.parse(r.time_sources) as AlarmTimeSources) : null,
    active: bool(r.active),
    acked: bool(r.acked),
    confirmed: bool(r.confirmed),
    retain: bool(r.retain),
    firstEventId: r.first_event_id,
    lastEventId: r.last_event_id,
    lastEventAt: r.last_event_at,
    seenAt: r.seen_at,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

function params(a: AlarmRow) {
  return {
    key: a.key,
    server: a.server,
    condition_id: a.conditionId,
    state: a.state,
    external_id: a.externalId,
    machine: a.machine,
    condition_name: a.conditionName,
    source_name: a.sourceName,
    source_node: a.sourceNode,
    event_type: a.eventType,
    event_type_name: a.eventTypeName,
    severity: a.severity,
    message: a.message,
    reason_code: a.reasonCode,
    category: a.category,
    rule_text: a.ruleText,
    machine_variables: JSON.stringify(a.machineVariables),
    started_at: a.startedAt,
    ended_at: a.endedAt,
    end_inferred: a.endInferred,
    time_sources: a.timeSources ? JSON.stringify(a.timeSources) : null,
    active: int(a.active),
    acked: int(a.acked),
    confirmed: int(a.confirmed),
    retain: int(a.retain),
    first_event_id: a.firstEventId,
    last_event_id: a.lastEventId,
    last_event_at: a.lastEventAt,
    seen_at: a.seenAt,
    created_at: a.createdAt,
    updated_at: a.updatedAt,
  };
}

/** Rows the full policy deletes per step (oldest first). */
const ROOM_STEP = 500;

export class AlarmStore {
  private readonly st: Record<string, Statement>;

  constructor(private readonly db: StoreOwner) {
    const columns = Object.keys(params({ machineVariables: [] } as unknown as AlarmRow));
    this.st = {
      insert: db.prepare(`INSERT INTO alarm_conditions (${columns.join(', ')}) VALUES (${columns.map((c) => `@${c}`).join(', ')}) ON CONFLICT (key) DO NOTHING`),
      update: db.prepare(`UPDATE alarm_conditions SET ${columns.filter((c) => c !== 'key').map((c) => `${c} = @${c}`).join(', ')} WHERE key = @key`),
      byKey: db.prepare('SELECT * FROM alarm_conditions WHERE key = ?'),
      byExternalId: db.prepare('SELECT * FROM alarm_conditions WHERE external_id = ?'),
      openFor: db.prepare("SELECT * FROM alarm_conditions WHERE server = ? AND condition_id = ? AND state = 'open'"),
      latestFor: db.prepare('SELECT * FROM alarm_conditions WHERE server = ? AND condition_id = ? ORDER BY started_at DESC LIMIT 1'),
      openOfServer: db.prepare("SELECT * FROM alarm_conditions WHERE state = 'open' AND server = ? ORDER BY started_at"),
      allOpen: db.prepare("SELECT * FROM alarm_conditions WHERE state = 'open' ORDER BY started_at"),
      countOpen: db.prepare("SELECT count(*) FROM alarm_conditions WHERE state = 'open'").pluck(true),
      touchServer: db.prepare("UPDATE alarm_conditions SET seen_at = ? WHERE state = 'open' AND server = ?"),
      overlapping: db.prepare(
        `SELECT * FROM (SELECT * FROM alarm_conditions WHERE machine = @machine AND state = 'open' AND started_at < @to
         UNION ALL SELECT * FROM alarm_conditions WHERE machine = @machine AND state = 'closed' AND ended_at > @from AND started_at < @to) ORDER BY started_at LIMIT 50`,
      ),
      purge: db.prepare("DELETE FROM alarm_conditions WHERE state != 'open' AND updated_at < ?"),
      link: db.prepare('INSERT OR IGNORE INTO annotation_links (operator, alarm, created_at) VALUES (?, ?, ?)'),
      linksOf: db.prepare('SELECT operator, alarm, created_at FROM annotation_links WHERE operator = ? OR alarm = ?'),
      flag: db.prepare('INSERT OR REPLACE INTO annotation_flags (external_id, flag, detail, created_at) VALUES (?, ?, ?, ?)'),
      flagsOf: db.prepare('SELECT external_id, flag, detail, created_at FROM annotation_flags WHERE external_id = ?'),
      purgeLinks: db.prepare('DELETE FROM annotation_links WHERE created_at < ?'),
      purgeFlags: db.prepare('DELETE FROM annotation_flags WHERE created_at < ?'),
      dropEnded: db.prepare("DELETE FROM alarm_conditions WHERE key IN (SELECT key FROM alarm_conditions WHERE state != 'open' ORDER BY updated_at LIMIT ?)"),
      dropLinks: db.prepare('DELETE FROM annotation_links WHERE (operator, alarm) IN (SELECT operator, alarm FROM annotation_links ORDER BY created_at LIMIT ?)'),
      dropFlags: db.prepare('DELETE FROM annotation_flags WHERE (external_id, flag) IN (SELECT external_id, flag FROM annotation_flags ORDER BY created_at LIMIT ?)'),
    };
    db.fullPolicy({ text: 'conditions that ended, old links and flags go first, oldest first; then new activations are refused (active ones still end)', makeRoom: () => this.dropOldest() });
  }

  /** Runs `fn` as one write of the conditions (C3): a batch of events, or closing orphans. */
  write<T>(what: string, fn: (tx: WriteTx) => T): T {
    return this.db.write(what, fn);
  }

  /** Whether a new activation fits (C4), making room first when over the bound and no write runs. */
  hasRoom(): boolean {
    return this.db.hasRoom();
  }

  /** Counts a new activation refused for lack of room (C4). */
  refused(): void {
    this.db.countRefusal();
  }

  /** Inserts a new row; false when the key exists already (the same activation seen again). */
  insert(row: AlarmRow): boolean {
    return this.st.insert.run(params(row)).changes === 1;
  }

  update(row: AlarmRow): void {
    this.st.update.run(params(row));
  }

  byKey(key: string): AlarmRow | undefined {
    const r = this.st.byKey.get(key) as DbRow | undefined;
    return r && toRow(r);
  }

  byExternalId(externalId: string): AlarmRow | undefined {
    const r = this.st.byExternalId.get(externalId) as DbRow | undefined;
    return r && toRow(r);
  }

  /** The open activation of a condition (C1: at most one). */
  openFor(server: string, conditionId: string): AlarmRow | undefined {
    const r = this.st.openFor.get(server, conditionId) as DbRow | undefined;
    return r && toRow(r);
  }

  /** The newest activation of a condition, whatever its state. */
  latestFor(server: string, conditionId: string): AlarmRow | undefined {
    const r = this.st.latestFor.get(server, conditionId) as DbRow | undefined;
    return r && toRow(r);
  }

  openOfServer(server: string): AlarmRow[] {
    return (this.st.openOfServer.all(server) as DbRow[]).map(toRow);
  }

  allOpen(): AlarmRow[] {
    return (this.st.allOpen.all() as DbRow[]).map(toRow);
  }

  countOpen(): number {
    return this.st.countOpen.get() as number;
  }

  /** The server was in sight until `at`: every open condition of it was still active then. */
  touchServer(server: string, at: number): void {
    this.st.touchServer.run(at, server);
  }

  /** Activations of a machine's conditions overlapping [from, to) (open ones count as lasting until now). */
  overlapping(machine: string, from: number, to: number): AlarmRow[] {
    return (this.st.overlapping.all({ machine, from, to }) as DbRow[]).map(toRow);
  }

  /** Links an operator's downtime and a condition (joins a write running now). */
  link(operator: string, alarm: string, now: number): void {
    this.db.write('link a downtime and a condition', () => this.st.link.run(operator, alarm, now), { join: true });
  }

  linksOf(externalId: string): AnnotationLink[] {
    return (this.st.linksOf.all(externalId, externalId) as Array<{ operator: string; alarm: string; created_at: number }>).map((l) => ({ operator: l.operator, alarm: l.alarm, createdAt: l.created_at }));
  }

  flag(externalId: string, flag: string, detail: string, now: number): void {
    this.db.write('flag an annotation', () => this.st.flag.run(externalId, flag, detail, now), { join: true });
  }

  flagsOf(externalId: string): AnnotationFlag[] {
    return (this.st.flagsOf.all(externalId) as Array<{ external_id: string; flag: string; detail: string; created_at: number }>).map((f) => ({ externalId: f.external_id, flag: f.flag, detail: f.detail, createdAt: f.created_at }));
  }

  /** Deletes closed and instant rows, links and flags last changed before `before` (with the outbox's retention). */
  purge(before: number): number {
    return this.db.write('purge machine conditions', () => this.st.purge.run(before).changes + this.st.purgeLinks.run(before).changes + this.st.purgeFlags.run(before).changes);
  }

  /** The full policy (C4): ended rows, links and flags, oldest first, until below 90 % of the bound; returns the rows. */
  private dropOldest(): number {
    return this.db.deleteOldest('delete the oldest ended conditions (store.alarms_max_bytes)', ROOM_STEP, () => this.st.dropEnded.run(ROOM_STEP).changes + this.st.dropLinks.run(ROOM_STEP).changes + this.st.dropFlags.run(ROOM_STEP).changes);
  }
}
