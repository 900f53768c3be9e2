import { Backoff, type BackoffPolicy } from '../../core/backoff.js';
import { sleepUnlessAborted } from '../../core/clock.js';
import { describeError } from '../../core/errors.js';
import type { LogThrottle } from '../../core/log-throttle.js';
import { Q_BAD, Q_GOOD, type QualityTable } from '../../core/quality.js';
import type { Sample } from '../../core/sample.js';
import type { SourceContext } from '../context.js';
import { describeRange, TABLE_INFO } from './address.js';
import { bitAt, decodeValue, scaleRaw, type DecodeOutcome } from './decode.js';
import { failureAction, ModbusRequestError, toRequestError } from './errors.js';
import type { ModbusLink, ReadResponse } from './link.js';
import { coalesce, endpointKey, type DevicePlan, type PlannedValue, type ReadBlock } from './plan.js';

/**
 * connecting: its connection has not come up yet since the start; disconnected: its connection
 * went down after the device had answered; offline: connected, but the device does not answer.
 */
export type DeviceState = 'connecting' | 'connected' | 'degraded' | 'disconnected' | 'offline' | 'stopped';

export interface DeviceDeps {
  sourceName: string;
  ctx: SourceContext;
  link: ModbusLink;
  reconnect: BackoffPolicy;
  throttle: LogThrottle;
  onStateChange: () => void;
}

interface CycleOutcome {
  /** Blocks the device answered (with data or an exception). */
  answered: number;
  /** Blocks that produced no data. */
  failed: number;
  /** The device answered nothing at all: take it offline with backoff. */
  offline: boolean;
  /** The connection went away mid-cycle. */
  linkDown: boolean;
}

type BlockResult = { ok: true; response: ReadResponse; attempts: number } | { ok: false; error: ModbusRequestError; attempts: number };

/** At most this many appends in flight per device; beyond it polling waits for the buffer. */
const MAX_INFLIGHT_APPENDS = 8;

/**
 * Polls one device: its own loop, its own schedule and its own backoff, so an offline or slow
 * device never delays another one (devices on one serial bus still take turns on the wire).
 *
 * Each cycle reads every block (one request per block, see plan.ts), decodes the values and hands
 * them to the buffer. A sample's timestamp is the wall-clock time its response arrived.
 */
export class DevicePoller {
  private state: DeviceState = 'connecting';
  private blocks: ReadBlock[];
  private readonly backoff: Backoff;
  private readonly abort = new AbortController();
  private loop: Promise<void> | null = null;
  private readonly inflight = new Set<Promise<void>>();
  private readonly labels: { source: string; device: string };
  /** Newest timestamp given to a sample of this device (see `stamp`). */
  private lastTs = -Infinity;
  private cycles = 0;
  private overruns = 0;
  private lastCycleMs: number | null = null;
  private lastProblem: { code: string; message: string; at: number } | null = null;
  private everUp = false;
  private readonly roundedWarned = new Set<string>();
  /** The source's quality table, this device's group in it, and the slot of each value by its `index`. */
  private readonly quality: QualityTable;
  private readonly group: number;
  private readonly slots: Int32Array;

  constructor(readonly plan: DevicePlan, private readonly deps: DeviceDeps) {
    this.blocks = plan.blocks.map((b) => ({ ...b, values: [...b.values] }));
    this.quality = deps.ctx.stats.quality;
    this.group = this.quality.addGroup(plan.name, plan.pollIntervalMs);
    this.slots = new Int32Array(plan.values.reduce((n, v) => Math.max(n, v.index + 1), 0)).fill(-1);
    for (const v of plan.values) this.slots[v.index] = this.quality.add(v.variable, this.group);
    this.backoff = new Backoff(deps.reconnect);
    this.labels = { source: deps.sourceName, device: plan.name };
    deps.ctx.metrics.modbusRequestsPerCycle.set(this.labels, this.blocks.length);
    deps.ctx.metrics.modbusDeviceUp.set(this.labels, 0);
  }

  get currentState(): DeviceState {
    return this.state;
  }

  get hasBeenUp(): boolean {
    return this.everUp;
  }

  get link(): ModbusLink {
    return this.deps.link;
  }

  /**
   * The device's connection went down at `at` (the link's own event): its variables are stale from
   * then, and its row says disconnected at once rather than at its next poll.
   */
  linkLost(at: number): void {
    if (!this.everUp || this.state === 'stopped') return;
    this.quality.setGroupDown(this.group, at);
    this.setState('disconnected');
  }

