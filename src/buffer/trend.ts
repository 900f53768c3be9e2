import type { Statement } from 'better-sqlite3';
import { endianness } from 'node:os';
import { deflateRawSync, inflateRawSync } from 'node:zlib';
import type { Logger } from 'pino';
import type { Clock } from '../core/clock.js';
import { describeError } from '../core/errors.js';
import type { MaintenanceTask } from './maintenance.js';
import type { OwnerSchema } from '../store/migrations.js';
import type { StoreOwner } from '../store/store.js';
import type { VariableDictionary } from './variables.js';

/**
 * The trend room: the console's recent minimum, maximum and sample count per variable and time
 * bucket, kept in the buffer file so that a variable's trend survives a restart of the gateway.
 * It holds no sample: losing some of it loses nothing the service is owed, so B1–B4
 * do not concern it.
 *
 * The console's value ring (src/console/value-ring.ts, through src/console/trend-keeper.ts) is the
 * source. On this room's schedule it hands over the buckets that closed since its last take; the
 * room writes them as a few rows (one per part of the variables: a blob of those variables'
 * buckets, variables by their integer ids of `variables`), and at the next start the console reads
 * the rows back into its ring before the first sample comes (`read`).
 *
 * Keeps:
 *  T1  Off the acknowledgement path (B7): a take runs on the maintenance schedule, once per bucket
 *      that closes (TREND_GRACE_MS after its end), never inside a commit. It goes through the
 *      variables a part at a time, a part sized so that collecting, encoding and writing it fit a
 *      slice (its cost per variable is measured); each part is one row, written in a transaction
 *      of its own with the prunes. When encoding used the slice up, the write waits for the next
 *      slice. So a power cut or a SIGKILL loses the open bucket and those closed since the last
 *      take (one, now and then two); a clean stop writes the open buckets too (`finish`).
 *  T2  Bounded: rows whose newest bucket is older than TREND_KEEP_MS are pruned; the rows' blobs
 *      together stay under the trend's own space, store.trend_max_bytes (the oldest rows go first;
 *      a part larger than that alone is not written, said once in the log). The trend is an owner
 *      of the file of its own (src/store/README.md), so it never takes the samples' room and they
 *      never take its. Rows: one per part of a take, about TREND_KEEP_MS / bucket takes kept
 *      (src/buffer/README.md, bench/trend-flush.ts).
 *  T3  The newest row wins: a (variable, bucket) written again (a bucket written open at a stop and
 *      completed after the restart, a bucket that got late samples) is read from the newest row
 *      holding it: `read` visits rows newest first.
 *  T4  B8: the list of rows kept in memory (for the prunes and the cap) changes only after the
 *      transaction that changed the file has committed. A failed write is dropped (cosmetic: the
 *      buckets of that part are not kept) and the next take is tried on schedule.
 */

/** Rows are kept while their newest bucket is younger than this: the ring's 10 minutes and one more. */
export const TREND_KEEP_MS = 11 * 60_000;
/** The trend's space when the store sets none (store.trend_max_bytes' default; T2). */
export const TREND_MAX_BYTES = 64 * 1024 * 1024;
/**
 * A bucket is taken this long after its end: samples reach the console's ring after their commit
 * (commit_interval, at most 1 s) and a poll's timestamp may lag its arrival a little.
 */
export const TREND_GRACE_MS = 2_000;

/** Blob format: a version byte, then the columns below deflated (raw). */
const FORMAT = 1;
/** Share of a slice a part is planned to take (collect, encode, write). */
const PART_SHARE = 0.7;
/** Fewest and most variables in a part. */
const MIN_PART = 1_000;
const MAX_PART = 100_000;
/** Starting cost of a part, in ms per variable; measured after. */
const INITIAL_MS_PER_VARIABLE = 0.002;
/** Starting size of a part, in blob bytes per variable; measured after. */
const INITIAL_BYTES_PER_VARIABLE = 16;
/** A part is planned to take at most this share of the trend's cap (a small max_bytes: small parts, the newest kept). */
const PART_OF_CAP = 0.25;
const HAS_LAST = 1;
const FLAT = 2; // min == max: one value stored

/**
 * One bucket handed over or read back: the variable, the bucket's start (epoch ms), its minimum,
 * maximum and sample count, and the variable's last value and its time when this is the newest
 * bucket of the variable in its take (NaN otherwise).
 */
