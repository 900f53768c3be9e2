import {
  AttributeIds,
  HistoryReadRequest,
  ReadRawModifiedDetails,
  TimestampsToReturn,
  resolveNodeId,
  type ClientSession,
  type DataValue,
  type HistoryReadResult,
} from 'node-opcua';
import { HistoryData } from 'node-opcua-service-history';
import type { Logger } from 'pino';
import type { GapLedger, GapRow } from '../../buffer/gaps.js';
import type { Clock } from '../../core/clock.js';
import { describeError } from '../../core/errors.js';
import type { Metrics } from '../../core/metrics.js';
import { SamplesRefusedError, type Sample, type SampleSink } from '../../core/sample.js';
import { decodeDataValue, severityOf, type NodeBinding } from './decode.js';

/**
 * OPC UA historical backfill (issue 14 §1; OPC UA Part 11 §6.4.3 ReadRawModifiedDetails, Part 4
 * §5.10.3 HistoryRead). After any gap — the gateway started after a stop, the session was lost and
 * re-established, the subscription re-created, the watchdog rebuilt the connection — the values the
 * server historized while the gateway was not reading are read back and put into the buffer like
 * live ones (the service replaces the same variable and timestamp, so an overlap is harmless).
 *
 * For each node of the link:
 *  - start: the newest timestamp the buffer ever committed for its variable (last-committed.ts),
 *    taken before the subscription is created, so the first live value cannot move it;
 *  - end: the source timestamp of the first live value after the (re)connect;
 *  - plus any gap of the source the ledger still holds as `pending` (a backfill cut short by a crash
 *    or a second connection loss is read again from the ledger, not forgotten);
 *  - at most `max_window` (the newest part), `values_per_request` values per node per request,
 *    continuation points followed (Part 11 §6.4.3.2).
 * Nodes whose AccessLevel/UserAccessLevel lacks HistoryRead (Part 3 §5.6.2), or whose HistoryRead
 * is refused, are noted once and never read again in a loop. A node never committed before has
 * nothing to fill.
 *
 * It runs beside the live subscription: it only starts once live values flow, and each response is
 * handed to the buffer with `await`, so the buffer's commit paces it and live values interleave.
 */

export interface HistorySettings {
  backfill: 'auto' | 'off';
  /** Largest interval read after one gap, ms (the newest part is kept). */
  max_window: number;
  /** numValuesPerNode of one HistoryRead. */
  values_per_request: number;
}

/** What the runtime gives the OPC UA source for history: buffer state (src/buffer/). */
export interface HistoryContext {
  lastCommitted: { get(variable: string): number | null };
  gaps: GapLedger;
}

/**
 * Nodes per HistoryRead request (each with its own continuation point): at most 50, and about
 * 10,000 values per response, so one response decoded and committed never stalls the event loop
 * (and the live subscription) for long.
 */
export function nodesPerRequest(valuesPerRequest: number): number {
  return Math.max(1, Math.min(50, Math.floor(10_000 / valuesPerRequest)));
}
/** Responses handed to the buffer and not yet committed, at most. */
const APPENDS_IN_FLIGHT = 2;
/** Attribute reads per Read request when checking AccessLevel. */
const READ_CHUNK = 500;

interface NodeWindow {
  binding: NodeBinding;
  ranges: Array<[number, number]>;
  clamped: boolean;
}

interface Run {
  id: number;
  aborted: boolean;
  /** Binding index → source ts of the first live value after the (re)connect. */
  firstLive: Map<number, number>;
  waitingFor: number;
  wake: (() => void) | null;
  /** Buffer appends of responses not yet committed. */
  appends: Array<Promise<void>>;
}

export interface HistoryStatus {
  backfill: 'auto' | 'off';
  state: 'idle' | 'waiting_for_live' | 'reading';
  runs: number;
  values_total: number;
  last_run: { at: string; values: number; nodes: number; seconds: number; outcome: string } | null;
  nodes_without_history: string[];
}

