import { mkdirSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { ImportLedger, LedgerEntry } from '../buffer/imports/ledger.js';
import type { SeqRange } from '../buffer/types.js';
import type { BackfillBuffer } from '../buffer/views.js';
import { backoffDelay } from '../core/backoff.js';
import { sleep, type Clock } from '../core/clock.js';
import { describeError } from '../core/errors.js';
import { LogThrottle } from '../core/log-throttle.js';
import type { Metrics } from '../core/metrics.js';
import { RateMeter } from '../core/rate-meter.js';
import { WakeSignal } from '../core/signal.js';
import { describeResult, outcomeOf, type ImportJob, type TrackingClient } from './client.js';
import type { BackfillConfig } from './config.js';
import { ImportFileBuilder } from './import-file-builder.js';
import { importJobsWanted } from './import-trigger.js';
import { decide } from './retry-policy.js';
import type { UplinkHealth } from './uplink-health.js';

export interface BackfillOptions {
  buffer: BackfillBuffer;
  ledger: ImportLedger;
  client: TrackingClient;
  health: UplinkHealth;
  config: BackfillConfig;
  /** The budget's pacing rate: the lowest of the ceiling, a fleet share and the rate found from 429s. */
  requestsPerMinute: number | (() => number);
  /** Whether the backlog grows and the deliverable ingest (backlog-meter.ts); default: not growing, nothing arriving. */
  trend?: () => { growing: boolean; deliverableIngestPerS: number };
  batchSize: number;
  itemIdField: string;
  /** Directory for import files (created; leftovers removed at start). */
  dir: string;
  logger: Logger;
  metrics: Metrics;
  clock: Clock;
}

/** Smallest size of one item in a file, for sizing a range before building it (shrunk after). */
const MIN_ITEM_BYTES = 60;
/** Share of the budget the sync path is assumed to get (the rest: tokens, polls, annotations). */
const SYNC_SHARE = 0.9;
/** The newest rows the sync path keeps for itself, in seconds of its capacity (at most half the threshold). */
const KEEP_FOR_SYNC_SECONDS = 60;
/** Job turnarounds (plan to rows deleted) remembered for the drain estimate. */
const TURNAROUNDS = 5;
/** The start rule is read again at most this often. */
const RULE_CACHE_MS = 500;

export interface BackfillStats {
  enabled: boolean;
  jobs_in_flight: number;
  jobs: Array<{ ledger_id: number; state: string; items: number | null; bytes: number | null; job_id: string | null; attempts: number; since: string }>;
  /** Samples per second import jobs deliver while some are in flight (the last minute's deliveries); 0 when none is. */
  rate_per_s: number;
  /** Samples finished jobs delivered in the last minute (a past figure, not an ongoing rate). */
  delivered_last_minute: number;
  delivered_total: number;
  set_aside_total: number;
  failed_total: number;
  sync_only_ranges: number;
  backlog_at_start: number;
  /** uplink.backfill.threshold in seconds: the age of the oldest unsent sample beyond which jobs may start. */
  threshold_s: number;
  /** Jobs are wanted now (import-trigger.ts), and why or why not. */
  wants_jobs: boolean;
  start_rule: string;
  /** The newest samples the sync path keeps while jobs take the rest. */
  keep_samples: number;
  /** Seconds from planning a job to its rows deleted, the mean of the last ones; null before one finished. */
  job_turnaround_s: number | null;
  /** Seconds since the oldest job in flight was planned; null when none is. */
  oldest_job_age_s: number | null;
  /** Samples per second the sync path can carry at the pace in force (its share of it). */
  sync_capacity_per_s: number;
}

/**
 * Backfill through import jobs (interface §4.7, §2.9, §8), beside the live sync path.
 *
 * When the backlog cannot drain through the sync path in time (import-trigger.ts: the oldest unsent
 * sample is older than `threshold` and the backlog grows or would take longer than that at the
 * measured pace), the oldest rows are packed into a file (≤ 128 MB, streamed from SQLite, never built in memory),
 * uploaded as multipart `file`, and the job is polled with backoff (polls take budget slots at
 * their priority). The newest minute of backlog always stays with the sync path, so live values
 * upstream stay fresh during a multi-day catch-up.
 *
 * Rows are deleted only when the job finished (I2b). Rejected items are set aside with the job's
 * error objects as they came — when the errors say which items (an `index` field [A, emulator]);
 * when they do not, the range is handed to the sync path, whose bisection isolates the bad items,
 * so no refused item is ever dropped silently. A failed job is built and sent once more; a range
 * that fails twice goes to the sync path.
 */
export class BackfillManager {
  private readonly tasks = new Map<number, Promise<void>>();
  private readonly entries = new Map<number, LedgerEntry>();
  private readonly abort = new AbortController();
  private readonly wake = new WakeSignal();
  private readonly delivered: RateMeter;
  private loop: Promise<void> | null = null;
  private stopping = false;
  private deliveredTotal = 0;
  private setAsideTotal = 0;
  private failedTotal = 0;
  private backlogAtStart = 0;
  /** A backfill is under way: started above the threshold, not yet down to CONTINUE_ABOVE_KEEP. */
  private backfilling = false;
  private rule: { at: number; value: { want: boolean; why: string } } | null = null;
  /** Monotonic ms each job in flight was planned, and the turnarounds of the last finished ones (s). */
  private readonly plannedAt = new Map<number, number>();
  private readonly turnarounds: number[] = [];
  private readonly unsubscribe: () => void;
  /** One file is built at a time: building is CPU-bound, and two at once only doubles the memory. */
  private buildLock: Promise<void> = Promise.resolve();

  private readonly throttle: LogThrottle;
  private readonly files: ImportFileBuilder;

  constructor(private readonly o: BackfillOptions) {
    this.files = new ImportFileBuilder({ buffer: o.buffer, logger: o.logger });
    this.throttle = new LogThrottle(o.logger, 60_000, () => o.clock.monotonic());
    this.delivered = new RateMeter(() => o.clock.monotonic(), 60);
    this.unsubscribe = o.buffer.onChange(() => this.wake.notify());
  }

  /** Samples per second the sync path can send at the budget. */
  get syncCapacityPerSecond(): number {
    const perMinute = typeof this.o.requestsPerMinute === 'function' ? this.o.requestsPerMinute() : this.o.requestsPerMinute;
    return (perMinute / 60) * this.o.batchSize * SYNC_SHARE;
  }

  /** The newest backlog the sync path keeps for itself (KEEP_FOR_SYNC_SECONDS of its capacity). */
  get keepSamples(): number {
    return Math.ceil(this.syncCapacityPerSecond * Math.min(KEEP_FOR_SYNC_SECONDS, this.o.config.threshold / 2_000));
  }

  /**
   * True while import jobs will take the oldest samples: enabled, delivering, and the backlog is
   * above the threshold, or a backfill under way has more than CONTINUE_ABOVE_KEEP × keepSamples
   * left (the sync path's age bound leaves the oldest to them then).
   */
  takesOldest(): boolean {
    if (!this.o.config.enabled || this.o.health.condition === 'halted' || this.o.health.condition === 'auth_failed') return false;
    return this.wantsJobs();
  }

  private wantsJobs(): boolean {
    return this.startRule().want;
  }

  /** The rule of import-trigger.ts on what is measured now (read again at most every RULE_CACHE_MS: the sync path asks per batch). */
  private startRule(): { want: boolean; why: string } {
    const now = this.o.clock.monotonic();
    if (this.rule && now - this.rule.at < RULE_CACHE_MS) return this.rule.value;
    const oldest = this.o.buffer.oldestAvailableTs();
    const trend = this.o.trend?.() ?? { growing: false, deliverableIngestPerS: 0 };
    const value = importJobsWanted({
      oldestAgeMs: oldest === null ? null : this.o.clock.now() - oldest,
      available: this.o.buffer.available,
      growing: trend.growing,
      deliverableIngestPerS: trend.deliverableIngestPerS,
      syncCapacityPerS: this.syncCapacityPerSecond,
      thresholdMs: this.o.config.threshold,
      backfilling: this.backfilling,
      keepSamples: this.keepSamples,
    });
    this.rule = { at: now, value };
    return value;
  }

  start(): void {
    if (this.loop) return;
    mkdirSync(this.o.dir, { recursive: true });
    this.resume();
    this.loop = this.planLoop();
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.abort.abort(new Error('gateway stopping'));
    this.wake.notify();
    this.unsubscribe();
    await this.loop;
    await Promise.allSettled([...this.tasks.values()]);
    await this.files.close();
  }

  stats(): BackfillStats {
    const rule = this.o.config.enabled ? this.startRule() : { want: false, why: 'uplink.backfill.enabled is false' };
    const now = this.o.clock.monotonic();
    const oldestPlan = Math.min(...this.plannedAt.values());
    const lastMinute = Math.round(this.delivered.perSecond() * 60);
    return {
      enabled: this.o.config.enabled,
      jobs_in_flight: this.entries.size,
      jobs: [...this.entries.values()].map((e) => ({ ledger_id: e.id, state: e.state, items: e.itemCount, bytes: e.fileBytes, job_id: e.jobId, attempts: e.attempts, since: new Date(e.updatedAt).toISOString() })),
      // Finished jobs are not ongoing: with none in flight nothing is being imported now.
      rate_per_s: this.entries.size > 0 ? this.delivered.perSecond() : 0,
      delivered_last_minute: lastMinute,
      delivered_total: this.deliveredTotal,
      set_aside_total: this.setAsideTotal,
      failed_total: this.failedTotal,
      sync_only_ranges: this.o.buffer.syncOnlyRanges.length,
      backlog_at_start: this.backlogAtStart,
      threshold_s: this.o.config.threshold / 1000,
      wants_jobs: rule.want,
      start_rule: rule.why,
      keep_samples: this.keepSamples,
      job_turnaround_s: this.turnarounds.length === 0 ? null : this.turnarounds.reduce((a, b) => a + b, 0) / this.turnarounds.length,
      oldest_job_age_s: Number.isFinite(oldestPlan) ? (now - oldestPlan) / 1000 : null,
      sync_capacity_per_s: this.syncCapacityPerSecond,
    };
  }

  /** Picks up the ledger after a restart (issue: "resume"). */
  private resume(): void {
    for (const entry of this.o.ledger.all()) {
      if (entry.state === 'finishing') {
        // Rejected items were already set aside; only the deletion was left.
        this.o.buffer.reserveRange(entry.range);
        this.completeDeletion(entry, 0);
      } else if (entry.state === 'submitted' || entry.state === 'retry') {
        this.o.buffer.reserveRange(entry.range);
        this.o.logger.info({ ledger_id: entry.id, job_id: entry.jobId, state: entry.state, range: entry.range }, 'resuming import job');
        this.launch(entry);
      } else {
        // Never got a job id: the rows return to the queue and go into a new file.
        this.o.ledger.remove(entry.id);
        this.o.logger.info({ ledger_id: entry.id, state: entry.state }, 'import file was not uploaded before the restart; its rows return to the queue');
      }
    }
    // Files are rebuilt from the buffer when needed, so every file left over is removed.
    for (const name of readdirSync(this.o.dir)) rmSync(join(this.o.dir, name), { force: true });
  }

  private async planLoop(): Promise<void> {
    while (!this.stopping) {
      try {
        this.plan();
      } catch (err) {
        this.throttle.error('plan', { err: describeError(err) }, 'import job planning failed; will retry');
      }
      await this.wake.wait(1_000);
    }
  }

  private plan(): void {
    const { buffer, config } = this.o;
    if (!config.enabled || this.o.health.condition === 'halted' || this.o.health.condition === 'auth_failed') return;
    while (this.entries.size < config.max_jobs_in_flight) {
      if (!this.wantsJobs()) {
        if (this.entries.size === 0) {
          this.backlogAtStart = 0;
          this.backfilling = false;
        }
        return;
      }
      const range = buffer.planJobRange(Math.floor(config.max_file_bytes / MIN_ITEM_BYTES), this.keepSamples);
      if (!range) return;
      const why = this.backfilling ? 'backfill under way' : this.startRule().why;
      this.backfilling = true;
      if (this.backlogAtStart === 0) this.backlogAtStart = buffer.stats().rows;
      const entry = this.o.ledger.create(range);
      buffer.reserveRange(range);
      // The rule is read afresh for the next one: this job changed what is available.
      this.rule = null;
      this.o.logger.info({ ledger_id: entry.id, range, backlog: buffer.stats().rows }, `${why}: packing the oldest samples into an import job`);
      this.launch(entry);
    }
  }

  private launch(entry: LedgerEntry): void {
    this.entries.set(entry.id, entry);
    this.plannedAt.set(entry.id, this.o.clock.monotonic());
    this.o.metrics.importJobsInFlight.set(this.entries.size);
    const task = this.run(entry)
      .catch((err) => {
        if (!this.stopping) this.throttle.error('task', { ledger_id: entry.id, err: describeError(err) }, 'import job task failed; the range returns to the queue');
      })
      .finally(() => {
        this.tasks.delete(entry.id);
        this.entries.delete(entry.id);
        this.plannedAt.delete(entry.id);
        this.o.metrics.importJobsInFlight.set(this.entries.size);
        this.wake.notify();
      });
    this.tasks.set(entry.id, task);
  }

  private filePath(entry: LedgerEntry): string {
    return join(this.o.dir, `import-${entry.id}-${entry.attempts}.json`);
  }

  /** Drives one ledger entry through its states until it ends (finished, failed twice, stopped). */
  private async run(entry: LedgerEntry): Promise<void> {
    const signal = this.abort.signal;
    let file: string | null = null;
    try {
      for (;;) {
        if (this.stopping) return;
        if (entry.state === 'building' || entry.state === 'retry') {
          file = this.filePath(entry);
          const started = this.o.clock.monotonic();
          this.o.logger.debug({ event: 'import_build_started', ledger_id: entry.id, range: entry.range }, 'building import file');
          const previous = this.buildLock;
          let unlock!: () => void;
          this.buildLock = new Promise<void>((r) => (unlock = r));
          await previous;
          const built = await this.files.build(entry.range, this.o.itemIdField, file, this.o.config.max_file_bytes, signal).finally(unlock);
          if (built.itemCount === 0 || built.lastSeq === null) {
            this.endReservation(entry);
            return;
          }
          if (built.lastSeq < entry.range.to) {
            this.o.buffer.shrinkRange(entry.range, built.lastSeq, built.itemCount);
            entry.range = { from: entry.range.from, to: built.lastSeq };
          }
          this.o.ledger.update(entry.id, { state: 'uploading', seqTo: entry.range.to, itemCount: built.itemCount, filePath: file, fileBytes: built.bytes });
          Object.assign(entry, { state: 'uploading', itemCount: built.itemCount, filePath: file, fileBytes: built.bytes, updatedAt: this.o.clock.now() });
          this.o.logger.debug({ event: 'import_file_built', ledger_id: entry.id, items: built.itemCount, bytes: built.bytes, ms: Math.round(this.o.clock.monotonic() - started) }, 'import file built');
        }
        if (entry.state === 'uploading') {
          if (!file) {
            // Resumed in 'uploading' cannot happen (resume drops it); rebuild to be safe.
            entry.state = 'building';
            continue;
          }
          const ticket = await this.o.health.ready(signal);
          this.o.logger.debug({ event: 'import_upload_started', ledger_id: entry.id }, 'uploading import file');
          const r = await this.o.client.uploadImportFile(file, signal, this.o.config.upload_timeout);
          if (this.stopping) return;
          const d = decide(outcomeOf(r), this.o.health.attempt);
          if (d.action === 'done' && r.body) {
            this.o.health.success();
            this.o.metrics.importFileBytes.inc(entry.fileBytes ?? 0);
            this.o.ledger.update(entry.id, { state: 'submitted', jobId: r.body.job_id, filePath: null });
            Object.assign(entry, { state: 'submitted', jobId: r.body.job_id, updatedAt: this.o.clock.now() });
            rmSync(file, { force: true });
            file = null;
            this.o.logger.info({ event: 'import_job_submitted', ledger_id: entry.id, job_id: r.body.job_id, items: entry.itemCount }, 'import job submitted');
          } else if (d.action === 'split' || d.action === 'isolate') {
            this.o.health.success();
            rmSync(file, { force: true });
            file = null;
            if (!this.failed(entry, `upload refused: ${describeResult(r)}`)) return;
          } else {
            this.o.health.failure(d.action === 'renew_token' ? { action: 'credentials_failed', delayMs: 30_000 } : d, describeResult(r), ticket);
          }
          continue;
        }
        if (entry.state === 'submitted') {
          const job = await this.poll(entry, signal);
          if (!job) return;
          if (job.status === 'finished') {
            await this.finished(entry, job);
            return;
          }
          if (!this.failed(entry, `import job ${entry.jobId} failed`)) return;
        }
      }
    } finally {
      if (file) rmSync(file, { force: true });
    }
  }

  /** Polls until the job ends; null when stopping or the job is unknown (handled inside). */
  private async poll(entry: LedgerEntry, signal: AbortSignal): Promise<ImportJob | null> {
    // poll_interval, doubling up to poll_interval_max, no jitter (one job, one poller).
    const policy = { initialMs: this.o.config.poll_interval, maxMs: this.o.config.poll_interval_max, factor: 2 };
    for (let polls = 1; ; polls++) {
      let ticket: number;
      try {
        await sleep(backoffDelay(policy, polls), signal);
        ticket = await this.o.health.ready(signal);
      } catch {
        return null;
      }
      const r = await this.o.client.getImportJob(entry.jobId!, signal);
      if (this.stopping) return null;
      this.o.logger.debug({ event: 'import_job_polled', ledger_id: entry.id, job_id: entry.jobId, status: r.body?.status ?? r.status }, 'import job polled');
      if (r.ok && r.body) {
        this.o.health.success();
        if (r.body.status === 'finished' || r.body.status === 'failed') return r.body;
        continue;
      }
      const d = decide(outcomeOf(r), this.o.health.attempt);
      if (r.status === 404) {
        // The service does not know the job (expired, lost): treat as failed, the rows are resent.
        this.o.health.success();
        return { job_id: entry.jobId!, status: 'failed', items_received: 0, created_at: '' };
      }
      this.o.health.failure(d.action === 'renew_token' ? { action: 'credentials_failed', delayMs: 30_000 } : d, describeResult(r), ticket);
    }
  }

  /** A finished job: set aside what it rejected, delete the rest of the range (I2b). */
  private async finished(entry: LedgerEntry, job: ImportJob): Promise<void> {
    const items = entry.itemCount ?? 0;
    const rejected = job.items_rejected ?? 0;
    const accepted = job.items_accepted ?? items - rejected;
    const errors = job.errors ?? [];
    const byIndex = new Map<number, unknown>();
    for (const e of errors) {
      const index = (e as { index?: unknown } | null)?.index;
      if (typeof index === 'number' && Number.isInteger(index) && index >= 0 && index < items) byIndex.set(index, e);
    }
    const accountedFor = accepted + rejected === items && byIndex.size === rejected;
    if (rejected > 0 && !accountedFor) {
      // The job does not say which items it refused: let the sync path find them by bisection.
      this.o.logger.warn(
        { job_id: entry.jobId, items, accepted, rejected, errors_listed: errors.length, first_errors: errors.slice(0, 3) },
        'import job rejected items without saying which; the range goes through the sync path to isolate them',
      );
      this.o.buffer.markSyncOnly(entry.range);
      this.endReservation(entry);
      return;
    }
    // One transaction, inside the buffer: the refused samples move to set-aside and the ledger
    // says so, so a crash can never map the job's item indices onto a range that already lost rows.
    const refusedCount = this.o.buffer.finishImportJob(entry, byIndex);
    if (refusedCount > 0) {
      this.setAsideTotal += refusedCount;
      this.o.metrics.uplinkSetAsideSamples.inc({ path: 'import' }, refusedCount);
      this.o.logger.warn({ job_id: entry.jobId, count: refusedCount }, 'the tracking service rejected items of an import job; they are set aside (edge-gateway set-aside list)');
    }
    this.o.metrics.importJobs.inc({ outcome: 'finished' });
    // A slice per event-loop turn: a job's range is up to 1.3 M rows (I2b; a stop half-way leaves
    // the entry 'finishing' and the next start deletes the rest).
    this.endDeletion(entry, rejected, await this.o.buffer.deleteRangeInSlices(entry.range));
  }

  /** Deletes the rows of a finished job's range (I2b) and ends its ledger entry (at a start). */
  private completeDeletion(entry: LedgerEntry, rejected: number): void {
    this.endDeletion(entry, rejected, this.o.buffer.deleteRange(entry.range));
  }

  private endDeletion(entry: LedgerEntry, rejected: number, deleted: number): void {
    this.o.ledger.remove(entry.id);
    this.deliveredTotal += deleted;
    this.delivered.add(deleted);
    const planned = this.plannedAt.get(entry.id);
    if (planned !== undefined && deleted > 0) {
      this.turnarounds.push((this.o.clock.monotonic() - planned) / 1000);
      if (this.turnarounds.length > TURNAROUNDS) this.turnarounds.shift();
    }
    this.o.metrics.uplinkDeliveredSamples.inc({ path: 'import' }, deleted);
    this.o.logger.info({ event: 'import_job_finished', job_id: entry.jobId, delivered: deleted, rejected }, 'import job finished');
  }

  /**
   * A failed job: the first time, the same range is built and sent again; the second time it goes to
   * the sync path. Returns true when the entry should go on (retry).
   */
  private failed(entry: LedgerEntry, reason: string): boolean {
    this.failedTotal += 1;
    this.o.metrics.importJobs.inc({ outcome: 'failed' });
    const attempts = entry.attempts + 1;
    if (attempts >= 2) {
      this.o.logger.warn({ ledger_id: entry.id, job_id: entry.jobId, range: entry.range, reason }, 'import job failed twice for this range; its samples go through the sync path');
      this.o.buffer.markSyncOnly(entry.range);
      this.endReservation(entry);
      return false;
    }
    this.o.logger.warn({ ledger_id: entry.id, job_id: entry.jobId, reason }, 'import job failed; building and sending it once more');
    this.o.ledger.update(entry.id, { state: 'retry', attempts, jobId: null, lastError: reason });
    Object.assign(entry, { state: 'retry', attempts, jobId: null, lastError: reason, updatedAt: this.o.clock.now() });
    return true;
  }

  private endReservation(entry: { id: number; range: SeqRange }): void {
    this.o.ledger.remove(entry.id);
    this.o.buffer.releaseRange(entry.range);
  }
}
