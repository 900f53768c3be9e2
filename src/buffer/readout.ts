import type { Statement } from 'better-sqlite3';
import type { Clock } from '../core/clock.js';
import type { Metrics } from '../core/metrics.js';
import { RateMeter } from '../core/rate-meter.js';
import type { DiskUsage } from '../store/usage.js';
import type { Losses } from './capacity/losses.js';
import type { WalBound } from './capacity/wal.js';
import type { ChunkStore } from './chunks/store.js';
import type { Holds } from './holds.js';
import type { Ingest } from './ingest.js';
import type { Tally } from './tally.js';
import type { BufferStats } from './types.js';
import type { StoreOwner } from '../store/store.js';

/** Raw size of a sample for the compression ratio: an 8-byte timestamp and an 8-byte double. */
const RAW_SAMPLE_BYTES = 16;

/**
 * What the buffer reports: its stats (status, console), its gauges (metrics), and the ingest rate.
 * Reads only: the counts (Tally, B8), what the file takes (DiskUsage, WalBound) and who holds what.
 * Bytes in use, bytes per sample and the capacity are the samples' own (their owner's pages in
 * the store, src/store/README.md S4): set-aside samples, annotations and the other side tables
 * have their own bounds and are reported apart (gateway_store_bytes{owner}, status `store`).
 */
export class Readout {
  /** Samples committed per second, over the last 30 s. */
  readonly ingestRate: RateMeter;
  private readonly st: { oldestRowTs: Statement };

  constructor(
    db: StoreOwner,
    private readonly o: { maxBytes: number; metrics: Metrics; clock: Clock; tally: Tally; usage: DiskUsage; samplesBytes: () => number; wal: WalBound; holds: Holds; store: ChunkStore; ingest: Ingest; losses: Losses },
  ) {
    this.ingestRate = new RateMeter(() => o.clock.monotonic(), 30);
    this.st = { oldestRowTs: db.prepare('SELECT ts FROM samples ORDER BY seq ASC LIMIT 1').pluck(true) };
  }

  /** Samples a sender may claim now. Acked rows stay claimed and counted until deleted. */
  available(): number {
    return Math.max(0, this.o.tally.samples - this.o.holds.claimedCount - this.o.holds.reservedSamples);
  }

  stats(): BufferStats {
    const { tally: t, usage, wal } = this.o;
    const used = this.o.samplesBytes();
    const total = t.samples;
    return {
      rows: total,
      liveRows: t.rows,
      sealedSamples: t.sealed,
      chunks: t.chunks,
      chunkBytes: t.chunkBytes,
      chunksSealedTotal: t.chunksSealedTotal,
      bytesPerSample: total > 0 ? used / total : null,
      compressionRatio: t.chunkBytes > 0 ? (t.sealed * RAW_SAMPLE_BYTES) / t.chunkBytes : null,
      capacitySeconds: this.capacitySeconds(used),
      inflight: this.o.holds.claimedCount,
      reserved: this.o.holds.reservedSamples,
      available: this.available(),
      pendingSamples: this.o.ingest.pendingSamples,
      usedBytes: used,
      fileBytes: usage.fileBytes() + wal.bytes(),
      freeBytes: usage.freeBytes(),
      walBytes: wal.bytes(),
      maxBytes: this.o.maxBytes,
      oldestTs: this.oldestTs(),
      committedTotal: t.committedTotal,
      droppedTotal: this.o.losses.droppedTotal,
      writable: this.o.ingest.writable,
      lastWriteError: this.o.ingest.lastWriteError,
      refusing: this.o.ingest.refusingReason,
      fullEpisode: this.o.losses.episode,
    };
  }

  refreshGauges(): void {
    const { metrics: m, tally: t, usage, wal } = this.o;
    const used = this.o.samplesBytes();
    const total = t.samples;
    m.bufferRows.set(total);
    m.bufferBytes.set(used);
    m.bufferFileBytes.set(usage.fileBytes() + wal.bytes());
    m.bufferFreeBytes.set(usage.freeBytes());
    m.bufferSealedSamples.set(t.sealed);
    m.bufferBytesPerSample.set(total > 0 ? used / total : 0);
    m.bufferCompressionRatio.set(t.chunkBytes > 0 ? (t.sealed * RAW_SAMPLE_BYTES) / t.chunkBytes : 0);
    m.bufferCapacitySeconds.set(this.capacitySeconds(used) ?? -1);
    const oldest = this.oldestTs();
    m.bufferOldestAge.set(oldest === null ? 0 : Math.max(0, (this.o.clock.now() - oldest) / 1000));
  }

  /** Timestamp of the oldest unsent sample by seq (rows and sealed), or null. */
  private oldestTs(): number | null {
    const row = (this.st.oldestRowTs.get() as number | undefined) ?? null;
    const sealed = this.o.tally.sealed > 0 ? this.o.store.oldestTs() : null;
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
    const rate = this.ingestRate.perSecond();
    if (rate <= 0) return null;
    const t = this.o.tally;
    const perSample = t.sealed >= 1_000 ? (t.chunkBytes + t.chunks * 40) / t.sealed : t.samples > 0 ? used / t.samples : 25;
    return Math.max(0, this.o.maxBytes - used) / (perSample * rate);
  }
}
