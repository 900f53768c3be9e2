import type { Statement } from 'better-sqlite3';
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { Clock } from '../core/clock.js';
import { LogThrottle } from '../core/log-throttle.js';
import type { Metrics } from '../core/metrics.js';
import { SamplesRefusedError, type AppendOptions, type BufferRefusal, type Sample } from '../core/sample.js';
import type { OwnerSchema } from '../store/migrations.js';
import type { Store, StoreOwner } from '../store/store.js';
import type { ChunkStore } from './chunks/store.js';
import { fromRowValue, toRowValue } from './row-value.js';
import type { BufferedRow } from './types.js';

/**
 * Samples the service refused, kept for the operator (CONTRACT.md error table, "invalid payload").
 * `edge-gateway set-aside list|requeue|drop` and the local API use this; requeue puts samples back
 * in the queue, for example after a missing machine variable was created upstream.
 */
export interface SetAsideRow {
  id: number;
  variable: string | null;
  ts: number | null;
  value: number | null;
  path: 'sync' | 'import';
  reason: string;
  detail: unknown;
  job_id: string | null;
  request_id: string | null;
  created_at: number;
}

/** Which set-aside rows an operation applies to; at least one criterion is required for writes. */
export interface SetAsideFilter {
  ids?: number[];
  variable?: string;
  all?: boolean;
}

/**
 * Set-aside rows moved per requeue step. One step reads its rows, commits them to the buffer and
 * deletes them from set_aside while holding the event loop for tens of milliseconds; between
 * steps the gateway serves everything else (bench/set-aside-requeue.ts measures the longest stall).
 */
export const REQUEUE_STEP_ROWS = 10_000;

/** What a requeue achieved. */
export interface RequeueResult {
  /** Samples committed back to the queue and removed from set_aside. */
  requeued: number;
  /** Samples matching the request that are still set aside. */
  remaining: number;
  /** Why the requeue stopped early (the buffer refused a step); null when it went through. */
  refused: { code: BufferRefusal; reason: string } | null;
}

/** The buffer as a requeue sees it (SampleBuffer). */
export interface RequeueTarget {
  append(samples: readonly Sample[], options?: AppendOptions): Promise<void>;
  /** Commits what is pending now instead of at the next group-commit tick. */
  flush(): Promise<void>;
}

/** Why samples are set aside: the path that sent them and the service's answer. */
export interface SetAsideInfo {
  path: 'sync' | 'import';
  reason: string;
  detail?: unknown;
  jobId?: string;
  requestId?: string;
}

/** The set-aside samples' table in the gateway's file (made by step 1 of the samples' schema: src/buffer/schema.ts). */
export const SET_ASIDE_SCHEMA: OwnerSchema = { owner: 'set_aside', tables: ['set_aside'] };

/**
 * Setting samples aside (README.md B2c), inside the samples owner's write: each sample is recorded
 * in set_aside (the set-aside owner's part, which joins that write) and removed from the queue, as
 * a row or from its chunk (chunks/store.ts re-encodes the rest of a chunk over its remaining seqs).
 * The counts learn of the new set-aside rows once the whole write has committed (B8).
 */
export class SetAsideMove {
  private readonly st: { insert: Statement; deleteSeq: Statement };

  constructor(
    samples: StoreOwner,
    private readonly setAside: StoreOwner,
    private readonly store: ChunkStore,
    private readonly counts: SetAsideCounts,
  ) {
    this.st = {
      insert: setAside.prepare('INSERT INTO set_aside (variable, ts, value, path, reason, detail, job_id, request_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)'),
      deleteSeq: samples.prepare('DELETE FROM samples WHERE seq = ?'),
    };
  }