  start(): void {
    if (this.loop) return;
    this.loop = this.run().catch((err) => {
      // Nothing a device sends should get here; if it does, say so instead of dying silently.
      this.deps.ctx.logger.error({ device: this.plan.name, err: describeError(err) }, 'modbus device loop stopped unexpectedly');
      this.setState('offline');
    });
  }

  /** Asks the loop to stop after the request in flight; `close()` waits for it. */
  stop(): void {
    this.abort.abort();
  }

  async close(): Promise<void> {
    this.abort.abort();
    await this.loop;
    await Promise.allSettled([...this.inflight]);
    this.setState('stopped');
  }

  status(): Record<string, unknown> {
    return {
      name: this.plan.name,
      endpoint: endpointKey(this.plan.endpoint),
      unit_id: this.plan.unitId,
      state: this.state,
      poll_interval_ms: this.plan.pollIntervalMs,
      values: this.plan.values.length,
      requests_per_cycle: this.blocks.length,
      cycles: this.cycles,
      cycle_overruns: this.overruns,
      last_cycle_ms: this.lastCycleMs,
      last_problem: this.lastProblem,
      down_since: this.quality.groupDownSince(this.group),
      variables: this.quality.summary(this.deps.ctx.clock.now(), this.group),
    };
  }

  /** Read blocks as they are now (after any split), for status and tests. */
  currentBlocks(): ReadonlyArray<Readonly<ReadBlock>> {
    return this.blocks;
  }

  private setState(state: DeviceState): void {
    if (state === this.state) return;
    const was = this.state;
    this.state = state;
    const up = state === 'connected' || state === 'degraded';
    if (up) this.everUp = true;
    // Its variables are stale while it is down (core/quality.ts): from the link's event when that
    // came first (linkLost), else from now.
    if (up) this.quality.setGroupDown(this.group, null);
    else if (this.everUp && state !== 'connecting') this.quality.setGroupDown(this.group, this.deps.ctx.clock.now());
    this.deps.ctx.metrics.modbusDeviceUp.set(this.labels, up ? 1 : 0);
    if (was === 'offline' && up) this.deps.ctx.logger.info({ device: this.plan.name }, 'modbus device answering again');
    this.deps.onStateChange();
  }

  private async run(): Promise<void> {
    const { clock } = this.deps.ctx;
    const signal = this.abort.signal;
    const interval = this.plan.pollIntervalMs;
    let next = clock.monotonic();
    while (!signal.aborted) {
      if (!this.deps.link.isConnected()) {
        this.setState(this.everUp ? 'disconnected' : 'connecting');
        if (!(await this.deps.link.waitUntilConnected(signal))) break;
        next = clock.monotonic();
        continue;
      }
      await this.waitForBuffer();
      const outcome = await this.cycle();
      if (signal.aborted) break;
      if (outcome.linkDown) {
        this.setState(this.everUp ? 'disconnected' : 'connecting');
        continue;
      }
      if (outcome.offline) {
        this.setState('offline');
        const delay = this.backoff.next();
        this.deps.throttle.warn(
          `offline:${this.plan.name}`,
          { device: this.plan.name, unit_id: this.plan.unitId, endpoint: endpointKey(this.plan.endpoint), retry_in_ms: delay },
          'modbus device not answering; polling it again after a backoff delay',
        );
        await sleepUnlessAborted(delay, signal);
        next = clock.monotonic();
        continue;
      }
      this.backoff.reset();
      this.setState(outcome.failed > 0 ? 'degraded' : 'connected');
      next += interval;
      const now = clock.monotonic();
      if (next < now) {
        // The cycle took longer than the interval: skip the missed ticks rather than firing them
        // in a burst, so a slow device is read as often as it can answer.
        const missed = Math.floor((now - next) / interval) + 1;
        this.overruns += missed;
        this.deps.ctx.metrics.modbusCycleOverruns.inc(this.labels, missed);
        next += missed * interval;
      }
      await sleepUnlessAborted(next - now, signal);
    }
  }

