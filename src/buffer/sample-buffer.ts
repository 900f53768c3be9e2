/**
 * The durable store-and-forward buffer for samples: the façade over the buffer's rooms
 * (src/buffer/README.md holds the invariants B1–B9 they keep together, and the room map).
 *
 * The façade builds the rooms on the store's samples owner (src/store/README.md: the file has one
 * owner, the store; the buffer writes only through it), hands each room only the rooms it needs,
 * runs the after-commit hooks in order, and offers the rest of the gateway narrow views of the
 * buffer (views.ts): what the sync sender uses, what the backfill uses, what status and the console
 * read. Nobody gets the database handle.
 */
import { describeError } from '../core/errors.js';
import type { AppendOptions, Sample, SampleColumns, SampleSink } from '../core/sample.js';
import { Checkpointer } from './capacity/checkpointer.js';
import { DEFAULT_RETURN_AFTER_MS, DiskReturn } from './capacity/disk.js';
import { FullPolicy } from './capacity/full-policy.js';
import { Losses } from './capacity/losses.js';
import { WalBound } from './capacity/wal.js';
import { SealSchedule } from './chunks/seal-schedule.js';
import { Sealer } from './chunks/sealer.js';
import { ChunkStore } from './chunks/store.js';
import { Claims } from './claims.js';
import { Holds } from './holds.js';
import { ImportLedger } from './imports/ledger.js';
import type { LedgerEntry } from './imports/ledger.js';
import { ImportRanges } from './imports/ranges.js';
import { SampleReader } from './imports/reader.js';
import { Ingest } from './ingest.js';
import { Maintenance } from './maintenance.js';
import { Readout } from './readout.js';
import { FLUSH_MS as LAST_COMMITTED_FLUSH_MS, LastCommitted } from './last-committed.js';
import { SetAsideMove, SetAsideStore, type SetAsideInfo } from './set-aside.js';
import { Tally } from './tally.js';
import { TurnShare } from './turn-share.js';
import { TrendStore, type TrendSource, type TrendVisit } from './trend.js';
import type { BufferedRow, BufferOptions, BufferStats, ImportReader, SeqRange } from './types.js';
import { VariableDictionary } from './variables.js';
import type { BackfillBuffer, BufferReadout, SyncBuffer, TrendBuffer } from './views.js';
import type { Store, StoreOwner } from '../store/store.js';
import type { DiskUsage } from '../store/usage.js';

export type { BufferedRow, BufferOptions, BufferStats, FullEpisode, ImportReader, SeqRange } from './types.js';

/** Rows are sealed once committed this long ago (buffer.seal_after; bench/buffer-footprint.ts). */
export const DEFAULT_SEAL_AFTER_MS = 2 * 60_000;
/**
 * Most seqs per sealing job (buffer.seal_rows): its rows in memory stay small (bench/memory.ts);
 * the job is sliced, and its commit sized to fit a slice; compaction makes the chunks large.
 */
export const DEFAULT_SEAL_ROWS = 100_000;
/**
 * Most samples per compaction window (buffer.compact_samples); a window is also cut so that its
 * commit fits a slice (chunks/seal-schedule.ts).
 */
export const DEFAULT_COMPACT_SAMPLES = 2_000_000;
/** Longest a maintenance slice holds the event loop (B7): commits wait at most this long for one. */
export const DEFAULT_SLICE_MS = 25;
/**
 * Free space the file keeps for new samples before it gives pages back (buffer.keep_free). None by
 * default: pages the next samples take are reused within the minute anyway (capacity/disk.ts).
 */
export const DEFAULT_KEEP_FREE_BYTES = 0;

/** A PASSIVE checkpoint at least this long (ms) moves checkpoints to the worker thread (capacity/checkpointer.ts). */
const CHECKPOINT_INLINE_BELOW_MS = 10;

