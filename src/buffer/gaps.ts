import type { Statement } from 'better-sqlite3';
import type { Metrics } from '../core/metrics.js';
import type { OwnerSchema } from '../store/migrations.js';
import type { StoreOwner } from '../store/store.js';

/**
 * The gap ledger (issue 14 §2): a durable record of every interval in which a source, or some of
 * its variables, produced no data when it should have. It lives in the gateway's file (table
 * `gaps`, an owner of its own: src/store/README.md), so a power cut neither loses a gap nor
 * forgets that history already filled it.
 *
 * INVARIANTS
 *  G1  At most one open gap (to_ts NULL) per (source, scope). `open` returns the open one instead
 *      of starting a second, so a flapping state cannot double-count an interval.
 *  G2  `filled` is `pending` only while an OPC UA historical backfill may still fill the gap; the
 *      backfill sets yes / partial / no. A pending gap survives a restart and is read again then.
 *  G3  A gap is annotated (issue 14 §3) at most once: the annotation ids are written in the same
 *      transaction as the outbox rows (see src/annotations/gap-annotator.ts).
 *  G4  `gateway_gap_seconds_total{reason}` grows once per gap, when it closes, by its duration.
 *  G5  Bounded by store.gaps_max_bytes: after a write that went over it the oldest closed gaps are
 *      deleted (open ones stay); a new gap is refused (StoreFullError) only when open gaps alone
 *      fill it. The ledger never takes the samples' room (their bound is their own).
 *
 * Times are epoch ms of the gateway clock (the moment a source went away, or came back); the
 * backfill itself uses the device's source timestamps.
 */

export const GAP_REASONS = ['gateway_stopped', 'source_disconnected', 'device_error', 'buffer_full', 'values_lost'] as const;
export type GapReason = (typeof GAP_REASONS)[number];
export type GapFilled = 'no' | 'partial' | 'yes' | 'pending';

/** Which part of a source a gap is about: the whole source, one device of it, or the buffer's drop episode. */
export type GapScope = 'source' | `device:${string}` | 'buffer';

export interface GapRow {
  id: number;
  source: string;
  scope: GapScope;
  /** null: all of the source. */
  variables: string[] | null;
  from: number;
  to: number | null;
  reason: GapReason;
  filled: GapFilled;
  /** Values the historical backfill put into the buffer for this gap. */
  filledValues: number;
  /** Why the gap is not (fully) filled, in words, or null. */
  note: string | null;
  /** External ids of the range annotations made from this gap (more than one beyond 100 variables). */
  annotationIds: string[] | null;
  createdAt: number;
  updatedAt: number;
}

interface DbRow {
  id: number;
  source: string;
  scope: string;
  variables: string | null;
  from_ts: number;
  to_ts: number | null;
  reason: GapReason;
  filled: GapFilled;
  filled_values: number;
  note: string | null;
  annotation_ids: string | null;
  created_at: number;
  updated_at: number;
}

/** Step 4 of the file's schema: the gap ledger and the per-variable last committed timestamp (src/buffer/last-committed.ts, the samples owner's). */
const GAPS_STEP = `
  -- Per machine variable, the newest sample timestamp ever committed (written in the commit
  -- transaction; only grows). Where an OPC UA historical backfill starts after a gap.
  CREATE TABLE last_committed (variable TEXT PRIMARY KEY, ts INTEGER NOT NULL) WITHOUT ROWID;

  -- Intervals in which a source (or some of its variables) produced no data (issue 14 §2).
  CREATE TABLE gaps (
    id             INTEGER PRIMARY KEY,
    source         TEXT    NOT NULL,
    scope          TEXT    NOT NULL,           -- source | device:<name> | buffer
    variables      TEXT,                       -- JSON list of mvr_ ids, NULL = all of the source
    from_ts        INTEGER NOT NULL,           -- epoch ms
    to_ts          INTEGER,                    -- epoch ms, NULL while open
    reason         TEXT    NOT NULL,           -- gateway_stopped | source_disconnected | device_error | buffer_full
    filled         TEXT    NOT NULL,           -- no | partial | yes | pending
    filled_values  INTEGER NOT NULL DEFAULT 0,
    note           TEXT,
    annotation_ids TEXT,                       -- JSON list of external ids, NULL until annotated
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL
  );
  CREATE INDEX gaps_by_source ON gaps (source, scope, to_ts);
`;

/** The gap ledger's tables in the gateway's file (src/store/README.md). */
export const GAPS_SCHEMA: OwnerSchema = { owner: 'gaps', tables: ['gaps'], steps: [{ version: 4, up: GAPS_STEP }] };

