import type { LedgerEntry } from './imports/ledger.js';
import type { SetAsideInfo } from './set-aside.js';
import type { TrendSource, TrendVisit } from './trend.js';
import type { BufferedRow, BufferStats, ImportReader, SeqRange } from './types.js';

/**
 * The buffer as the rest of the gateway sees it: narrow views, one per user, instead of the
 * database handle (src/buffer/README.md). SampleBuffer implements all of them.
 */

/** What the sync sender uses (src/uplink/sync-sender.ts): claims, acknowledgements, set-aside. */
export interface SyncBuffer {
  claimNewest(limit: number): BufferedRow[];
  claimOldest(limit: number): BufferedRow[];
  oldestAvailableTs(): number | null;
  release(rows: readonly { seq: number }[]): void;
  ack(rows: readonly { seq: number }[]): void;
  setAside(rows: readonly BufferedRow[], info: SetAsideInfo): void;
  /** Several groups with their own reasons in one transaction. */
  setAsideGroups(groups: ReadonlyArray<{ rows: readonly BufferedRow[]; info: SetAsideInfo }>): void;
  /** Keeps at most `keep` set-aside samples whose reason starts with `prefix`, deleting the oldest; returns how many went. */
  trimSetAside(prefix: string, keep: number): number;
  onChange(listener: () => void): () => void;
  readonly available: number;
}

/** What the import-job backfill uses (src/uplink/backfill.ts): job ranges, the reader, the finish. */
export interface BackfillBuffer {
  readonly available: number;
  /** Timestamp of the oldest sample no sender holds (import jobs start from its age). */
  oldestAvailableTs(): number | null;
  stats(): Pick<BufferStats, 'rows'>;
  onChange(listener: () => void): () => void;
  readonly syncOnlyRanges: readonly SeqRange[];
  planJobRange(maxItems: number, keepNewest: number): SeqRange | null;
  reserveRange(range: SeqRange): void;
  /** `count`: the samples in [from, newTo] when the caller knows them (a built file's item count). */
  shrinkRange(range: SeqRange, newTo: number, count?: number): void;
  releaseRange(range: SeqRange): void;
  importReader(range: SeqRange, idField: string, rows?: number): ImportReader;
  /** The file, for the import-file worker's own read-only connection; null for a buffer in memory. */
  readonly filePath: string | null;
  readRange(range: SeqRange, chunk?: number): Generator<BufferedRow[]>;
  /** Rejected items (index → the service's error) to set_aside and the entry to `finishing`, in one transaction. */
  finishImportJob(entry: LedgerEntry, rejected: ReadonlyMap<number, unknown>): number;
  deleteRange(range: SeqRange): number;
  /** The same, a transaction per event-loop turn (a job's range is up to 1.3 M rows). */
  deleteRangeInSlices(range: SeqRange): Promise<number>;
  markSyncOnly(range: SeqRange): void;
}

/** What status, metrics, the console and the ops routes read. */
export interface BufferReadout {
  stats(): BufferStats;
  ingestRate(): number;
  refreshGauges(): void;
}

/**
 * What the console's trend uses (src/console/trend-keeper.ts, issue 24 §4): the buckets kept from
 * before a restart, read once at its start, and its closed buckets handed over on the buffer's
 * maintenance schedule (trend.ts), never inside a commit.
 */
export interface TrendBuffer {
  /** The kept rows of `bucketMs` holding buckets from `since` (epoch ms) on, newest first. */
  trendRows(bucketMs: number, since: number): number[];
  /** Visits the buckets of one kept row that start at or after `since` (one row at a time: a start stays responsive). */
  readTrendRow(row: number, bucketMs: number, since: number, visit: TrendVisit): void;
  /** Keeps `source`'s buckets from now on; the returned stop writes its open buckets too and lets go. */
  keepTrend(source: TrendSource): () => void;
}
