import type { Statement } from 'better-sqlite3';
import { toIsoUtc } from '../../core/time.js';
import { decodeChunkInto, type DecodedChunk } from '../chunks/codec.js';
import { chunkSamples, type ChunkRow, type ChunkStore } from '../chunks/store.js';
import { fromRowValue, ROW_VALUE_JSON_SQL } from '../row-value.js';
import type { Tally } from '../tally.js';
import type { BufferedRow, ImportReader, SeqRange } from '../types.js';
import type { VariableDictionary } from '../variables.js';
import type { StatementSource } from '../../store/store.js';

/**
 * The import reader: a seq range's samples, rows and sealed, in seq order, as import-file items
 * (interface §4.7) or as rows. Reads only.
 *
 * Keeps B3 for its callers: the range it reads is held by an import job, so nothing renumbers or
 * re-encodes its samples while a reader walks it, and item i of a file is the i-th sample of
 * `readRange` (a job's error index names a sample).
 */
export class SampleReader {
  private readonly st: { oldestBetween: Statement };

  constructor(
    private readonly db: StatementSource,
    private readonly o: { store: ChunkStore; tally: Pick<Tally, 'sealed'>; dict: Pick<VariableDictionary, 'nameOf'> },
  ) {
    this.st = { oldestBetween: db.prepare('SELECT seq, var, ts, value FROM samples WHERE seq > ? AND seq < ? ORDER BY seq ASC LIMIT ?').raw(true) };
  }

  /**
   * Reads a range as import-file items, serialized by SQLite: `nextBlock()` returns up to `rows`
   * items as one JSON text (`{...},{...}`) with the seq of the last one, so building a file
   * allocates one string per block instead of an array, two numbers and a string per row (which
   * kept the garbage collector busy and RSS high: bench/memory.ts). `itemsAfter` returns single
   * items, for the block that meets the file's size limit.
   *
   * Exactness: `strftime('%Y-%m-%dT%H:%M:%fZ', ts / 1000.0, 'unixepoch')` equals
   * `Date.toISOString()` (checked on 10^6 random times 1970-2099, and by test/uplink/import-file),
   * and SQLite >= 3.47 (bundled 3.53) writes a REAL as text that reads back as the same double.
   */
  importReader(range: SeqRange, idField: string, rows = 1_000): ImportReader {
    const item = `'{"timestamp":"' || strftime('%Y-%m-%dT%H:%M:%fZ', s.ts / 1000.0, 'unixepoch') || '",' || json_quote(@field) || ':' || json_quote(v.name) || ',"value":' || ${ROW_VALUE_JSON_SQL('s.value')} || '}'`;
    const block = this.db.prepare(
      `SELECT string_agg(item, ',' ORDER BY seq) AS text, count(*) AS n, max(seq) AS last FROM (SELECT s.seq AS seq, ${item} AS item FROM samples s JOIN variables v ON v.id = s.var WHERE s.seq > @lo AND s.seq <= @hi ORDER BY s.seq LIMIT @rows)`,
    );
    const store = this.o.store;
    let lo = range.from - 1;
    let done = false;
    const fieldJson = JSON.stringify(idField);
    const names = new Map<number, string>();
    const jsItem = (varId: number, ts: number, value: number): string => {
      let name = names.get(varId);
      if (name === undefined) names.set(varId, (name = JSON.stringify(this.o.dict.nameOf(varId))));
      return `{"timestamp":"${toIsoUtc(ts)}",${fieldJson}:${name},"value":${jsonNumber(value)}}`;
    };
    // The chunk being serialized, decoded once and handed out `rows` items per block. A whole
    // chunk per block (up to MAX_CHUNK_SAMPLES items, ~400 kB of text) kept thousands of item
    // strings alive at once, so the young generation's scavenges promoted most of them and the
    // joined text went straight to the large-object space: ~120 MB of old-generation garbage per
    // 128 MB file, which V8 lets pile up before a full GC (bench/memory.ts, online phase).
    // Keeping it across calls is safe: the range is held, so nothing re-encodes its samples (B3).
    let cur: { c: ChunkRow; d: DecodedChunk; i: number; end: number } | null = null;
    // The reader's own decode arrays: `cur.d` views them, and the next chunk is decoded only once
    // `cur` is done (decodeChunkInto).
    const decoded: DecodedChunk = { ts: new Float64Array(0), values: new Float64Array(0) };
    return {
      nextBlock: () => {
        while (!done) {
          if (!cur) {
            // Rows up to the next chunk come from SQLite's serializer; a chunk is decoded and
            // serialized here.
            const c = this.o.tally.sealed > 0 ? store.firstAfter(lo, range.to + 1) : undefined;
            const rowsHi = c ? Math.min(range.to, c.seq_from - 1) : range.to;
            if (rowsHi > lo) {
              const r = block.get({ field: idField, lo, hi: rowsHi, rows }) as { text: string | null; n: number; last: number | null };
              if (r.n > 0 && r.text !== null && r.last !== null) {
                const from = lo;
                lo = r.last;
                if (!c && r.n < rows) done = true;
                return { text: r.text, count: r.n, afterSeq: from, lastSeq: r.last };
              }
            }
            if (!c) {
              done = true;
              return null;
            }
            // Its samples with seqs in (lo, range.to]: indexes i .. end − 1.
            cur = { c, d: decodeChunkInto(c.data, decoded), i: Math.max(0, lo + 1 - c.seq_from), end: Math.min(c.n, range.to - c.seq_from + 1) };
          }
          const { c, d } = cur;
          const stop = Math.min(cur.end, cur.i + rows);
          const parts: string[] = [];
          for (let i = cur.i; i < stop; i++) parts.push(jsItem(c.var, d.ts[i], d.values[i]));
          const from = lo;
          cur.i = stop;
          if (stop >= cur.end) {
            lo = Math.max(lo, Math.min(range.to, c.seq_from + c.n - 1));
            cur = null;
            if (lo >= range.to) done = true;
          } else lo = c.seq_from + stop - 1;
          if (parts.length > 0) return { text: parts.join(','), count: parts.length, afterSeq: from, lastSeq: c.seq_from + stop - 1 };
        }
        return null;
      },
      itemsAfter: (afterSeq: number, n: number) => {
        const out: Array<[number, string]> = [];
        for (const x of this.iterateRange(afterSeq + 1, range.to)) {
          if (out.length >= n) break;
          out.push([x.seq, jsItem(x.varId, x.ts, x.value)]);
        }
        return out;
      },
    };
  }