export type TrendVisit = (variable: string, start: number, min: number, max: number, count: number, last: number, lastTs: number) => void;

/** A bucket handed over: as TrendVisit, after `key`, the variable's number in the source (see `take`). */
export type TrendPut = (key: number, variable: string, start: number, min: number, max: number, count: number, last: number, lastTs: number) => void;

/** Where the kept buckets come from (the console's ring). */
export interface TrendSource {
  /** The length of a bucket in ms; a bucket starts at a multiple of it (epoch ms). */
  readonly bucketMs: number;
  /**
   * Visits the variables numbered `from` to `from + limit − 1` (a small integer each, stable while
   * the source lives: the ring's index) and calls `put` for each of their buckets that is over by
   * `closedBefore` (epoch ms: it ended at or before; Infinity at a stop: every bucket held, open
   * ones too) and was not handed over before, or got samples since. Returns how many variables it
   * visited: fewer than `limit` once there are no more.
   */
  take(closedBefore: number, from: number, limit: number, put: TrendPut): number;
}

interface KeptRow {
  id: number;
  toTs: number;
  bytes: number;
}

interface Staged {
  bucketMs: number;
  fromTs: number;
  toTs: number;
  n: number;
  data: Buffer;
}

export interface TrendOptions {
  clock: Clock;
  logger: Logger;
  dict: VariableDictionary;
  /** After a write (a checkpoint falls due). */
  wrote: () => void;
}

const TREND_STEP = `
  -- The console's recent trend (src/buffer/trend.ts): one row per part of a take of closed
  -- buckets, the min/max/count of those variables' buckets in one blob. No samples. Pruned after
  -- ~11 minutes.
  -- IF NOT EXISTS: tests make a file of an earlier schema by setting user_version back on a
  -- current one, which has the table already.
  CREATE TABLE IF NOT EXISTS trend (
    id        INTEGER PRIMARY KEY,
    bucket_ms INTEGER NOT NULL,
    from_ts   INTEGER NOT NULL,           -- start of the oldest bucket in data (epoch ms)
    to_ts     INTEGER NOT NULL,           -- start of the newest
    n         INTEGER NOT NULL,           -- buckets in data
    data      BLOB    NOT NULL
  );
`;

/** The trend's table in the gateway's file (src/store/README.md): step 6 of its schema. */
export const TREND_SCHEMA: OwnerSchema = { owner: 'trend', tables: ['trend'], steps: [{ version: 6, up: TREND_STEP }] };

export class TrendStore implements MaintenanceTask {
  readonly name = 'trend';
  private source: TrendSource | null = null;
  /** Bucket number (of the source's bucketMs) up to which buckets were taken by the clock. */
  private takenUpTo = -Infinity;
  /** The take going on: what is over, and the next variable to visit. */
  private pass: { closedBefore: number; from: number } | null = null;
  private staged: Staged | null = null;
  /** Measured cost of a part (collect, encode, write), ms per variable visited. */
  private msPerVariable = INITIAL_MS_PER_VARIABLE;
  /** Measured blob bytes per variable visited. */
  private bytesPerVariable = INITIAL_BYTES_PER_VARIABLE;
  /** The source's variable number → its id in `variables` (0: not looked up yet). */
  private ids = new Int32Array(1_024);
  private rows: KeptRow[];
  private closed = false;
  private warnedTooLarge = false;
  private readonly cols = new Columns();
  private readonly st: { insert: Statement; remove: Statement; recent: Statement; row: Statement };

  constructor(
    private readonly db: StoreOwner,
    private readonly o: TrendOptions,
  ) {
    this.st = {
      insert: db.prepare('INSERT INTO trend (bucket_ms, from_ts, to_ts, n, data) VALUES (?, ?, ?, ?, ?)'),
      remove: db.prepare('DELETE FROM trend WHERE id = ?'),
      recent: db.prepare('SELECT id FROM trend WHERE bucket_ms = ? AND to_ts >= ? ORDER BY id DESC').pluck(true),
      row: db.prepare('SELECT data FROM trend WHERE id = ?').pluck(true),
    };
    this.rows = db.prepare('SELECT id, to_ts AS toTs, length(data) AS bytes FROM trend ORDER BY id').all() as KeptRow[];
    // T2: every write keeps the blobs under the space, so there is nothing to refuse or to delete after.
    db.fullPolicy({ text: 'the oldest trend rows go first; a part larger than the whole space is not kept' });
  }