  private async cycle(): Promise<CycleOutcome> {
    const t0 = this.deps.ctx.clock.monotonic();
    const samples: Sample[] = [];
    let answered = 0;
    let failed = 0;
    let silentStreak = 0;
    let maxTs = -Infinity;
    const blocks = [...this.blocks];
    for (const block of blocks) {
      if (this.abort.signal.aborted) break;
      // While nothing has answered in this cycle, a silent device costs one attempt per block.
      const retries = answered === 0 && silentStreak > 0 ? 0 : this.plan.retries;
      const result = await this.readBlock(block, retries);
      if (result.ok) {
        answered += 1;
        silentStreak = 0;
        const ts = this.stamp(result.response.at);
        maxTs = Math.max(maxTs, ts);
        this.decodeBlock(block, result.response.bytes, ts, samples);
        continue;
      }
      const err = result.error;
      const action = failureAction(err.kind, err.exception?.code);
      failed += 1;
      // An exception response is the device saying these values cannot be read (§7): bad.
      if (err.exception) this.markBad(block.values);
      this.report(block, err, result.attempts);
      if (action.linkDown) {
        this.finishCycle(t0, samples, maxTs);
        return { answered, failed, offline: false, linkDown: true };
      }
      if (action.silent) {
        silentStreak += 1;
        // Two silent blocks and no answer: the device (not just one range) is not answering.
        if (answered === 0 && (silentStreak >= 2 || blocks.length === 1)) {
          this.finishCycle(t0, samples, maxTs);
          return { answered, failed, offline: true, linkDown: false };
        }
        continue;
      }
      answered += 1; // an exception is an answer: the device is there
      silentStreak = 0;
      if (action.splitBlock && this.plan.splitOnIllegalAddress) this.split(block);
    }
    this.finishCycle(t0, samples, maxTs);
    return { answered, failed, offline: answered === 0 && failed > 0, linkDown: false };
  }

  private finishCycle(t0: number, samples: Sample[], maxTs: number): void {
    const ms = this.deps.ctx.clock.monotonic() - t0;
    this.cycles += 1;
    this.lastCycleMs = Math.round(ms);
    this.deps.ctx.metrics.modbusCycleSeconds.observe(this.labels, ms / 1000);
    if (maxTs > -Infinity) this.lastTs = maxTs;
    if (samples.length > 0) this.deliver(samples);
  }

  /**
   * The sample timestamp for a response that arrived at wall-clock `at`: `at` itself, except when
   * it is not after the previous cycle's (a cycle ending and the next one answering within the same
   * millisecond), where it is nudged 1 ms forward so the service, which keeps one value per
   * (variable, timestamp), does not replace the earlier sample. A clock stepped back by more than
   * a second is followed rather than papered over.
   */
  private stamp(at: number): number {
    if (at > this.lastTs || this.lastTs - at > 1_000) return at;
    return this.lastTs + 1;
  }

  private async readBlock(block: ReadBlock, retries: number): Promise<BlockResult> {
    const { metrics } = this.deps.ctx;
    let attempt = 0;
    for (;;) {
      attempt += 1;
      try {
        const response = await this.deps.link.read({
          unitId: this.plan.unitId,
          table: block.table,
          address: block.start,
          count: block.count,
          timeoutMs: this.plan.timeoutMs,
          delayMs: this.plan.requestDelayMs,
        });
        metrics.sourceRequests.inc({ source: this.labels.source, kind: 'modbus', device: this.labels.device, outcome: 'ok' });
        return { ok: true, response, attempts: attempt };
      } catch (raw) {
        const err = toRequestError(raw);
        metrics.sourceRequests.inc({ source: this.labels.source, kind: 'modbus', device: this.labels.device, outcome: err.kind === 'exception' ? 'exception' : err.kind });
        if (err.exception) metrics.modbusExceptions.inc({ ...this.labels, exception: err.exception.label });
        const action = failureAction(err.kind, err.exception?.code);
        if (!action.retry || attempt > retries || this.abort.signal.aborted) return { ok: false, error: err, attempts: attempt };
        // Busy / acknowledge (§7, codes 05 and 06) ask for "later": give the device a moment.
        if (err.kind === 'exception') await sleepUnlessAborted(Math.min(this.plan.timeoutMs, 100), this.abort.signal);
      }
    }
  }

  private decodeBlock(block: ReadBlock, bytes: Buffer, ts: number, out: Sample[]): void {
    const bits = TABLE_INFO[block.table].bits;
    for (const v of block.values) {
      let outcome: DecodeOutcome;
      try {
        if (bits) {
          outcome = scaleRaw(bitAt(bytes, v.address - block.start), { type: 'bool', scale: v.scale, offset: v.offset });
        } else {
          const from = (v.address - block.start) * 2;
          outcome = decodeValue(bytes.subarray(from, from + v.count * 2), v);
        }
      } catch (err) {
        this.refuse(v, 'decode_error', describeError(err));
        continue;
      }
      if (!outcome.ok) {
        this.refuse(v, outcome.reason, `${v.type} value is ${outcome.raw}`);
        continue;
      }
      this.quality.set(this.slots[v.index], Q_GOOD, ts);
      if (outcome.rounded && !this.roundedWarned.has(v.variable)) {
        this.roundedWarned.add(v.variable);
        this.deps.ctx.logger.warn(
          { device: this.plan.name, variable: v.variable, range: this.rangeOf(v) },
          `${v.type} value beyond ±2^53 rounded to the nearest double (sample values are 64-bit floats); logged once per variable`,
        );
      }
      out.push({ variable: v.variable, ts, value: outcome.value });
    }
  }

