import type { Logger } from 'pino';
import type { BufferedRow } from '../buffer/types.js';
import type { SyncBuffer } from '../buffer/views.js';
import type { Clock } from '../core/clock.js';
import { describeError } from '../core/errors.js';
import { LogThrottle } from '../core/log-throttle.js';
import type { Metrics } from '../core/metrics.js';
import { RateMeter } from '../core/rate-meter.js';
import { WakeSignal } from '../core/signal.js';
import { toIsoUtc } from '../core/time.js';
import { describeResult, outcomeOf, type ApiResult, type TrackingClient } from './client.js';
import { MAX_JSON_BODY_BYTES } from './config.js';
import { sleep } from '../core/clock.js';
import { heldRefusal, isSystematic, newRun, type BatchRun, type Refusal } from './refusals.js';
import { decide } from './retry-policy.js';
import type { UplinkHealth } from './uplink-health.js';
import { itemIndexInMessage, UNKNOWN_VARIABLE_REASON, type UnknownVariables } from './unknown-variables.js';

export interface SyncSenderOptions {
  buffer: SyncBuffer;
  client: TrackingClient;
  health: UplinkHealth;
  batchSize: number;
  flushIntervalMs: number;
  maxInFlight: number;
  itemIdField: string;
  logger: Logger;
  metrics: Metrics;
  clock: Clock;
  /**
   * Bound on the age of the oldest unsent sample (uplink.max_unsent_age, issue 12 §5): beyond it
   * every other batch is claimed oldest-first. 0 turns it off.
   */
  maxUnsentAgeMs?: number;
  /** True while import jobs will take the oldest samples (then the sync path leaves them alone, I5). */
  importJobsTakeOldest?: () => boolean;
  /** Machine variables the service does not know (issue 24 §1): their samples are set aside without a request. */
  unknown?: UnknownVariables;
  /** Most set-aside samples of unknown variables kept (uplink.unknown_variables.keep_set_aside); the oldest beyond are deleted. */
  keepUnknownSetAside?: number;
}

/** Claim rounds per batch while unknown variables' samples are set aside to fill it with sendable ones. */
const MAX_FILL_ROUNDS = 50;

/** The longest the sync path waits for a catalog read before it sends again (the read may be slow at a low rate). */
const CATALOG_HOLD_MS = 60_000;

type DeliverResult = 'ok' | 'stopped';

/**
 * The live path: `POST /machine-data/batch` with up to 200 of the newest buffered samples
 * (interface §8), as fast as the request budget allows while a backlog exists, so the freshest
 * value upstream stays seconds old even during a backfill.
 *
 * Per batch (CONTRACT.md error table):
 * - 2xx: the rows are acknowledged and deleted.
 * - 413: split in halves and send each.
 * - 400: split until each bad item stands alone (about log2(200) extra calls per bad item; a refusal
 *   that locates its item by its `items[N]` path saves the split); bad items go to the set-aside
 *   table with the service's message, the rest is delivered. An item refused alone makes its
 *   variable suspect, whatever the message's words (refusals are understood by structure, §7
 *   promises only `{code, message}`): `UnknownVariables` reads the catalog and sets the variable's
 *   samples aside by what it says, without a request, so they take no budget and the batches carry
 *   only variables the service accepts. While the catalog is being read, a batch that shows a
 *   second bad variable goes back to the queue and the sync path waits for the read instead of
 *   splitting every batch item by item. When the service refused many items of several variables
 *   the catalog lists and nothing went through, the cause is systematic (wrong item_id_field, say),
 *   so nothing is set aside: delivery halts with an alert instead of emptying the buffer.
 * - 429: rows return to the buffer; the request budget lowers its pace and holds every class for
 *   the §8 backoff (rate-finder.ts).
 * - 5xx, network: rows return to the buffer and every sender pauses (shared `UplinkHealth`).
 * - 401 after a fresh token, 403, 404: alert and pause for long; samples keep buffering.
 */
