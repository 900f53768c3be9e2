import type { Statement } from 'better-sqlite3';
import type { Logger } from 'pino';
import { backoffDelay, type BackoffPolicy } from '../core/backoff.js';
import type { Clock } from '../core/clock.js';
import { describeError, errorCode } from '../core/errors.js';
import type { Metrics } from '../core/metrics.js';
import { SamplesRefusedError, type AppendOptions, type BufferRefusal, type Sample, type SampleColumns } from '../core/sample.js';
import type { FullPolicy } from './capacity/full-policy.js';
import type { LossLabel, Losses } from './capacity/losses.js';
import type { Holds } from './holds.js';
import type { LastCommitted } from './last-committed.js';
import { toRowValue } from './row-value.js';
import type { Tally } from './tally.js';
import type { TurnShare } from './turn-share.js';
import type { VariableDictionary } from './variables.js';
import type { StoreOwner } from '../store/store.js';

/**
 * Ingest: appends wait in memory for the next group commit, which writes them as rows in one
 * transaction together with the deletes of acknowledged rows.
 *
 * Keeps:
 *  B1  (stated in src/buffer/README.md) Here: an append is resolved after its group commit and
 *      every refusal is decided: an append holding a non-finite value or timestamp at once
 *      (`INVALID_SAMPLE`), the in-memory limit and a closed buffer at once, refuse_new at the
 *      commit; a refused append rejects whole, having committed nothing.
 *      The commit's own work is only the rows, the acks' deletes and `meta.next_seq` (each
 *      variable's newest timestamp is recorded in memory after it, last-committed.ts):
 *      maintenance (sealing, compaction, giving disk back) never runs in it (B7).
 *  B3  New seqs come from `meta.next_seq`, read and advanced inside the commit transaction (another
 *      process, `set-aside requeue` on the file, may have taken some), so a new sample never takes
 *      a seq any sample ever had.
 *  B8  A failed commit rolls the file back and the in-memory state with it: seqs, dictionary
 *      entries, the pending queue and the acks are restored, and the write is retried.
 */

/** Retry of a failed commit: 250 ms, doubling up to 5 s, no jitter (one writer). */
const WRITE_RETRY: BackoffPolicy = { initialMs: 250, maxMs: 5_000, factor: 2 };

interface PendingAppend {
  /** The samples as objects, or (appendColumns) as columns; `count` of them either way. */
  samples: readonly Sample[] | null;
  columns: SampleColumns | null;
  count: number;
  /** AppendOptions.keepsRefused: a refusal of these samples is not a loss. */
  keepsRefused: boolean;
  resolve: () => void;
  reject: (err: Error) => void;
}

/** Rows per INSERT statement: one statement step per 64 rows halves the per-row cost (bench/mqtt-throughput.ts). */
const INSERT_ROWS = 64;

/**
 * A due commit is cut into slices of whole appends (an append is never split across two
 * transactions, B1) sized to take about `sliceMs` (the maintenance slice, 25 ms), from the time per
 * sample the last commits took on this machine; the next slice runs in the next turn of the event
 * loop, after sockets and timers. Sources deliver in bursts (an OPC UA server answers a whole
 * publishing interval at once: 30,000 values at 30,000 items at 1 s), and a commit of all of them
 * held the loop 80–240 ms on a busy 2-core machine. Measured, not fixed: a fixed 5,000
 * cut ingest throughput by two thirds (each commit also pays an fsync, and then wrote one
 * last_committed row per variable), while a slice sized by time keeps commits as large as the
 * machine commits in that time. At least MIN_SLICE_SAMPLES, so one slow commit cannot shrink them to nothing.
 */
const MIN_SLICE_SAMPLES = 1_000;
/** Starting estimate: 2 µs a sample (500,000 samples/s, bench/buffer-ingest.ts's target). */
const INITIAL_MS_PER_SAMPLE = 0.002;
/** Commits smaller than this say more about the fsync than about the samples: not measured. */
const MEASURE_MIN_WORK = 1_000;

