/**
 * The durable store-and-forward buffer for samples.
 *
 * INVARIANTS (tests in test/buffer/ and the crash harness check them):
 *
 *  I1  `append()` resolves only after the transaction holding its samples has committed (with
 *      synchronous=FULL: durable against power loss), and never otherwise. Samples it does not
 *      keep (refuse_new over max_bytes or on a full disk, more than maxPendingSamples waiting in
 *      memory, a closed buffer) are refused: the promise rejects with a `SamplesRefusedError`
 *      carrying a stable code and the reason, and none of that append's samples were committed.
 *      A source acknowledges its device/broker, and a caller deletes its own copy (set-aside),
 *      only after `append()` resolved. Refusals are counted in
 *      `gateway_buffer_refused_samples_total`; those whose caller cannot offer them again (no
 *      `keepsRefused`) are lost and also counted in `gateway_buffer_dropped_samples_total` and
 *      the full-buffer episode (logged once per episode).
 *  I2  A row leaves the `samples` table only when (a) the service answered 2xx for a batch holding
 *      it, (b) a finished import job accounted for it, (c) it moves to `set_aside` in the same
 *      transaction, or (d) drop_oldest evicted it to make room (counted, logged). refuse_new never
 *      removes a committed row: it refuses new ones (I1).
 *  I3  `seq` is assigned from `meta.next_seq`, which is written in the same transaction as the
 *      rows, so a seq is never reused, not even across crashes. An acknowledgement by seq can
 *      therefore never delete a different, later sample.
 *  I4  At any moment a row is held by at most one sender: the sync path (in-memory in-flight set)
 *      or one import job (a durable seq range in `import_jobs`). Claims are advisory state: after
 *      a crash, in-flight sync claims are simply gone and the rows are sent again, which the
 *      service's replace-on-same-(variable, timestamp) rule makes harmless (CONTRACT.md).
 *  I5  The sync path claims the newest rows first (live data stays fresh); import jobs take the
 *      oldest rows (backfill). They meet only when the backlog is nearly gone.
 *  I6  One gateway process per file: I4's in-memory claims hold only within one process, so the
 *      gateway takes `owner-lock.ts`'s lock before it opens the file.
 *
 * BUFFER V2: the same invariants with sealed chunks. A sample is either a row in `samples` (the
 * live tail) or part of a per-variable compressed chunk in `chunks` (chunk-store.ts), and every
 * sample keeps a seq in both forms (chunk-store S1). Restated for chunks:
 *
 *  I1  Unchanged: `append()` writes rows; sealing happens later, in its own transaction
 *      (sealer.ts L1), so it can never delay or undo an acknowledgement.
 *  I2  A sealed sample leaves only as a row would: a finished import job's range deletes rows and
 *      chunk samples by seq (partial chunks re-encoded, S3), set-aside removes it from its chunk in
 *      the transaction that records it, and drop_oldest deletes whole unheld chunks and counts
 *      their `n` exactly. Sealing and unsealing move samples between the forms in one transaction.
 *  I3  Sealing renumbers only a range nothing holds, into the same range (L2); chunk seqs count
 *      for `next_seq` at open, so a seq is still never reused.
 *  I4  The sync path claims rows only: when it needs sealed samples (rows exhausted, or the
 *      oldest-first turns of `claimOldest`) it first turns the chunk back into rows with the same
 *      seqs. Import jobs hold seq ranges as before; sealing skips them (L2).
 *  I5  Unchanged: sealed samples are the oldest, so import jobs take chunks first; the sync path
 *      reaches them only when no row is left, or for the age bound (`claimOldest`).
 *  I6  Unchanged.
 */
import type { Database, Statement } from 'better-sqlite3';
import { statSync } from 'node:fs';
import type { Logger } from 'pino';
import type { Clock } from '../core/clock.js';
import { describeError, errorCode } from '../core/errors.js';
import type { Metrics } from '../core/metrics.js';
import { SamplesRefusedError, type AppendOptions, type BufferRefusal, type Sample, type SampleSink } from '../core/sample.js';
import { LogThrottle } from '../core/log-throttle.js';
import { RateMeter } from '../core/rate-meter.js';
import { LastCommitted } from './last-committed.js';
import { toIsoUtc } from '../core/time.js';
import { decodeChunkInto, type Compressor, type DecodedChunk } from './chunks/codec.js';
import { ChunkStore, chunkSamples, MAX_CHUNK_SAMPLES, type ChunkRow } from './chunks/store.js';
import { Sealer } from './chunks/sealer.js';
import { fromRowValue, ROW_VALUE_JSON_SQL, toRowValue } from './row-value.js';

export interface BufferOptions {
  commitIntervalMs: number;
  maxBytes: number;
  whenFull: 'drop_oldest' | 'refuse_new';
  logger: Logger;
  metrics: Metrics;
  clock: Clock;
  /** Samples held in memory while the disk refuses writes; beyond this the newest are dropped (counted). */
  maxPendingSamples?: number;
  /** A commit is started at once when this many samples are pending, without waiting for the interval. */
  commitEagerSamples?: number;
  /** A full-buffer episode ends after this long without a drop (then its loss is logged). */
  episodeQuietMs?: number;
  /** WAL size above which a TRUNCATE checkpoint is run after a commit. */
  walLimitBytes?: number;
  /** Rows committed at least this long ago may be sealed into chunks (buffer.seal_after). */
  sealAfterMs?: number;
  /** Seqs per sealing step; a full step is sealed at once, a partial one after 2 × sealAfterMs (buffer.seal_rows). */
  sealRows?: number;
  /** General compressor over the chunk layout (chunk-codec.ts). */
  compressor?: Compressor;
  /** Samples per compaction window: small chunks of one variable within it are merged (sealer L5). */
  compactSamples?: number;
}

export interface BufferedRow {
  seq: number;
  variable: string;
  ts: number;
  value: number;
}

/** Import items of a seq range, serialized by SQLite (see SampleBuffer.importReader). */
export interface ImportReader {
  /** Up to N items as `{...},{...}`, the seq just before them and the seq of the last one; null at the end. */
  nextBlock(): { text: string; count: number; afterSeq: number; lastSeq: number } | null;
  /** Single items after `afterSeq`, as [seq, item text]. */
  itemsAfter(afterSeq: number, n: number): Array<[number, string]>;
}

export interface SeqRange {
  from: number;
  to: number;
}

export interface FullEpisode {
  policy: 'drop_oldest' | 'refuse_new' | 'memory';
  startedAt: number;
  samplesLost: number;
  /** Sample-timestamp range of what was lost. */
  fromTs: number | null;
  toTs: number | null;
}

export interface BufferStats {
  /** Unsent samples: live rows plus sealed ones. */
  rows: number;
  /** Of which in the samples table (the live tail). */
  liveRows: number;
  /** Of which sealed in chunks. */
  sealedSamples: number;
  chunks: number;
  chunkBytes: number;
  chunksSealedTotal: number;
  /** Bytes in use per unsent sample, or null when empty. */
  bytesPerSample: number | null;
  /** Raw bytes (16 per sample) over chunk bytes, or null before the first seal. */
  compressionRatio: number | null;
  /** Seconds until max_bytes at the current ingest rate, or null while nothing is ingested. */
  capacitySeconds: number | null;
  /** Rows claimed by the sync path right now. */
  inflight: number;
  /** Rows inside import-job ranges. */
  reserved: number;
  /** Rows a sender may claim now. */
  available: number;
  pendingSamples: number;
  usedBytes: number;
  fileBytes: number;
  maxBytes: number;
  oldestTs: number | null;
  committedTotal: number;
  droppedTotal: number;
  writable: boolean;
  lastWriteError: { code: string; message: string; at: number } | null;
  fullEpisode: FullEpisode | null;
}

interface PendingAppend {
  samples: readonly Sample[];
  /** AppendOptions.keepsRefused: a refusal of these samples is not a loss. */
  keepsRefused: boolean;
  resolve: () => void;
  reject: (err: Error) => void;
}

/** The `policy` label refused samples that are lost count under in gateway_buffer_dropped_samples_total. */
type LossLabel = FullEpisode['policy'] | 'unwritable_at_stop';