function toRow(r: DbRow): GapRow {
  return {
    id: r.id,
    source: r.source,
    scope: r.scope as GapScope,
    variables: r.variables === null ? null : (JSON.parse(r.variables) as string[]),
    from: r.from_ts,
    to: r.to_ts,
    reason: r.reason,
    filled: r.filled,
    filledValues: r.filled_values,
    note: r.note,
    annotationIds: r.annotation_ids === null ? null : (JSON.parse(r.annotation_ids) as string[]),
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

const ALIVE_KEY = 'gaps.alive_at';

/**
 * One gap as `GET /api/gaps` serves it (a contract with the web console; keep the shape):
 * `annotation` is null until the gap was annotated; its `state` is the outbox state (queued,
 * delivered, refused; `unknown` once the outbox entry was purged after annotations.retention).
 */
export interface GapView {
  id: number;
  source: string;
  variables: string[] | null;
  from: number;
  to: number | null;
  reason: GapReason;
  filled: GapFilled;
  /** Why the gap is not (fully) filled, in words (an OPC UA backfill that could not read it all), or null. */
  note: string | null;
  annotation: { state: string; external_id: string } | null;
}

/** Closed gaps the full policy deletes per step (oldest first). */
const ROOM_STEP = 500;

export class GapLedger {
  private readonly st: Record<string, Statement>;

  constructor(
    private readonly db: StoreOwner,
    private readonly metrics: Metrics | null = null,
  ) {
    this.st = {
      insert: db.prepare(
        `INSERT INTO gaps (source, scope, variables, from_ts, to_ts, reason, filled, created_at, updated_at)
         VALUES (@source, @scope, @variables, @from, @to, @reason, @filled, @now, @now)`,
      ),
      openFor: db.prepare('SELECT * FROM gaps WHERE source = ? AND scope = ? AND to_ts IS NULL ORDER BY id DESC LIMIT 1'),
      byId: db.prepare('SELECT * FROM gaps WHERE id = ?'),
      close: db.prepare('UPDATE gaps SET to_ts = ?, updated_at = ? WHERE id = ? AND to_ts IS NULL'),
      extend: db.prepare('UPDATE gaps SET from_ts = min(from_ts, ?), to_ts = CASE WHEN to_ts IS NULL THEN NULL ELSE max(to_ts, ?) END, updated_at = ? WHERE id = ?'),
      setFilled: db.prepare('UPDATE gaps SET filled = ?, filled_values = filled_values + ?, note = ?, updated_at = ? WHERE id = ?'),
      pending: db.prepare("SELECT * FROM gaps WHERE source = ? AND filled = 'pending' ORDER BY from_ts"),
      listOpen: db.prepare('SELECT * FROM gaps WHERE to_ts IS NULL ORDER BY id DESC LIMIT ?'),
      listAll: db.prepare('SELECT * FROM gaps ORDER BY id DESC LIMIT ?'),
      countOpen: db.prepare('SELECT count(*) FROM gaps WHERE to_ts IS NULL').pluck(true),
      annotatable: db.prepare("SELECT * FROM gaps WHERE to_ts IS NOT NULL AND annotation_ids IS NULL AND filled IN ('no', 'partial') AND to_ts - from_ts >= ? ORDER BY id LIMIT 100"),
      setAnnotations: db.prepare('UPDATE gaps SET annotation_ids = ?, updated_at = ? WHERE id = ? AND annotation_ids IS NULL'),
      outboxState: db.prepare('SELECT state FROM annotation_outbox WHERE external_id = ?').pluck(true),
      getMeta: db.prepare('SELECT value FROM meta WHERE key = ?').pluck(true),
      setMeta: db.prepare('INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value'),
      dropClosed: db.prepare('DELETE FROM gaps WHERE id IN (SELECT id FROM gaps WHERE to_ts IS NOT NULL ORDER BY id LIMIT ?)'),
    };
    // store.gaps_max_bytes (src/store/README.md S5): the oldest closed gaps go; open ones stay.
    db.fullPolicy({ text: 'the oldest closed gaps are deleted; open gaps are kept', afterWrite: true, makeRoom: () => this.dropOldestClosed() });
  }

  /**
   * Opens a gap, or returns the one already open for (source, scope) (G1). `to` may be given for a
   * gap known only after the fact (a buffer drop episode); it is then recorded closed. Throws
   * StoreFullError when open gaps alone fill the ledger's space.
   */
  open(g: { source: string; scope?: GapScope; variables: readonly string[] | null; from: number; to?: number; reason: GapReason; filled: 'no' | 'pending' }, now: number): GapRow {
    const scope = g.scope ?? 'source';
    return this.db.write('open a gap', (tx) => {
      const existing = g.to === undefined ? (this.st.openFor.get(g.source, scope) as DbRow | undefined) : undefined;
      if (existing) return toRow(existing);
      this.db.admit(`a new gap of ${g.source}`);
      const id = Number(
        this.st.insert.run({ source: g.source, scope, variables: g.variables === null ? null : JSON.stringify([...g.variables]), from: Math.trunc(g.from), to: g.to === undefined ? null : Math.trunc(g.to), reason: g.reason, filled: g.filled, now }).lastInsertRowid,
      );
      const row = toRow(this.st.byId.get(id) as DbRow);
      tx.onCommit(() => {
        if (row.to !== null) this.countClosed(row);
        this.refreshGauge();
      });
      return row;
    });
  }

  /** The open gap of (source, scope), if any. */
  openGap(source: string, scope: GapScope = 'source'): GapRow | undefined {
    const r = this.st.openFor.get(source, scope) as DbRow | undefined;
    return r && toRow(r);
  }

  /** Closes the open gap of (source, scope) at `to`; returns it, or undefined when none was open. */
  closeOpen(source: string, scope: GapScope, to: number, now: number): GapRow | undefined {
    return this.db.write('close a gap', (tx) => {
      const r = this.st.openFor.get(source, scope) as DbRow | undefined;
      if (!r) return undefined;
      this.st.close.run(Math.max(r.from_ts, Math.trunc(to)), now, r.id);
      const row = toRow(this.st.byId.get(r.id) as DbRow);
      tx.onCommit(() => {
        this.countClosed(row);
        this.refreshGauge();
      });
      return row;
    });
  }

  /** Widens a gap (a buffer drop episode that keeps dropping). */
  extend(id: number, from: number, to: number, now: number): void {
    this.db.write('widen a gap', () => this.st.extend.run(Math.trunc(from), Math.trunc(to), now, id));
  }

  get(id: number): GapRow | undefined {
    const r = this.st.byId.get(id) as DbRow | undefined;
    return r && toRow(r);
  }

  /** Gaps of `source` an OPC UA backfill has still to fill (G2), oldest first. */
  pending(source: string): GapRow[] {
    return (this.st.pending.all(source) as DbRow[]).map(toRow);
  }

  /** Records what the historical backfill achieved for a gap (G2). */
  setFilled(id: number, filled: Exclude<GapFilled, 'pending'>, values: number, note: string | null, now: number): void {
    const before = this.get(id);
    this.db.write('record a gap\'s backfill', () => this.st.setFilled.run(filled, values, note, now, id));
    if (before && before.filled === 'pending' && (filled === 'yes' || filled === 'partial')) this.metrics?.gapFilled.inc({ result: filled });
  }

  list(options: { state?: 'open' | 'all'; limit?: number } = {}): GapRow[] {
    const limit = Math.max(1, Math.min(10_000, Math.trunc(options.limit ?? 100)));
    return ((options.state === 'open' ? this.st.listOpen : this.st.listAll).all(limit) as DbRow[]).map(toRow);
  }

  /** The API shape of a gap (GapView). With several annotations (a split beyond 100 variables) the least advanced state is shown. */
  view(g: GapRow): GapView {
    let annotation: GapView['annotation'] = null;
    if (g.annotationIds && g.annotationIds.length > 0) {
      const states = g.annotationIds.map((id) => (this.st.outboxState.get(id) as string | undefined) ?? 'unknown');
      const state = states.includes('refused') ? 'refused' : states.includes('queued') ? 'queued' : states.includes('unknown') ? 'unknown' : 'delivered';
      annotation = { state, external_id: g.annotationIds[0] };
    }
    return { id: g.id, source: g.source, variables: g.variables, from: g.from, to: g.to, reason: g.reason, filled: g.filled, note: g.note, annotation };
  }

  openCount(): number {
    return this.st.countOpen.get() as number;
  }

  /** Closed gaps not filled by history, at least `minMs` long, not yet annotated (G3). */
  annotatable(minMs: number): GapRow[] {
    return (this.st.annotatable.all(minMs) as DbRow[]).map(toRow);
  }

  /** Records the annotations made from a gap; false when it was annotated already (G3). Joins a write running now. */
  setAnnotations(id: number, externalIds: readonly string[], now: number): boolean {
    return this.db.write('record a gap\'s annotations', () => this.st.setAnnotations.run(JSON.stringify([...externalIds]), now, id).changes === 1, { join: true });
  }

  /**
   * Records the annotations made from a gap and, in the same transaction, writes their outbox rows
   * (`writeOutbox`: the annotation store's inserts, which join this write), so a gap is annotated
   * at most once (G3). False, with nothing written, when it was annotated already.
   */
  annotate(id: number, externalIds: readonly string[], now: number, writeOutbox: () => void): boolean {
    return this.db.write('annotate a gap', () => {
      if (!this.setAnnotations(id, externalIds, now)) return false;
      writeOutbox();
      return true;
    });
  }

  /** The full policy (G5): the oldest closed gaps, until the ledger is below 90 % of its bound; returns how many. */
  private dropOldestClosed(): number {
    return this.db.deleteOldest('delete the oldest closed gaps (store.gaps_max_bytes)', ROOM_STEP, () => this.st.dropClosed.run(ROOM_STEP).changes);
  }

  // ------------------------------------------------------------ the gateway's own life

  /** The last time the running gateway said it was alive (heartbeat or clean stop), or null. */
  lastAlive(): number | null {
    const v = this.st.getMeta.get(ALIVE_KEY) as string | undefined;
    return v === undefined ? null : Number(v);
  }

  heartbeat(now: number): void {
    this.db.write('the gateway\'s heartbeat', () => this.st.setMeta.run(ALIVE_KEY, String(Math.trunc(now))));
  }

  refreshGauge(): void {
    this.metrics?.gapsOpen.set(this.openCount());
  }

  private countClosed(row: GapRow): void {
    if (row.to === null) return;
    this.metrics?.gapSeconds.inc({ reason: row.reason }, Math.max(0, (row.to - row.from) / 1000));
  }
}