  /** Call inside the samples owner's write; returns how many left the rows and how many left chunks. */
  move(rows: readonly BufferedRow[], info: SetAsideInfo, now: number): { fromRows: number; fromChunks: number } {
    const detail = info.detail === undefined ? null : JSON.stringify(info.detail);
    this.setAside.write(
      'set samples aside',
      (tx) => {
        for (const r of rows) this.st.insert.run(r.variable, r.ts, toRowValue(r.value), info.path, info.reason, detail, info.jobId ?? null, info.requestId ?? null, now);
        tx.onCommit(() => this.counts.added(rows.map((r) => r.variable), info.reason));
      },
      { join: true },
    );
    let fromRows = 0;
    const sealed: number[] = [];
    for (const r of rows) {
      if (this.st.deleteSeq.run(r.seq).changes > 0) fromRows++;
      else sealed.push(r.seq);
    }
    // Items of an import job may be sealed: they leave their chunk in this transaction.
    const fromChunks = sealed.length > 0 ? this.store.removeSeqs(sealed) : 0;
    return { fromRows, fromChunks };
  }
}

export interface SetAsideSummary {
  total: number;
  by_variable: Array<{ variable: string | null; count: number; reason: string }>;
}

/**
 * How many samples are set aside, in all, per variable and per tracked reason prefix, kept in
 * memory (with thousands of unknown variables set_aside grows by thousands of rows a
 * second, and a `count(*)` for every status read took longer the longer it ran). Read once from
 * the table when first asked, then kept by every change this process makes: the gateway owns the
 * file while it runs (src/store/file/owner-lock.ts), so no other process changes set_aside meanwhile. A
 * change whose effect on the counts is not known row by row (an operator's drop or requeue)
 * forgets them; the next read counts again.
 */
export class SetAsideCounts {
  private byVariable: Map<string | null, number> | null = null;
  private all = 0;
  private readonly prefixes = new Map<string, number | null>();

  constructor(private readonly db: StoreOwner) {}

  total(): number {
    this.load();
    return this.all;
  }

  /** Samples per variable (null: job-level notes without a sample). */
  perVariable(): ReadonlyMap<string | null, number> {
    this.load();
    return this.byVariable!;
  }

  /** Samples whose reason starts with `prefix` (counted from the table the first time). */
  withReason(prefix: string): number {
    let n = this.prefixes.get(prefix);
    if (n === undefined || n === null) {
      n = this.db.prepare("SELECT count(*) FROM set_aside WHERE substr(reason, 1, ?) = ? AND variable IS NOT NULL").pluck(true).get(prefix.length, prefix) as number;
      this.prefixes.set(prefix, n);
    }
    return n;
  }

  /** Rows inserted (after their transaction committed): one per entry of `variables`. */
  added(variables: ReadonlyArray<string | null>, reason: string): void {
    this.change(variables, reason, 1);
  }

  removed(variables: ReadonlyArray<string | null>, reason: string): void {
    this.change(variables, reason, -1);
  }

  /** Rows deleted, each with its own reason (a requeue step). */
  removedRows(rows: ReadonlyArray<{ variable: string | null; reason: string }>): void {
    const byReason = new Map<string, Array<string | null>>();
    for (const r of rows) {
      const list = byReason.get(r.reason);
      if (list) list.push(r.variable);
      else byReason.set(r.reason, [r.variable]);
    }
    for (const [reason, variables] of byReason) this.change(variables, reason, -1);
  }

  /** Forget the counts: the next read counts the table again. */
  forget(): void {
    this.byVariable = null;
    for (const k of this.prefixes.keys()) this.prefixes.set(k, null);
  }

  private change(variables: ReadonlyArray<string | null>, reason: string, sign: 1 | -1): void {
    for (const [prefix, n] of this.prefixes) if (n !== null && reason.startsWith(prefix)) this.prefixes.set(prefix, n + sign * variables.filter((v) => v !== null).length);
    if (!this.byVariable) return;
    for (const v of variables) {
      const n = (this.byVariable.get(v) ?? 0) + sign;
      if (n > 0) this.byVariable.set(v, n);
      else this.byVariable.delete(v);
    }
    this.all += sign * variables.length;
  }

  private load(): void {
    if (this.byVariable) return;
    const rows = this.db.prepare('SELECT variable, count(*) FROM set_aside GROUP BY variable').raw(true).all() as Array<[string | null, number]>;
    this.byVariable = new Map(rows);
    this.all = rows.reduce((sum, [, n]) => sum + n, 0);
  }
}