/** Metric label of gateway_buffer_refused_samples_total per refusal code. */
const REFUSAL_LABEL: Record<BufferRefusal, string> = { BUFFER_FULL: 'buffer_full', BUFFER_PENDING_LIMIT: 'pending_limit', BUFFER_CLOSED: 'closed' };

const CLAIM_COLUMNS = 'seq, var, ts, value';

/** Rows are sealed once committed this long ago (buffer.seal_after; bench/buffer-footprint.ts). */
export const DEFAULT_SEAL_AFTER_MS = 2 * 60_000;
/**
 * Seqs per sealing step (buffer.seal_rows). Small enough that a step's rows in memory and its
 * time holding the event loop stay small (bench/memory.ts); compaction makes the chunks large.
 */
export const DEFAULT_SEAL_ROWS = 100_000;
/**
 * Samples per compaction window (sealer L5): with 5,000 variables at 1 Hz this gives chunks of
 * ~400 samples, with 1,000 variables ~2,000; one window is rewritten in ~0.3-0.6 s
 * (bench/buffer-footprint.ts prints the longest step).
 */
export const DEFAULT_COMPACT_SAMPLES = 2_000_000;
/** Raw size of a sample for the compression ratio: an 8-byte timestamp and an 8-byte double. */
const RAW_SAMPLE_BYTES = 16;

/** Rows per INSERT statement: one statement step per 64 rows halves the per-row cost (bench/mqtt-throughput.ts). */
const INSERT_ROWS = 64;

export class SampleBuffer implements SampleSink {
  private readonly insertArgs: Array<number | Buffer> = new Array(INSERT_ROWS * 4);
  private readonly db: Database;
  private readonly opts: Required<BufferOptions>;
  private readonly varIds = new Map<string, number>();
  private readonly varNames = new Map<number, string>();
  private nextSeq: number;
  private rowCount: number;
  private pending: PendingAppend[] = [];
  private pendingSamples = 0;
  private ackQueue: number[] = [];
  /** Seqs claimed by the sync path (and acked-but-not-yet-deleted ones). */
  private readonly inflight = new Set<number>();
  /** Import-job ranges, sorted by `from`, with their row counts. */
  private reserved: Array<SeqRange & { rows: number }> = [];
  private reservedRows = 0;
  /** Ranges that failed twice as import jobs: only the sync path may send them (durable table). */
  private syncOnly: SeqRange[] = [];
  private timer: NodeJS.Timeout | null = null;
  private retryTimer: NodeJS.Timeout | null = null;
  private closed = false;
  private committing = false;
  private writable = true;
  private lastWriteError: BufferStats['lastWriteError'] = null;
  private committedTotal = 0;
  private droppedTotal = 0;
  private episode: FullEpisode | null = null;
  private lastDropAt = 0;
  private writeFailures = 0;
  private readonly listeners = new Set<() => void>();
  private readonly pageSize: number;
  private readonly ingest: RateMeter;
  private readonly walPath: string;
  private lastWalCheck = 0;
  private walBlocked = false;
  /** Per-variable newest committed timestamp (issue 14), written inside the commit transaction. */
  readonly lastCommitted: LastCommitted;
  private readonly store: ChunkStore;
  private readonly sealer: Sealer;
  private sealedSamples = 0;
  private chunkCount = 0;
  private chunkBytes = 0;
  private chunksSealedTotal = 0;
  private sealedUpto: number;
  /** One mark per second of commits: the last seq committed then (for seal_after). */
  private marks: Array<{ seq: number; at: number }> = [];
  private lastSealCheck = 0;
  private sealBusyUntil = 0;
  /** The last tick sealed: compaction goes first on the next one if it has work (see maybeSeal). */
  private compactTurn = false;
  /** Seqs up to here were looked at by compaction and need none (sealer L5); in memory only. */
  private compactCursor = 0;
  private readonly ledgerRanges: Statement;
  private readonly refusalLog: LogThrottle;

  private readonly st: {
    insert: Statement;
    insertMany: Statement;
    insertVar: Statement;
    setNextSeq: Statement;
    getNextSeq: Statement;
    deleteSeq: Statement;
    newestSeqs: Statement;
    rowBySeq: Statement;
    oldestBetween: Statement;
    oldestTs: Statement;
    insertSetAside: Statement;
    pageCount: Statement;
    freelistCount: Statement;
    countBetween: Statement;
    firstAfter: Statement;
    nthFrom: Statement;
    maxBelow: Statement;
    maxSeqInRange: Statement;
  };

  constructor(db: Database, options: BufferOptions) {
    this.db = db;
    this.opts = {
      maxPendingSamples: 2_000_000,
      commitEagerSamples: 50_000,
      episodeQuietMs: 10_000,
      walLimitBytes: 64 * 1024 * 1024,
      sealAfterMs: DEFAULT_SEAL_AFTER_MS,
      sealRows: DEFAULT_SEAL_ROWS,
      compactSamples: DEFAULT_COMPACT_SAMPLES,
      compressor: 'deflate',
      ...options,
    };
    this.walPath = `${db.name}-wal`;
    this.lastCommitted = new LastCommitted(db);
    this.st = {
      insert: db.prepare('INSERT INTO samples (seq, var, ts, value) VALUES (?, ?, ?, ?)'),
      insertMany: db.prepare(`INSERT INTO samples (seq, var, ts, value) VALUES ${Array(INSERT_ROWS).fill('(?, ?, ?, ?)').join(', ')}`),
      insertVar: db.prepare('INSERT INTO variables (name) VALUES (?)'),
      setNextSeq: db.prepare("INSERT INTO meta (key, value) VALUES ('next_seq', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value"),
      getNextSeq: db.prepare("SELECT value FROM meta WHERE key = 'next_seq'").pluck(true),
      deleteSeq: db.prepare('DELETE FROM samples WHERE seq = ?'),
      newestSeqs: db.prepare('SELECT seq FROM samples WHERE seq > ? AND seq < ? ORDER BY seq DESC LIMIT ?').pluck(true),
      rowBySeq: db.prepare('SELECT var, ts, value FROM samples WHERE seq = ?').raw(true),
      oldestBetween: db.prepare(`SELECT ${CLAIM_COLUMNS} FROM samples WHERE seq > ? AND seq < ? ORDER BY seq ASC LIMIT ?`).raw(true),
      oldestTs: db.prepare('SELECT ts FROM samples ORDER BY seq ASC LIMIT 1').pluck(true),
      insertSetAside: db.prepare(
        'INSERT INTO set_aside (variable, ts, value, path, reason, detail, job_id, request_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
      ),
      pageCount: db.prepare('PRAGMA page_count').pluck(true),
      freelistCount: db.prepare('PRAGMA freelist_count').pluck(true),
      countBetween: db.prepare('SELECT count(*) FROM samples WHERE seq BETWEEN ? AND ?').pluck(true),
      firstAfter: db.prepare('SELECT seq FROM samples WHERE seq > ? AND seq < ? ORDER BY seq ASC LIMIT 1').pluck(true),
      nthFrom: db.prepare('SELECT seq FROM samples WHERE seq >= ? AND seq < ? ORDER BY seq ASC LIMIT 1 OFFSET ?').pluck(true),
      maxBelow: db.prepare('SELECT max(seq) FROM samples WHERE seq >= ? AND seq < ?').pluck(true),
      maxSeqInRange: db.prepare('SELECT max(seq) FROM samples WHERE seq BETWEEN ? AND ?').pluck(true),
    };
    this.syncOnly = (db.prepare('SELECT seq_from AS "from", seq_to AS "to" FROM sync_only_ranges ORDER BY seq_from').all() as SeqRange[]);
    this.pageSize = db.pragma('page_size', { simple: true }) as number;
    this.ingest = new RateMeter(() => options.clock.monotonic(), 30);
    for (const [id, name] of db.prepare('SELECT id, name FROM variables').raw(true).all() as Array<[number, string]>) {
      this.varIds.set(name, id);
      this.varNames.set(id, name);
    }
    const storedNext = db.prepare("SELECT value FROM meta WHERE key = 'next_seq'").pluck(true).get() as string | undefined;
    const maxSeq = (db.prepare('SELECT max(seq) FROM samples').pluck(true).get() as number | null) ?? 0;
    const maxChunkSeq = (db.prepare('SELECT max(seq_from + n - 1) FROM chunks').pluck(true).get() as number | null) ?? 0;
    this.nextSeq = Math.max(Number(storedNext ?? 1), maxSeq + 1, maxChunkSeq + 1);
    this.rowCount = db.prepare('SELECT count(*) FROM samples').pluck(true).get() as number;
    this.store = new ChunkStore(db, this.opts.compressor);
    this.sealer = new Sealer(db, this.store);
    this.sealedUpto = this.sealer.sealedUpto();
    const totals = this.store.totals();
    this.sealedSamples = totals.samples;
    this.chunkCount = totals.chunks;
    this.chunkBytes = totals.bytes;
    this.ledgerRanges = db.prepare('SELECT seq_from AS "from", seq_to AS "to" FROM import_jobs');
    this.refusalLog = new LogThrottle(this.opts.logger, 60_000, () => options.clock.monotonic());
    // Rows already in the file were committed before this start: old enough to seal (this is also
    // how a v1 file's backlog is converted in place, a step at a time).
    if (this.nextSeq - 1 > this.sealedUpto) this.marks.push({ seq: this.nextSeq - 1, at: options.clock.monotonic() - 2 * this.opts.sealAfterMs - 1 });
    this.opts.metrics.bufferWritable.set(1);
    this.refreshGauges();
  }