export class SyncSender {
  private readonly wake = new WakeSignal();
  private readonly abort = new AbortController();
  private readonly delivered: RateMeter;
  private inflight = 0;
  private stopping = false;
  private loopDone: Promise<void> | null = null;
  private partialSince: number | null = null;
  private freshestTs: number | null = null;
  private deliveredTotal = 0;
  private setAsideTotal = 0;
  /** Set-aside samples of unknown variables deleted beyond keepUnknownSetAside since start. */
  private unknownDropped = 0;
  private readonly unsubscribe: () => void;
  private readonly idle = new WakeSignal();
  /** A batch went back to the queue to wait for a catalog read: the loop waits for it. */
  private holdForCatalog = false;
  /** Alternation state for the age bound: the next batch is oldest-first when true. */
  private oldestTurn = true;
  private oldestBatches = 0;

  /** Repeated warnings (the same refusal on every batch) are logged once a minute with a count. */
  private readonly throttle: LogThrottle;

  constructor(private readonly o: SyncSenderOptions) {
    this.throttle = new LogThrottle(o.logger, 60_000, () => o.clock.monotonic());
    this.delivered = new RateMeter(() => o.clock.monotonic(), 10);
    this.unsubscribe = o.buffer.onChange(() => this.wake.notify());
  }

  start(): void {
    if (!this.loopDone) this.loopDone = this.loop();
  }

  /**
   * Stops claiming; lets requests in flight finish for up to `graceMs`, then abandons them (their
   * rows stay buffered and are sent again next time: the service replaces same-timestamp values).
   */
  async stop(graceMs = 3_000): Promise<void> {
    if (this.stopping) return this.loopDone ?? undefined;
    this.stopping = true;
    this.wake.notify();
    const deadline = this.o.clock.monotonic() + graceMs;
    while (this.inflight > 0 && this.o.clock.monotonic() < deadline) await this.idle.wait(Math.max(1, deadline - this.o.clock.monotonic()));
    this.abort.abort(new Error('gateway stopping'));
    while (this.inflight > 0) await this.idle.wait(50);
    this.unsubscribe();
    await this.loopDone;
  }

  stats() {
    return {
      inflightBatches: this.inflight,
      deliveredTotal: this.deliveredTotal,
      setAsideTotal: this.setAsideTotal,
      ratePerSecond: this.delivered.perSecond(),
      freshestDeliveredTs: this.freshestTs,
      oldestFirstBatches: this.oldestBatches,
    };
  }

  /**
   * Claim selection (I5 with the age bound of issue 12 §5): newest first, so live values stay
   * fresh; but while the oldest sample no import job will take is older than the bound, every other
   * batch takes the oldest samples (sealed ones included), so a backlog under the import threshold,
   * or rows left beside a shrunk job range, cannot starve behind steady live ingest.
   */
  private claim(batchSize: number): BufferedRow[] {
    const { buffer, clock } = this.o;
    const bound = this.o.maxUnsentAgeMs ?? 0;
    if (bound > 0 && !(this.o.importJobsTakeOldest?.() ?? false)) {
      const oldest = buffer.oldestAvailableTs();
      if (oldest !== null && clock.now() - oldest > bound) {
        const turn = this.oldestTurn;
        this.oldestTurn = !turn;
        if (turn) {
          const rows = buffer.claimOldest(batchSize);
          if (rows.length > 0) {
            this.oldestBatches += 1;
            return rows;
          }
        }
      } else this.oldestTurn = true;
    }
    return buffer.claimNewest(batchSize);
  }

