import type { Logger } from 'pino';
import type { Clock } from '../core/clock.js';
import type { Metrics } from '../core/metrics.js';
import type { Compressor } from './chunks/codec.js';

/** Shapes shared by the buffer's rooms and the modules that use the buffer (README.md). */

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
  /**
   * How new chunks are encoded (chunks/codec.ts): null (the default) chunk format 3, range-coded
   * residuals (codec-v3.ts); a general compressor, format 2 with it (comparisons and tests).
   */
  compressor?: Compressor | null;
  /** Samples per compaction window at most: small chunks of one variable within it are merged (chunks/seal-schedule.ts). */
  compactSamples?: number;
  /** Longest a maintenance slice (sealing, compaction, giving disk back) holds the event loop (maintenance.ts). */
  sliceMs?: number;
  /** How often an idle buffer looks for maintenance work. */
  maintenanceIdleMs?: number;
  /** Longest each variable's newest committed timestamp waits in memory before it is written (last-committed.ts, 30 s). */
  lastCommittedFlushMs?: number;
  /** Free space the file keeps for new samples; free pages beyond it unused for a minute go back to the disk (buffer.keep_free). */
  keepFreeBytes?: number;
  /** How long free pages must stay unused before they are returned (buffer.return_free_after). */
  returnFreeAfterMs?: number;
  /**
   * PASSIVE checkpoints run on the main thread while each takes less than this (ms), on a worker
   * thread from the first slower one (capacity/checkpointer.ts); null: on the worker from the first.
   */
  checkpointInlineBelowMs?: number | null;
}

export interface BufferedRow {
  seq: number;
  variable: string;
  ts: number;
  value: number;
}

/** An inclusive range of seqs. */
export interface SeqRange {
  from: number;
  to: number;
}

/** Import items of a seq range, serialized by SQLite (see imports/reader.ts). */
export interface ImportReader {
  /** Up to N items as `{...},{...}`, the seq just before them and the seq of the last one; null at the end. */
  nextBlock(): { text: string; count: number; afterSeq: number; lastSeq: number } | null;
  /** Single items after `afterSeq`, as [seq, item text]. */
  itemsAfter(afterSeq: number, n: number): Array<[number, string]>;
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
  /** Bytes the samples use: their owner's pages in use in the file, side tables apart (what buffer.max_bytes limits). */
  usedBytes: number;
  /** Bytes the database file and its WAL take on disk. */
  fileBytes: number;
  /** Of which free pages inside the file (reused by the next writes, or returned to the disk). */
  freeBytes: number;
  /** Of which the WAL. */
  walBytes: number;
  maxBytes: number;
  oldestTs: number | null;
  committedTotal: number;
  droppedTotal: number;
  writable: boolean;
  lastWriteError: { code: string; message: string; at: number } | null;
  /** Why the last commit refused its new samples (refuse_new at max_bytes, or a full disk), or null when it took them. */
  refusing: string | null;
  fullEpisode: FullEpisode | null;
}