  // ---------------------------------------------------------------- ingest (group commit)

  /**
   * Queues samples for the next group commit. Resolves once they are committed (I1); rejects with a
   * `SamplesRefusedError` when the buffer does not keep them (see `SampleSink`).
   */
  append(samples: readonly Sample[], options: AppendOptions = {}): Promise<void> {
    const keepsRefused = options.keepsRefused === true;
    if (this.closed) return Promise.reject(new SamplesRefusedError('BUFFER_CLOSED', 'refused: the buffer is closed (the gateway is stopping)', samples.length));
    if (samples.length === 0) return Promise.resolve();
    if (this.pendingSamples + samples.length > this.opts.maxPendingSamples) {
      // Memory is the limit: the disk has refused writes for a while, or one append is larger than
      // what may wait for a commit. Refuse the newest (these) rather than grow without bound.
      const reason = this.writable
        ? `refused: ${this.pendingSamples + samples.length} samples would wait for one commit, more than the ${this.opts.maxPendingSamples} the buffer holds in memory; append them in smaller steps`
        : `refused: the buffer cannot write (${this.lastWriteError?.code ?? 'unknown error'}) and ${this.pendingSamples} samples already wait in memory; at most ${this.opts.maxPendingSamples} may wait for the disk`;
      this.countRefusal([{ samples, keepsRefused }], 'BUFFER_PENDING_LIMIT', reason);
      return Promise.reject(new SamplesRefusedError('BUFFER_PENDING_LIMIT', reason, samples.length));
    }
    return new Promise<void>((resolve, reject) => {
      this.pending.push({ samples, keepsRefused, resolve, reject });
      this.pendingSamples += samples.length;
      this.scheduleCommit();
    });
  }

  /** Rejects appends the buffer does not keep (I1), each with its own count, after counting them. */
  private refuse(batch: readonly PendingAppend[], code: BufferRefusal, reason: string, lostAs?: LossLabel): void {
    this.countRefusal(batch, code, reason, lostAs);
    for (const p of batch) p.reject(new SamplesRefusedError(code, reason, p.samples.length));
  }

  /**
   * Counts refused samples. Those whose caller keeps them are refused only; the others are lost,
   * so they also count as dropped by the policy (`refuse_new`, or `memory` for the in-memory limit)
   * and make or extend a full-buffer episode, as before issue 21.
   */
  private countRefusal(batch: ReadonlyArray<{ samples: readonly Sample[]; keepsRefused: boolean }>, code: BufferRefusal, reason: string, lostAs: LossLabel = code === 'BUFFER_FULL' ? 'refuse_new' : 'memory'): void {
    if (batch.length === 0) return;
    let kept = 0;
    const lost: number[] = [];
    for (const p of batch) {
      if (p.keepsRefused) kept += p.samples.length;
      else for (const s of p.samples) lost.push(s.ts);
    }
    const total = kept + lost.length;
    if (total === 0) return;
    this.opts.metrics.bufferRefusedSamples.inc({ reason: REFUSAL_LABEL[code] }, total);
    if (lostAs === 'unwritable_at_stop') {
      // At close the episode is over: counted only (see close()).
      this.droppedTotal += lost.length;
      if (lost.length > 0) this.opts.metrics.bufferDroppedSamples.inc({ policy: lostAs }, lost.length);
    } else this.recordDrop(lostAs, lost);
    this.refusalLog.warn(`refused:${code}`, { code, samples: total, kept_by_caller: kept, lost: lost.length }, `buffer refused ${total} samples (${kept} stay with their caller, ${lost.length} are lost): ${reason}`);
  }

  /** Commits everything pending now. Resolves when done (or when the write failed and a retry is scheduled). */
  async flush(): Promise<void> {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    this.commit();
  }