  /**
   * Claims up to `batchSize` rows whose variables are not known to be unknown; the samples of
   * unknown variables met on the way are set aside at once (one transaction per round), so a
   * batch is filled with what the service will take instead of carrying one sendable sample.
   */
  private claimSendable(batchSize: number): BufferedRow[] {
    const unknown = this.o.unknown;
    if (!unknown || !unknown.holdsAny) return this.claim(batchSize);
    unknown.tick();
    const out: BufferedRow[] = [];
    for (let round = 0; round < MAX_FILL_ROUNDS && out.length < batchSize; round++) {
      const rows = this.claim(batchSize - out.length);
      if (rows.length === 0) break;
      const refused: Refusal[] = [];
      for (const row of rows) {
        const u = unknown.lookup(row.variable);
        if (u) refused.push(heldRefusal(row, u));
        else out.push(row);
      }
      this.setAsideRefused(refused);
    }
    return out;
  }

  /** After a batch went back to the queue for the catalog: wait for the read (bounded), then go on. */
  private async waitForCatalog(): Promise<void> {
    this.holdForCatalog = false;
    const unknown = this.o.unknown;
    if (!unknown?.awaitingCatalog) return;
    await Promise.race([unknown.settled(), sleep(CATALOG_HOLD_MS, this.abort.signal)]).catch(() => undefined);
  }

  private async loop(): Promise<void> {
    const { buffer, batchSize, flushIntervalMs, maxInFlight, clock } = this.o;
    /** A budget slot taken for a batch whose claimed rows all turned out unknown: kept for the next. */
    let slot = false;
    while (!this.stopping) {
      try {
        // Not ready(): that is for the request itself, which may be the one probe (uplink-health.ts).
        await this.o.health.settled(this.abort.signal);
        if (this.holdForCatalog) await this.waitForCatalog();
        if (this.stopping) break;
        if (this.inflight >= maxInFlight) {
          await this.wake.wait(1_000);
          continue;
        }
        const available = buffer.available;
        if (available === 0) {
          this.partialSince = null;
          await this.wake.wait(1_000);
          continue;
        }
        if (available < batchSize && flushIntervalMs > 0) {
          // A partial batch waits up to flush_interval for more samples (fewer, fuller requests).
          const now = clock.monotonic();
          if (this.partialSince === null) this.partialSince = now;
          const due = this.partialSince + flushIntervalMs;
          if (now < due) {
            await this.wake.wait(due - now);
            continue;
          }
        }
        // The budget slot first, the rows second: rows claimed before a wait in the budget's queue
        // were as old as that wait when they left (2–3 s at 2 requests/s with four batches queued).
        if (!slot) await this.o.client.reserve('data', this.abort.signal);
        slot = true;
        if (this.stopping) break;
        const rows = this.claimSendable(batchSize);
        if (rows.length === 0) {
          await this.wake.wait(100);
          continue;
        }
        this.partialSince = null;
        slot = false;
        this.inflight += 1;
        void this.deliverBatch(rows, true).finally(() => {
          this.inflight -= 1;
          this.wake.notify();
          this.idle.notify();
        });
      } catch (err) {
        if (this.stopping) break;
        this.throttle.error('loop', { err: describeError(err) }, 'sync sender loop error; continuing');
        await this.wake.wait(1_000);
      }
    }
  }

  /** Delivers one claimed batch, isolating bad items; every row ends acked, set aside or released. */
  private async deliverBatch(rows: BufferedRow[], reserved: boolean): Promise<void> {
    const run = newRun();
    let result: DeliverResult;
    try {
      result = await this.deliver(rows, run, reserved);
    } catch (err) {
      this.throttle.error('deliver', { err: describeError(err) }, 'unexpected error delivering a batch; its samples stay buffered');
      this.o.buffer.release(rows);
      this.o.buffer.release(run.refused.map((r) => r.row));
      return;
    }
    if (run.held.length > 0) {
      this.o.buffer.release(run.held);
      this.holdForCatalog = true;
    }
    if (run.refused.length === 0) return;
    if (result === 'ok' && isSystematic(run)) {
      this.o.buffer.release(run.refused.map((r) => r.row));
      this.o.health.failure({ action: 'halt', reason: 'rejected' }, `every item refused: ${run.refused[0].reason}`);
      return;
    }
    // Rows of `refused` that were released by a stop are not set aside: they will be retried.
    if (result === 'stopped') {
      this.o.buffer.release(run.refused.map((r) => r.row));
      return;
    }
    this.setAsideRefused(run.refused);
  }