  private markBad(values: readonly PlannedValue[]): void {
    const now = this.deps.ctx.clock.now();
    for (const v of values) this.quality.set(this.slots[v.index], Q_BAD, now);
  }

  private refuse(v: PlannedValue, reason: 'not_finite' | 'decode_error', detail: string): void {
    this.quality.set(this.slots[v.index], Q_BAD, this.deps.ctx.clock.now());
    this.deps.ctx.stats.refused(reason, 1, { variable: v.variable, detail });
    this.deps.throttle.warn(
      `refused:${this.plan.name}:${v.variable}:${reason}`,
      { device: this.plan.name, variable: v.variable, range: this.rangeOf(v), reason, detail },
      'modbus value refused',
    );
  }

  private rangeOf(v: PlannedValue): string {
    return describeRange(v.table, v.address, v.count, this.plan.addressBase);
  }

  private report(block: ReadBlock, err: ModbusRequestError, attempts: number): void {
    const { ctx, throttle } = this.deps;
    const range = describeRange(block.table, block.start, block.count, this.plan.addressBase);
    const who = `device "${this.plan.name}" (unit ${this.plan.unitId} at ${endpointKey(this.plan.endpoint)})`;
    let message: string;
    if (err.exception) {
      message = `${who} answered exception ${err.exception.code} (${err.exception.name}) to a read of ${range} (FC${TABLE_INFO[block.table].functionCode}): ${err.exception.hint}`;
    } else if (err.kind === 'timeout') {
      message = `${who} did not answer a read of ${range} within ${this.plan.timeoutMs} ms (${attempts} attempt${attempts === 1 ? '' : 's'})`;
    } else {
      message = `${who}: read of ${range} failed: ${err.message}`;
    }
    const wrapped = new ModbusRequestError(err.kind, err.code, message, { cause: err, exception: err.exception });
    ctx.stats.error(wrapped, err.code);
    this.lastProblem = { code: err.code, message, at: ctx.clock.now() };
    if (err.kind === 'connection') return; // the link logs its own state changes
    throttle.warn(
      `block:${this.plan.name}:${block.table}:${block.start}:${block.count}:${err.code}`,
      {
        device: this.plan.name,
        unit_id: this.plan.unitId,
        endpoint: endpointKey(this.plan.endpoint),
        table: block.table,
        range,
        code: err.code,
        ...(err.exception ? { exception: err.exception.name } : {}),
      },
      message,
    );
  }

  /**
   * A joined read answered "illegal data address" (§7, code 02): some address inside the block is
   * not implemented, possibly one in a gap the block read through. From now on read the block's
   * values one by one (values sharing registers stay together), so only the bad one is lost.
   */
  private split(block: ReadBlock): void {
    const parts = coalesce(block.values, -1, Number.MAX_SAFE_INTEGER);
    if (parts.length <= 1) return;
    const i = this.blocks.indexOf(block);
    if (i < 0) return;
    this.blocks.splice(i, 1, ...parts);
    this.deps.ctx.metrics.modbusRequestsPerCycle.set(this.labels, this.blocks.length);
    this.deps.ctx.logger.warn(
      { device: this.plan.name, range: describeRange(block.table, block.start, block.count, this.plan.addressBase), requests: parts.length },
      'joined read refused with "illegal data address"; reading its values one by one from now on to isolate the bad address',
    );
  }

  private deliver(samples: Sample[]): void {
    const { ctx } = this.deps;
    const p: Promise<void> = ctx.sink
      .append(samples)
      .then(() => ctx.stats.samplesRead(samples.length))
      .catch((err) => {
        // Not committed: the next poll reads the registers again; these values are counted as refused.
        ctx.stats.bufferRefused(err, samples.length);
        this.deps.throttle.error(`buffer:${this.plan.name}`, { device: this.plan.name, err: describeError(err), samples: samples.length }, 'modbus samples not buffered');
      })
      .finally(() => this.inflight.delete(p));
    this.inflight.add(p);
  }

  private async waitForBuffer(): Promise<void> {
    while (this.inflight.size >= MAX_INFLIGHT_APPENDS && !this.abort.signal.aborted) {
      await Promise.race(this.inflight);
    }
  }
}