  /** Every sample with a seq in [from, to], rows and sealed, in seq order. */
  *iterateRange(from: number, to: number): Generator<{ seq: number; varId: number; ts: number; value: number }> {
    let lo = from - 1;
    while (lo < to) {
      const c = this.o.tally.sealed > 0 ? this.o.store.firstAfter(lo, to + 1) : undefined;
      const rowsHi = c ? Math.min(to + 1, c.seq_from) : to + 1; // rows strictly between lo and rowsHi
      while (rowsHi > lo + 1) {
        const rows = this.st.oldestBetween.all(lo, rowsHi, 5_000) as Array<[number, number, number, number | Buffer]>;
        if (rows.length === 0) break;
        for (const [seq, varId, ts, value] of rows) yield { seq, varId, ts, value: fromRowValue(value) };
        lo = rows[rows.length - 1][0];
        if (rows.length < 5_000) break;
      }
      if (!c) return;
      for (const x of chunkSamples(c, lo + 1, to)) yield { seq: x.seq, varId: c.var, ts: x.ts, value: x.value };
      lo = Math.max(lo, Math.min(to, c.seq_from + c.n - 1));
    }
  }

  /** Reads samples of a range (rows and sealed) in seq order, `chunk` at a time. */
  *readRange(range: SeqRange, chunk = 5_000): Generator<BufferedRow[]> {
    let batch: BufferedRow[] = [];
    for (const x of this.iterateRange(range.from, range.to)) {
      batch.push({ seq: x.seq, variable: this.o.dict.nameOf(x.varId), ts: x.ts, value: x.value });
      if (batch.length >= chunk) {
        yield batch;
        batch = [];
      }
    }
    if (batch.length > 0) yield batch;
  }
}

/** A double as JSON text that reads back as the same double (−0 keeps its sign). */
export function jsonNumber(v: number): string {
  return Object.is(v, -0) ? '-0' : String(v);
}
