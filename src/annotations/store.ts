import type { Statement } from 'better-sqlite3';
import type { StoreOwner } from '../store/store.js';
import { OPERATOR_ORIGINS, type DeliveryState, type NewAnnotation, type Origin, type OutboxEntry, type SiteRef } from './model.js';

/**
 * The annotation outbox and the open downtimes, in the gateway's SQLite file: the `annotations`
 * owner of the store (src/store/README.md; tables of schema.ts), with its own space,
 * store.annotations_max_bytes.
 *
 * INVARIANTS
 *  A1  An annotation and its external_id are written in one transaction; the id never changes, so
 *      every attempt (also after a crash) sends the same id (§4.1: a repeat meets 409).
 *  A2  A queued row leaves the `queued` state only on a 2xx or 409 (delivered) or a 400-class
 *      refusal (refused, with the service's message). Rows are deleted only after `retention`
 *      and never while queued.
 *  A3  Stopping a downtime inserts its range annotation and deletes the open downtime in one
 *      transaction: a crash leaves either the open downtime or the queued annotation, never both
 *      and never neither.
 *  A4  Bounded by store.annotations_max_bytes, never by deleting a queued entry: at the bound,
 *      delivered and refused entries go first, oldest first (`makeRoom`, also before
 *      annotations.retention); beyond that a new annotation or a new downtime is refused with a
 *      StoreFullError (HTTP 507, a counted MQTT refusal). What completes something admitted
 *      before (stopping an open downtime, the end of a condition) is always taken.
 *
 * Every write is the store's (write.ts): one short transaction, or a part joining the caller's
 * (a gap's annotations, a batch of condition events).
 */

export interface DowntimeRow {
  key: string;
  kind: 'manual' | 'detector';
  machine: string;
  externalId: string;
  startedAt: number;
  reason: string | null;
  text: string | null;
  machineVariables: string[] | null;
  origin: Origin;
  createdAt: number;
}

interface OutboxDbRow {
  seq: number;
  external_id: string;
  type: 'instant' | 'range';
  occurred_at: number | null;
  started_at: number | null;
  ended_at: number | null;
  text: string;
  machine_variables: string;
  site: string;
  machine: string | null;
  origin: Origin;
  state: DeliveryState;
  attempts: number;
  last_error: string | null;
  refusal: string | null;
  service_id: string | null;
  request_id: string | null;
  created_at: number;
  updated_at: number;
  delivered_at: number | null;
}

interface DowntimeDbRow {
  key: string;
  kind: 'manual' | 'detector';
  machine: string;
  external_id: string;
  started_at: number;
  reason: string | null;
  text: string | null;
  machine_variables: string | null;
  origin: Origin;
  created_at: number;
}

function toEntry(r: OutboxDbRow): OutboxEntry {
  return {
    seq: r.seq,
    externalId: r.external_id,
    type: r.type,
    occurredAt: r.occurred_at,
    startedAt: r.started_at,
    endedAt: r.ended_at,
    text: r.text,
    machineVariables: JSON.parse(r.machine_variables) as string[],
    site: JSON.parse(r.site) as SiteRef,
    machine: r.machine,
    origin: r.origin,
    state: r.state,
    attempts: r.attempts,
    lastError: r.last_error,
    refusal: r.refusal,
    serviceId: r.service_id,
    requestId: r.request_id,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    deliveredAt: r.delivered_at,
  };
}

function toDowntime(r: DowntimeDbRow): DowntimeRow {
  return {
    key: r.key,
    kind: r.kind,
    machine: r.machine,
    externalId: r.external_id,
    startedAt: r.started_at,
    reason: r.reason,
    text: r.text,
    machineVariables: r.machine_variables === null ? null : (JSON.parse(r.machine_variables) as string[]),
    origin: r.origin,
    createdAt: r.created_at,
  };
}

/** Finished entries the full policy deletes per step (oldest first). */
const ROOM_STEP = 500;

export class AnnotationStore {
  private readonly st: Record<string, Statement>;