/** Set-aside samples the full policy deletes per write (oldest first). */
const ROOM_STEP = 5_000;

export interface SetAsideStoreOptions {
  metrics?: Metrics | null;
  logger?: Logger | null;
  clock?: Clock | null;
}

/**
 * The set-aside samples for the operator (list, drop, requeue), an owner of the file of its own
 * with its own space, store.set_aside_max_bytes (src/store/README.md S5): after a set-aside that
 * went over it, the oldest set-aside samples are deleted and counted
 * (gateway_set_aside_dropped_samples_total{reason="store_full"}). Setting aside itself never
 * fails for lack of room: a refused sample never goes back to the queue.
 */
export class SetAsideStore {
  readonly counts: SetAsideCounts;
  private readonly db: StoreOwner;
  private readonly samples: StoreOwner;
  private readonly log: LogThrottle | null;

  constructor(
    store: Store,
    private readonly o: SetAsideStoreOptions = {},
  ) {
    this.db = store.owner('set_aside');
    this.samples = store.owner('samples');
    this.counts = new SetAsideCounts(this.db);
    this.log = o.logger ? new LogThrottle(o.logger, 60_000, () => o.clock?.monotonic() ?? performance.now()) : null;
    this.db.fullPolicy({ text: 'the oldest set-aside samples are deleted (counted in gateway_set_aside_dropped_samples_total{reason="store_full"})', afterWrite: true, makeRoom: () => this.dropOldest() });
  }

  /** The owner of the set_aside table, for the buffer's moves (SetAsideMove). */
  get owner(): StoreOwner {
    return this.db;
  }

  summary(): SetAsideSummary {
    const total = this.counts.total();
    const by = this.db
      .prepare('SELECT variable, count(*) AS count, max(reason) AS reason FROM set_aside GROUP BY variable ORDER BY count DESC LIMIT 50')
      .all() as Array<{ variable: string | null; count: number; reason: string }>;
    return { total, by_variable: by };
  }

  /** Samples set aside in all. */
  total(): number {
    return this.counts.total();
  }

  /** Set-aside samples per variable (the console's variables page). */
  countsByVariable(): ReadonlyMap<string | null, number> {
    return this.counts.perVariable();
  }

  /**
   * Keeps at most `keep` samples whose reason starts with `prefix`, deleting the oldest beyond
   * (the samples of thousands of unknown variables must not fill the set-aside space). Returns
   * how many were deleted; at most `maxStep` per call, so one call stays short.
   */
  trimReason(prefix: string, keep: number, maxStep = 50_000): number {
    const over = this.counts.withReason(prefix) - keep;
    if (over <= 0) return 0;
    const trim = this.db.prepare('DELETE FROM set_aside WHERE id IN (SELECT id FROM set_aside WHERE substr(reason, 1, ?) = ? AND variable IS NOT NULL ORDER BY id LIMIT ?) RETURNING variable').pluck(true);
    return this.db.write('trim set-aside samples', (tx) => {
      const gone = trim.all(prefix.length, prefix, Math.min(over, maxStep)) as string[];
      tx.onCommit(() => this.counts.removed(gone, prefix));
      return gone.length;
    });
  }

  /** The full policy: deletes the oldest set-aside rows until the space is below 90 % of its bound; returns how many. */
  private dropOldest(): number {
    const drop = this.db.prepare('DELETE FROM set_aside WHERE id IN (SELECT id FROM set_aside ORDER BY id LIMIT ?) RETURNING variable, reason');
    let samples = 0;
    const removed = this.db.deleteOldest('delete the oldest set-aside samples (store.set_aside_max_bytes)', ROOM_STEP, (tx) => {
      const rows = drop.all(ROOM_STEP) as Array<{ variable: string | null; reason: string }>;
      tx.onCommit(() => {
        this.counts.removedRows(rows);
        samples += rows.filter((r) => r.variable !== null).length;
      });
      return rows.length;
    });
    if (samples > 0) this.o.metrics?.setAsideDroppedSamples.inc({ reason: 'store_full' }, samples);
    if (removed > 0) {
      this.log?.warn('store_full', { dropped: samples, set_aside_bytes: this.db.bytes, max_bytes: this.db.maxBytes }, `set-aside space full (store.set_aside_max_bytes): the oldest ${samples} set-aside samples were deleted`);
    }
    return removed;
  }