export class SampleBuffer implements SampleSink, SyncBuffer, BackfillBuffer, BufferReadout, TrendBuffer {
  private readonly opts: Required<BufferOptions>;
  private readonly listeners = new Set<() => void>();
  private readonly readout: Readout;
  private readonly tally = new Tally();
  private readonly usage: DiskUsage;
  private readonly diskReturn: DiskReturn;
  private readonly wal: WalBound;
  private readonly checkpointer: Checkpointer;
  private readonly losses: Losses;
  private readonly full: FullPolicy;
  private readonly store: ChunkStore;
  private readonly sealer: Sealer;
  private readonly seal: SealSchedule;
  private readonly maintenance: Maintenance;
  /** The turn's budget commits, maintenance and a job's deletes share (turn-share.ts, B7). */
  private readonly share: TurnShare;
  private readonly holds: Holds;
  private readonly ingest: Ingest;
  private readonly claims: Claims;
  private readonly ranges: ImportRanges;
  private readonly reader: SampleReader;
  private readonly trend: TrendStore;
  private closed = false;
  /** The turn after a commit's acknowledgements, when one is due (afterAcknowledgements). */
  private afterAcks: NodeJS.Immediate | null = null;
  /** Per-variable newest committed timestamp (issue 14), written inside the commit transaction. */
  readonly lastCommitted: LastCommitted;
  /** The import-job ledger (imports/ledger.ts), in this file. */
  readonly importLedger: ImportLedger;
  /** Samples the service refused, for the operator (list, drop, requeue). */
  readonly setAsideStore: SetAsideStore;
  /** Samples that were still held in memory (unwritable disk) when the buffer closed. */
  discardedAtClose = 0;

  /** The samples owner's handle on the file (src/store/README.md): the buffer's tables. */
  private readonly db: StoreOwner;

