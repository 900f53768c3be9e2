import type { Logger } from 'pino';
import type { GapLedger, GapReason, GapScope } from '../buffer/gaps.js';
import type { SampleBuffer } from '../buffer/sample-buffer.js';
import type { Clock } from '../core/clock.js';
import { describeError } from '../core/errors.js';
import { LogThrottle } from '../core/log-throttle.js';
import type { Source, SourceState, SourceStats } from '../core/source.js';
import type { SourceInfo } from '../sources/inventory.js';

/**
 * Feeds the gap ledger (src/buffer/gaps.ts) from what the running gateway sees:
 *
 * - gateway_stopped: at start, one gap per source that had delivered data before, from the last
 *   heartbeat of the previous run (written every HEARTBEAT_MS and at a clean stop) until the
 *   source is up again;
 * - source_disconnected: a source that was up goes connecting/disconnected (exact time from the
 *   source's own state change); closed when it is up again;
 * - device_error / source_disconnected per Modbus device (`device:<name>` scope, the device's
 *   variables): a device that stops answering, or whose connection is down;
 * - buffer_full: an episode of the full-buffer policy, with the sample-time range of what it lost.
 *
 * Gaps of an OPC UA source with `history.backfill: auto` start `pending`: its backfill decides.
 */

const HEARTBEAT_MS = 2_000;
const POLL_MS = 1_000;

const isUp = (s: SourceState | string) => s === 'connected' || s === 'degraded';

export class GapWatcher {
  private heartbeatTimer: NodeJS.Timeout | null = null;
  private pollTimer: NodeJS.Timeout | null = null;
  private readonly detach = new Map<string, () => void>();
  private readonly deviceWasUp = new Map<string, boolean>();
  private episode: { from: number; to: number } | null = null;
  private stopped = false;
  private throttle: LogThrottle | null = null;

  constructor(
    private readonly o: {
      ledger: GapLedger;
      buffer: SampleBuffer;
      sources: () => readonly Source[];
      info: () => Map<string, SourceInfo>;
      clock: Clock;
      logger: Logger;
      /** Called after a gap closed (the annotator looks for work). */
      onClosed?: () => void;
    },
  ) {}

  /**
   * Records the interval the gateway was not running, for every source that had data before.
   * Call before the sources start.
   */
  start(startedAt: number): void {
    // A ledger that cannot be written (a full disk) must not keep the gateway from starting.
    this.safe(() => this.recordStop(startedAt));
    const { ledger } = this.o;
    this.heartbeatTimer = setInterval(() => this.safe(() => ledger.heartbeat(this.o.clock.now())), HEARTBEAT_MS);
    this.heartbeatTimer.unref();
    this.pollTimer = setInterval(() => this.safe(() => this.poll()), POLL_MS);
    this.pollTimer.unref();
  }

  /** The gateway_stopped gaps of the previous run, and the first heartbeat. */
  private recordStop(startedAt: number): void {
    const { ledger } = this.o;
    const lastAlive = ledger.lastAlive();
    if (lastAlive !== null && startedAt > lastAlive) {
      const seen = this.o.buffer.lastCommitted.snapshot();
      for (const [name, info] of this.o.info()) {
        if (!info.variables.some((v) => seen.has(v)) && info.variables.length > 0) continue;
        if (info.variables.length === 0 && seen.size === 0) continue;
        const g = ledger.open({ source: name, variables: null, from: lastAlive, reason: 'gateway_stopped', filled: info.historyAuto ? 'pending' : 'no' }, startedAt);
        if (g.reason === 'gateway_stopped' && g.from === lastAlive) {
          this.o.logger.info({ source: name, from: new Date(lastAlive).toISOString(), gap_id: g.id }, 'gap recorded: the gateway was not running');
        }
      }
    }
    ledger.refreshGauge();
    ledger.heartbeat(startedAt);
  }

  /** Watches one source's state (called when its context is made, also after reloads). */
  attach(name: string, stats: SourceStats): void {
    this.detach.get(name)?.();
    this.detach.set(
      name,
      stats.onStateChange((state, previous, at) => this.safe(() => this.onState(name, state, previous, at))),
    );
  }

