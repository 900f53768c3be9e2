import type { Database } from 'better-sqlite3';
import { fromRowValue, toRowValue } from './row-value.js';

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

  list(options: { limit?: number; variable?: string } = {}): SetAsideRow[] {
    const limit = Math.max(1, Math.min(10_000, options.limit ?? 100));
    const rows = (options.variable
      ? this.db.prepare('SELECT * FROM set_aside WHERE variable = ? ORDER BY id LIMIT ?').all(options.variable, limit)
      : this.db.prepare('SELECT * FROM set_aside ORDER BY id LIMIT ?').all(limit)) as Array<Omit<SetAsideRow, 'detail'> & { detail: string | null }>;
    return rows.map((r) => ({ ...r, value: r.value === null ? null : fromRowValue(r.value as number | Buffer), detail: r.detail === null ? null : safeParse(r.detail) }));
  }

  /** The rows matching `filter` that carry a sample (job-level notes have none). */
  select(filter: SetAsideFilter): Array<{ id: number; variable: string; ts: number; value: number }> {
    const { where, args } = whereOf(filter);
    const rows = this.db.prepare(`SELECT id, variable, ts, value FROM set_aside WHERE ${where} AND variable IS NOT NULL ORDER BY id`).all(...args) as Array<{ id: number; variable: string; ts: number; value: number | Buffer }>;
    return rows.map((r) => ({ ...r, value: fromRowValue(r.value) }));
  }

  /** Deletes matching rows; returns how many. */
  drop(filter: SetAsideFilter): number {
    const { where, args } = whereOf(filter);
    return this.db.prepare(`DELETE FROM set_aside WHERE ${where}`).run(...args).changes;
  }

  deleteIds(ids: number[]): void {
    const del = this.db.prepare('DELETE FROM set_aside WHERE id = ?');
    this.db.transaction(() => {
      for (const id of ids) del.run(id);
    })();
  }

  /**
   * Requeue straight into the file, for when no gateway runs: samples go back into `samples` with
   * new seqs from meta.next_seq and leave set_aside, in one transaction (I2, I3 of sample-buffer.ts).
   */
  requeueInFile(filter: SetAsideFilter): number {
    const rows = this.select(filter);
    if (rows.length === 0) return 0;
    const getNext = this.db.prepare("SELECT value FROM meta WHERE key = 'next_seq'").pluck(true);
    const maxSeq = this.db.prepare('SELECT max(seq) FROM samples').pluck(true);
    const setNext = this.db.prepare("INSERT INTO meta (key, value) VALUES ('next_seq', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value");
    const varId = this.db.prepare('SELECT id FROM variables WHERE name = ?').pluck(true);
    const insVar = this.db.prepare('INSERT INTO variables (name) VALUES (?)');
    const ins = this.db.prepare('INSERT INTO samples (seq, var, ts, value) VALUES (?, ?, ?, ?)');
    const del = this.db.prepare('DELETE FROM set_aside WHERE id = ?');
    this.db
      .transaction(() => {
        let seq = Math.max(Number((getNext.get() as string | undefined) ?? 1), ((maxSeq.get() as number | null) ?? 0) + 1);
        for (const r of rows) {
          const id = (varId.get(r.variable) as number | undefined) ?? Number(insVar.run(r.variable).lastInsertRowid);
          ins.run(seq++, id, r.ts, toRowValue(r.value));
          del.run(r.id);
        }
        setNext.run(String(seq));
      })
      .immediate();
    return rows.length;
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