  /** Sets refused samples aside, grouped by reason in one transaction, and logs (throttled). */
  private setAsideRefused(refused: Refusal[]): void {
    if (refused.length === 0) return;
    const groups = new Map<string, { rows: BufferedRow[]; info: { path: 'sync'; reason: string; requestId?: string } }>();
    for (const r of refused) {
      const g = groups.get(r.reason);
      if (g) g.rows.push(r.row);
      else groups.set(r.reason, { rows: [r.row], info: { path: 'sync', reason: r.reason, requestId: r.requestId } });
    }
    this.o.buffer.setAsideGroups([...groups.values()]);
    this.setAsideTotal += refused.length;
    this.o.metrics.uplinkSetAsideSamples.inc({ path: 'sync' }, refused.length);
    if (refused.some((r) => r.unknown)) this.trimUnknownSetAside();
    // Held variables have their own lines (unknown-variables.ts), one a minute, not one per batch.
    const other = refused.filter((r) => !r.unknown && !r.held);
    if (other.length === 0) return;
    this.throttle.warn(
      `set_aside:${other[0].reason}`,
      { count: other.length, variables: [...new Set(other.map((r) => r.row.variable))].slice(0, 10), reason: other[0].reason },
      'the tracking service refused samples; they are set aside (edge-gateway set-aside list)',
    );
  }

  /**
   * The set-aside samples of unknown variables are bounded (issue 24 §4): 5,000 unknown variables
   * at 1 Hz set aside 18 million rows an hour, and counted against buffer.max_bytes they would push
   * the full policy onto real data. The oldest beyond the bound go, counted and logged.
   */
  private trimUnknownSetAside(): void {
    const keep = this.o.keepUnknownSetAside;
    if (keep === undefined) return;
    const dropped = this.o.buffer.trimSetAside(UNKNOWN_VARIABLE_REASON, keep);
    if (dropped === 0) return;
    this.unknownDropped += dropped;
    this.o.metrics.setAsideDroppedSamples.inc({ reason: 'unknown_variable' }, dropped);
    this.throttle.warn(
      'set_aside_unknown_trimmed',
      { dropped_total: this.unknownDropped, keep_set_aside: keep },
      `set-aside samples of unknown machine variables reached uplink.unknown_variables.keep_set_aside (${keep}); the oldest of them are deleted (${this.unknownDropped} since start). Fix the mapping or create the variables upstream`,
    );
  }

  /** `reserved`: the first request may use the budget slot the loop took for this batch. */
  private async deliver(rows: BufferedRow[], run: BatchRun, reserved = false): Promise<DeliverResult> {
    if (this.stopping && this.abort.signal.aborted) {
      this.o.buffer.release(rows);
      return 'stopped';
    }
    rows = this.withoutHeld(rows, run);
    if (rows.length === 0) return 'ok';
    const body = serializeBatch(rows, this.o.itemIdField);
    if (Buffer.byteLength(body) > MAX_JSON_BODY_BYTES && rows.length > 1) {
      // Never send a body over the 1 MB limit (§8); halve until it fits.
      return this.deliverHalves(rows, run, reserved);
    }
    let ticket: number;
    try {
      ticket = await this.o.health.ready(this.abort.signal);
    } catch {
      this.o.buffer.release(rows);
      return 'stopped';
    }
    const r = await this.o.client.postBatch(body, this.abort.signal, reserved);
    if (this.abort.signal.aborted && !r.ok) {
      this.o.buffer.release(rows);
      return 'stopped';
    }
    const d = decide(outcomeOf(r), this.o.health.attempt);
    switch (d.action) {
      case 'done':
        this.o.health.success();
        this.o.buffer.ack(rows);
        this.recordDelivered(rows);
        run.delivered += rows.length;
        return 'ok';
      case 'split':
        this.o.health.success();
        if (rows.length === 1) {
          run.refused.push({ row: rows[0], reason: `the service refused a single item as too large (413)`, requestId: r.requestId });
          return 'ok';
        }
        return this.deliverHalves(rows, run);
      case 'isolate':
        this.o.health.success();
        return this.isolate(rows, run, r);
      default:
        // A 429 paused the budget already (rate-finder.ts); the rows go back and wait their turn.
        this.o.health.failure(d.action === 'renew_token' ? { action: 'credentials_failed', delayMs: 30_000 } : d, describeResult(r), ticket);
        this.o.buffer.release(rows);
        return 'stopped';
    }
  }

