import type { Database, Statement } from 'better-sqlite3';
import type { Logger } from 'pino';
import type { Clock } from '../../core/clock.js';
import { describeError } from '../../core/errors.js';
import type { Metrics } from '../../core/metrics.js';
import { assertNotNested } from '../file/transactions.js';
import type { Holds } from '../holds.js';
import type { Tally } from '../tally.js';
import type { Sealer } from './sealer.js';
import { MAX_CHUNK_SAMPLES, type ChunkStore } from './store.js';

/**
 * When to seal and compact: rows committed at least seal_after ago are sealed a seq range at a
 * time, and a variable's small chunks are merged by compaction.
 *
 * Keeps B3: a range is sealed or compacted only when nothing holds it (Holds.all: claims,
 * reservations, sync-only and ledger ranges).
 */
export class SealSchedule {
  private sealedUpto: number;
  /** One mark per second of commits: the last seq committed then (for seal_after). */
  private marks: Array<{ seq: number; at: number }> = [];
  private lastSealCheck = 0;
  private sealBusyUntil = 0;
  /** The last tick sealed: compaction goes first on the next one if it has work (see maybeSeal). */
  private compactTurn = false;
  /** Seqs up to here were looked at by compaction and need none (sealer L5); in memory only. */
  private compactCursor = 0;
  private readonly st: { firstRowAfter: Statement };

  constructor(
    private readonly db: Database,
    private readonly o: {
      sealAfterMs: number;
      sealRows: number;
      compactSamples: number;
      logger: Logger;
      metrics: Metrics;
      clock: Clock;
      sealer: Sealer;
      store: ChunkStore;
      holds: Holds;
      tally: Tally;
      /** The last committed seq. */
      lastSeq: () => number;
    },
  ) {
    this.st = { firstRowAfter: db.prepare('SELECT seq FROM samples WHERE seq > ? AND seq < ? ORDER BY seq ASC LIMIT 1').pluck(true) };
    this.sealedUpto = o.sealer.sealedUpto();
    // Rows already in the file were committed before this start: old enough to seal (this is also
    // how a v1 file's backlog is converted in place, a step at a time).
    const last = o.lastSeq();
    if (last > this.sealedUpto) this.marks.push({ seq: last, at: o.clock.monotonic() - 2 * o.sealAfterMs - 1 });
  }

  /** After a commit that inserted rows: remembers when seqs up to the last one were committed. */
  committed(): void {
    const now = this.o.clock.monotonic();
    const last = this.marks[this.marks.length - 1];
    const seq = this.o.lastSeq();
    if (last && now - last.at < 1_000) last.seq = seq;
    else this.marks.push({ seq, at: now });
  }

  /**
   * Seals the oldest unheld rows into chunks when a full step (`sealRows` seqs) was committed at
   * least `sealAfterMs` ago, or when the oldest unsealed rows have waited twice that. At most one
   * step per second, and never more than half of the time.
   */
  maybeSeal(force = false): void {
    const now = this.o.clock.monotonic();
    if (!force && (now - this.lastSealCheck < 1_000 || now < this.sealBusyUntil)) return;
    this.lastSealCheck = now;
    if (force) {
      this.sealStep(now, true);
      return;
    }
    // Sealing first (rows cost 26 B each), but when a sealing step is due on every tick (a v1
    // backlog converted in place, ingest faster than seal_rows a second) compaction takes every
    // other one, or it would wait until the backlog is sealed and the small chunks pile up.
    if (this.compactTurn && this.compactStep()) {
      this.compactTurn = false;
      return;
    }
    if (this.sealStep(now, false)) this.compactTurn = true;
    else this.compactStep();
  }