  /** Blob bytes kept (T2). */
  get bytes(): number {
    let n = 0;
    for (const r of this.rows) n += r.bytes;
    return n;
  }

  /** Rows kept. */
  get rowCount(): number {
    return this.rows.length;
  }

  /** The cap on the blobs' bytes (T2). */
  get capBytes(): number {
    const max = this.db.maxBytes;
    return Number.isFinite(max) ? max : TREND_MAX_BYTES;
  }

  /** The kept rows of `bucketMs` whose newest bucket starts at or after `since`, newest first (T3). */
  rowIds(bucketMs: number, since: number): number[] {
    return this.st.recent.all(bucketMs, since) as number[];
  }

  /**
   * Visits the buckets of row `id` that start at or after `since`; a row that cannot be read (or
   * is gone) is skipped, said in the log when damaged.
   */
  readRow(id: number, bucketMs: number, since: number, visit: TrendVisit): void {
    const data = this.st.row.get(id) as Buffer | undefined;
    if (!data) return;
    try {
      decode(data, bucketMs, (id, bucket, min, max, count, last, lastTs) => {
        const start = bucket * bucketMs;
        if (start < since) return;
        const name = this.o.dict.knownName(id);
        if (name !== undefined) visit(name, start, min, max, count, last, lastTs);
      });
    } catch (err) {
      this.o.logger.warn({ err: describeError(err), row: id }, 'a kept trend row cannot be read; its buckets are left out of the console trend');
    }
  }

  /** Every kept bucket of `bucketMs` from `since` on, newest row first (tests, tools). */
  read(bucketMs: number, since: number, visit: TrendVisit): void {
    for (const id of this.rowIds(bucketMs, since)) this.readRow(id, bucketMs, since, visit);
  }

  /**
   * Keeps `source`'s buckets from now on (T1). Returns the stop: it writes the buckets not yet
   * kept, open ones too, and lets go of the source.
   */
  keep(source: TrendSource): () => void {
    if (this.source) throw new Error('the trend is kept from one source at a time');
    this.source = source;
    this.takenUpTo = -Infinity;
    this.pass = null;
    this.ids = new Int32Array(1_024);
    return () => {
      if (this.source === source) this.finish();
    };
  }

  due(): boolean {
    if (this.closed) return false;
    if (this.staged || this.pass) return true;
    const now = this.o.clock.now();
    if (this.source && this.closedUpTo(this.source, now) > this.takenUpTo) return true;
    return this.rows.some((r) => r.toTs < now - TREND_KEEP_MS);
  }

  slice(deadline: number): boolean {
    const now = this.o.clock.now();
    const started = performance.now();
    const source = this.source;
    let visited = 0;
    if (!this.staged && source) {
      const upTo = this.closedUpTo(source, now);
      if (!this.pass && upTo > this.takenUpTo) {
        this.takenUpTo = upTo;
        this.pass = { closedBefore: upTo * source.bucketMs, from: 0 };
      }
      if (this.pass) {
        const limit = Math.min(this.partBytesLimit(), Math.round(Math.min(MAX_PART, Math.max(MIN_PART, ((deadline - started) * PART_SHARE) / this.msPerVariable))));
        visited = this.collect(source, this.pass.closedBefore, this.pass.from, limit);
        this.pass = visited < limit ? null : { closedBefore: this.pass.closedBefore, from: this.pass.from + visited };
        // Encoding used the slice up: the write is the next slice's one transaction (B7).
        if (this.staged && performance.now() >= deadline) return true;
      }
    }
    this.write(now);
    if (visited >= MIN_PART) this.msPerVariable = 0.7 * this.msPerVariable + (0.3 * (performance.now() - started)) / visited;
    return this.pass !== null;
  }

  describe(): string {
    return this.staged ? `writing ${this.staged.n} trend buckets` : this.pass ? `taking trend buckets from variable ${this.pass.from}` : 'pruning the trend';
  }