  constructor(private readonly db: StoreOwner) {
    this.st = {
      insert: db.prepare(
        `INSERT INTO annotation_outbox (external_id, type, occurred_at, started_at, ended_at, text, machine_variables, site, machine, origin, state, attempts, created_at, updated_at)
         VALUES (@external_id, @type, @occurred_at, @started_at, @ended_at, @text, @machine_variables, @site, @machine, @origin, 'queued', 0, @now, @now)
         ON CONFLICT (external_id) DO NOTHING`,
      ),
      byExternalId: db.prepare('SELECT * FROM annotation_outbox WHERE external_id = ?'),
      bySeq: db.prepare('SELECT * FROM annotation_outbox WHERE seq = ?'),
      nextQueued: db.prepare("SELECT * FROM annotation_outbox WHERE state = 'queued' ORDER BY seq LIMIT 1"),
      delivered: db.prepare(
        "UPDATE annotation_outbox SET state = 'delivered', attempts = attempts + 1, service_id = ?, request_id = ?, last_error = ?, updated_at = ?, delivered_at = ? WHERE seq = ? AND state = 'queued'",
      ),
      refused: db.prepare("UPDATE annotation_outbox SET state = 'refused', attempts = attempts + 1, refusal = ?, request_id = ?, updated_at = ? WHERE seq = ? AND state = 'queued'"),
      attemptFailed: db.prepare("UPDATE annotation_outbox SET attempts = attempts + 1, last_error = ?, request_id = ?, updated_at = ? WHERE seq = ? AND state = 'queued'"),
      recent: db.prepare('SELECT * FROM annotation_outbox ORDER BY seq DESC LIMIT ?'),
      recentByState: db.prepare('SELECT * FROM annotation_outbox WHERE state = ? ORDER BY seq DESC LIMIT ?'),
      recentByMachine: db.prepare('SELECT * FROM annotation_outbox WHERE machine = ? ORDER BY seq DESC LIMIT ?'),
      counts: db.prepare('SELECT state, count(*) AS n FROM annotation_outbox GROUP BY state'),
      oldestQueued: db.prepare("SELECT min(created_at) FROM annotation_outbox WHERE state = 'queued'").pluck(true),
      purge: db.prepare("DELETE FROM annotation_outbox WHERE state != 'queued' AND updated_at < ?"),
      dropFinished: db.prepare("DELETE FROM annotation_outbox WHERE seq IN (SELECT seq FROM annotation_outbox WHERE state != 'queued' ORDER BY updated_at LIMIT ?)"),
      operatorOverlapping: db.prepare(
        `SELECT external_id, text, started_at, ended_at FROM annotation_outbox WHERE machine = ? AND type = 'range' AND origin IN (${OPERATOR_ORIGINS.map((x) => `'${x}'`).join(', ')}) AND started_at < ? AND ended_at > ? ORDER BY started_at LIMIT 20`,
      ),
      downtimeGet: db.prepare('SELECT * FROM downtimes WHERE key = ?'),
      downtimeAll: db.prepare('SELECT * FROM downtimes ORDER BY started_at'),
      downtimeInsert: db.prepare(
        `INSERT INTO downtimes (key, kind, machine, external_id, started_at, reason, text, machine_variables, origin, created_at)
         VALUES (@key, @kind, @machine, @external_id, @started_at, @reason, @text, @machine_variables, @origin, @created_at)`,
      ),
      downtimeDelete: db.prepare('DELETE FROM downtimes WHERE key = ?'),
      downtimeUpdate: db.prepare('UPDATE downtimes SET reason = ?, text = ? WHERE key = ?'),
    };
    db.fullPolicy({ text: 'delivered and refused annotations go first, oldest first; queued ones are kept and new ones refused', makeRoom: () => this.dropFinished() });
  }

  /**
   * Queues an annotation. When its external_id is already in the outbox (a caller replaying its
   * own idempotency key, or a redelivered MQTT message) nothing is written and the existing entry
   * is returned with `created: false`. A new one is admitted only with room (A4: StoreFullError
   * otherwise), unless `completes` says it ends something admitted before. Joins a write running
   * now (a gap's annotations, a batch of condition events).
   */
  insert(a: NewAnnotation, now: number, options: { completes?: boolean } = {}): { entry: OutboxEntry; created: boolean } {
    const existing = this.byExternalId(a.externalId);
    if (existing) return { entry: existing, created: false };
    if (!options.completes) this.db.admit('a new annotation');
    return this.db.write(
      'queue an annotation',
      () => {
        const r = this.st.insert.run(this.params(a, now));
        const entry = this.byExternalId(a.externalId)!;
        return { entry, created: r.changes === 1 };
      },
      { join: true },
    );
  }

  /** Whether a new annotation fits now (A4). */
  hasRoom(): boolean {
    return this.db.hasRoom();
  }

  byExternalId(externalId: string): OutboxEntry | undefined {
    const r = this.st.byExternalId.get(externalId) as OutboxDbRow | undefined;
    return r && toEntry(r);
  }

  bySeq(seq: number): OutboxEntry | undefined {
    const r = this.st.bySeq.get(seq) as OutboxDbRow | undefined;
    return r && toEntry(r);
  }

  /** The oldest queued entry: delivery follows creation order. */
  nextQueued(): OutboxEntry | undefined {
    const r = this.st.nextQueued.get() as OutboxDbRow | undefined;
    return r && toEntry(r);
  }

  markDelivered(seq: number, serviceId: string | null, requestId: string | null, note: string | null, now: number): void {
    this.db.write('an annotation delivered', () => this.st.delivered.run(serviceId, requestId ?? null, note, now, now, seq));
  }