export interface IngestOptions {
  commitIntervalMs: number;
  /** Time one commit transaction should take at most (whole appends; see MIN_SLICE_SAMPLES). */
  sliceMs: number;
  commitEagerSamples: number;
  maxPendingSamples: number;
  whenFull: 'drop_oldest' | 'refuse_new';
  maxBytes: number;
  logger: Logger;
  metrics: Metrics;
  clock: Clock;
}

export interface IngestRooms {
  dict: VariableDictionary;
  tally: Tally;
  holds: Holds;
  losses: Losses;
  full: FullPolicy;
  /** Why the disk-full state holds (src/store/README.md S6), or null when the disk has room. */
  diskFull: () => string | null;
  lastCommitted: LastCommitted;
  /** The turn's budget the buffer's sliced work shares (turn-share.ts, B7). */
  share: TurnShare;
  /** Runs after every successful commit, in the commit's turn (the façade's hooks, in order). */
  afterCommit(c: { inserted: number; acks: number }): void;
}

export class Ingest {
  private readonly insertArgs: Array<number | Buffer> = new Array(INSERT_ROWS * 4);
  /** The variable ids and timestamps of the rows the running commit inserts (for last_committed, after it). */
  private committedIds = new Int32Array(4096);
  private committedTs = new Float64Array(4096);
  private nextSeq: number;
  private pending: PendingAppend[] = [];
  private pendingCount = 0;
  private ackQueue: number[] = [];
  private timer: NodeJS.Timeout | null = null;
  private retryTimer: NodeJS.Timeout | null = null;
  /** The next slice of a commit that was due, after the event loop has served I/O. */
  private sliceTimer: NodeJS.Immediate | null = null;
  /** Commit time per sample (and per acknowledgement's delete) on this machine, moving average. */
  private msPerSample = INITIAL_MS_PER_SAMPLE;
  /** When the planned commit runs (performance.now() ms), or Infinity when none is planned. */
  private dueAt = Infinity;
  /** performance.now() of the last successful commit. */
  lastCommitAt = -Infinity;
  private closed = false;
  private committing = false;
  private writableNow = true;
  private lastError: { code: string; message: string; at: number } | null = null;
  private writeFailures = 0;
  private refusing: string | null = null;
  private readonly st: { insert: Statement; insertMany: Statement; setNextSeq: Statement; getNextSeq: Statement; deleteSeq: Statement };

  constructor(
    private readonly db: StoreOwner,
    private readonly o: IngestOptions,
    private readonly r: IngestRooms,
  ) {
    this.st = {
      insert: db.prepare('INSERT INTO samples (seq, var, ts, value) VALUES (?, ?, ?, ?)'),
      insertMany: db.prepare(`INSERT INTO samples (seq, var, ts, value) VALUES ${Array(INSERT_ROWS).fill('(?, ?, ?, ?)').join(', ')}`),
      setNextSeq: db.prepare("INSERT INTO meta (key, value) VALUES ('next_seq', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value"),
      getNextSeq: db.prepare("SELECT value FROM meta WHERE key = 'next_seq'").pluck(true),
      deleteSeq: db.prepare('DELETE FROM samples WHERE seq = ?'),
    };
    const storedNext = this.st.getNextSeq.get() as string | undefined;
    const maxSeq = (db.prepare('SELECT max(seq) FROM samples').pluck(true).get() as number | null) ?? 0;
    const maxChunkSeq = (db.prepare('SELECT max(seq_from + n - 1) FROM chunks').pluck(true).get() as number | null) ?? 0;
    this.nextSeq = Math.max(Number(storedNext ?? 1), maxSeq + 1, maxChunkSeq + 1);
  }

  /** The seq the next committed sample gets (samples up to `nextSeq − 1` are committed). */
  get lastSeq(): number {
    return this.nextSeq - 1;
  }

  get pendingSamples(): number {
    return this.pendingCount;
  }

  /** Whether a commit has work waiting (samples or acks). */
  get hasWork(): boolean {
    return this.pending.length > 0 || this.ackQueue.length > 0;
  }

  /** When the next commit is planned (performance.now() ms; Infinity when none): maintenance ends its slices before it (B7). */
  get commitDueAt(): number {
    return this.hasWork ? this.dueAt : Infinity;
  }

  get writable(): boolean {
    return this.writableNow;
  }