  /** Writes what the source has not handed over yet, open buckets too, and lets go of it (a stop). */
  finish(): void {
    const source = this.source;
    this.source = null;
    if (!source || this.closed) return;
    try {
      if (this.staged) this.write(this.o.clock.now());
      // Every variable: the take going on is overtaken by this one (open buckets too).
      this.pass = null;
      const limit = Math.min(MAX_PART, this.partBytesLimit());
      for (let from = 0, visited = limit; visited === limit; from += visited) {
        visited = this.collect(source, Infinity, from, limit);
        this.write(this.o.clock.now());
      }
    } catch (err) {
      this.staged = null;
      this.o.logger.warn({ err: describeError(err) }, 'the console trend could not be written at the stop; it starts empty next time');
    }
  }

  /** The buffer closes: nothing more is written. */
  close(): void {
    this.closed = true;
    this.source = null;
    this.staged = null;
    this.pass = null;
  }

  /** Most variables in a part for its blob to stay within PART_OF_CAP of the cap (at least 100). */
  private partBytesLimit(): number {
    return Math.max(100, Math.floor((this.capBytes * PART_OF_CAP) / this.bytesPerVariable));
  }

  /** The last bucket number that is over by the clock (TREND_GRACE_MS after its end). */
  private closedUpTo(source: TrendSource, now: number): number {
    return Math.floor((now - TREND_GRACE_MS) / source.bucketMs);
  }

  /** Stages one part of a take (nothing when it has no bucket); returns the variables visited. */
  private collect(source: TrendSource, closedBefore: number, from: number, limit: number): number {
    const c = this.cols;
    const bucketMs = source.bucketMs;
    c.reset();
    const visited = source.take(closedBefore, from, limit, (key, variable, start, min, max, count, last, lastTs) => {
      const id = this.idOf(key, variable);
      // Every variable of the ring was committed, so it has an id; one that has not is left out.
      if (id > 0 && count > 0) c.push(id, Math.floor(start / bucketMs), bucketMs, min, max, count, last, lastTs);
    });
    if (c.n === 0) return visited;
    const data = encode(c);
    if (visited >= 100) this.bytesPerVariable = 0.7 * this.bytesPerVariable + (0.3 * data.length) / visited;
    let lo = Infinity;
    let hi = -Infinity;
    for (let i = 0; i < c.n; i++) {
      if (c.bucket[i] < lo) lo = c.bucket[i];
      if (c.bucket[i] > hi) hi = c.bucket[i];
    }
    this.staged = { bucketMs, fromTs: lo * bucketMs, toTs: hi * bucketMs, n: c.n, data };
    return visited;
  }

  /** The `variables` id of the source's variable `key` (0: none), looked up once. */
  private idOf(key: number, variable: string): number {
    if (key >= this.ids.length) {
      let size = this.ids.length * 2;
      while (size <= key) size *= 2;
      const ids = new Int32Array(size);
      ids.set(this.ids);
      this.ids = ids;
    }
    let id = this.ids[key];
    if (id === 0) {
      id = this.o.dict.find(variable) ?? 0;
      this.ids[key] = id;
    }
    return id;
  }

  /** The staged part (if it may be written) and the prunes, in one transaction (T1, T2, T4). */
  private write(now: number): void {
    const staged = this.staged;
    this.staged = null;
    const cap = this.capBytes;
    let insert = staged;
    if (insert && insert.data.length > cap) {
      if (!this.warnedTooLarge) {
        this.warnedTooLarge = true;
        this.o.logger.warn(
          { trend_bytes: insert.data.length, cap_bytes: cap, buckets: insert.n },
          `the console trend is not kept across restarts: one part of ${insert.n} buckets needs ${insert.data.length} bytes, more than the trend may use (store.trend_max_bytes: ${cap} bytes)`,
        );
      }
      insert = null;
    }
    const drop = new Set<number>();
    let kept = 0;
    for (const r of this.rows) {
      if (r.toTs < now - TREND_KEEP_MS) drop.add(r.id);
      else kept += r.bytes;
    }
    if (insert) {
      for (const r of this.rows) {
        if (kept + insert.data.length <= cap) break;
        if (drop.has(r.id)) continue;
        drop.add(r.id);
        kept -= r.bytes;
      }
    }
    if (!insert && drop.size === 0) return;
    const row = insert;
    const id = this.db.write('a trend write', () => {
      for (const d of drop) this.st.remove.run(d);
      return row ? Number(this.st.insert.run(row.bucketMs, row.fromTs, row.toTs, row.n, row.data).lastInsertRowid) : 0;
    });
    // T4: after the commit.
    this.rows = this.rows.filter((r) => !drop.has(r.id));
    if (row) this.rows.push({ id, toTs: row.toTs, bytes: row.data.length });
    this.o.wrote();
  }
}