  /**
   * The buffer on `store`'s file: the samples owner (its bound is buffer.max_bytes), and the
   * set-aside and trend owners, each with its own space.
   */
  constructor(
    private readonly file: Store,
    options: BufferOptions,
  ) {
    this.opts = {
      maxPendingSamples: 2_000_000,
      commitEagerSamples: 50_000,
      episodeQuietMs: 10_000,
      walLimitBytes: 64 * 1024 * 1024,
      sealAfterMs: DEFAULT_SEAL_AFTER_MS,
      sealRows: DEFAULT_SEAL_ROWS,
      compactSamples: DEFAULT_COMPACT_SAMPLES,
      compressor: null,
      sliceMs: DEFAULT_SLICE_MS,
      maintenanceIdleMs: 1_000,
      lastCommittedFlushMs: LAST_COMMITTED_FLUSH_MS,
      keepFreeBytes: DEFAULT_KEEP_FREE_BYTES,
      returnFreeAfterMs: DEFAULT_RETURN_AFTER_MS,
      checkpointInlineBelowMs: CHECKPOINT_INLINE_BELOW_MS,
      ...options,
    };
    const o = this.opts;
    const { logger, metrics, clock } = o;
    const changed = () => this.notify();
    const db = file.owner('samples');
    this.db = db;
    db.maxBytes = o.maxBytes;
    db.fullPolicy({ text: o.whenFull === 'drop_oldest' ? 'buffer.when_full = drop_oldest: the oldest unsent samples are deleted' : 'buffer.when_full = refuse_new: new samples are refused' });
    const dict = new VariableDictionary(db);
    this.share = new TurnShare(o.sliceMs);
    this.lastCommitted = new LastCommitted(db, dict, o.lastCommittedFlushMs);
    this.importLedger = new ImportLedger(db, clock);
    this.usage = file.usage;
    // On the main thread while a checkpoint is quick (a small plant's few pages), on a worker from
    // the first slow one (100,000 samples/s: 54-186 ms each).
    this.checkpointer = new Checkpointer(db, { logger, ...(o.checkpointInlineBelowMs === null ? {} : { inlineBelowMs: o.checkpointInlineBelowMs }) });
    this.wal = new WalBound(db, { logger, clock, limitBytes: o.walLimitBytes, checkpointing: () => this.checkpointer.running });
    this.store = new ChunkStore(db, o.compressor);
    this.holds = new Holds(db, this.importLedger);
    this.sealer = new Sealer(db, this.store, this.holds);
    this.losses = new Losses({ logger, metrics, clock, episodeQuietMs: o.episodeQuietMs, maxBytes: o.maxBytes, usedBytes: () => db.bytes });
    this.full = new FullPolicy(db, { maxBytes: o.maxBytes, logger, holds: this.holds, store: this.store, tally: this.tally, dict, losses: this.losses });
    this.ingest = new Ingest(db, o, {
      dict,
      tally: this.tally,
      holds: this.holds,
      losses: this.losses,
      full: this.full,
      diskFull: () => file.diskFullReason,
      lastCommitted: this.lastCommitted,
      share: this.share,
      afterCommit: (c) => this.afterCommit(c),
    });
    this.setAsideStore = new SetAsideStore(file, { metrics, logger, clock });
    const setAsideMove = new SetAsideMove(db, this.setAsideStore.owner, this.store, this.setAsideStore.counts);
    this.claims = new Claims(db, { logger, clock, holds: this.holds, store: this.store, tally: this.tally, dict, ingest: this.ingest, setAsideMove, changed });
    this.reader = new SampleReader(db, { store: this.store, tally: this.tally, dict });
    this.ranges = new ImportRanges(db, { clock, holds: this.holds, store: this.store, tally: this.tally, ledger: this.importLedger, reader: this.reader, setAsideMove, changed });
    // Checkpoints run on the maintenance schedule (capacity/disk.ts), not inside whichever commit
    // crosses SQLite's automatic threshold (B7).
    db.pragma('wal_autocheckpoint = 0');
    this.tally.rows = db.prepare('SELECT count(*) FROM samples').pluck(true).get() as number;
    this.tally.resync(this.store.totals());
    this.seal = new SealSchedule(db, { ...o, sealer: this.sealer, store: this.store, holds: this.holds, tally: this.tally, lastSeq: () => this.ingest.lastSeq, changed: () => this.refreshGauges(), wrote: () => this.diskReturn.wrote() });
    this.diskReturn = new DiskReturn(db, { keepFreeBytes: o.keepFreeBytes, returnAfterMs: o.returnFreeAfterMs, logger, metrics, usage: this.usage, wal: this.wal, lastCommitAt: () => this.ingest.lastCommitAt, changed: () => this.refreshGauges(), checkpointer: this.checkpointer, diskFull: () => file.diskFull });
    this.trend = new TrendStore(file.owner('trend'), { clock, logger, dict, wrote: () => this.diskReturn.wrote() });
    this.maintenance = new Maintenance([this.seal, this.diskReturn, this.trend, this.lastCommitted], { sliceMs: o.sliceMs, idleMs: o.maintenanceIdleMs, logger, metrics, commitDueAt: () => this.ingest.commitDueAt, share: this.share });
    this.readout = new Readout(db, { maxBytes: o.maxBytes, metrics, clock, tally: this.tally, usage: this.usage, samplesBytes: () => db.bytes, wal: this.wal, holds: this.holds, store: this.store, ingest: this.ingest, losses: this.losses });
    metrics.bufferWritable.set(1);
    this.refreshGauges();
    this.maintenance.start();
  }

  /**
   * After every successful commit, in order: the ingest rate, the end of a quiet full episode, a
   * checkpoint made due and the seal schedule's clock (both run later), the gauges, the listeners
   * (sync sender, backfill), and a wake-up for maintenance. Nothing here deletes, seals, compacts,
   * checkpoints or gives disk back: the commit's appends are acknowledged in this turn's
   * microtasks, before any of that (B7). drop_oldest and the WAL backstop run in the next turn.
   */
  private afterCommit(c: { inserted: number; acks: number }): void {
    this.readout.ingestRate.add(c.inserted);
    this.losses.maybeEndEpisode(this.ingest.writable);
    this.diskReturn.wrote();
    if (c.inserted > 0) this.seal.committed();
    this.refreshGauges();
    if (c.inserted > 0 || c.acks > 0) this.notify();
    this.afterAcknowledgements();
    this.maintenance.wake();
  }