  list(options: { limit?: number; variable?: string } = {}): SetAsideRow[] {
    const limit = Math.max(1, Math.min(10_000, options.limit ?? 100));
    const rows = (options.variable
      ? this.db.prepare('SELECT * FROM set_aside WHERE variable = ? ORDER BY id LIMIT ?').all(options.variable, limit)
      : this.db.prepare('SELECT * FROM set_aside ORDER BY id LIMIT ?').all(limit)) as Array<Omit<SetAsideRow, 'detail'> & { detail: string | null }>;
    return rows.map((r) => ({ ...r, value: r.value === null ? null : fromRowValue(r.value as number | Buffer), detail: r.detail === null ? null : safeParse(r.detail) }));
  }

  /** Deletes matching rows; returns how many. */
  drop(filter: SetAsideFilter): number {
    const { where, args } = whereOf(filter);
    const del = this.db.prepare(`DELETE FROM set_aside WHERE ${where}`);
    return this.db.write('drop set-aside samples', (tx) => {
      const n = del.run(...args).changes;
      tx.onCommit(() => this.counts.forget());
      return n;
    });
  }

  /** Sample rows matching `filter` (job-level notes have none). */
  count(filter: SetAsideFilter): number {
    const { where, args } = whereOf(filter);
    return this.db.prepare(`SELECT count(*) FROM set_aside WHERE (${where}) AND variable IS NOT NULL`).pluck(true).get(...args) as number;
  }

  /**
   * Puts the matching samples back into the running gateway's queue, in steps of `stepRows`.
   * Each step's rows are committed by the buffer first and only then deleted from
   * set_aside: a crash in between leaves a duplicate, never a loss (re-sending replaces the same
   * value upstream, CONTRACT.md). When the buffer refuses a step (refuse_new on a full buffer) the
   * requeue stops there and that step and the rest stay set aside; the result says how many and why.
   *
   * Only rows present when the requeue starts are taken, so samples the service refuses again
   * while it runs are not requeued a second time by the same request.
   */
  async requeue(buffer: RequeueTarget, filter: SetAsideFilter, options: { stepRows?: number } = {}): Promise<RequeueResult> {
    const stepRows = Math.max(1, options.stepRows ?? REQUEUE_STEP_ROWS);
    const { where, args } = whereOf(filter);
    const maxId = (this.db.prepare('SELECT max(id) FROM set_aside').pluck(true).get() as number | null) ?? 0;
    const read = this.stepQuery(where);
    // The rows a step read are exactly the matching ones in (afterId, lastId]: a new set-aside row
    // gets an id above the largest present one, and lastId stays present until this delete.
    const remove = this.db.prepare(`DELETE FROM set_aside WHERE (${where}) AND variable IS NOT NULL AND id > ? AND id <= ?`);
    let afterId = 0;
    let requeued = 0;
    let refused: RequeueResult['refused'] = null;
    for (;;) {
      const rows = read.all(...args, afterId, maxId, stepRows) as Array<[number, string, number, number | Buffer, string]>;
      if (rows.length === 0) break;
      const samples: Sample[] = new Array(rows.length);
      for (let i = 0; i < rows.length; i++) samples[i] = { variable: rows[i][1], ts: rows[i][2], value: fromRowValue(rows[i][3]) };
      const lastId = rows[rows.length - 1][0];
      const committed = buffer.append(samples, { keepsRefused: true });
      await buffer.flush();
      try {
        await committed;
      } catch (err) {
        if (!(err instanceof SamplesRefusedError)) throw err;
        refused = { code: err.code, reason: err.reason };
        break;
      }
      // Each part of a step holds the event loop for tens of milliseconds; the rest of the
      // gateway runs between them.
      await nextTurn();
      const from = afterId;
      this.db.write('requeue set-aside samples', (tx) => {
        remove.run(...args, from, lastId);
        tx.onCommit(() => this.counts.removedRows(rows.map((r) => ({ variable: r[1], reason: r[4] }))));
      });
      requeued += rows.length;
      afterId = lastId;
      if (rows.length < stepRows) break;
      await nextTurn();
    }
    return { requeued, remaining: this.count(filter), refused };
  }