  /** One sealing step if one is due; true when it ran (or failed trying). */
  private sealStep(now: number, force: boolean): boolean {
    while (this.marks.length > 0 && this.marks[0].seq <= this.sealedUpto) this.marks.shift();
    let eligible = 0;
    for (const m of this.marks) if (force || m.at <= now - this.o.sealAfterMs) eligible = m.seq;
    if (eligible <= this.sealedUpto) return false;
    const overdue = force || (this.marks.length > 0 && this.marks[0].at <= now - 2 * this.o.sealAfterMs);
    const range = this.nextSealRange(eligible);
    if (!range) return false;
    if (!overdue && !range.cut && range.hi - range.lo + 1 < this.o.sealRows) return false;
    const started = performance.now();
    this.o.logger.debug({ event: 'buffer_seal_started', seq_from: range.lo, seq_to: range.hi }, 'sealing rows into chunks');
    try {
      assertNotNested(this.db, 'sealing');
      const r = this.o.sealer.seal(range.lo, range.hi);
      this.sealedUpto = range.hi;
      const t = this.o.tally;
      t.rows -= r.samples;
      t.sealed += r.samples;
      t.chunks += r.chunks;
      t.chunkBytes += r.bytes;
      t.chunksSealedTotal += r.chunks;
      this.o.metrics.bufferSealedChunks.inc(r.chunks);
      const ms = performance.now() - started;
      this.sealBusyUntil = this.o.clock.monotonic() + ms;
      this.o.logger.debug({ event: 'buffer_sealed', seq_from: range.lo, seq_to: range.hi, samples: r.samples, chunks: r.chunks, bytes: r.bytes, ms: Math.round(ms) }, 'sealed rows into chunks');
    } catch (err) {
      // A full disk or a busy file: the rows stay rows and sealing is tried again later.
      this.o.logger.warn({ err: describeError(err) }, 'sealing rows into chunks failed; they stay rows and sealing is retried');
      this.sealBusyUntil = this.o.clock.monotonic() + 5_000;
    }
    return true;
  }

  /**
   * The next compaction window above `compactCursor` (sealer L5): whole chunks only, no rows, no
   * hold, at most `compactSamples` samples. `full` says it cannot grow any more.
   */
  private nextCompactWindow(): { lo: number; hi: number; before: number; after: number; samples: number; full: boolean } | null {
    const holds = this.o.holds.all(this.compactCursor);
    let from = this.compactCursor + 1;
    for (let guard = 0; guard < 1_000; guard++) {
      if (from > this.sealedUpto) return null;
      const h = holds.find((x) => x.from <= from && x.to >= from);
      if (h) {
        from = h.to + 1;
        continue;
      }
      // A chunk that starts below `from` and reaches into it is not ours to move (a job range ended inside it).
      const straddle = this.o.store.overlapping(from, from)[0];
      if (straddle && straddle.seq_from < from) {
        from = straddle.seq_from + straddle.n;
        continue;
      }
      let limit = this.sealedUpto;
      const nextHold = holds.find((x) => x.from > from);
      if (nextHold) limit = Math.min(limit, nextHold.from - 1);
      const firstRow = this.st.firstRowAfter.get(from - 1, limit + 1) as number | undefined;
      if (firstRow !== undefined && firstRow !== null) limit = firstRow - 1;
      const perVar = new Map<number, number>();
      let samples = 0;
      let before = 0;
      let lo = -1;
      let hi = -1;
      let full = false;
      for (const m of this.o.sealer.iterateChunkMeta(from, limit)) {
        if (m.seq_from + m.n - 1 > limit) break;
        if (samples + m.n > this.o.compactSamples && before > 0) {
          full = true;
          break;
        }
        if (lo < 0) lo = m.seq_from;
        hi = m.seq_from + m.n - 1;
        samples += m.n;
        before++;
        perVar.set(m.var, (perVar.get(m.var) ?? 0) + m.n);
      }
      if (before === 0) {
        // Nothing sealed here: go on at the next chunk past the row or hold that ended it.
        if (limit >= this.sealedUpto) return null;
        const next = this.o.store.firstAfter(limit, this.sealedUpto + 1);
        if (!next) return null;
        from = Math.max(limit + 1, next.seq_from);
        continue;
      }
      let after = 0;
      for (const n of perVar.values()) after += Math.ceil(n / MAX_CHUNK_SAMPLES);
      return { lo, hi, before, after, samples, full: full || limit < this.sealedUpto };
    }
    return null;
  }