  /**
   * The full policy (drop_oldest right after the commit that crossed max_bytes, B9) and the WAL
   * backstop, in the turn after the commit: its acknowledgements (promise callbacks) have run (B7).
   */
  private afterAcknowledgements(): void {
    if (this.afterAcks !== null || this.closed) return;
    this.afterAcks = setImmediate(() => {
      this.afterAcks = null;
      if (this.closed) return;
      if (this.opts.whenFull === 'drop_oldest' && this.full.overLimit()) {
        this.full.dropOldest();
        this.refreshGauges();
      }
      this.wal.check();
    });
  }

  // ---------------------------------------------------------------- ingest (SampleSink)

  /** Queues samples for the next group commit (B1): resolves once committed, rejects when refused. */
  append(samples: readonly Sample[], options: AppendOptions = {}): Promise<void> {
    return this.ingest.append(samples, options);
  }

  /** `append` for samples held as columns (SampleSink.appendColumns). */
  appendColumns(columns: SampleColumns, options: AppendOptions = {}): Promise<void> {
    return this.ingest.appendColumns(columns, options);
  }

  /** Values a source lost before they reached the buffer (SampleSink.lost): they count in the dropped total. */
  lost(count: number): void {
    this.losses.countLostUpstream(count);
  }

  /** Commits everything pending now. */
  async flush(): Promise<void> {
    this.ingest.flush();
  }

  // ---------------------------------------------------------------- the sync path (SyncBuffer)

  claimNewest(limit: number): BufferedRow[] {
    return this.claims.claimNewest(limit);
  }

  claimOldest(limit: number): BufferedRow[] {
    return this.claims.claimOldest(limit);
  }

  oldestAvailableTs(): number | null {
    return this.claims.oldestAvailableTs();
  }

  release(rows: readonly { seq: number }[]): void {
    this.claims.release(rows);
  }

  ack(rows: readonly { seq: number }[]): void {
    this.claims.ack(rows);
  }

  setAside(rows: readonly BufferedRow[], info: SetAsideInfo): void {
    this.claims.setAside(rows, info);
    this.refreshGauges();
  }

  setAsideGroups(groups: ReadonlyArray<{ rows: readonly BufferedRow[]; info: SetAsideInfo }>): void {
    this.claims.setAsideGroups(groups);
    this.refreshGauges();
  }

  trimSetAside(prefix: string, keep: number): number {
    return this.setAsideStore.trimReason(prefix, keep);
  }

  // ---------------------------------------------------------------- import jobs (BackfillBuffer)

  reserveRange(range: SeqRange): void {
    this.ranges.reserveRange(range);
  }

  shrinkRange(range: SeqRange, newTo: number, count?: number): void {
    this.ranges.shrinkRange(range, newTo, count);
  }

  releaseRange(range: SeqRange): void {
    this.ranges.releaseRange(range);
  }

  finishImportJob(entry: LedgerEntry, rejected: ReadonlyMap<number, unknown>): number {
    const n = this.ranges.finishJob(entry, rejected);
    this.refreshGauges();
    return n;
  }

  deleteRange(range: SeqRange): number {
    const n = this.ranges.deleteRange(range);
    this.refreshGauges();
    return n;
  }

  /** `deleteRange` a slice per event-loop turn (ImportRanges.deleteRangeInSlices). */
  async deleteRangeInSlices(range: SeqRange): Promise<number> {
    const n = await this.ranges.deleteRangeInSlices(range, this.share, () => this.closed);
    this.refreshGauges();
    return n;
  }

  planJobRange(maxItems: number, keepNewest: number): SeqRange | null {
    return this.ranges.planJobRange(maxItems, keepNewest, this.available);
  }

  markSyncOnly(range: SeqRange): void {
    this.ranges.markSyncOnly(range);
  }

  pruneSyncOnly(): void {
    this.ranges.pruneSyncOnly();
  }