export class HistoryBackfill {
  private runSeq = 0;
  private current: Run | null = null;
  private state: HistoryStatus['state'] = 'idle';
  private runs = 0;
  private valuesTotal = 0;
  private lastRun: HistoryStatus['last_run'] = null;
  /** Variables whose node has no history (noted once per source lifetime). */
  private readonly withoutHistory = new Map<string, string>();
  /** Variables whose HistoryRead the server refused: not read again until the source restarts. */
  private readonly refused = new Set<string>();

  constructor(
    private readonly o: {
      source: string;
      path: string;
      settings: HistorySettings;
      ctx: HistoryContext;
      sink: SampleSink;
      logger: Logger;
      metrics: Metrics;
      clock: Clock;
      /** How long to wait for a node's first live value before taking "now" as the window's end. */
      firstValueTimeoutMs: number;
    },
  ) {}

  /**
   * A link was (re)established or repaired: remember where each variable's data stops (before the
   * subscription delivers anything) and start a backfill that waits for the first live values.
   */
  begin(session: ClientSession, bindings: readonly NodeBinding[]): void {
    this.end();
    const starts = new Map<number, number>();
    for (const b of bindings) {
      const lc = this.o.ctx.lastCommitted.get(b.variable);
      if (lc !== null) starts.set(b.index, lc);
    }
    const run: Run = { id: ++this.runSeq, aborted: false, firstLive: new Map(), waitingFor: 0, wake: null, appends: [] };
    this.current = run;
    void this.execute(run, session, bindings, starts).catch((err) => {
      this.o.logger.warn({ err: describeError(err) }, `${this.o.path}: historical backfill failed; the gap stays pending and is read again at the next connect`);
    }).finally(() => {
      if (this.current === run) {
        this.current = null;
        this.state = 'idle';
      }
    });
  }

  /** Called with every decoded live value; the first per node ends that node's window. */
  noteLive(index: number, ts: number): void {
    const run = this.current;
    if (!run || run.firstLive.has(index)) return;
    run.firstLive.set(index, ts);
    if (run.wake && run.firstLive.size >= run.waitingFor) run.wake();
  }

  /** The link is going away: stop reading (the session is dead or closing). Pending gaps stay pending. */
  end(): void {
    if (this.current) {
      this.current.aborted = true;
      this.current.wake?.();
    }
    this.current = null;
    this.state = 'idle';
  }

  status(): HistoryStatus {
    return {
      backfill: this.o.settings.backfill,
      state: this.state,
      runs: this.runs,
      values_total: this.valuesTotal,
      last_run: this.lastRun,
      nodes_without_history: [...this.withoutHistory.keys()],
    };
  }

  // ------------------------------------------------------------------------------------------

