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
import { isResponseTooLarge } from './errors.js';
import { entriesPerCall, NO_OPERATION_LIMITS, type OperationLimits } from './operation-limits.js';

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
 *    continuation points followed (Part 11 §6.4.3.2), within bounds a misbehaving server cannot
 *    push (issue 21 §2, see readGroup): every page must move forward in time, reading stops at the
 *    gap's end and after `max_values_per_gap` values, continuation points are released, an answer
 *    is at most `max_message_size` (client-options.ts) and goes to the buffer in slices. A gap so cut
 *    short is marked partial/no with a note and logged once.
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
  /** Most values read for one node after one gap. */
  max_values_per_gap: number;
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
/** Most values handed to the buffer in one append (one answer can hold more, see readGroup). */
const APPEND_SLICE = 10_000;
/**
 * Consecutive pages with a continuation point but no value newer than the pages before, after
 * which a node's reading stops. Part 11 §6.4.3.2: each page continues where the last one ended; a
 * server that sends the same values again would otherwise be read for ever (issue 21 §2: 360
 * requests and 360,000 duplicate values in 20 s for a 4 s gap). A few are allowed for a server
 * that returns an empty page when its own time budget ran out.
 */
export const MAX_STALLED_PAGES = 3;
/** Pages per node and gap, as a multiple of the pages `max_values_per_gap` needs at `values_per_request`. */
const PAGES_SLACK = 10;
/** Nodes per Read request when checking AccessLevel (two attributes each), lowered to the server's MaxNodesPerRead. */
const READ_CHUNK = 500;

interface NodeWindow {
  binding: NodeBinding;
  ranges: Array<[number, number]>;
  clamped: boolean;
}

interface Unit {
  binding: NodeBinding;
  from: number;
  to: number;
}

/** One node's range being read: where it got to, and how much it took. */
interface Cursor {
  unit: Unit;
  cp: Buffer | null;
  /** Newest source time read so far (unit.from - 1 before the first page). */
  after: number;
  pages: number;
  values: number;
  /** Consecutive pages that brought nothing newer. */
  stalled: number;
}

/** Why the reading of a node's range stopped before its end. */
type StopReason = 'no_progress' | 'cap' | 'too_large';

interface Stopped {
  unit: Unit;
  reason: StopReason;
  values: number;
  pages: number;
}

interface Run {
  id: number;
  aborted: boolean;
  /** Ranges whose reading a bound cut short (settle() marks their gaps, and says why). */
  stopped: Stopped[];
  /** Binding index → source ts of the first live value after the (re)connect. */
  firstLive: Map<number, number>;
  waitingFor: number;
  wake: (() => void) | null;
  /** Buffer appends of responses not yet committed. */
  appends: Array<Promise<void>>;
  /** The server's operation limits, read at connect (operation-limits.ts). */
  limits: OperationLimits;
}

export interface HistoryStatus {
  backfill: 'auto' | 'off';
  state: 'idle' | 'waiting_for_live' | 'reading';
  runs: number;
  values_total: number;
  last_run: { at: string; values: number; nodes: number; seconds: number; outcome: string } | null;
  /** The first STATUS_NAMES of them (the log line names them too); the count is complete. */
  nodes_without_history: string[];
  nodes_without_history_count: number;
}

/**
 * Variables named in the status's `nodes_without_history`. All 100,000 of a plant whose server keeps
 * no history made every status request build and send a 100,000-name list (~2 MB of JSON, issue 25).
 */