  get lastWriteError(): { code: string; message: string; at: number } | null {
    return this.lastError;
  }

  /**
   * Queues samples for the next group commit. Resolves once they are committed (B1); rejects with a
   * `SamplesRefusedError` when the buffer does not keep them (see `SampleSink`).
   */
  append(samples: readonly Sample[], options: AppendOptions = {}): Promise<void> {
    return this.enqueue(samples, null, samples.length, options);
  }

  /** `append` for samples held as columns (SampleSink.appendColumns): committed straight from the typed arrays. */
  appendColumns(columns: SampleColumns, options: AppendOptions = {}): Promise<void> {
    return this.enqueue(null, columns, columns.count, options);
  }

  private enqueue(samples: readonly Sample[] | null, columns: SampleColumns | null, count: number, options: AppendOptions): Promise<void> {
    const keepsRefused = options.keepsRefused === true;
    if (this.closed) return Promise.reject(new SamplesRefusedError('BUFFER_CLOSED', 'refused: the buffer is closed (the gateway is stopping)', count));
    if (count === 0) return Promise.resolve();
    const invalid = samples ? nonFiniteSample(samples) : nonFiniteColumn(columns!);
    if (invalid !== null) {
      // B1: refused whole, as every refusal is, rather than committed with a sample skipped unseen.
      this.r.losses.countRefusal([{ samples: samples ?? columns!.toSamples(), keepsRefused }], 'INVALID_SAMPLE', invalid);
      return Promise.reject(new SamplesRefusedError('INVALID_SAMPLE', invalid, count));
    }
    if (this.pendingCount + count > this.o.maxPendingSamples) {
      // Memory is the limit: the disk has refused writes for a while, or one append is larger than
      // what may wait for a commit. Refuse the newest (these) rather than grow without bound.
      const reason = this.writableNow
        ? `refused: ${this.pendingCount + count} samples would wait for one commit, more than the ${this.o.maxPendingSamples} the buffer holds in memory; append them in smaller steps`
        : `refused: the buffer cannot write (${this.lastError?.code ?? 'unknown error'}) and ${this.pendingCount} samples already wait in memory; at most ${this.o.maxPendingSamples} may wait for the disk`;
      this.r.losses.countRefusal([{ samples: samples ?? columns!.toSamples(), keepsRefused }], 'BUFFER_PENDING_LIMIT', reason);
      return Promise.reject(new SamplesRefusedError('BUFFER_PENDING_LIMIT', reason, count));
    }
    return new Promise<void>((resolve, reject) => {
      this.pending.push({ samples, columns, count, keepsRefused, resolve, reject });
      this.pendingCount += count;
      this.scheduleCommit();
    });
  }

  /**
   * The service acknowledged these rows (2xx). They stay claimed (excluded from claims) and are
   * deleted in the next group commit; losing that delete in a crash only means sending them again.
   */
  queueAcks(rows: readonly { seq: number }[]): void {
    if (this.closed) return;
    for (const r of rows) {
      this.r.holds.claim(r.seq);
      this.ackQueue.push(r.seq);
    }
    this.scheduleCommit();
  }

  /** Commits everything pending now (slice after slice, without yielding). */
  flush(): void {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    this.dueAt = performance.now();
    this.commitAll();
  }

  /** Slices until nothing is pending, the disk refuses writes, or a slice makes no progress. */
  private commitAll(): void {
    for (;;) {
      const before = this.pending.length + this.ackQueue.length;
      this.commit(false);
      const after = this.pending.length + this.ackQueue.length;
      if (after === 0 || after >= before || this.retryTimer) return;
    }
  }