  /** Rows of held variables (unknown, suspect, quarantined) are refused without a request. */
  private withoutHeld(rows: BufferedRow[], run: BatchRun): BufferedRow[] {
    const unknown = this.o.unknown;
    if (!unknown?.holdsAny) return rows;
    const pass: BufferedRow[] = [];
    for (const row of rows) {
      const u = unknown.lookup(row.variable);
      if (u) run.refused.push(heldRefusal(row, u));
      else pass.push(row);
    }
    return pass;
  }

  /**
   * A 400 (§7): by structure, not wording. One item: it is refused alone. Several: the item the
   * refusal locates by its `items[N]` path is refused alone and the rest goes again; otherwise the
   * batch is split. While the catalog is read to judge a suspect, a batch that shows a further
   * refusal goes back to the queue instead of being split item by item.
   */
  private isolate(rows: BufferedRow[], run: BatchRun, r: ApiResult): Promise<DeliverResult> | DeliverResult {
    if (rows.length === 1) {
      this.refusedAlone(rows[0], run, r);
      return 'ok';
    }
    if (run.isolated > 0 && this.o.unknown?.awaitingCatalog) {
      run.held.push(...rows);
      return 'ok';
    }
    const index = itemIndexInMessage(r.error?.message);
    if (index !== null && index < rows.length) {
      this.refusedAlone(rows[index], run, r);
      return this.deliver(rows.filter((_, i) => i !== index), run);
    }
    return this.deliverHalves(rows, run);
  }

  /** An item refused on its own: its variable is suspect (the catalog judges); the item is set aside. */
  private refusedAlone(row: BufferedRow, run: BatchRun, r: ApiResult): void {
    run.isolated += 1;
    const message = r.error?.message || describeResult(r);
    const held = this.o.unknown?.refusedAlone(row.variable, message, r.requestId);
    if (held) run.refused.push(heldRefusal(row, held, true));
    else run.refused.push({ row, reason: message, requestId: r.requestId });
  }

  private async deliverHalves(rows: BufferedRow[], run: BatchRun, reserved = false): Promise<DeliverResult> {
    const mid = Math.ceil(rows.length / 2);
    const first = rows.slice(0, mid);
    const second = rows.slice(mid);
    if ((await this.deliver(first, run, reserved)) === 'stopped') {
      this.o.buffer.release(second);
      return 'stopped';
    }
    return this.deliver(second, run);
  }

  private recordDelivered(rows: BufferedRow[]): void {
    let max = this.freshestTs ?? -Infinity;
    for (const r of rows) if (r.ts > max) max = r.ts;
    this.freshestTs = max;
    this.deliveredTotal += rows.length;
    this.delivered.add(rows.length);
    this.o.metrics.uplinkDeliveredSamples.inc({ path: 'sync' }, rows.length);
    this.o.metrics.uplinkFreshestAge.set(Math.max(0, (this.o.clock.now() - max) / 1000));
  }
}

/** `{"items": [...]}` with ISO 8601 UTC timestamps with milliseconds (CONTRACT.md batch ITEM). */
export function serializeBatch(rows: readonly { variable: string; ts: number; value: number }[], idField: string): string {
  const items = rows.map((r) => ({ timestamp: toIsoUtc(r.ts), [idField]: r.variable, value: r.value }));
  return JSON.stringify({ items });
}