  markRefused(seq: number, refusal: string, requestId: string | null, now: number): void {
    this.db.write('an annotation refused', () => this.st.refused.run(refusal, requestId ?? null, now, seq));
  }

  markAttemptFailed(seq: number, error: string, requestId: string | null, now: number): void {
    this.db.write('an annotation attempt failed', () => this.st.attemptFailed.run(error, requestId ?? null, now, seq));
  }

  recent(limit: number, filter: { state?: DeliveryState; machine?: string } = {}): OutboxEntry[] {
    const rows = filter.state
      ? this.st.recentByState.all(filter.state, limit)
      : filter.machine
        ? this.st.recentByMachine.all(filter.machine, limit)
        : this.st.recent.all(limit);
    return (rows as OutboxDbRow[]).map(toEntry);
  }

  counts(): Record<DeliveryState, number> {
    const out: Record<DeliveryState, number> = { queued: 0, delivered: 0, refused: 0 };
    for (const r of this.st.counts.all() as Array<{ state: DeliveryState; n: number }>) out[r.state] = r.n;
    return out;
  }

  oldestQueuedCreatedAt(): number | null {
    return (this.st.oldestQueued.get() as number | null) ?? null;
  }

  /** Deletes delivered and refused entries last changed before `before` (A2). Returns the count. */
  purge(before: number): number {
    return this.db.write('purge the outbox', () => this.st.purge.run(before).changes);
  }

  /** Operator range annotations of `machine` overlapping (from, to) (reconcile.ts), at most 20. */
  operatorOverlapping(machine: string, from: number, to: number): Array<{ externalId: string; text: string; startedAt: number; endedAt: number }> {
    return (this.st.operatorOverlapping.all(machine, to, from) as Array<{ external_id: string; text: string; started_at: number; ended_at: number }>).map((r) => ({ externalId: r.external_id, text: r.text, startedAt: r.started_at, endedAt: r.ended_at }));
  }

  /** The full policy (A4): finished entries, oldest first, until below 90 % of the bound; returns how many. */
  private dropFinished(): number {
    return this.db.deleteOldest('delete the oldest finished annotations (store.annotations_max_bytes)', ROOM_STEP, () => this.st.dropFinished.run(ROOM_STEP).changes);
  }

  // ---------------------------------------------------------------- downtimes

  downtime(key: string): DowntimeRow | undefined {
    const r = this.st.downtimeGet.get(key) as DowntimeDbRow | undefined;
    return r && toDowntime(r);
  }

  downtimes(): DowntimeRow[] {
    return (this.st.downtimeAll.all() as DowntimeDbRow[]).map(toDowntime);
  }

  /** Records an open downtime; false when one is already open under `key`. */
  openDowntime(d: DowntimeRow): boolean {
    if (this.st.downtimeGet.get(d.key)) return false;
    this.db.admit('a new downtime');
    return this.db.write('open a downtime', () => {
      if (this.st.downtimeGet.get(d.key)) return false;
      this.st.downtimeInsert.run({
        key: d.key,
        kind: d.kind,
        machine: d.machine,
        external_id: d.externalId,
        started_at: d.startedAt,
        reason: d.reason,
        text: d.text,
        machine_variables: d.machineVariables === null ? null : JSON.stringify(d.machineVariables),
        origin: d.origin,
        created_at: d.createdAt,
      });
      return true;
    });
  }

  updateDowntimeNotes(key: string, reason: string | null, text: string | null): void {
    this.db.write('note a downtime', () => this.st.downtimeUpdate.run(reason, text, key));
  }

  /** Forgets an open downtime without an annotation (cancelled, or shorter than a rule's minimum). */
  discardDowntime(key: string): boolean {
    return this.db.write('discard a downtime', () => this.st.downtimeDelete.run(key).changes === 1);
  }

  /**
   * Closes an open downtime into its range annotation, atomically (A3). Returns null when the
   * downtime was no longer open (closed by a concurrent request).
   */
  closeDowntime(key: string, annotation: NewAnnotation, now: number): { entry: OutboxEntry; created: boolean } | null {
    return this.db.write('close a downtime', () => {
      if (this.st.downtimeDelete.run(key).changes !== 1) return null;
      const r = this.st.insert.run(this.params(annotation, now));
      return { entry: this.byExternalId(annotation.externalId)!, created: r.changes === 1 };
    });
  }

  private params(a: NewAnnotation, now: number) {
    return {
      external_id: a.externalId,
      type: a.type,
      occurred_at: a.occurredAt,
      started_at: a.startedAt,
      ended_at: a.endedAt,
      text: a.text,
      machine_variables: JSON.stringify(a.machineVariables),
      site: JSON.stringify(a.site),
      machine: a.machine,
      origin: a.origin,
      now,
    };
  }
}