const STATUS_NAMES = 20;

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
  begin(session: ClientSession, bindings: readonly NodeBinding[], limits: OperationLimits = NO_OPERATION_LIMITS): void {
    this.end();
    const starts = new Map<number, number>();
    for (const b of bindings) {
      const lc = this.o.ctx.lastCommitted.get(b.variable);
      if (lc !== null) starts.set(b.index, lc);
    }
    const run: Run = { id: ++this.runSeq, aborted: false, stopped: [], firstLive: new Map(), waitingFor: 0, wake: null, appends: [], limits };
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

  /** `noteLive` for the hot path: the time is `out.ts` (decode.ts SampleOut). */
  noteLiveOut(index: number, out: { ts: number }): void {
    const run = this.current;
    if (!run || run.firstLive.has(index)) return;
    this.noteLive(index, out.ts);
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
      nodes_without_history: firstKeys(this.withoutHistory, STATUS_NAMES),
      nodes_without_history_count: this.withoutHistory.size,
    };
  }

  // ------------------------------------------------------------------------------------------

  private async execute(run: Run, session: ClientSession, bindings: readonly NodeBinding[], starts: Map<number, number>): Promise<void> {
    const began = this.o.clock.monotonic();
    const candidates = bindings;
    if (candidates.length === 0) return;

    this.state = 'waiting_for_live';
    // The nodes' AccessLevel is read once the subscription delivers (or after the first-value wait):
    // at 100,000 nodes those 200 Reads competed with the CreateMonitoredItems calls of the connect.
    await this.firstLiveOrTimeout(run);
    if (run.aborted) return;
    const historized = await this.historizedNodes(session, candidates, run.limits);
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
    this.settle(pending, bindings, historized, windows, values, run.stopped);
  }

  /** Writes what this backfill achieved into every pending gap it covered (gaps.ts G2). */
  private settle(pending: GapRow[], bindings: readonly NodeBinding[], historized: Set<number>, windows: NodeWindow[], values: number, stopped: Stopped[]): void {
    const now = this.o.clock.now();
    const missing = bindings.filter((b) => !historized.has(b.index) || this.refused.has(b.variable));
    const clamped = windows.filter((w) => w.clamped);
    for (const seen of pending) {
      const g = this.o.ctx.gaps.get(seen.id);
      if (!g || g.to === null || g.filled !== 'pending') continue; // still open: not back yet for this scope
      const inScope = g.variables === null ? bindings : bindings.filter((b) => g.variables!.includes(b.variable));
      const lacking = missing.filter((b) => inScope.includes(b));
      const cut = clamped.filter((w) => inScope.includes(w.binding));
      // Ranges of this gap's nodes, overlapping it, whose reading a bound stopped.
      const short = stopped.filter((x) => inScope.includes(x.unit.binding) && x.unit.from <= g.to! && x.unit.to >= g.from);
      const emptyHanded = new Set(short.filter((x) => x.values === 0).map((x) => x.unit.binding));
      let filled: 'yes' | 'partial' | 'no';
      if (inScope.length > 0 && lacking.length + [...emptyHanded].filter((b) => !lacking.includes(b)).length === inScope.length) filled = 'no';
      else if (lacking.length > 0 || cut.length > 0 || short.length > 0) filled = 'partial';
      else filled = 'yes';
      const notes: string[] = [];
      if (lacking.length > 0) notes.push(`no history on the server for ${lacking.length} of ${inScope.length} node(s): ${names(lacking)}`);
      if (cut.length > 0) notes.push(`only the newest ${Math.round(this.o.settings.max_window / 60_000)} min (history.max_window) were read for ${cut.length} node(s)`);
      for (const reason of ['no_progress', 'cap', 'too_large'] as const) {
        const of = short.filter((x) => x.reason === reason);
        if (of.length > 0) notes.push(this.stopNote(reason, of));
      }
      const note = notes.length > 0 ? notes.join('; ') : null;
      this.o.ctx.gaps.setFilled(g.id, filled, values, note, now);
      if (short.length > 0) {
        // Said once, when the gap is settled (it leaves `pending` here and is not read again).
        this.o.logger.warn(
          { code: 'OPCUA_HISTORY_INCOMPLETE', gap_id: g.id, from: new Date(g.from).toISOString(), to: new Date(g.to).toISOString(), filled, nodes: short.slice(0, 20).map((x) => ({ node_id: x.unit.binding.configuredId, variable: x.unit.binding.variable, reason: x.reason, values: x.values, pages: x.pages })) },
          `${this.o.path}: the gap ${new Date(g.from).toISOString()} to ${new Date(g.to).toISOString()} could not be filled completely from the server's history (${filled}): ${note}. It is recorded as such (edge-gateway gaps list) and not read again`,
        );
      }
    }
  }

  private stopNote(reason: StopReason, of: Stopped[]): string {
    const s = this.o.settings;
    switch (reason) {
      case 'no_progress':
        return `the server's HistoryRead pages stopped moving forward in time for ${of.length} node(s) (the same values again with a continuation point); reading stopped after ${Math.max(...of.map((x) => x.pages))} page(s): ${names(of.map((x) => x.unit.binding))}`;
      case 'cap':
        return `reading stopped after ${s.max_values_per_gap} values or ${maxPages(s)} pages per node (history.max_values_per_gap) for ${of.length} node(s): ${names(of.map((x) => x.unit.binding))}`;
      case 'too_large':
        return `the server's HistoryRead answer for ${of.length} node(s) exceeded max_message_size even for one node, so it ignores numValuesPerNode (history.values_per_request ${s.values_per_request}): ${names(of.map((x) => x.unit.binding))}`;
    }
  }

  /** Reads AccessLevel and UserAccessLevel; a node is historized when both have HistoryRead (bit 2, Part 3 §5.6.2). */
  /** Resolves at the run's first live value, or after firstValueTimeoutMs. */
  private async firstLiveOrTimeout(run: Run): Promise<void> {
    const deadline = this.o.clock.monotonic() + this.o.firstValueTimeoutMs;
    while (!run.aborted && run.firstLive.size === 0 && this.o.clock.monotonic() < deadline) await sleep(100);
  }

  /**
   * The nodes whose history may be read, by config index. Kept for the same node list (a rebuild
   * while the server's namespace array is unchanged reuses it, source.ts planFor): a restarted
   * server asked again for 100,000 AccessLevels is a minute of Reads at the worst moment. A reload
   * or a restart of the gateway reads them afresh.
   */
  private historized: { bindings: readonly NodeBinding[]; set: Set<number> } | null = null;

  private async historizedNodes(session: ClientSession, bindings: readonly NodeBinding[], limits: OperationLimits): Promise<Set<number>> {
    if (this.historized?.bindings === bindings) return this.historized.set;
    const set = await this.readHistorized(session, bindings, limits);
    this.historized = { bindings, set };
    return set;
  }

  private async readHistorized(session: ClientSession, bindings: readonly NodeBinding[], limits: OperationLimits): Promise<Set<number>> {
    const out = new Set<number>();
    const perRead = entriesPerCall(READ_CHUNK, limits.maxNodesPerRead, 2);
    for (let start = 0; start < bindings.length; start += perRead) {
      const chunk = bindings.slice(start, start + perRead);
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
    const units: Unit[] = [];
    for (const w of windows) for (const [from, to] of w.ranges) units.push({ binding: w.binding, from, to });
    units.sort((a, b) => a.from - b.from || a.to - b.to);
    let total = 0;
    const perRequest = entriesPerCall(nodesPerRequest(this.o.settings.values_per_request), run.limits.maxNodesPerHistoryReadData);
    const fresh = (unit: Unit): Cursor => ({ unit, cp: null, after: unit.from - 1, pages: 0, values: 0, stalled: 0 });
    // Groups to read; a node that must start again without its continuation point comes back alone.
    const work: Cursor[][] = [];
    let i = 0;
    while (i < units.length) {
      // Group units that share a time domain closely enough (within a second of each other);
      // each keeps its own range when values are filtered.
      const group = [units[i]];
      let j = i + 1;
      while (j < units.length && group.length < perRequest && units[j].from - units[i].from <= 1_000 && Math.abs(units[j].to - units[i].to) <= 1_000) group.push(units[j++]);
      i = j;
      work.push(group.map(fresh));
    }
    while (work.length > 0 && !run.aborted) {
      const { values, again } = await this.readGroup(run, session, work.shift()!);
      total += values;
      for (const c of again) work.unshift([c]);
    }
    // Every value read is committed before the backfill reports (and the gap is settled).
    while (run.appends.length > 0) await run.appends.shift();
    return total;
  }

  /**
   * Reads a group of ranges page by page (Part 11 §6.4.3.2), within bounds a server cannot push:
   *  - of a page only the values newer than the pages before are taken; MAX_STALLED_PAGES pages in
   *    a row with a continuation point and nothing newer stop the node (`no_progress`);
   *  - a node whose newest value reached its range's end is done, whatever the server says;
   *  - after `max_values_per_gap` values or maxPages() pages a node stops (`cap`);
   *  - an answer the server could not send within max_message_size: a group is read again node by
   *    node from where each got to; a node alone stops (`too_large`);
   *  - a node that stops with a continuation point has it released (Part 4 §5.10.3:
   *    releaseContinuationPoints), so the server frees what it keeps for it.
   * Returns the values taken, and the nodes to read again alone from where they got to (the server
   * could not send the group's answer).
   */
  private async readGroup(run: Run, session: ClientSession, group: Cursor[]): Promise<{ values: number; again: Cursor[] }> {
    const s = this.o.settings;
    const from = Math.min(...group.map((c) => Math.max(c.unit.from, c.after + 1)));
    const to = Math.max(...group.map((c) => c.unit.to));
    const details = new ReadRawModifiedDetails({
      isReadModified: false,
      startTime: new Date(from),
      endTime: new Date(to),
      numValuesPerNode: s.values_per_request,
      returnBounds: false,
    });
    const again: Cursor[] = [];
    let open = group;
    let total = 0;
    while (open.length > 0) {
      if (run.aborted) {
        await this.release(session, details, open).catch(() => undefined);
        return { values: total, again: [] };
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
        if (!isResponseTooLarge(err)) throw err;
        // The server could not send its answer within max_message_size (Part 6 §7.1.2.3). The
        // continuation points it was given may be spent: released, then each node alone.
        await this.release(session, details, open).catch(() => undefined);
        if (open.length > 1) {
          for (const c of open) again.push({ ...c, cp: null, stalled: 0 });
        } else {
          open[0].pages += 1;
          this.stop(run, open[0], 'too_large');
        }
        return { values: total, again };
      }
      const next: Cursor[] = [];
      const done: Cursor[] = [];
      const samples: Sample[] = [];
      results.forEach((r, k) => {
        const c = open[k];
        if (!c) return;
        const b = c.unit.binding;
        const code = r.statusCode?.value ?? 0;
        if (severityOf(code) === 'bad') {
          // BadHistoryOperationUnsupported, BadNotReadable, BadUserAccessDenied ...: noted once.
          this.refused.add(b.variable);
          this.noteWithoutHistory([b], `the server refused HistoryRead (${r.statusCode.name})`);
          return;
        }
        c.pages += 1;
        const cp = r.continuationPoint && r.continuationPoint.length > 0 ? r.continuationPoint : null;
        c.cp = cp;
        // A server that ignores numValuesPerNode (Part 11 §6.4.3.2) may send more than asked, up to
        // max_message_size: taken (it is in memory already, and asking again would bring it again),
        // up to max_values_per_gap, and handed to the buffer in slices below.
        const data = r.historyData instanceof HistoryData ? r.historyData.dataValues ?? [] : [];
        const before = c.after;
        let cut = false;
        for (const dv of data) {
          if (c.values >= s.max_values_per_gap) {
            cut = true;
            break;
          }
          const t = deviceTime(dv);
          if (t === undefined || t <= before) continue; // a repeat of an earlier page
          if (t > c.after) c.after = t;
          const sample = this.decode(b, dv, c.unit.from, c.unit.to);
          if (sample) {
            samples.push(sample);
            c.values += 1;
          }
        }
        c.stalled = c.after > before ? 0 : c.stalled + 1;
        if (c.after >= c.unit.to) done.push(c); // the range's end is reached: more pages would lie beyond it
        else if (cut || (cp && (c.values >= s.max_values_per_gap || c.pages >= maxPages(s)))) this.stop(run, c, 'cap', done);
        else if (cp && c.stalled >= MAX_STALLED_PAGES) this.stop(run, c, 'no_progress', done);
        else if (cp) next.push(c);
      });
      // Continuation points of nodes that stop here are released in one request.
      await this.release(session, details, done).catch(() => undefined);
      // In slices: an answer beyond numValuesPerNode must not become one huge commit.
      for (let k = 0; k < samples.length; k += APPEND_SLICE) {
        const slice = samples.length <= APPEND_SLICE ? samples : samples.slice(k, k + APPEND_SLICE);
        // The next request goes out while this response commits; at most APPENDS_IN_FLIGHT wait
        // for their group commit, so the buffer paces the backfill and memory stays bounded.
        const n = slice.length;
        // keepsRefused: a refused response fails the run and its gap stays pending (execute), so
        // the server's history still holds these values: refused, not lost.
        const committed = this.o.sink.append(slice, { keepsRefused: true }).then(() => {
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
    return { values: total, again };
  }

  /** A node's range is given up before its end; `done` collects it for releasing its continuation point. */
  private stop(run: Run, c: Cursor, reason: StopReason, done?: Cursor[]): void {
    run.stopped.push({ unit: c.unit, reason, values: c.values, pages: c.pages });
    done?.push(c);
  }

  /** History values: the node's scale/offset and quality rules, always the source timestamp (issue 14 §1). */
  private decode(b: NodeBinding, dv: DataValue, from: number, to: number): Sample | null {
    const d = decodeDataValue({ ...b, timestamp: 'source' }, dv, this.o.clock.now());
    if (!d.ok) return null;
    if (d.sample.ts < from || d.sample.ts > to) return null;
    return d.sample;
  }

  /**
   * Frees the server's continuation points of reads that stop early (Part 4 §5.10.3, Part 11 §6.3:
   * releaseContinuationPoints=true); nodes without one are skipped.
   */
  private async release(session: ClientSession, details: ReadRawModifiedDetails, cursors: Cursor[]): Promise<void> {
    const open = cursors.filter((c) => c.cp !== null);
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

/** Pages per node and gap before reading stops (history.max_values_per_gap). */
function maxPages(s: HistorySettings): number {
  return PAGES_SLACK * Math.ceil(s.max_values_per_gap / s.values_per_request);
}

/** Source time of a history value (server time when the source one is missing), epoch ms. */
function deviceTime(dv: DataValue): number | undefined {
  const t = (dv.sourceTimestamp ?? dv.serverTimestamp)?.getTime();
  return t !== undefined && Number.isFinite(t) && t > 0 ? t : undefined;
}

function names(bindings: readonly NodeBinding[]): string {
  const unique = [...new Set(bindings)];
  return `${unique.slice(0, 5).map((b) => b.variable).join(', ')}${unique.length > 5 ? ', ...' : ''}`;
}

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

function firstKeys<K>(map: ReadonlyMap<K, unknown>, n: number): K[] {
  const out: K[] = [];
  for (const k of map.keys()) {
    if (out.length >= n) break;
    out.push(k);
  }
  return out;
}