  get syncOnlyRanges(): readonly SeqRange[] {
    return this.holds.syncOnlyRanges;
  }

  get reservedRanges(): readonly SeqRange[] {
    return this.holds.reservedRanges;
  }

  importReader(range: SeqRange, idField: string, rows = 1_000): ImportReader {
    return this.reader.importReader(range, idField, rows);
  }

  /** The buffer's file, for a reader on a connection of its own (imports/detached-reader.ts); null in memory. */
  get filePath(): string | null {
    return this.db.memory ? null : this.db.name;
  }

  readRange(range: SeqRange, chunk = 5_000): Generator<BufferedRow[]> {
    return this.reader.readRange(range, chunk);
  }

  /** Lowest seq currently claimed by the sync path, or null. */
  lowestInflight(): number | null {
    return this.holds.lowestClaimed();
  }

  // ---------------------------------------------------------------- maintenance (tests, benchmarks, tools)

  /** Resolves once maintenance has nothing left to do (sealing, compaction caught up). */
  maintenanceIdle(): Promise<void> {
    return this.maintenance.idle();
  }

  /** Seals every row not held right now, regardless of age, in this call. */
  sealNow(): void {
    this.seal.sealNow();
    this.refreshGauges();
  }

  /** Compacts every window worth it now. */
  compactNow(): void {
    this.seal.compactNow();
    this.refreshGauges();
  }

  // ---------------------------------------------------------------- the console's trend (TrendBuffer)

  trendRows(bucketMs: number, since: number): number[] {
    return this.trend.rowIds(bucketMs, since);
  }

  readTrendRow(row: number, bucketMs: number, since: number, visit: TrendVisit): void {
    this.trend.readRow(row, bucketMs, since, visit);
  }

  keepTrend(source: TrendSource): () => void {
    return this.trend.keep(source);
  }

  /** Rows and blob bytes the trend keeps (tests, benchmarks). */
  trendSize(): { rows: number; bytes: number; capBytes: number } {
    return { rows: this.trend.rowCount, bytes: this.trend.bytes, capBytes: this.trend.capBytes };
  }

  // ---------------------------------------------------------------- observation (BufferReadout)

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
    return this.readout.ingestRate.perSecond();
  }

  /** Samples a sender may claim now. Acked rows stay claimed and counted until deleted. */
  get available(): number {
    return this.readout.available();
  }

  /** Bytes the samples use in the file (their owner's pages in use, side tables apart): what buffer.max_bytes limits. */
  usedBytes(): number {
    return this.db.bytes;
  }

  /** Size of the WAL file in bytes (0 when there is none). */
  walBytes(): number {
    return this.wal.bytes();
  }

  stats(): BufferStats {
    return this.readout.stats();
  }

  refreshGauges(): void {
    this.readout.refreshGauges();
  }

  // ---------------------------------------------------------------- shutdown

  /** Commits what is pending and stops; the file stays open until its store closes (Store.close). Safe to call twice. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.afterAcks !== null) clearImmediate(this.afterAcks);
    this.afterAcks = null;
    this.maintenance.stop();
    // The checkpoint worker ends (after a checkpoint it is running) before the store's last TRUNCATE.
    const checkpointerEnded = this.checkpointer.close();
    this.seal.cancel();
    this.ingest.stop();
    this.share.close();
    this.losses.maybeEndEpisode(this.ingest.writable, true);
    this.discardedAtClose = this.ingest.discardPending();
    // The console's open buckets, after the last samples (a clean stop keeps the whole trend).
    this.trend.finish();
    this.trend.close();
    try {
      this.lastCommitted.flush();
    } catch (err) {
      // A full or failing disk: the table lags (L1), which costs re-reading some history, not data.
      this.opts.logger.warn({ err: describeError(err) }, 'buffer: the newest committed timestamps could not be written at close; a history backfill may re-read up to 30 s');
    }
    // The worker's checkpoint ends before the store's last TRUNCATE (Store.close, by whoever opened the file).
    await checkpointerEnded;
  }
}