const INT32 = 2 ** 31;

/**
 * The records of one part, reused from part to part (typed arrays grown as needed). A record
 * whose bucket is 2^31 buckets or more from the one before is left out, and a last value whose
 * time is 2^31 ms or more from its bucket's start is left out (neither happens with real clocks).
 */
class Columns {
  n = 0;
  id = new Int32Array(1_024);
  bucket = new Float64Array(1_024);
  min = new Float32Array(1_024);
  max = new Float32Array(1_024);
  count = new Uint16Array(1_024);
  last = new Float64Array(1_024);
  /** Last value's time − bucket start (ms); NaN: no last value. */
  lastOff = new Float64Array(1_024);

  reset(): void {
    this.n = 0;
  }

  push(id: number, bucket: number, bucketMs: number, min: number, max: number, count: number, last: number, lastTs: number): void {
    if (this.n > 0 && !(Math.abs(bucket - this.bucket[this.n - 1]) < INT32)) return;
    if (this.n === this.id.length) this.grow();
    const i = this.n++;
    this.id[i] = id;
    this.bucket[i] = bucket;
    this.min[i] = min;
    this.max[i] = max;
    this.count[i] = Math.min(65_535, count);
    const off = Math.floor(lastTs - bucket * bucketMs);
    const ok = Math.abs(off) < INT32 && Number.isFinite(last);
    this.last[i] = ok ? last : NaN;
    this.lastOff[i] = ok ? off : NaN;
  }

  private grow(): void {
    const size = this.id.length * 2;
    const more = <T extends Int32Array | Float64Array | Float32Array | Uint16Array>(a: T, make: new (n: number) => T): T => {
      const b = new make(size);
      b.set(a);
      return b;
    };
    this.id = more(this.id, Int32Array);
    this.bucket = more(this.bucket, Float64Array);
    this.min = more(this.min, Float32Array);
    this.max = more(this.max, Float32Array);
    this.count = more(this.count, Uint16Array);
    this.last = more(this.last, Float64Array);
    this.lastOff = more(this.lastOff, Float64Array);
  }
}

const LITTLE_ENDIAN = endianness() === 'LE';
const HEADER = 24;

/**
 * Where each column of a body starts: a 24-byte header (u32 n; u32 m1, the records with max ≠ min;
 * u32 m2, the records with a last value; u32 0; f64 the first record's bucket number), then
 * f64 last [m2] · i32 bucket delta [n] · i32 id delta [n] · i32 last ts − bucket start [m2] ·
 * f32 min [n] · f32 max [m1] · u16 count [n] · u8 flags [n], each aligned to its width.
 */
function layout(n: number, m1: number, m2: number) {
  const last = HEADER;
  const bucket = last + 8 * m2;
  const id = bucket + 4 * n;
  const lastOff = id + 4 * n;
  const min = lastOff + 4 * m2;
  const max = min + 4 * n;
  const count = max + 4 * m1;
  const flags = count + 2 * n;
  return { last, bucket, id, lastOff, min, max, count, flags, size: flags + n };
}

/** Typed-array views of a body's columns (`buf` holds the body from offset 0). */
function columns(buf: ArrayBuffer, n: number, m1: number, m2: number) {
  const l = layout(n, m1, m2);
  return {
    last: new Float64Array(buf, l.last, m2),
    bucket: new Int32Array(buf, l.bucket, n),
    id: new Int32Array(buf, l.id, n),
    lastOff: new Int32Array(buf, l.lastOff, m2),
    min: new Float32Array(buf, l.min, n),
    max: new Float32Array(buf, l.max, m1),
    count: new Uint16Array(buf, l.count, n),
    flags: new Uint8Array(buf, l.flags, n),
  };
}