  /**
   * One compaction step (sealer L5). A window that can still grow (the newest sealed samples) is
   * rewritten only when that cuts its chunks to a quarter, so it is not redone on every sealing
   * step; a window bounded by its size (or a hold or row) when it saves a quarter, and then the
   * cursor moves past it for good in this process.
   */
  private compactStep(): boolean {
    if (this.o.tally.chunks < 2) return false;
    for (let i = 0; i < 1_000; i++) {
      const w = this.nextCompactWindow();
      if (!w) return false;
      const worth = w.full ? w.after < w.before * 0.75 : w.after * 4 <= w.before;
      if (!worth) {
        if (!w.full) return false;
        this.compactCursor = w.hi;
        continue;
      }
      const started = performance.now();
      this.o.logger.debug({ event: 'buffer_compact_started', seq_from: w.lo, seq_to: w.hi, chunks: w.before }, 'merging small chunks');
      try {
        assertNotNested(this.db, 'compaction');
        const r = this.o.sealer.compact(w.lo, w.hi);
        this.o.tally.chunks += r.chunksAfter - r.chunksBefore;
        this.o.tally.chunkBytes += r.bytesAfter - r.bytesBefore;
        if (w.full) this.compactCursor = r.newHi;
        const ms = performance.now() - started;
        this.sealBusyUntil = this.o.clock.monotonic() + ms;
        this.o.logger.debug({ event: 'buffer_compacted', seq_from: w.lo, seq_to: r.newHi, samples: r.samples, chunks_before: r.chunksBefore, chunks_after: r.chunksAfter, bytes_before: r.bytesBefore, bytes_after: r.bytesAfter, ms: Math.round(ms) }, 'merged small chunks');
      } catch (err) {
        this.o.logger.warn({ err: describeError(err) }, 'merging small chunks failed; they stay as they are and merging is retried');
        this.sealBusyUntil = this.o.clock.monotonic() + 5_000;
      }
      return true;
    }
    return false;
  }

  /** Compacts every window worth it now (tests, benchmarks). */
  compactNow(): void {
    this.compactCursor = 0;
    for (let i = 0; i < 100_000; i++) if (!this.compactStep()) break;
  }

  /**
   * The next range to seal: from just above `sealed_upto`, at most `sealRows` seqs, up to
   * `eligible`, stopping before anything held (B3). Held rows at its start are skipped for good
   * (sealer L3: they stay rows). `cut` says a hold ended it early (seal it anyway: waiting cannot grow it).
   */
  private nextSealRange(eligible: number): { lo: number; hi: number; cut: boolean } | null {
    const holds = this.o.holds.all(this.sealedUpto);
    let lo = this.sealedUpto + 1;
    for (const h of holds) if (h.from <= lo && h.to >= lo) lo = h.to + 1;
    if (lo > eligible) return null;
    if (lo - 1 > this.sealedUpto) {
      this.o.sealer.skipTo(lo - 1);
      this.sealedUpto = lo - 1;
    }
    let hi = Math.min(eligible, lo + this.o.sealRows - 1);
    let cut = false;
    for (const h of holds) {
      if (h.from > lo && h.from <= hi) {
        hi = h.from - 1;
        cut = true;
        break;
      }
    }
    return { lo, hi, cut };
  }

  /** Seals every row not held right now, regardless of age (tests, benchmarks, `seal` after a migration). */
  sealNow(): void {
    this.marks = [{ seq: this.o.lastSeq(), at: this.o.clock.monotonic() }];
    for (let i = 0; i < 10_000; i++) {
      const before = this.sealedUpto;
      this.maybeSeal(true);
      if (this.sealedUpto === before) break;
    }
  }
}