  /** Clean stop: the heartbeat says when, so the next start knows where the gateway_stopped gap begins. */
  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
    if (this.pollTimer) clearInterval(this.pollTimer);
    for (const d of this.detach.values()) d();
    this.detach.clear();
    this.safe(() => this.o.ledger.heartbeat(this.o.clock.now()));
  }

  private filledFor(name: string): 'no' | 'pending' {
    return this.o.info().get(name)?.historyAuto ? 'pending' : 'no';
  }

  private onState(name: string, state: SourceState, previous: SourceState, at: number): void {
    if (this.stopped) return;
    const kind = this.o.info().get(name)?.kind;
    if (isUp(state)) {
      // Back: whatever kept it from delivering (gateway stopped, disconnected) ends now.
      const closed = this.o.ledger.closeOpen(name, 'source', at, this.o.clock.now());
      if (closed) this.o.onClosed?.();
      return;
    }
    // Modbus gaps are per device (poll below); a source being stopped (shutdown, reload) is not a gap.
    if (kind === 'modbus' || state === 'stopped' || state === 'starting') return;
    if (isUp(previous) && (state === 'connecting' || state === 'disconnected')) {
      this.open(name, 'source', null, at, 'source_disconnected');
    }
  }

  private open(source: string, scope: GapScope, variables: string[] | null, from: number, reason: GapReason): void {
    const g = this.o.ledger.open({ source, scope, variables, from, reason, filled: scope === 'source' ? this.filledFor(source) : 'no' }, this.o.clock.now());
    this.o.logger.info({ source, scope, reason, gap_id: g.id, from: new Date(g.from).toISOString() }, `gap opened: ${source} delivers no data (${reason})`);
  }

  private poll(): void {
    if (this.stopped) return;
    const now = this.o.clock.now();
    const infos = this.o.info();
    for (const src of this.o.sources()) {
      if (src.kind !== 'modbus') continue;
      const devices = (src.status().detail?.devices ?? []) as Array<{ name: string; state: string; last_problem: { at: number } | null }>;
      for (const d of devices) {
        const key = `${src.name}/${d.name}`;
        const scope: GapScope = `device:${d.name}`;
        if (isUp(d.state)) {
          this.deviceWasUp.set(key, true);
          if (this.o.ledger.closeOpen(src.name, scope, now, now)) this.o.onClosed?.();
        } else if (d.state === 'offline' || d.state === 'disconnected' || (d.state === 'connecting' && this.deviceWasUp.get(key))) {
          // offline: the device stopped answering (it was reached, or it would be 'connecting');
          // disconnected (connecting): its connection is down, a gap only once it had delivered.
          if (this.o.ledger.openGap(src.name, scope)) continue;
          // The device's last problem is when it stopped answering (to the poll cycle, not the second).
          const from = d.last_problem && d.last_problem.at <= now ? d.last_problem.at : now;
          this.open(src.name, scope, infos.get(src.name)?.devices.get(d.name) ?? null, from, d.state === 'offline' ? 'device_error' : 'source_disconnected');
        }
      }
    }
    this.pollBuffer(now, infos);
  }

  /** A full-buffer episode: one gap per source over the sample-time range the policy dropped. */
  private pollBuffer(now: number, infos: Map<string, SourceInfo>): void {
    const e = this.o.buffer.stats().fullEpisode;
    if (e && e.fromTs !== null && e.toTs !== null) {
      const first = this.episode === null;
      this.episode = { from: Math.min(this.episode?.from ?? e.fromTs, e.fromTs), to: Math.max(this.episode?.to ?? e.toTs, e.toTs) };
      for (const name of infos.keys()) {
        const g = first ? (this.o.ledger.openGap(name, 'buffer') ?? this.o.ledger.open({ source: name, scope: 'buffer', variables: null, from: this.episode.from, reason: 'buffer_full', filled: 'no' }, now)) : this.o.ledger.openGap(name, 'buffer');
        if (g) this.o.ledger.extend(g.id, this.episode.from, this.episode.to, now);
      }
      if (first) this.o.logger.warn({ policy: e.policy, from: new Date(e.fromTs).toISOString() }, 'gap opened: the full-buffer policy is dropping samples (buffer_full)');
    } else if (!e && this.episode) {
      const ep = this.episode;
      this.episode = null;
      for (const name of infos.keys()) this.o.ledger.closeOpen(name, 'buffer', ep.to, now);
      this.o.onClosed?.();
    }
  }

  private safe(fn: () => void): void {
    try {
      fn();
    } catch (err) {
      // The ledger is a record; a failed write (disk full, closing) must never break a source. Said
      // at most once a minute: the heartbeat alone tries every HEARTBEAT_MS.
      this.throttle ??= new LogThrottle(this.o.logger, 60_000, () => this.o.clock.monotonic());
      this.throttle.warn('write', { err: describeError(err) }, 'gap ledger not updated');
    }
  }
}