  private scheduleCommit(): void {
    if (this.retryTimer) return; // the disk refused writes; the retry loop will commit
    if (this.pendingCount >= this.o.commitEagerSamples) {
      if (this.timer) clearTimeout(this.timer);
      this.dueAt = performance.now();
      this.timer = setTimeout(() => {
        this.timer = null;
        this.commit();
      }, 0);
      return;
    }
    if (this.timer) return;
    this.dueAt = performance.now() + this.o.commitIntervalMs;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.commit();
    }, this.o.commitIntervalMs);
  }

  /** The commit transaction's body: the rows, `meta.next_seq`, the acks' deletes. */
  private commitBody(batch: PendingAppend[], acks: number[], refuse: boolean): number {
    let inserted = 0;
    if (!refuse) {
      // Another process (edge-gateway set-aside requeue on the file) may have taken seqs: B3 holds
      // across processes because both read and advance meta.next_seq inside their transaction.
      const stored = Number((this.st.getNextSeq.get() as string | undefined) ?? 0);
      if (stored > this.nextSeq) this.nextSeq = stored;
      let seq = this.nextSeq;
      const args = this.insertArgs;
      let n = 0;
      let ids = this.committedIds;
      let tss = this.committedTs;
      for (const p of batch) {
        const c = p.columns;
        const list = p.samples;
        for (let k = 0; k < p.count; k++) {
          let variable: string;
          let value: number;
          let rawTs: number;
          if (c) {
            variable = c.variables[k];
            value = c.values[k];
            rawTs = c.ts[k];
          } else {
            const s = list![k];
            variable = s.variable;
            value = s.value;
            rawTs = s.ts;
          }
          const id = this.r.dict.idOf(variable);
          const ts = Math.trunc(rawTs);
          if (inserted === ids.length) {
            ids = this.committedIds = growInt32(ids);
            tss = this.committedTs = growFloat64(tss);
          }
          ids[inserted] = id;
          tss[inserted] = ts;
          args[n++] = seq++;
          args[n++] = id;
          args[n++] = ts;
          args[n++] = toRowValue(value);
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
    }
    for (const seq of acks) this.st.deleteSeq.run(seq);
    return inserted;
  }

  /**
   * One commit slice. `shared`: it keeps to what the turn's budget has left after the buffer's
   * other work in this turn (turn-share.ts), and waits for a later turn when that is under a
   * quarter of a slice; a flush (`commitAll`) commits regardless.
   */
  private commit(shared = true): void {
    if (this.sliceTimer) {
      clearImmediate(this.sliceTimer);
      this.sliceTimer = null;
    }
    if (this.closed || this.committing || !this.hasWork) return;
    const left = shared ? this.r.share.left() : this.o.sliceMs;
    if (left < this.o.sliceMs / 4 && !this.retryTimer) {
      // A maintenance slice or a job's delete already used this turn: commit in the next one
      // (B1 is unaffected: nothing is resolved before its commit; this only moves the commit).
      if (this.timer) clearTimeout(this.timer);
      this.dueAt = performance.now();
      this.timer = this.r.share.nextTurn(() => {
        this.timer = null;
        this.commit();
      });
      return;
    }
    this.committing = true;
    // One slice: whole appends up to what fits the turn's budget (at least one append), acks in what is left.
    const limit = Math.max(MIN_SLICE_SAMPLES, Math.floor(this.sliceSamples * Math.min(1, left / this.o.sliceMs)));
    let take = 0;
    let samples = 0;
    while (take < this.pending.length && (take === 0 || samples + this.pending[take].count <= limit)) {
      samples += this.pending[take].count;
      take += 1;
    }
    const batch = take === this.pending.length ? this.pending : this.pending.slice(0, take);
    // Inserts and acks' deletes share the slice (msPerSample is measured over both): acks get what
    // the inserts leave, and at least a quarter so they never wait behind a steady stream of inserts.
    const ackLimit = Math.max(limit - samples, Math.ceil(limit / 4));
    const acks = this.ackQueue.length <= ackLimit ? this.ackQueue : this.ackQueue.slice(0, ackLimit);
    this.pending = take === this.pending.length ? [] : this.pending.slice(take);
    this.pendingCount -= samples;
    this.ackQueue = acks === this.ackQueue ? [] : this.ackQueue.slice(acks.length);
    const sliced = this.hasWork;
    const refusal = this.refusal();
    const refuse = refusal !== null;
    const started = performance.now();
    const seqBefore = this.nextSeq;
    const varsBefore = this.r.dict.size;
    try {
      // Alone, never inside another write (a NestedWriteError otherwise): B1 and B8 rest on it.
      const inserted = this.db.write('a group commit', () => this.commitBody(batch, acks, refuse));
      this.lastCommitAt = performance.now();
      // After the commit, never inside it (last-committed.ts L1): written on the maintenance schedule.
      if (inserted > 0) this.r.lastCommitted.record(this.committedIds, this.committedTs, inserted);
      this.measure(this.lastCommitAt - started, inserted + acks.length);
      const t = this.r.tally;
      t.rows += inserted - acks.length;
      t.committedTotal += inserted;
      for (const seq of acks) this.r.holds.unclaim(seq);
      const m = this.o.metrics;
      m.bufferCommits.inc();
      m.bufferCommittedSamples.inc(inserted);
      m.bufferCommitSeconds.observe((performance.now() - started) / 1000);
      this.markWritable();
      if (refusal !== null) this.refuse(batch, 'BUFFER_FULL', refusal);
      else for (const p of batch) p.resolve();
      if (samples > 0) this.refusing = refusal;
      this.r.afterCommit({ inserted, acks: acks.length });
    } catch (err) {
      // Roll back in-memory state; the transaction rolled back the file.
      this.nextSeq = seqBefore;
      this.r.dict.forgetFrom(varsBefore);
      this.pending = batch.concat(this.pending);
      this.pendingCount += samples;
      this.ackQueue = acks.concat(this.ackQueue);
      this.onWriteFailure(err);
    } finally {
      this.committing = false;
      this.r.share.ran(started);
    }
    if (this.retryTimer) return;
    if (sliced && this.hasWork) {
      // The rest of a commit that was due: next turn, once pending I/O and timers have run.
      this.dueAt = performance.now();
      this.sliceTimer = setImmediate(() => {
        this.sliceTimer = null;
        this.commit();
      });
    } else if (this.pending.length > 0) this.scheduleCommit();
  }

  /**
   * Why new samples are refused now (buffer.when_full = refuse_new), or null: the samples are at
   * buffer.max_bytes (their own space: side tables do not count), or the disk is full
   * (src/store/README.md S6: the backlog is delivered in the reserve's room and intake resumes by
   * itself once the disk has room again).
   */
  private refusal(): string | null {
    if (this.o.whenFull !== 'refuse_new') return null;
    if (this.r.full.overLimit()) return `refused: buffer full (buffer.when_full = refuse_new): the samples use ${this.db.bytes} bytes, buffer.max_bytes is ${this.o.maxBytes}`;
    const disk = this.r.diskFull();
    if (disk !== null) return `refused: ${disk}; buffer.when_full = refuse_new keeps what is stored: the backlog is delivered, which frees space, and new samples are taken again by themselves once the disk has room`;
    return null;
  }

  /** Why the last commit refused its new samples, or null when it took them. */
  get refusingReason(): string | null {
    return this.refusing;
  }

  /** Samples and acks one slice takes together (acks at least a quarter): what the last commits did in sliceMs. */
  get sliceSamples(): number {
    return Math.max(MIN_SLICE_SAMPLES, Math.floor(this.o.sliceMs / this.msPerSample));
  }

  private measure(ms: number, work: number): void {
    if (work < MEASURE_MIN_WORK) return;
    // Up fast, down slowly: a slice that overran (page splits, a cold cache, the disk's fsync)
    // shrinks the next ones at once, and one quick commit does not grow them back.
    const now = ms / work;
    this.msPerSample = now > this.msPerSample ? 0.5 * this.msPerSample + 0.5 * now : 0.85 * this.msPerSample + 0.15 * now;
  }

  /** Rejects appends the buffer does not keep (B1), each with its own count, after counting them. */
  private refuse(batch: readonly PendingAppend[], code: BufferRefusal, reason: string, lostAs?: LossLabel): void {
    this.r.losses.countRefusal(batch.map((p) => ({ samples: p.samples ?? p.columns!.toSamples(), keepsRefused: p.keepsRefused })), code, reason, lostAs);
    for (const p of batch) p.reject(new SamplesRefusedError(code, reason, p.count));
  }

  private onWriteFailure(err: unknown): void {
    const code = errorCode(err, 'SQLITE_ERROR');
    this.writeFailures += 1;
    this.writableNow = false;
    this.lastError = { code, message: describeError(err), at: this.o.clock.now() };
    this.o.metrics.bufferWriteErrors.inc({ code });
    this.o.metrics.bufferWritable.set(0);
    if (this.writeFailures === 1) {
      this.o.logger.error({ code, err: describeError(err), pending_samples: this.pendingCount }, 'buffer write failed; samples are held in memory and the write is retried');
    }
    if (code === 'SQLITE_FULL') {
      // The disk (or the file's page limit) is full. Apply the policy so that ingest can go on.
      if (this.o.whenFull === 'drop_oldest') this.r.full.dropOldest(this.pendingCount);
      else this.refusePending();
    }
    const delay = backoffDelay(WRITE_RETRY, this.writeFailures);
    this.dueAt = performance.now() + delay;
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
    if (!this.writableNow) this.o.logger.warn({ failed_attempts: this.writeFailures }, 'buffer writes succeed again');
    this.writableNow = true;
    this.writeFailures = 0;
    this.o.metrics.bufferWritable.set(1);
  }

  /** refuse_new on a full disk: the pending samples are refused back to their callers so sources are not blocked. */
  private refusePending(): void {
    const batch = this.pending;
    this.pending = [];
    this.pendingCount = 0;
    this.refusing = 'refused: buffer full: the disk is full (SQLITE_FULL) and buffer.when_full = refuse_new';
    this.refuse(batch, 'BUFFER_FULL', this.refusing);
  }

  /** Commits what is pending and stops: later appends are refused. */
  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.timer = null;
    this.retryTimer = null;
    this.commitAll();
    this.closed = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    if (this.timer) clearTimeout(this.timer);
    if (this.sliceTimer) clearImmediate(this.sliceTimer);
    this.sliceTimer = null;
  }

  /**
   * After `stop`: refuses the samples still held in memory because the disk refused every write
   * and returns how many. Their appends are refused, so a caller that keeps them (a
   * QoS 1 publisher) offers them again and they are not counted lost.
   */
  discardPending(): number {
    const discarded = this.pendingCount;
    if (discarded > 0) {
      this.o.logger.error({ discarded_samples: discarded, last_write_error: this.lastError }, `buffer closed while the disk refused writes: ${discarded} samples held in memory are discarded`);
    }
    this.refuse(this.pending, 'BUFFER_CLOSED', 'refused: the buffer closed before these samples could be written (the disk refused writes)', 'unwritable_at_stop');
    this.pending = [];
    this.pendingCount = 0;
    return discarded;
  }
}