  private async execute(run: Run, session: ClientSession, bindings: readonly NodeBinding[], starts: Map<number, number>): Promise<void> {
    const began = this.o.clock.monotonic();
    const candidates = bindings;
    if (candidates.length === 0) return;

    this.state = 'waiting_for_live';
    const historized = await this.historizedNodes(session, candidates);
    if (run.aborted) return;
    const readable = candidates.filter((b) => historized.has(b.index) && !this.refused.has(b.variable));
    this.noteWithoutHistory(candidates.filter((b) => !historized.has(b.index)), 'its AccessLevel/UserAccessLevel has no HistoryRead bit (the server keeps no history for it, or not for this user)');

    // Wait for the first live value of each readable node (bounded: a node that never changes
    // after the connect still has the subscription's initial value, Part 4 §5.12.1.2).
    run.waitingFor = readable.length;
    if (readable.length > 0 && readable.some((b) => !run.firstLive.has(b.index))) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, this.o.firstValueTimeoutMs);
        timer.unref?.();
        run.wake = () => {
          clearTimeout(timer);
          resolve();
        };
        if (run.firstLive.size >= run.waitingFor) run.wake();
      });
      run.wake = null;
    }
    // The runtime closes the source's open gap when the source reports itself connected, at the
    // end of the connect; the gap's end is needed before it can be settled.
    const deadline = this.o.clock.monotonic() + this.o.firstValueTimeoutMs;
    while (!run.aborted && this.o.ctx.gaps.openGap(this.o.source) && this.o.clock.monotonic() < deadline) await sleep(100);
    if (run.aborted) return;
    const now = this.o.clock.now();
    const pending = this.o.ctx.gaps.pending(this.o.source);

    const windows: NodeWindow[] = [];
    for (const b of readable) {
      const end = (run.firstLive.get(b.index) ?? now) - 1;
      const ranges: Array<[number, number]> = [];
      const lc = starts.get(b.index);
      if (lc !== undefined && lc + 1 <= end) ranges.push([lc + 1, end]);
      for (const g of pending) {
        const to = Math.min(g.to ?? end, end);
        if (g.from <= to && (g.variables === null || g.variables.includes(b.variable))) ranges.push([g.from, to]);
      }
      const merged = mergeRanges(ranges);
      if (merged.length === 0) continue;
      const { kept, clamped } = clampNewest(merged, this.o.settings.max_window);
      windows.push({ binding: b, ranges: kept, clamped });
    }

    let values = 0;
    let failed = false;
    if (windows.length > 0) {
      this.state = 'reading';
      this.runs += 1;
      try {
        values = await this.readAll(run, session, windows);
      } catch (err) {
        failed = true;
        // A buffer refusal (refuse_new on a full buffer) leaves the gap pending like a failed read:
        // its values are still on the server (issue 21 §1).
        const what = err instanceof SamplesRefusedError ? `the buffer refused the values read back (${err.reason})` : 'HistoryRead failed';
        this.o.logger.warn({ err: describeError(err) }, `${this.o.path}: ${what}; the gap stays pending and is read again at the next connect`);
      }
    }
    if (run.aborted || failed) {
      this.lastRun = { at: new Date(now).toISOString(), values, nodes: windows.length, seconds: (this.o.clock.monotonic() - began) / 1000, outcome: run.aborted ? 'interrupted' : 'failed' };
      return;
    }
    this.lastRun = { at: new Date(now).toISOString(), values, nodes: windows.length, seconds: (this.o.clock.monotonic() - began) / 1000, outcome: 'done' };
    if (windows.length > 0) {
      this.o.logger.info({ nodes: windows.length, values, seconds: this.lastRun.seconds }, `${this.o.path}: ${values} value(s) of ${windows.length} node(s) read back from the server's history after a gap`);
    }
    this.settle(pending, bindings, historized, windows, values);
  }

  /** Writes what this backfill achieved into every pending gap it covered (gaps.ts G2). */
  private settle(pending: GapRow[], bindings: readonly NodeBinding[], historized: Set<number>, windows: NodeWindow[], values: number): void {
    const now = this.o.clock.now();
    const missing = bindings.filter((b) => !historized.has(b.index) || this.refused.has(b.variable));
    const clamped = windows.filter((w) => w.clamped);
    for (const seen of pending) {
      const g = this.o.ctx.gaps.get(seen.id);
      if (!g || g.to === null || g.filled !== 'pending') continue; // still open: not back yet for this scope
      const inScope = g.variables === null ? bindings : bindings.filter((b) => g.variables!.includes(b.variable));
      const lacking = missing.filter((b) => inScope.includes(b));
      const cut = clamped.filter((w) => inScope.includes(w.binding));
      let filled: 'yes' | 'partial' | 'no';
      if (inScope.length > 0 && lacking.length === inScope.length) filled = 'no';
      else if (lacking.length > 0 || cut.length > 0) filled = 'partial';
      else filled = 'yes';
      const notes: string[] = [];
      if (lacking.length > 0) notes.push(`no history on the server for ${lacking.length} of ${inScope.length} node(s): ${lacking.slice(0, 5).map((b) => b.variable).join(', ')}${lacking.length > 5 ? ', ...' : ''}`);
      if (cut.length > 0) notes.push(`only the newest ${Math.round(this.o.settings.max_window / 60_000)} min (history.max_window) were read for ${cut.length} node(s)`);
      this.o.ctx.gaps.setFilled(g.id, filled, values, notes.length > 0 ? notes.join('; ') : null, now);
    }
  }

  /** Reads AccessLevel and UserAccessLevel; a node is historized when both have HistoryRead (bit 2, Part 3 §5.6.2). */
  private async historizedNodes(session: ClientSession, bindings: readonly NodeBinding[]): Promise<Set<number>> {
    const out = new Set<number>();
    for (let start = 0; start < bindings.length; start += READ_CHUNK) {
      const chunk = bindings.slice(start, start + READ_CHUNK);
      const results = await session.read(chunk.flatMap((b) => [
        { nodeId: resolveNodeId(b.nodeId), attributeId: AttributeIds.AccessLevel },
        { nodeId: resolveNodeId(b.nodeId), attributeId: AttributeIds.UserAccessLevel },
      ]));
      chunk.forEach((b, i) => {
        const level = accessBits(results[2 * i]);
        // A server may not expose UserAccessLevel; then AccessLevel alone decides.
        const user = accessBits(results[2 * i + 1]);
        if (level !== null && (level & 4) !== 0 && (user === null || (user & 4) !== 0)) out.add(b.index);
      });
    }
    return out;
  }

  private noteWithoutHistory(bindings: readonly NodeBinding[], why: string): void {
    const fresh = bindings.filter((b) => !this.withoutHistory.has(b.variable));
    for (const b of fresh) this.withoutHistory.set(b.variable, why);
    if (fresh.length === 0) return;
    this.o.logger.warn(
      { code: 'OPCUA_NO_HISTORY', nodes: fresh.slice(0, 20).map((b) => ({ node_id: b.configuredId, variable: b.variable })), count: fresh.length },
      `${this.o.path}: ${fresh.length} node(s) cannot be backfilled after a gap: ${why}. Gaps in their data are recorded (edge-gateway gaps list) and not retried`,
    );
  }

  private async readAll(run: Run, session: ClientSession, windows: NodeWindow[]): Promise<number> {
    // One request per group of nodes with the same range, so each request has one time domain.
    const units: Array<{ binding: NodeBinding; from: number; to: number }> = [];
    for (const w of windows) for (const [from, to] of w.ranges) units.push({ binding: w.binding, from, to });
    units.sort((a, b) => a.from - b.from || a.to - b.to);
    let total = 0;
    const perRequest = nodesPerRequest(this.o.settings.values_per_request);
    let i = 0;
    while (i < units.length && !run.aborted) {
      // Group units that share a time domain closely enough (within a second of each other);
      // each keeps its own range when values are filtered.
      const group = [units[i]];
      let j = i + 1;
      while (j < units.length && group.length < perRequest && units[j].from - units[i].from <= 1_000 && Math.abs(units[j].to - units[i].to) <= 1_000) group.push(units[j++]);
      i = j;
      total += await this.readGroup(run, session, group);
    }
    // Every value read is committed before the backfill reports (and the gap is settled).
    while (run.appends.length > 0) await run.appends.shift();
    return total;
  }

  private async readGroup(run: Run, session: ClientSession, group: Array<{ binding: NodeBinding; from: number; to: number }>): Promise<number> {
    const from = Math.min(...group.map((g) => g.from));
    const to = Math.max(...group.map((g) => g.to));
    const details = new ReadRawModifiedDetails({
      isReadModified: false,
      startTime: new Date(from),
      endTime: new Date(to),
      numValuesPerNode: this.o.settings.values_per_request,
      returnBounds: false,
    });
    let open = group.map((unit) => ({ unit, cp: null as Buffer | null }));
    let total = 0;
    while (open.length > 0) {
      if (run.aborted) {
        await this.release(session, details, open.filter((x) => x.cp !== null)).catch(() => undefined);
        return total;
      }
      let results: HistoryReadResult[];
      try {
        const response = await session.historyRead(
          new HistoryReadRequest({
            historyReadDetails: details,
            timestampsToReturn: TimestampsToReturn.Source,
            releaseContinuationPoints: false,
            nodesToRead: open.map((x) => ({ nodeId: resolveNodeId(x.unit.binding.nodeId), continuationPoint: x.cp ?? undefined })),
          }),
        );
        results = response.results ?? [];
        this.o.metrics.historyRequests.inc({ source: this.o.source, outcome: 'ok' });
      } catch (err) {
        this.o.metrics.historyRequests.inc({ source: this.o.source, outcome: 'error' });
        throw err;
      }
      const next: typeof open = [];
      const samples: Sample[] = [];
      results.forEach((r, k) => {
        const x = open[k];
        if (!x) return;
        const b = x.unit.binding;
        const code = r.statusCode?.value ?? 0;
        if (severityOf(code) === 'bad') {
          // BadHistoryOperationUnsupported, BadNotReadable, BadUserAccessDenied ...: noted once.
          this.refused.add(b.variable);
          this.noteWithoutHistory([b], `the server refused HistoryRead (${r.statusCode.name})`);
          return;
        }
        const data = r.historyData instanceof HistoryData ? r.historyData.dataValues ?? [] : [];
        for (const dv of data) {
          const s = this.decode(b, dv, x.unit.from, x.unit.to);
          if (s) samples.push(s);
        }
        const cp = r.continuationPoint;
        if (cp && cp.length > 0) next.push({ unit: x.unit, cp });
      });
      if (samples.length > 0) {
        // The next request goes out while this response commits; at most APPENDS_IN_FLIGHT wait
        // for their group commit, so the buffer paces the backfill and memory stays bounded.
        const n = samples.length;
        // keepsRefused: a refused response fails the run and its gap stays pending (execute), so
        // the server's history still holds these values: refused, not lost.
        const committed = this.o.sink.append(samples, { keepsRefused: true }).then(() => {
          this.valuesTotal += n;
          this.o.metrics.historyValues.inc({ source: this.o.source }, n);
        });
        // Handled here so a read that fails meanwhile leaves no unhandled rejection; awaited below.
        committed.catch(() => undefined);
        run.appends.push(committed);
        total += n;
        while (run.appends.length >= APPENDS_IN_FLIGHT) await run.appends.shift();
      }
      open = next;
    }
    return total;
  }

  /** History values: the node's scale/offset and quality rules, always the source timestamp (issue 14 §1). */
  private decode(b: NodeBinding, dv: DataValue, from: number, to: number): Sample | null {
    const d = decodeDataValue({ ...b, timestamp: 'source' }, dv, this.o.clock.now());
    if (!d.ok) return null;
    if (d.sample.ts < from || d.sample.ts > to) return null;
    return d.sample;
  }

  /** Frees the server's continuation points of an interrupted read (Part 11 §6.3: releaseContinuationPoints). */
  private async release(session: ClientSession, details: ReadRawModifiedDetails, open: Array<{ unit: { binding: NodeBinding }; cp: Buffer | null }>): Promise<void> {
    if (open.length === 0) return;
    await session.historyRead(
      new HistoryReadRequest({
        historyReadDetails: details,
        timestampsToReturn: TimestampsToReturn.Source,
        releaseContinuationPoints: true,
        nodesToRead: open.map((x) => ({ nodeId: resolveNodeId(x.unit.binding.nodeId), continuationPoint: x.cp ?? undefined })),
      }),
    );
  }
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref?.());

