import type { Database, Statement } from 'better-sqlite3';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { SamplesRefusedError, type AppendOptions, type BufferRefusal, type Sample } from '../core/sample.js';
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

/**
 * The buffer's side of setting samples aside (README.md B2c): inside the caller's transaction,
 * each sample is recorded in set_aside and removed from the queue, as a row or from its chunk
 * (chunks/store.ts re-encodes the rest of a chunk over its remaining seqs).
 */
export class SetAsideMove {
  private readonly st: { insert: Statement; deleteSeq: Statement };

  constructor(
    db: Database,
    private readonly store: ChunkStore,
  ) {
    this.st = {
      insert: db.prepare('INSERT INTO set_aside (variable, ts, value, path, reason, detail, job_id, request_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)'),
      deleteSeq: db.prepare('DELETE FROM samples WHERE seq = ?'),
    };
  }

  /** Call inside a transaction; returns how many left the rows and how many left chunks. */
  moveInTransaction(rows: readonly BufferedRow[], info: SetAsideInfo, now: number): { fromRows: number; fromChunks: number } {
    const detail = info.detail === undefined ? null : JSON.stringify(info.detail);
    let fromRows = 0;
    const sealed: number[] = [];
    for (const r of rows) {
      this.st.insert.run(r.variable, r.ts, toRowValue(r.value), info.path, info.reason, detail, info.jobId ?? null, info.requestId ?? null, now);
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

export class SetAsideStore {
  constructor(private readonly db: Database) {}

  summary(): SetAsideSummary {
    const total = this.db.prepare('SELECT count(*) FROM set_aside').pluck(true).get() as number;
    const by = this.db
      .prepare('SELECT variable, count(*) AS count, max(reason) AS reason FROM set_aside GROUP BY variable ORDER BY count DESC LIMIT 50')
      .all() as Array<{ variable: string | null; count: number; reason: string }>;
    return { total, by_variable: by };
  }

  /** Samples set aside in all. */
  total(): number {
    return this.db.prepare('SELECT count(*) FROM set_aside').pluck(true).get() as number;
  }

  /** Set-aside samples per variable (the console's variables page), at most `limit` variables. */
  countsByVariable(limit = 50_000): Array<{ variable: string | null; n: number }> {
    return this.db.prepare('SELECT variable, count(*) AS n FROM set_aside GROUP BY variable LIMIT ?').all(limit) as Array<{ variable: string | null; n: number }>;
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
    return this.db.prepare(`DELETE FROM set_aside WHERE ${where}`).run(...args).changes;
  }

  /** Sample rows matching `filter` (job-level notes have none). */
  count(filter: SetAsideFilter): number {
    const { where, args } = whereOf(filter);
    return this.db.prepare(`SELECT count(*) FROM set_aside WHERE (${where}) AND variable IS NOT NULL`).pluck(true).get(...args) as number;
  }

  /**
   * Puts the matching samples back into the running gateway's queue, in steps of `stepRows`
   * (issue 21 §1). Each step's rows are committed by the buffer first and only then deleted from
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
      const rows = read.all(...args, afterId, maxId, stepRows) as Array<[number, string, number, number | Buffer]>;
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
      remove.run(...args, afterId, lastId);
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
    const getNext = this.db.prepare("SELECT value FROM meta WHERE key = 'next_seq'").pluck(true);
    const maxSeq = this.db.prepare('SELECT max(seq) FROM samples').pluck(true);
    const maxChunkSeq = this.db.prepare('SELECT max(seq_from + n - 1) FROM chunks').pluck(true);
    const setNext = this.db.prepare("INSERT INTO meta (key, value) VALUES ('next_seq', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value");
    const varId = this.db.prepare('SELECT id FROM variables WHERE name = ?').pluck(true);
    const insVar = this.db.prepare('INSERT INTO variables (name) VALUES (?)');
    const ins = this.db.prepare('INSERT INTO samples (seq, var, ts, value) VALUES (?, ?, ?, ?)');
    const del = this.db.prepare('DELETE FROM set_aside WHERE id = ?');
    let afterId = 0;
    let requeued = 0;
    const moveStep = this.db.transaction((): number => {
      const rows = step.all(...args, afterId, maxId, stepRows) as Array<[number, string, number, number | Buffer]>;
      if (rows.length === 0) return 0;
      // A seq is never reused (B3), also not one of a sealed chunk.
      let seq = Math.max(Number((getNext.get() as string | undefined) ?? 1), ((maxSeq.get() as number | null) ?? 0) + 1, ((maxChunkSeq.get() as number | null) ?? 0) + 1);
      for (const [rowId, variable, ts, value] of rows) {
        const id = (varId.get(variable) as number | undefined) ?? Number(insVar.run(variable).lastInsertRowid);
        ins.run(seq++, id, ts, value);
        del.run(rowId);
      }
      setNext.run(String(seq));
      afterId = rows[rows.length - 1][0];
      return rows.length;
    });
    for (;;) {
      const n = moveStep.immediate();
      requeued += n;
      if (n < stepRows) return requeued;
    }
  }

  /** Matching sample rows in (afterId, maxId], oldest first, as [id, variable, ts, value]. */
  private stepQuery(where: string): Statement {
    return this.db.prepare(`SELECT id, variable, ts, value FROM set_aside WHERE (${where}) AND variable IS NOT NULL AND id > ? AND id <= ? ORDER BY id LIMIT ?`).raw(true);
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
