import type { Statement } from 'better-sqlite3';
import type { Clock } from '../../core/clock.js';
import type { SeqRange } from '../types.js';
import type { StoreOwner } from '../../store/store.js';

/**
 * The durable record of import jobs (interface §4.7, §2.9): which seq range of the buffer each
 * job covers and how far it got. A restart reads it to resume: a job whose id was recorded is
 * polled again; a job that never got an id is dropped from the ledger, so its rows return to the
 * queue and are packed into a new file (re-sending what the service may already have is harmless,
 * it replaces values with the same (variable, timestamp)).
 *
 * States:
 *   building   the file is being written (range reserved)
 *   uploading  the file is being sent
 *   submitted  the service accepted the file and gave a job id; we poll it
 *   retry      the job failed once; the same range is rebuilt and sent once more
 *   finishing  the job finished and its rejected items are set aside; the range's rows are being
 *              deleted (in slices; a restart finishes the deletion)
 */
export type LedgerState = 'building' | 'uploading' | 'submitted' | 'retry' | 'finishing';

export interface LedgerEntry {
  id: number;
  range: SeqRange;
  state: LedgerState;
  itemCount: number | null;
  filePath: string | null;
  fileBytes: number | null;
  jobId: string | null;
  attempts: number;
  lastError: string | null;
  createdAt: number;
  updatedAt: number;
}

interface Row {
  id: number;
  seq_from: number;
  seq_to: number;
  state: LedgerState;
  item_count: number | null;
  file_path: string | null;
  file_bytes: number | null;
  job_id: string | null;
  attempts: number;
  last_error: string | null;
  created_at: number;
  updated_at: number;
}

const toEntry = (r: Row): LedgerEntry => ({
  id: r.id,
  range: { from: r.seq_from, to: r.seq_to },
  state: r.state,
  itemCount: r.item_count,
  filePath: r.file_path,
  fileBytes: r.file_bytes,
  jobId: r.job_id,
  attempts: r.attempts,
  lastError: r.last_error,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

export class ImportLedger {
  private readonly st: { insert: Statement; get: Statement; all: Statement; remove: Statement; ranges: Statement };

  constructor(
    private readonly db: StoreOwner,
    private readonly clock: Clock,
  ) {
    this.st = {
      insert: db.prepare('INSERT INTO import_jobs (seq_from, seq_to, state, attempts, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)'),
      get: db.prepare('SELECT * FROM import_jobs WHERE id = ?'),
      all: db.prepare('SELECT * FROM import_jobs ORDER BY id'),
      remove: db.prepare('DELETE FROM import_jobs WHERE id = ?'),
      ranges: db.prepare('SELECT seq_from AS "from", seq_to AS "to" FROM import_jobs'),
    };
  }

  create(range: SeqRange, attempts = 0): LedgerEntry {
    const now = this.clock.now();
    const id = this.db.write('record an import job', () => Number(this.st.insert.run(range.from, range.to, 'building', attempts, now, now).lastInsertRowid));
    return this.get(id)!;
  }

  get(id: number): LedgerEntry | undefined {
    const row = this.st.get.get(id) as Row | undefined;
    return row ? toEntry(row) : undefined;
  }

  all(): LedgerEntry[] {
    return (this.st.all.all() as Row[]).map(toEntry);
  }

  update(id: number, patch: Partial<{ state: LedgerState; seqTo: number; itemCount: number; filePath: string | null; fileBytes: number; jobId: string | null; attempts: number; lastError: string | null }>): void {
    const cols: string[] = [];
    const vals: unknown[] = [];
    const map: Record<string, string> = { state: 'state', seqTo: 'seq_to', itemCount: 'item_count', filePath: 'file_path', fileBytes: 'file_bytes', jobId: 'job_id', attempts: 'attempts', lastError: 'last_error' };
    for (const [k, v] of Object.entries(patch)) {
      if (v === undefined) continue;
      cols.push(`${map[k]} = ?`);
      vals.push(v);
    }
    cols.push('updated_at = ?');
    vals.push(this.clock.now(), id);
    const update = this.db.prepare(`UPDATE import_jobs SET ${cols.join(', ')} WHERE id = ?`);
    // Joins a write running now (finishing a job sets its rejected items aside in the same transaction).
    this.db.write('update an import job', () => update.run(...vals), { join: true });
  }

  remove(id: number): void {
    this.db.write('remove an import job', () => this.st.remove.run(id));
  }

  /** The seq range of every job in the ledger (holds.ts: what sealing and compaction leave alone). */
  ranges(): SeqRange[] {
    return this.st.ranges.all() as SeqRange[];
  }
}
