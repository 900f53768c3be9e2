import type { Database, Statement } from 'better-sqlite3';
import { MAX_CHUNK_SAMPLES, type ChunkStore } from './chunk-store.js';
import { fromRowValue } from './row-value.js';

/**
 * The sealer: turns the oldest rows into per-variable chunks, a seq range at a time.
 *
 * INVARIANTS:
 *
 *  L1  One transaction: the chunks are written, the rows they replace are deleted and
 *      `meta.sealed_upto` advances together, or nothing happens (a power cut leaves either all
 *      rows or all chunks, never both, never neither).
 *  L2  The caller passes a range [lo, hi] that nothing holds: no sync claim (acked-but-undeleted
 *      rows count as claimed), no import-job range (the durable ledger, not only the in-memory
 *      reservations), no sync-only range. Inside it the samples are renumbered per variable into
 *      the seqs lo, lo+1, … (chunk-store S2), which keeps I3: the range's seqs are used only by the
 *      same samples, and nothing outside it changes.
 *  L3  Rows below `sealed_upto` are never sealed again (a chunk turned back into rows for the
 *      sync path stays rows), so sealing and unsealing cannot chase each other.
 *  L4  Each chunk is checked to decode bit-exact before it is stored (chunk-codec C3).
 */

export interface SealResult {
  samples: number;
  chunks: number;
  bytes: number;
}

export class Sealer {
  private readonly st: { rows: Statement; deleteRange: Statement; setUpto: Statement; getUpto: Statement };

  constructor(
    private readonly db: Database,
    private readonly store: ChunkStore,
  ) {
    this.st = {
      rows: db.prepare('SELECT var, ts, value FROM samples WHERE seq >= ? AND seq <= ? ORDER BY seq').raw(true),
      deleteRange: db.prepare('DELETE FROM samples WHERE seq >= ? AND seq <= ?'),
      setUpto: db.prepare("INSERT INTO meta (key, value) VALUES ('sealed_upto', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value"),
      getUpto: db.prepare("SELECT value FROM meta WHERE key = 'sealed_upto'").pluck(true),
    };
  }

  /** Highest seq below which rows are never sealed (L3). */
  sealedUpto(): number {
    return Number((this.st.getUpto.get() as string | undefined) ?? 0);
  }

  /** Moves `sealed_upto` past rows that are held and will stay rows (L3); no rows change. */
  skipTo(seq: number): void {
    if (seq > this.sealedUpto()) this.st.setUpto.run(String(seq));
  }

  /** Seals every row with a seq in [lo, hi] (L1, L2: the caller checked that nothing holds them). */
  seal(lo: number, hi: number): SealResult {
    return this.db.transaction((): SealResult => {
      const byVar = new Map<number, { ts: number[]; values: number[] }>();
      let samples = 0;
      for (const [v, ts, value] of this.st.rows.iterate(lo, hi) as Iterable<[number, number, number | Buffer]>) {
        let g = byVar.get(v);
        if (!g) byVar.set(v, (g = { ts: [], values: [] }));
        g.ts.push(ts);
        g.values.push(fromRowValue(value));
        samples++;
      }
      let seq = lo;
      let chunks = 0;
      let bytes = 0;
      for (const [varId, g] of byVar) {
        for (let i = 0; i < g.ts.length; i += MAX_CHUNK_SAMPLES) {
          const end = Math.min(g.ts.length, i + MAX_CHUNK_SAMPLES);
          const whole = i === 0 && end === g.ts.length; // the usual case: no copy
          bytes += this.store.write(seq, varId, whole ? g.ts : g.ts.slice(i, end), whole ? g.values : g.values.slice(i, end)).length;
          seq += end - i;
          chunks++;
        }
      }
      this.st.deleteRange.run(lo, hi);
      this.st.setUpto.run(String(hi));
      return { samples, chunks, bytes };
    }).immediate();
  }
}