function growInt32(a: Int32Array): Int32Array<ArrayBuffer> {
  const b = new Int32Array(a.length * 2);
  b.set(a);
  return b;
}

function growFloat64(a: Float64Array): Float64Array<ArrayBuffer> {
  const b = new Float64Array(a.length * 2);
  b.set(a);
  return b;
}

/**
 * Why an append cannot be committed as it is (a value or timestamp that is not a finite number:
 * the service takes JSON numbers only, CONTRACT.md), naming the sample; null when every sample is
 * finite. Sources convert device values with `toSampleValue` and never offer such a sample; this
 * keeps a caller's bug from being committed, or skipped unseen.
 */
function nonFiniteSample(samples: readonly Sample[]): string | null {
  for (let i = 0; i < samples.length; i++) {
    const s = samples[i];
    if (Number.isFinite(s.value) && Number.isFinite(s.ts)) continue;
    return nonFiniteReason(i, samples.length, s.variable, s.value, s.ts);
  }
  return null;
}

/** `nonFiniteSample` for samples held as columns (no object per sample). */
function nonFiniteColumn(c: SampleColumns): string | null {
  for (let i = 0; i < c.count; i++) {
    if (Number.isFinite(c.values[i]) && Number.isFinite(c.ts[i])) continue;
    return nonFiniteReason(i, c.count, c.variables[i], c.values[i], c.ts[i]);
  }
  return null;
}

function nonFiniteReason(i: number, count: number, variable: string, value: number, ts: number): string {
  const what = Number.isFinite(ts) ? `value ${String(value)}` : `timestamp ${String(ts)}`;
  return `refused: sample ${i + 1} of ${count} (variable "${variable}") has the ${what}; the buffer keeps finite numbers only, so none of this append's ${count} samples was committed`;
}