  /**
   * Requeue straight into the file, for when no gateway runs: samples go back into `samples` with
   * new seqs from meta.next_seq and leave set_aside, a step of `stepRows` per transaction (B2, B3
   * of src/buffer/README.md), so memory stays bounded however many are set aside.
   */
  requeueInFile(filter: SetAsideFilter, options: { stepRows?: number } = {}): number {
    const stepRows = Math.max(1, options.stepRows ?? REQUEUE_STEP_ROWS);
    const { where, args } = whereOf(filter);
    const maxId = (this.db.prepare('SELECT max(id) FROM set_aside').pluck(true).get() as number | null) ?? 0;
    const step = this.stepQuery(where);
    const samples = this.samples;
    const getNext = samples.prepare("SELECT value FROM meta WHERE key = 'next_seq'").pluck(true);
    const maxSeq = samples.prepare('SELECT max(seq) FROM samples').pluck(true);
    const maxChunkSeq = samples.prepare('SELECT max(seq_from + n - 1) FROM chunks').pluck(true);
    const setNext = samples.prepare("INSERT INTO meta (key, value) VALUES ('next_seq', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value");
    const varId = samples.prepare('SELECT id FROM variables WHERE name = ?').pluck(true);
    const insVar = samples.prepare('INSERT INTO variables (name) VALUES (?)');
    const ins = samples.prepare('INSERT INTO samples (seq, var, ts, value) VALUES (?, ?, ?, ?)');
    const del = this.db.prepare('DELETE FROM set_aside WHERE id = ?');
    let afterId = 0;
    let requeued = 0;
    // One step: the samples back into the queue (the samples owner's write) and out of set_aside
    // (the set-aside owner's part, joining it), in one transaction.
    const moveStep = (): number =>
      samples.write('requeue set-aside samples in the file', () => {
        const rows = step.all(...args, afterId, maxId, stepRows) as Array<[number, string, number, number | Buffer, string]>;
        if (rows.length === 0) return 0;
        // A seq is never reused (B3), also not one of a sealed chunk.
        let seq = Math.max(Number((getNext.get() as string | undefined) ?? 1), ((maxSeq.get() as number | null) ?? 0) + 1, ((maxChunkSeq.get() as number | null) ?? 0) + 1);
        for (const [, variable, ts, value] of rows) {
          const id = (varId.get(variable) as number | undefined) ?? Number(insVar.run(variable).lastInsertRowid);
          ins.run(seq++, id, ts, value);
        }
        setNext.run(String(seq));
        this.db.write('requeue set-aside samples in the file', () => {
          for (const r of rows) del.run(r[0]);
        }, { join: true });
        afterId = rows[rows.length - 1][0];
        return rows.length;
      });
    for (;;) {
      const n = moveStep();
      requeued += n;
      if (n < stepRows) break;
    }
    this.counts.forget();
    return requeued;
  }

  /** Matching sample rows in (afterId, maxId], oldest first, as [id, variable, ts, value, reason]. */
  private stepQuery(where: string): Statement {
    return this.db.prepare(`SELECT id, variable, ts, value, reason FROM set_aside WHERE (${where}) AND variable IS NOT NULL AND id > ? AND id <= ? ORDER BY id LIMIT ?`).raw(true);
  }
}

function whereOf(filter: SetAsideFilter): { where: string; args: unknown[] } {
  if (filter.ids && filter.ids.length > 0) return { where: `id IN (${filter.ids.map(() => '?').join(',')})`, args: filter.ids };
  if (filter.variable) return { where: 'variable = ?', args: [filter.variable] };
  if (filter.all) return { where: '1 = 1', args: [] };
  throw new Error('say which set-aside samples: ids, a variable, or all');
}

function safeParse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