function accessBits(dv: DataValue | undefined): number | null {
  if (!dv || severityOf(dv.statusCode?.value ?? 0) === 'bad') return null;
  const v = dv.value?.value;
  return typeof v === 'number' ? v : null;
}

/** Sorted, overlapping or touching ranges joined. */
export function mergeRanges(ranges: ReadonlyArray<[number, number]>): Array<[number, number]> {
  const sorted = [...ranges].filter(([a, b]) => a <= b).sort((x, y) => x[0] - y[0]);
  const out: Array<[number, number]> = [];
  for (const [a, b] of sorted) {
    const last = out[out.length - 1];
    if (last && a <= last[1] + 1) last[1] = Math.max(last[1], b);
    else out.push([a, b]);
  }
  return out;
}

/** Keeps the newest `maxMs` of the ranges (issue 14 §1: a maximum window). */
export function clampNewest(ranges: ReadonlyArray<[number, number]>, maxMs: number): { kept: Array<[number, number]>; clamped: boolean } {
  if (ranges.length === 0) return { kept: [], clamped: false };
  const newest = ranges[ranges.length - 1][1];
  const floor = newest - maxMs;
  const kept: Array<[number, number]> = [];
  let clamped = false;
  for (const [a, b] of ranges) {
    if (b < floor) {
      clamped = true;
      continue;
    }
    if (a < floor) clamped = true;
    kept.push([Math.max(a, floor), b]);
  }
  return { kept, clamped };
}