  private scheduleCommit(): void {
    if (this.retryTimer) return; // the disk refused writes; the retry loop will commit
    if (this.pendingSamples >= this.opts.commitEagerSamples) {
      if (this.timer) clearTimeout(this.timer);
      this.timer = setTimeout(() => {
        this.timer = null;
        this.commit();
      }, 0);
      return;
    }
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.commit();
    }, this.opts.commitIntervalMs);
  }

  private readonly commitTx = (batch: PendingAppend[], acks: number[], refuse: boolean): number => {
    let inserted = 0;
    if (!refuse) {
      // Another process (edge-gateway set-aside requeue on the file) may have taken seqs: I3 holds
      // across processes because both read and advance meta.next_seq inside their transaction.
      const stored = Number((this.st.getNextSeq.get() as string | undefined) ?? 0);
      if (stored > this.nextSeq) this.nextSeq = stored;
      let seq = this.nextSeq;
      const args = this.insertArgs;
      let n = 0;
      for (const p of batch) {
        for (const s of p.samples) {
          if (!Number.isFinite(s.value) || !Number.isFinite(s.ts)) continue;
          args[n++] = seq++;
          args[n++] = this.variableId(s.variable);
          args[n++] = Math.trunc(s.ts);
          args[n++] = toRowValue(s.value);
          inserted++;
          if (n === args.length) {
            this.st.insertMany.run(args);
            n = 0;
          }
        }
      }
      for (let i = 0; i < n; i += 4) this.st.insert.run(args[i], args[i + 1], args[i + 2], args[i + 3]);
      if (inserted > 0) this.st.setNextSeq.run(String(seq));
      this.nextSeq = seq;
      if (inserted > 0) this.lastCommitted.record(batch);
    }
    for (const seq of acks) this.st.deleteSeq.run(seq);
    return inserted;
  };

  private commit(): void {
    if (this.closed || this.committing || (this.pending.length === 0 && this.ackQueue.length === 0)) return;
    this.committing = true;
    const batch = this.pending;
    const samples = this.pendingSamples;
    const acks = this.ackQueue;
    this.pending = [];
    this.pendingSamples = 0;
    this.ackQueue = [];
    const refuse = this.opts.whenFull === 'refuse_new' && this.overLimit();
    const started = performance.now();
    const seqBefore = this.nextSeq;
    const varsBefore = this.varIds.size;
    try {
      const inserted = this.db.transaction(this.commitTx).immediate(batch, acks, refuse);
      this.rowCount += inserted - acks.length;
      for (const seq of acks) this.inflight.delete(seq);
      this.committedTotal += inserted;
      this.ingest.add(inserted);
      this.opts.metrics.bufferCommits.inc();
      this.opts.metrics.bufferCommittedSamples.inc(inserted);
      this.opts.metrics.bufferCommitSeconds.observe((performance.now() - started) / 1000);
      if (inserted < samples && !refuse) this.opts.metrics.bufferWriteErrors.inc({ code: 'INVALID_SAMPLE' }, samples - inserted);
      this.markWritable();
      if (refuse) this.refuse(batch, 'BUFFER_FULL', `refused: buffer full (buffer.when_full = refuse_new): ${this.usedBytes()} bytes in use, buffer.max_bytes is ${this.opts.maxBytes}`);
      else for (const p of batch) p.resolve();
      if (this.opts.whenFull === 'drop_oldest' && this.overLimit()) this.dropOldest();
      this.maybeEndEpisode();
      if (inserted > 0) this.mark();
      this.maybeSeal();
      this.refreshGauges();
      this.checkWal();
      if (inserted > 0 || acks.length > 0) this.notify();
    } catch (err) {
      // Roll back in-memory state; the transaction rolled back the file.
      this.nextSeq = seqBefore;
      this.forgetVariablesFrom(varsBefore);
      this.pending = batch.concat(this.pending);
      this.pendingSamples += samples;
      this.ackQueue = acks.concat(this.ackQueue);
      this.onWriteFailure(err);
    } finally {
      this.committing = false;
    }
    if (this.pending.length > 0 && !this.retryTimer) this.scheduleCommit();
  }

  private variableId(name: string): number {
    let id = this.varIds.get(name);
    if (id === undefined) {
      id = Number(this.st.insertVar.run(name).lastInsertRowid);
      this.varIds.set(name, id);
      this.varNames.set(id, name);
    }
    return id;
  }

  /** Undo dictionary entries created inside a transaction that rolled back. */
  private forgetVariablesFrom(sizeBefore: number): void {
    if (this.varIds.size === sizeBefore) return;
    const entries = [...this.varIds.entries()];
    for (const [name, id] of entries.slice(sizeBefore)) {
      this.varIds.delete(name);
      this.varNames.delete(id);
    }
  }

  // ---------------------------------------------------------------- sealing (sealer.ts)

  private mark(): void {
    const now = this.opts.clock.monotonic();
    const last = this.marks[this.marks.length - 1];
    if (last && now - last.at < 1_000) last.seq = this.nextSeq - 1;
    else this.marks.push({ seq: this.nextSeq - 1, at: now });
  }

  /**
   * Seals the oldest unheld rows into chunks when a full step (`sealRows` seqs) was committed at
   * least `sealAfterMs` ago, or when the oldest unsealed rows have waited twice that. At most one
   * step per second, and never more than half of the time (a v1 backlog is converted in steps
   * between commits, so ingest keeps going).
   */
  private maybeSeal(force = false): void {
    const now = this.opts.clock.monotonic();
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
    for (const m of this.marks) if (force || m.at <= now - this.opts.sealAfterMs) eligible = m.seq;
    if (eligible <= this.sealedUpto) return false;
    const overdue = force || (this.marks.length > 0 && this.marks[0].at <= now - 2 * this.opts.sealAfterMs);
    const range = this.nextSealRange(eligible);
    if (!range) return false;
    if (!overdue && !range.cut && range.hi - range.lo + 1 < this.opts.sealRows) return false;
    const started = performance.now();
    this.opts.logger.debug({ event: 'buffer_seal_started', seq_from: range.lo, seq_to: range.hi }, 'sealing rows into chunks');
    try {
      const r = this.sealer.seal(range.lo, range.hi);
      this.sealedUpto = range.hi;
      this.rowCount -= r.samples;
      this.sealedSamples += r.samples;
      this.chunkCount += r.chunks;
      this.chunkBytes += r.bytes;
      this.chunksSealedTotal += r.chunks;
      this.opts.metrics.bufferSealedChunks.inc(r.chunks);
      const ms = performance.now() - started;
      this.sealBusyUntil = this.opts.clock.monotonic() + ms;
      this.opts.logger.debug({ event: 'buffer_sealed', seq_from: range.lo, seq_to: range.hi, samples: r.samples, chunks: r.chunks, bytes: r.bytes, ms: Math.round(ms) }, 'sealed rows into chunks');
    } catch (err) {
      // A full disk or a busy file: the rows stay rows (L1) and sealing is tried again later.
      this.opts.logger.warn({ err: describeError(err) }, 'sealing rows into chunks failed; they stay rows and sealing is retried');
      this.sealBusyUntil = this.opts.clock.monotonic() + 5_000;
    }
    return true;
  }

  /** Everything held right now above `after`: import-job ranges (memory and ledger), sync-only ranges, sync claims. */
  private holdsAbove(after: number): SeqRange[] {
    const holds: SeqRange[] = [...this.reserved, ...this.syncOnly, ...(this.ledgerRanges.all() as SeqRange[])].filter((h) => h.to > after);
    for (const seq of this.inflight) if (seq > after) holds.push({ from: seq, to: seq });
    return holds.sort((a, b) => a.from - b.from);
  }

  /**
   * The next compaction window above `compactCursor` (sealer L5): whole chunks only, no rows, no
   * hold, at most `compactSamples` samples. `full` says it cannot grow any more (its size, a hold,
   * a row or the end of the sealed seqs bounds it... only its size counts as full: the others may
   * move).
   */
  private nextCompactWindow(): { lo: number; hi: number; before: number; after: number; samples: number; full: boolean } | null {
    const holds = this.holdsAbove(this.compactCursor);
    let from = this.compactCursor + 1;
    for (let guard = 0; guard < 1_000; guard++) {
      if (from > this.sealedUpto) return null;
      const h = holds.find((x) => x.from <= from && x.to >= from);
      if (h) {
        from = h.to + 1;
        continue;
      }
      // A chunk that starts below `from` and reaches into it is not ours to move (a job range ended inside it).
      const straddle = this.store.overlapping(from, from)[0];
      if (straddle && straddle.seq_from < from) {
        from = straddle.seq_from + straddle.n;
        continue;
      }
      let limit = this.sealedUpto;
      const nextHold = holds.find((x) => x.from > from);
      if (nextHold) limit = Math.min(limit, nextHold.from - 1);
      const firstRow = this.st.firstAfter.get(from - 1, limit + 1) as number | undefined;
      if (firstRow !== undefined && firstRow !== null) limit = firstRow - 1;
      const perVar = new Map<number, number>();
      let samples = 0;
      let before = 0;
      let lo = -1;
      let hi = -1;
      let full = false;
      for (const m of this.sealer.iterateChunkMeta(from, limit)) {
        if (m.seq_from + m.n - 1 > limit) break;
        if (samples + m.n > this.opts.compactSamples && before > 0) {
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
        const next = this.store.firstAfter(limit, this.sealedUpto + 1);
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
    if (this.chunkCount < 2) return false;
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
      this.opts.logger.debug({ event: 'buffer_compact_started', seq_from: w.lo, seq_to: w.hi, chunks: w.before }, 'merging small chunks');
      try {
        const r = this.sealer.compact(w.lo, w.hi);
        this.chunkCount += r.chunksAfter - r.chunksBefore;
        this.chunkBytes += r.bytesAfter - r.bytesBefore;
        if (w.full) this.compactCursor = r.newHi;
        const ms = performance.now() - started;
        this.sealBusyUntil = this.opts.clock.monotonic() + ms;
        this.opts.logger.debug({ event: 'buffer_compacted', seq_from: w.lo, seq_to: r.newHi, samples: r.samples, chunks_before: r.chunksBefore, chunks_after: r.chunksAfter, bytes_before: r.bytesBefore, bytes_after: r.bytesAfter, ms: Math.round(ms) }, 'merged small chunks');
      } catch (err) {
        this.opts.logger.warn({ err: describeError(err) }, 'merging small chunks failed; they stay as they are and merging is retried');
        this.sealBusyUntil = this.opts.clock.monotonic() + 5_000;
      }
      return true;
    }
    return false;
  }

  /** Compacts every window worth it now (tests, benchmarks). */
  compactNow(): void {
    this.compactCursor = 0;
    for (let i = 0; i < 100_000; i++) if (!this.compactStep()) break;
    this.refreshGauges();
  }

  /**
   * The next range to seal: from just above `sealed_upto`, at most `sealRows` seqs, up to
   * `eligible`, stopping before anything held (L2). Held rows at its start are skipped for good
   * (L3: they stay rows). `cut` says a hold ended it early (seal it anyway: waiting cannot grow it).
   */
  private nextSealRange(eligible: number): { lo: number; hi: number; cut: boolean } | null {
    const holds: SeqRange[] = [...this.reserved, ...this.syncOnly, ...(this.ledgerRanges.all() as SeqRange[])];
    for (const seq of this.inflight) if (seq > this.sealedUpto) holds.push({ from: seq, to: seq });
    holds.sort((a, b) => a.from - b.from);
    let lo = this.sealedUpto + 1;
    for (const h of holds) if (h.from <= lo && h.to >= lo) lo = h.to + 1;
    if (lo > eligible) return null;
    if (lo - 1 > this.sealedUpto) {
      this.sealer.skipTo(lo - 1);
      this.sealedUpto = lo - 1;
    }
    let hi = Math.min(eligible, lo + this.opts.sealRows - 1);
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
    this.marks = [{ seq: this.nextSeq - 1, at: this.opts.clock.monotonic() }];
    for (let i = 0; i < 10_000; i++) {
      const before = this.sealedUpto;
      this.maybeSeal(true);
      if (this.sealedUpto === before) break;
    }
    this.refreshGauges();
  }

  // ---------------------------------------------------------------- disk full and full-buffer policy

  private onWriteFailure(err: unknown): void {
    const code = errorCode(err, 'SQLITE_ERROR');
    this.writeFailures += 1;
    this.writable = false;
    this.lastWriteError = { code, message: describeError(err), at: this.opts.clock.now() };
    this.opts.metrics.bufferWriteErrors.inc({ code });
    this.opts.metrics.bufferWritable.set(0);
    if (this.writeFailures === 1) {
      this.opts.logger.error({ code, err: describeError(err), pending_samples: this.pendingSamples }, 'buffer write failed; samples are held in memory and the write is retried');
    }
    if (code === 'SQLITE_FULL') {
      // The disk (or the file's page limit) is full. Apply the policy so that ingest can go on.
      if (this.opts.whenFull === 'drop_oldest') this.dropOldest(true);
      else this.refusePending();
    }
    const delay = Math.min(5_000, 250 * 2 ** Math.min(5, this.writeFailures - 1));
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      this.commit();
    }, delay);
  }

  private markWritable(): void {
    if (!this.writable) {
      this.opts.logger.warn({ failed_attempts: this.writeFailures }, 'buffer writes succeed again');
    }
    this.writable = true;
    this.writeFailures = 0;
    this.opts.metrics.bufferWritable.set(1);
  }

  /** refuse_new on a full disk: the pending samples are refused back to their callers so sources are not blocked. */
  private refusePending(): void {
    const batch = this.pending;
    this.pending = [];
    this.pendingSamples = 0;
    this.refuse(batch, 'BUFFER_FULL', 'refused: buffer full: the disk is full (SQLITE_FULL) and buffer.when_full = refuse_new');
  }

  /**
   * Keeps the WAL bounded. SQLite's automatic checkpoint copies pages back but cannot reset the WAL
   * while a reader (an operator's sqlite3 shell, `set-aside list`) holds an old snapshot, so the
   * file keeps growing. Once it is over the limit, a TRUNCATE checkpoint is tried every second;
   * when a reader blocks it the operator is told once, and the WAL shrinks as soon as the reader
   * lets go.
   */
  private checkWal(): void {
    const now = this.opts.clock.monotonic();
    if (now - this.lastWalCheck < 1_000) return;
    this.lastWalCheck = now;
    let size = 0;
    try {
      size = statSync(this.walPath).size;
    } catch {
      return;
    }
    if (size <= this.opts.walLimitBytes) {
      this.walBlocked = false;
      return;
    }
    try {
      // TRUNCATE waits for readers through the busy handler; ingest must never wait on a reader,
      // so the attempt is made with no busy timeout and simply tried again a second later.
      const previous = this.db.pragma('busy_timeout', { simple: true }) as number;
      this.db.pragma('busy_timeout = 0');
      let r: { busy: number; log: number; checkpointed: number };
      try {
        [r] = this.db.pragma('wal_checkpoint(TRUNCATE)') as Array<{ busy: number; log: number; checkpointed: number }>;
      } finally {
        this.db.pragma(`busy_timeout = ${previous}`);
      }
      if (r.busy !== 0 && !this.walBlocked) {
        this.walBlocked = true;
        this.opts.logger.warn({ wal_bytes: size, limit: this.opts.walLimitBytes }, 'another connection holds a read snapshot of the buffer; its WAL cannot shrink until that reader ends');
      } else if (r.busy === 0) this.walBlocked = false;
    } catch (err) {
      this.opts.logger.warn({ err: describeError(err) }, 'WAL checkpoint failed');
    }
  }

  /** Size of the WAL file in bytes (0 when there is none). */
  walBytes(): number {
    try {
      return statSync(this.walPath).size;
    } catch {
      return 0;
    }
  }

  /** Bytes in use by the database (pages minus free pages). */
  usedBytes(): number {
    const pages = this.st.pageCount.get() as number;
    const free = this.st.freelistCount.get() as number;
    return (pages - free) * this.pageSize;
  }

  private overLimit(): boolean {
    return this.usedBytes() > this.opts.maxBytes;
  }

  /**
   * Deletes the oldest rows no sender holds until the database is below the limit with some
   * headroom (so the policy does not run on every commit). With `diskFull` the limit is not the
   * trigger, so a fixed slice is dropped to make room for pending samples.
   */
  private dropOldest(diskFull = false): void {
    const used = this.usedBytes();
    const total = this.rowCount + this.sealedSamples;
    const perRow = total > 0 ? Math.max(0.5, used / total) : 32;
    const headroom = this.opts.maxBytes * 0.02;
    let target = diskFull
      ? Math.max(1_000, Math.ceil((this.pendingSamples * perRow + headroom) / perRow))
      : Math.ceil((used - this.opts.maxBytes + headroom) / perRow);
    target = Math.min(target, total);
    if (target <= 0) return;
    // Sealed chunks hold the oldest samples: whole unheld chunks go first, counted by their n.
    if (this.sealedSamples > 0) {
      try {
        const dropped = this.dropOldestChunks(target);
        target -= dropped;
      } catch (err) {
        this.opts.logger.error({ err: describeError(err) }, 'could not delete the oldest chunks to make room');
      }
      if (target <= 0) return;
    }
    target = Math.min(target, this.rowCount);
    if (target <= 0) return;
    const victims = this.oldestUnheld(target);
    if (victims.length === 0) return;
    try {
      this.db.transaction(() => {
        for (const row of victims) this.st.deleteSeq.run(row[0]);
        // Before the commit, as for chunks: per variable, how many rows may leave.
        const perVar = new Map<string, number>();
        for (const row of victims) {
          const name = this.varNames.get(row[1]) ?? `#${row[1]}`;
          perVar.set(name, (perVar.get(name) ?? 0) + 1);
        }
        this.opts.logger.debug({ event: 'buffer_rows_dropping', samples: victims.length, per_variable: Object.fromEntries(perVar) }, 'dropping the oldest rows (buffer.when_full = drop_oldest)');
      })();
      this.rowCount -= victims.length;
      this.recordDrop('drop_oldest', victims.map((r) => r[2]));
    } catch (err) {
      this.opts.logger.error({ err: describeError(err) }, 'could not delete the oldest samples to make room');
    }
  }

  /** Deletes whole chunks outside every import-job range, oldest first, until `target` samples; returns how many. */
  private dropOldestChunks(target: number): number {
    const pick = this.db.prepare('SELECT seq_from, var, n, ts_min, ts_max, length(data) AS bytes FROM chunks WHERE seq_from > ? AND seq_from < ? ORDER BY seq_from LIMIT 256');
    const gone: Array<[string, number, number, number]> = [];
    const del = this.db.prepare('DELETE FROM chunks WHERE seq_from = ?');
    let dropped = 0;
    let chunks = 0;
    let bytes = 0;
    let min = Infinity;
    let max = -Infinity;
    this.db.transaction(() => {
      for (const gap of this.gapsAscending()) {
        let lo = gap.lo;
        while (dropped < target) {
          const rows = pick.all(lo, gap.hi) as Array<{ seq_from: number; var: number; n: number; ts_min: number; ts_max: number; bytes: number }>;
          if (rows.length === 0) break;
          for (const c of rows) {
            lo = c.seq_from;
            if (c.seq_from + c.n - 1 >= gap.hi || dropped >= target) continue; // reaches into a job's range
            del.run(c.seq_from);
            gone.push([this.varNames.get(c.var) ?? `#${c.var}`, c.n, c.ts_min, c.ts_max]);
            dropped += c.n;
            chunks += 1;
            bytes += c.bytes;
            min = Math.min(min, c.ts_min);
            max = Math.max(max, c.ts_max);
          }
        }
        if (dropped >= target) break;
      }
      // Written before the commit, so a reader of the log (the crash harness) knows of every drop
      // that may have committed, with its exact samples per variable: [variable, n, ts_min, ts_max].
      if (gone.length > 0) this.opts.logger.debug({ event: 'buffer_chunks_dropping', samples: dropped, chunks: gone }, 'dropping the oldest sealed chunks (buffer.when_full = drop_oldest)');
    })();
    this.sealedSamples -= dropped;
    this.chunkCount -= chunks;
    this.chunkBytes -= bytes;
    this.recordDropCount('drop_oldest', dropped, min, max);
    return dropped;
  }

  /** The oldest rows that are neither in flight nor inside an import-job range. */
  private oldestUnheld(limit: number): Array<[number, number, number, number]> {
    const out: Array<[number, number, number, number]> = [];
    for (const gap of this.gapsAscending()) {
      let lo = gap.lo;
      while (out.length < limit) {
        const rows = this.st.oldestBetween.all(lo, gap.hi, Math.min(10_000, limit - out.length + this.inflight.size)) as Array<[number, number, number, number]>;
        if (rows.length === 0) break;
        for (const r of rows) if (!this.inflight.has(r[0]) && out.length < limit) out.push(r);
        lo = rows[rows.length - 1][0];
      }
      if (out.length >= limit) break;
    }
    return out;
  }

  private recordDrop(policy: FullEpisode['policy'], timestamps: number[]): void {
    if (timestamps.length === 0) return;
    let min = Infinity;
    let max = -Infinity;
    for (const t of timestamps) {
      if (t < min) min = t;
      if (t > max) max = t;
    }
    this.recordDropCount(policy, timestamps.length, min, max);
  }

  private recordDropCount(policy: FullEpisode['policy'], count: number, min: number, max: number): void {
    if (count === 0) return;
    const now = this.opts.clock.now();
    if (!this.episode) {
      this.episode = { policy, startedAt: now, samplesLost: 0, fromTs: null, toTs: null };
      this.opts.logger.warn(
        { policy, used_bytes: this.usedBytes(), max_bytes: this.opts.maxBytes },
        policy === 'drop_oldest'
          ? 'buffer is full: dropping the oldest unsent samples to make room (buffer.when_full = drop_oldest)'
          : policy === 'refuse_new'
            ? 'buffer is full: refusing new samples until there is room (buffer.when_full = refuse_new)'
            : 'buffer cannot write and its memory queue is full: dropping new samples',
      );
    }
    const e = this.episode;
    e.samplesLost += count;
    e.fromTs = e.fromTs === null ? min : Math.min(e.fromTs, min);
    e.toTs = e.toTs === null ? max : Math.max(e.toTs, max);
    this.droppedTotal += count;
    this.lastDropAt = this.opts.clock.monotonic();
    this.opts.metrics.bufferDroppedSamples.inc({ policy }, count);
  }

  /** An episode ends once no drop has happened for a while and the buffer is below its limit. */
  private maybeEndEpisode(force = false): void {
    const e = this.episode;
    if (!e) return;
    if (!force && (this.opts.clock.monotonic() - this.lastDropAt < this.opts.episodeQuietMs || !this.writable)) return;
    this.episode = null;
    this.opts.logger.error(
      {
        policy: e.policy,
        samples_lost: e.samplesLost,
        from: e.fromTs === null ? null : new Date(e.fromTs).toISOString(),
        to: e.toTs === null ? null : new Date(e.toTs).toISOString(),
        started_at: new Date(e.startedAt).toISOString(),
      },
      `buffer full episode ended: ${e.samplesLost} samples were lost`,
    );
  }

  // ---------------------------------------------------------------- claims (sync path)

  /**
   * Claims up to `limit` of the newest rows no one holds (I4, I5). The caller must later `ack` or
   * `release` every returned row.
   */
  claimNewest(limit: number): BufferedRow[] {
    const out: BufferedRow[] = [];
    if (limit <= 0) return out;
    // Rows first; when no unheld row is left, the newest unheld chunk becomes rows again (I4).
    for (;;) {
      this.claimNewestRows(limit, out);
      if (out.length >= limit || this.sealedSamples === 0) return out;
      if (!this.unsealNewest()) return out;
    }
  }

  /**
   * Claims up to `limit` of the oldest samples no one holds, sealed ones included (issue 12 §5:
   * the sync path alternates to these while the oldest unsent sample is older than its bound).
   */
  claimOldest(limit: number): BufferedRow[] {
    const out: BufferedRow[] = [];
    if (limit <= 0) return out;
    for (const gap of this.gapsAscending()) {
      let lo = gap.lo;
      while (out.length < limit) {
        const c = this.store.firstAfter(lo, gap.hi);
        const rowsHi = c ? c.seq_from : gap.hi; // rows strictly between lo and rowsHi come first
        while (out.length < limit && rowsHi > lo + 1) {
          const rows = this.st.oldestBetween.all(lo, rowsHi, limit - out.length + this.inflight.size) as Array<[number, number, number, number | Buffer]>;
          if (rows.length === 0) break;
          for (const [seq, varId, ts, value] of rows) {
            lo = seq;
            if (this.inflight.has(seq)) continue;
            this.inflight.add(seq);
            out.push({ seq, variable: this.varNames.get(varId) ?? `#${varId}`, ts, value: fromRowValue(value) });
            if (out.length >= limit) break;
          }
        }
        if (out.length >= limit || !c) break;
        this.unseal(c);
        // Its samples are rows now, with the same seqs; never below the gap (a job's range).
        lo = Math.max(gap.lo, Math.min(lo, c.seq_from - 1));
      }
      if (out.length >= limit) break;
    }
    return out;
  }

  /** Timestamp of the oldest sample (by seq) that no sender holds, or null (issue 12 §5). */
  oldestAvailableTs(): number | null {
    for (const gap of this.gapsAscending()) {
      const c = this.store.firstAfter(gap.lo, gap.hi);
      const rowsHi = c ? c.seq_from : gap.hi;
      let lo = gap.lo;
      for (;;) {
        const rows = this.st.oldestBetween.all(lo, rowsHi, 256) as Array<[number, number, number, number]>;
        if (rows.length === 0) break;
        for (const r of rows) if (!this.inflight.has(r[0])) return r[2];
        lo = rows[rows.length - 1][0];
      }
      if (c) return Math.min(c.ts_min, this.store.earliestTsFrom(c.seq_from, gap.hi) ?? c.ts_min);
    }
    return null;
  }

  /** Turns the newest chunk outside every import-job range back into rows; false when there is none. */
  private unsealNewest(): boolean {
    for (const gap of this.gapsDescending()) {
      const c = this.store.lastBefore(gap.lo, gap.hi);
      if (c) {
        this.unseal(c);
        return true;
      }
    }
    return false;
  }

  private unseal(c: ChunkRow): void {
    const n = this.db.transaction(() => this.store.unseal(c))();
    this.opts.logger.debug({ event: 'chunk_unsealed', seq_from: c.seq_from, samples: n }, 'a sealed chunk went back to rows for the sync path');
    this.rowCount += n;
    this.sealedSamples -= n;
    this.chunkCount -= 1;
    this.chunkBytes -= c.data.length;
  }

  private claimNewestRows(limit: number, out: BufferedRow[]): void {
    // Seqs first (small integers), then whole rows only for the chosen ones: the newest rows are
    // mostly already claimed or acknowledged, and reading them whole only made garbage.
    for (const gap of this.gapsDescending()) {
      let hi = gap.hi;
      while (out.length < limit) {
        const want = limit - out.length + this.inflight.size;
        const seqs = this.st.newestSeqs.all(gap.lo, hi, want) as number[];
        if (seqs.length === 0) break;
        for (const seq of seqs) {
          if (this.inflight.has(seq)) continue;
          const row = this.st.rowBySeq.get(seq) as [number, number, number | Buffer] | undefined;
          if (!row) continue;
          this.inflight.add(seq);
          out.push({ seq, variable: this.varNames.get(row[0]) ?? `#${row[0]}`, ts: row[1], value: fromRowValue(row[2]) });
          if (out.length >= limit) break;
        }
        if (seqs.length < want) break;
        hi = seqs[seqs.length - 1];
      }
      if (out.length >= limit) break;
    }
  }

  /** Gives claimed rows back (transient failure); they will be claimed again. */
  release(rows: readonly { seq: number }[]): void {
    for (const r of rows) this.inflight.delete(r.seq);
    if (rows.length > 0) this.notify();
  }

  /**
   * The service acknowledged these rows (2xx). They stay excluded from claims and are deleted in
   * the next group commit; losing that delete in a crash only means sending them again (I4).
   */
  ack(rows: readonly { seq: number }[]): void {
    if (this.closed) return;
    for (const r of rows) {
      this.inflight.add(r.seq);
      this.ackQueue.push(r.seq);
    }
    this.scheduleCommit();
  }

  /**
   * Moves rows to the set-aside table with the service's message, in one transaction (I2c).
   * Works for sync-claimed rows and for rows of an import-job range.
   */
  setAside(rows: readonly BufferedRow[], info: { path: 'sync' | 'import'; reason: string; detail?: unknown; jobId?: string; requestId?: string }): void {
    if (rows.length === 0) return;
    const now = this.opts.clock.now();
    const detail = info.detail === undefined ? null : JSON.stringify(info.detail);
    let fromRows = 0;
    let fromChunks = 0;
    this.db.transaction(() => {
      const sealed: number[] = [];
      for (const r of rows) {
        this.st.insertSetAside.run(r.variable, r.ts, toRowValue(r.value), info.path, info.reason, detail, info.jobId ?? null, info.requestId ?? null, now);
        if (this.st.deleteSeq.run(r.seq).changes > 0) fromRows++;
        else sealed.push(r.seq);
      }
      // Items of an import job may be sealed: they leave their chunk in this transaction (I2c).
      if (sealed.length > 0 && this.sealedSamples > 0) fromChunks = this.store.removeSeqs(sealed);
    })();
    for (const r of rows) this.inflight.delete(r.seq);
    this.rowCount -= fromRows;
    if (fromChunks > 0) this.resyncChunkTotals();
    this.refreshGauges();
  }

  // ---------------------------------------------------------------- import-job ranges (backfill)

  /** Marks a seq range as held by an import job (the ledger row is the durable record). */
  reserveRange(range: SeqRange): void {
    const rows = this.countIn(range.from, range.to);
    this.reserved.push({ ...range, rows });
    this.reserved.sort((a, b) => a.from - b.from);
    this.reservedRows += rows;
  }

  /** Shrinks a reserved range to what the file actually holds (the rest returns to the queue). */
  shrinkRange(range: SeqRange, newTo: number): void {
    const r = this.reserved.find((x) => x.from === range.from && x.to === range.to);
    if (!r) return;
    this.reservedRows -= r.rows;
    r.to = newTo;
    r.rows = this.countIn(r.from, r.to);
    this.reservedRows += r.rows;
    this.notify();
  }

  /** Ends a reservation without deleting (a failed job returns its rows to the queue). */
  releaseRange(range: SeqRange): void {
    const i = this.reserved.findIndex((x) => x.from === range.from && x.to === range.to);
    if (i < 0) return;
    this.reservedRows -= this.reserved[i].rows;
    this.reserved.splice(i, 1);
    this.notify();
  }

  /** Samples (rows and sealed) with seqs in [from, to]. */
  private countIn(from: number, to: number): number {
    const rows = this.st.countBetween.get(from, to) as number;
    return this.sealedSamples > 0 ? rows + this.store.countIn(from, to) : rows;
  }

  /** Re-reads the chunk totals after an operation that re-encodes chunks (sizes change). */
  private resyncChunkTotals(): void {
    const t = this.store.totals();
    this.sealedSamples = t.samples;
    this.chunkCount = t.chunks;
    this.chunkBytes = t.bytes;
  }

  /** A finished import job accounted for the range: delete its rows (I2b) and end the reservation. */
  deleteRange(range: SeqRange): number {
    let deleted = 0;
    const del = this.db.prepare('DELETE FROM samples WHERE seq >= ? AND seq <= ?');
    // In slices so one huge delete does not stall ingest for seconds.
    const slice = 50_000;
    for (let from = range.from; from <= range.to; from += slice) {
      const to = Math.min(range.to, from + slice - 1);
      deleted += this.db.transaction(() => del.run(from, to).changes)();
    }
    this.rowCount -= deleted;
    if (this.sealedSamples > 0) {
      deleted += this.db.transaction(() => this.store.removeRange(range.from, range.to).removed)();
      this.resyncChunkTotals();
    }
    this.releaseRange(range);
    this.refreshGauges();
    return deleted;
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
    let lo = range.from - 1;
    let done = false;
    const fieldJson = JSON.stringify(idField);
    const names = new Map<number, string>();
    const jsItem = (varId: number, ts: number, value: number): string => {
      let name = names.get(varId);
      if (name === undefined) names.set(varId, (name = JSON.stringify(this.varNames.get(varId) ?? `#${varId}`)));
      return `{"timestamp":"${toIsoUtc(ts)}",${fieldJson}:${name},"value":${jsonNumber(value)}}`;
    };
    // The chunk being serialized, decoded once and handed out `rows` items per block. A whole
    // chunk per block (up to MAX_CHUNK_SAMPLES items, ~400 kB of text) kept thousands of item
    // strings alive at once, so the young generation's scavenges promoted most of them and the
    // joined text went straight to the large-object space: ~120 MB of old-generation garbage per
    // 128 MB file, which V8 lets pile up before a full GC (bench/memory.ts, online phase).
    // Keeping it across calls is safe: the range is held, so nothing re-encodes its samples (I3).
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
            const c = this.sealedSamples > 0 ? this.store.firstAfter(lo, range.to + 1) : undefined;
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
  private *iterateRange(from: number, to: number): Generator<{ seq: number; varId: number; ts: number; value: number }> {
    let lo = from - 1;
    while (lo < to) {
      const c = this.sealedSamples > 0 ? this.store.firstAfter(lo, to + 1) : undefined;
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
      batch.push({ seq: x.seq, variable: this.varNames.get(x.varId) ?? `#${x.varId}`, ts: x.ts, value: x.value });
      if (batch.length >= chunk) {
        yield batch;
        batch = [];
      }
    }
    if (batch.length > 0) yield batch;
  }

  /**
   * Chooses the seq range of the next import job (I4, I5): the oldest rows that no sender holds and
   * that are not sync-only, at most `maxItems` of them, leaving the newest `keepNewest` available
   * rows to the sync path. The range is contiguous and lies below every sync claim. Null when there
   * is nothing to take.
   */
  planJobRange(maxItems: number, keepNewest: number): SeqRange | null {
    const want = Math.min(maxItems, this.available - keepNewest);
    if (want <= 0) return null;
    const lowestInflight = this.lowestInflight();
    for (const gap of gapsOf([...this.reserved, ...this.syncOnly])) {
      const firstRow = this.st.firstAfter.get(gap.lo, gap.hi) as number | undefined;
      const c = this.sealedSamples > 0 ? this.store.firstAfter(gap.lo, gap.hi) : undefined;
      const first = Math.min(firstRow ?? Infinity, c ? Math.max(c.seq_from, gap.lo + 1) : Infinity);
      if (first === Infinity) continue;
      // The sync path is already sending rows this old: leave them to it.
      if (lowestInflight !== null && lowestInflight <= first) return null;
      const hi = lowestInflight === null ? gap.hi : Math.min(gap.hi, lowestInflight);
      const to = this.seqAtCount(first, hi, want);
      if (to === null) continue;
      return { from: first, to };
    }
    return null;
  }

  /**
   * The seq at which [first, seq] holds `want` samples (rows and sealed), below `hi`; a chunk is
   * taken whole when the count falls inside it (one job per chunk, no re-encoding at the end).
   * The highest seq below `hi` when there are fewer; null when there is none.
   */
  private seqAtCount(first: number, hi: number, want: number): number | null {
    let cur = first;
    let remaining = want;
    let last: number | null = null;
    for (;;) {
      const c = this.sealedSamples > 0 ? this.store.firstAfter(cur - 1, hi) : undefined;
      const rowsEnd = c ? Math.max(cur, c.seq_from) : hi; // rows in [cur, rowsEnd)
      if (rowsEnd > cur) {
        const nth = this.st.nthFrom.get(cur, rowsEnd, remaining - 1) as number | undefined;
        if (nth !== undefined) return nth;
        const count = this.st.countBetween.get(cur, rowsEnd - 1) as number;
        if (count > 0) {
          remaining -= count;
          last = this.st.maxBelow.get(cur, rowsEnd) as number;
        }
      }
      if (!c) return last;
      const start = Math.max(cur, c.seq_from);
      const end = Math.min(c.seq_from + c.n - 1, hi - 1);
      const inChunk = end - start + 1;
      if (inChunk >= remaining) return end;
      remaining -= inChunk;
      last = end;
      cur = end + 1;
      if (cur >= hi) return last;
    }
  }

  /** Marks a range as sync-only (it failed twice as an import job), durably. */
  markSyncOnly(range: SeqRange): void {
    this.db.prepare('INSERT OR REPLACE INTO sync_only_ranges (seq_from, seq_to) VALUES (?, ?)').run(range.from, range.to);
    this.syncOnly = [...this.syncOnly.filter((r) => r.from !== range.from), range].sort((a, b) => a.from - b.from);
  }

  /** Forgets sync-only ranges whose rows are all gone. */
  pruneSyncOnly(): void {
    const empty = this.syncOnly.filter((r) => this.st.maxSeqInRange.get(r.from, r.to) === null && (this.sealedSamples === 0 || this.store.countIn(r.from, r.to) === 0));
    if (empty.length === 0) return;
    const del = this.db.prepare('DELETE FROM sync_only_ranges WHERE seq_from = ?');
    this.db.transaction(() => {
      for (const r of empty) del.run(r.from);
    })();
    this.syncOnly = this.syncOnly.filter((r) => !empty.includes(r));
  }

  get syncOnlyRanges(): readonly SeqRange[] {
    return this.syncOnly;
  }

  get reservedRanges(): readonly SeqRange[] {
    return this.reserved;
  }

  get database(): Database {
    return this.db;
  }

  /** Lowest seq currently claimed by the sync path, or null. */
  lowestInflight(): number | null {
    let min: number | null = null;
    for (const s of this.inflight) if (min === null || s < min) min = s;
    return min;
  }

  /** Open intervals (lo, hi) between the reserved ranges, newest first. */
  private gapsDescending(): Array<{ lo: number; hi: number }> {
    return gapsOf(this.reserved).reverse();
  }

  private gapsAscending(): Array<{ lo: number; hi: number }> {
    return gapsOf(this.reserved);
  }

  // ---------------------------------------------------------------- observation

  /** Called after every commit that changed the table and after releases. */
  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private notify(): void {
    for (const l of this.listeners) l();
  }

  /** Samples per second committed, over the last 30 s. */
  ingestRate(): number {
    return this.ingest.perSecond();
  }

  /** Rows a sender may claim now. Acked rows stay in both `inflight` and `rowCount` until deleted. */
  get available(): number {
    return Math.max(0, this.rowCount + this.sealedSamples - this.inflight.size - this.reservedRows);
  }

  stats(): BufferStats {
    const used = this.usedBytes();
    const total = this.rowCount + this.sealedSamples;
    return {
      rows: total,
      liveRows: this.rowCount,
      sealedSamples: this.sealedSamples,
      chunks: this.chunkCount,
      chunkBytes: this.chunkBytes,
      chunksSealedTotal: this.chunksSealedTotal,
      bytesPerSample: total > 0 ? used / total : null,
      compressionRatio: this.chunkBytes > 0 ? (this.sealedSamples * RAW_SAMPLE_BYTES) / this.chunkBytes : null,
      capacitySeconds: this.capacitySeconds(used),
      inflight: this.inflight.size,
      reserved: this.reservedRows,
      available: this.available,
      pendingSamples: this.pendingSamples,
      usedBytes: used,
      fileBytes: this.fileBytes(),
      maxBytes: this.opts.maxBytes,
      oldestTs: this.oldestTs(),
      committedTotal: this.committedTotal,
      droppedTotal: this.droppedTotal,
      writable: this.writable,
      lastWriteError: this.lastWriteError,
      fullEpisode: this.episode ? { ...this.episode } : null,
    };
  }

  /** Timestamp of the oldest unsent sample by seq (rows and sealed), or null. */
  private oldestTs(): number | null {
    const row = (this.st.oldestTs.get() as number | undefined) ?? null;
    const sealed = this.sealedSamples > 0 ? this.store.oldestTs() : null;
    if (row === null) return sealed;
    if (sealed === null) return row;
    return Math.min(row, sealed);
  }

  /**
   * Seconds until `max_bytes` at the current ingest rate. New samples end up sealed, so once
   * chunks exist their measured cost per sample (plus the table's per-chunk overhead) is the
   * marginal cost; before that, the current bytes per sample.
   */
  private capacitySeconds(used: number): number | null {
    const rate = this.ingest.perSecond();
    if (rate <= 0) return null;
    const total = this.rowCount + this.sealedSamples;
    const perSample = this.sealedSamples >= 1_000 ? (this.chunkBytes + this.chunkCount * 40) / this.sealedSamples : total > 0 ? used / total : 25;
    return Math.max(0, this.opts.maxBytes - used) / (perSample * rate);
  }

  private fileBytes(): number {
    const pages = this.st.pageCount.get() as number;
    return pages * this.pageSize;
  }

  refreshGauges(): void {
    const m = this.opts.metrics;
    const used = this.usedBytes();
    const total = this.rowCount + this.sealedSamples;
    m.bufferRows.set(total);
    m.bufferBytes.set(used);
    m.bufferFileBytes.set(this.fileBytes());
    m.bufferSealedSamples.set(this.sealedSamples);
    m.bufferBytesPerSample.set(total > 0 ? used / total : 0);
    m.bufferCompressionRatio.set(this.chunkBytes > 0 ? (this.sealedSamples * RAW_SAMPLE_BYTES) / this.chunkBytes : 0);
    m.bufferCapacitySeconds.set(this.capacitySeconds(used) ?? -1);
    const oldest = this.oldestTs();
    m.bufferOldestAge.set(oldest === null ? 0 : Math.max(0, (this.opts.clock.now() - oldest) / 1000));
  }

  // ---------------------------------------------------------------- shutdown

  /** Samples that were still held in memory (unwritable disk) when the buffer closed. */
  discardedAtClose = 0;

  /** Commits what is pending, then closes the database. Safe to call twice. */
  async close(): Promise<void> {
    if (this.closed) return;
    if (this.timer) clearTimeout(this.timer);
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.timer = null;
    this.retryTimer = null;
    this.commit();
    this.closed = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    if (this.timer) clearTimeout(this.timer);
    this.maybeEndEpisode(true);
    // Issue 12 §1: samples still in memory because the disk refused every write are lost with the
    // process; count and say so instead of dropping them silently. Their appends are refused, so a
    // caller that keeps them (a QoS 1 publisher) offers them again and they are not counted lost.
    this.discardedAtClose = this.pendingSamples;
    if (this.discardedAtClose > 0) {
      this.opts.logger.error({ discarded_samples: this.discardedAtClose, last_write_error: this.lastWriteError }, `buffer closed while the disk refused writes: ${this.discardedAtClose} samples held in memory are discarded`);
    }
    this.refuse(this.pending, 'BUFFER_CLOSED', 'refused: the buffer closed before these samples could be written (the disk refused writes)', 'unwritable_at_stop');
    this.pending = [];
    this.pendingSamples = 0;
    try {
      this.db.pragma('wal_checkpoint(TRUNCATE)');
    } catch {
      // a busy or full disk must not keep the process from exiting; the WAL is replayed at next open
    }
    this.db.close();
  }
}

/** Open seq intervals (lo, hi) not covered by `ranges` (inclusive ranges), oldest first. */
export function gapsOf(ranges: readonly SeqRange[]): Array<{ lo: number; hi: number }> {
  const sorted = [...ranges].sort((a, b) => a.from - b.from);
  const gaps: Array<{ lo: number; hi: number }> = [];
  let lo = 0;
  for (const r of sorted) {
    if (r.from > lo + 1) gaps.push({ lo, hi: r.from });
    lo = Math.max(lo, r.to);
  }
  gaps.push({ lo, hi: Number.MAX_SAFE_INTEGER });
  return gaps;
}

/** A double as JSON text that reads back as the same double (−0 keeps its sign). */
export function jsonNumber(v: number): string {
  return Object.is(v, -0) ? '-0' : String(v);
}