/** The columns to or from little-endian, the order on disk (nothing to do on little-endian hosts). */
function swapColumns(cols: ReturnType<typeof columns>): void {
  if (LITTLE_ENDIAN) return;
  const bytes = (a: ArrayBufferView) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);
  bytes(cols.last).swap64();
  for (const a of [cols.bucket, cols.id, cols.lastOff, cols.min, cols.max]) bytes(a).swap32();
  bytes(cols.count).swap16();
}

/**
 * One part as a blob: FORMAT, then the body deflated (raw). Values of one kind sit together, and
 * ids and buckets are differences to the record before (mostly 1 and 0), so the compressor finds
 * the repetition; typed arrays keep encoding and decoding a few ns per record.
 */
function encode(c: Columns): Buffer {
  const n = c.n;
  let m1 = 0;
  let m2 = 0;
  for (let i = 0; i < n; i++) {
    if (c.max[i] !== c.min[i]) m1++;
    if (c.lastOff[i] === c.lastOff[i]) m2++;
  }
  const buf = new ArrayBuffer(layout(n, m1, m2).size);
  const head = new DataView(buf, 0, HEADER);
  head.setUint32(0, n, true);
  head.setUint32(4, m1, true);
  head.setUint32(8, m2, true);
  head.setFloat64(16, c.bucket[0], true);
  const out = columns(buf, n, m1, m2);
  let a = 0;
  let b = 0;
  let prevId = 0;
  let prevBucket = c.bucket[0];
  for (let i = 0; i < n; i++) {
    out.bucket[i] = c.bucket[i] - prevBucket;
    prevBucket = c.bucket[i];
    out.id[i] = c.id[i] - prevId;
    prevId = c.id[i];
    out.min[i] = c.min[i];
    out.count[i] = c.count[i];
    let flags = 0;
    if (c.max[i] !== c.min[i]) out.max[a++] = c.max[i];
    else flags |= FLAT;
    if (c.lastOff[i] === c.lastOff[i]) {
      out.last[b] = c.last[i];
      out.lastOff[b++] = c.lastOff[i];
      flags |= HAS_LAST;
    }
    out.flags[i] = flags;
  }
  swapColumns(out);
  const body = deflateRawSync(new Uint8Array(buf), { level: 1 });
  const blob = Buffer.allocUnsafe(1 + body.length);
  blob[0] = FORMAT;
  body.copy(blob, 1);
  return blob;
}

class TrendFormatError extends Error {}

/** Calls `visit` for every record of a blob written by `encode` (bucket numbers, last value's time in ms). */
function decode(data: Uint8Array, bucketMs: number, visit: (id: number, bucket: number, min: number, max: number, count: number, last: number, lastTs: number) => void): void {
  if (data.length < 1 || data[0] !== FORMAT) throw new TrendFormatError(`unknown trend format ${data[0]}`);
  const inflated = inflateRawSync(data.subarray(1));
  if (inflated.length < HEADER) throw new TrendFormatError('trend blob ends early');
  // A copy at offset 0 of its own buffer, so that every column is aligned.
  const buf = new Uint8Array(inflated).buffer;
  const head = new DataView(buf, 0, HEADER);
  const n = head.getUint32(0, true);
  const m1 = head.getUint32(4, true);
  const m2 = head.getUint32(8, true);
  if (m1 > n || m2 > n || layout(n, m1, m2).size !== buf.byteLength) throw new TrendFormatError('trend blob has the wrong size');
  const cols = columns(buf, n, m1, m2);
  swapColumns(cols);
  let a = 0;
  let b = 0;
  let id = 0;
  let bucket = head.getFloat64(16, true);
  for (let i = 0; i < n; i++) {
    const flags = cols.flags[i];
    bucket += cols.bucket[i];
    id += cols.id[i];
    const min = cols.min[i];
    let max = min;
    if ((flags & FLAT) === 0) {
      if (a >= m1) throw new TrendFormatError('trend blob: more maxima than counted');
      max = cols.max[a++];
    }
    let last = NaN;
    let lastTs = NaN;
    if (flags & HAS_LAST) {
      if (b >= m2) throw new TrendFormatError('trend blob: more last values than counted');
      last = cols.last[b];
      lastTs = bucket * bucketMs + cols.lastOff[b++];
    }
    visit(id, bucket, min, max, cols.count[i], last, lastTs);
  }
}
