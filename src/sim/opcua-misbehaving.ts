/**
 * Parts of an OPC UA server that break the rules, for tests and benchmarks. Installed
 * into the simulator (src/sim/opcua-server.ts, option `misbehave`) under a `Misbehaving` folder; the
 * rest of the simulator behaves. Each one is a failure seen in the field, or one a gateway must
 * survive whatever the server:
 *
 * - `Misbehaving.LoopingHistory` (Double): every HistoryRead answer is the same 100 values at the
 *   start of the asked range with a continuation point, whatever continuation point was sent (a
 *   historian that forgets where it was). Part 11 §6.4.3.2 requires each page to continue the last.
 * - `Misbehaving.HugeHistory` (Double): one HistoryRead answer of `hugeHistory` values spread over
 *   the asked range, ignoring numValuesPerNode (Part 11 §6.4.3.2: "the maximum number of values
 *   returned for any Node"), without a continuation point.
 * - `Misbehaving.ReferenceLoop` (Object): A, B and C under it each organize the other two, so a
 *   walk that follows references without remembering where it was finds 2^depth nodes.
 * - `Misbehaving.EndlessBrowse` (Object): Browse answers a page of references and a continuation
 *   point, and so does every BrowseNext, for ever (Part 4 §5.8.3). `maxPages` ends it only so that
 *   a client without a bound fails a test by a count instead of exhausting the machine's memory.
 *
 * Never imported by the gateway's runtime path.
 */
import {
  BrowseNextRequest,
  BrowseNextResponse,
  BrowseRequest,
  BrowseResponse,
  BrowseResult,
  DataType,
  DataValue,
  ExpandedNodeId,
  HistoryReadResult,
  NodeClass,
  NodeId,
  ReadRawModifiedDetails,
  ReferenceDescription,
  StatusCodes,
  Variant,
  VariantArrayType,
  coerceNodeId,
  type Namespace,
  type OPCUAServer,
  type UAVariable,
} from 'node-opcua';
import { HistoryData } from 'node-opcua-service-history';
import type { IHelloAckLimits } from 'node-opcua-transport';

export interface MisbehaviourOptions {
  /** Add `Misbehaving.LoopingHistory`. */
  loopingHistory?: boolean;
  /** Add `Misbehaving.HugeHistory`, answering this many values at once (e.g. 1,000,000). */
  hugeHistory?: number;
  /** Add `Misbehaving.EndlessBrowse`. */
  endlessBrowse?: {
    /** References per page (default 1000). */
    pageSize?: number;
    /** Delay before each BrowseNext answer, ms (default 0). */
    pageDelayMs?: number;
    /** Pages after which the server gives up (default 200); see the header. */
    maxPages?: number;
  };
  /** Add `Misbehaving.BigValue`: a Double array of this many elements (8 bytes each), a value bigger than a client's message limit. */
  bigValue?: number;
  /** Add `Misbehaving.ReferenceLoop`: objects A, B, C that organize each other (a loop with fan-out). */
  referenceLoop?: boolean;
  /** Print one `SIM_EVENT {json}` line on stdout per request served (a child process reports to its parent). */
  printEvents?: boolean;
}

/** What the misbehaving nodes were asked, counted. */
export interface MisbehaviourCounters {
  /** HistoryRead requests for the looping / huge node that asked for data. */
  historyReads: number;
  /** HistoryRead requests for them with releaseContinuationPoints=true. */
  historyReleases: number;
  /** Values put into answers. */
  historyValues: number;
  browseNexts: number;
  browseReleases: number;
}

export type MisbehaviourEvent =
  | { kind: 'history_read'; node: 'looping' | 'huge'; release: boolean; continuation: boolean; values: number; numValuesPerNode: number }
  | { kind: 'browse_next'; release: boolean; references: number };

export interface Misbehaviour {
  counters: MisbehaviourCounters;
  events: MisbehaviourEvent[];
  /** Node id strings (`ns=<i>;s=...`) of what was installed. */
  nodeIds: { loopingHistory?: string; hugeHistory?: string; endlessBrowse?: string; referenceLoop?: string; bigValue?: string };
  /** Changes the endless browse's page size, delay or page limit from now on. */
  configureBrowse(o: NonNullable<MisbehaviourOptions['endlessBrowse']>): void;
  /** Sets a new live value on the misbehaving variables (called with the simulator's updates). */
  tick(now: number): void;
}

/**
 * Transport limits of a server with `hugeHistory`: it honours a maximum message size the client
 * announces in its Hello (Part 6 §7.1.2.3), and without one it sends answers up to 256 MiB (node-opcua's
 * own default stops at 16 MiB, which a 1,000,000-value answer exceeds).
 */
export function misbehavingTransportSettings(options: MisbehaviourOptions | undefined): { adjustTransportLimits(hello: IHelloAckLimits): IHelloAckLimits } | undefined {
  if (!options?.hugeHistory) return undefined;
  return {
    adjustTransportLimits(hello) {
      const buffer = (v: number) => Math.min(Math.max(v || 65_536, 8_192), 65_536);
      const receiveBufferSize = buffer(hello.receiveBufferSize);
      const sendBufferSize = buffer(hello.sendBufferSize);
      const maxMessageSize = hello.maxMessageSize ? Math.min(hello.maxMessageSize, 256 * 1024 * 1024) : 256 * 1024 * 1024;
      const chunks = Math.ceil(maxMessageSize / Math.min(receiveBufferSize, sendBufferSize)) + 1;
      return { receiveBufferSize, sendBufferSize, maxMessageSize, maxChunkCount: hello.maxChunkCount ? Math.min(hello.maxChunkCount, chunks) : chunks };
    },
  };
}

const LOOP_VALUES = 100;
const ENDLESS_CP_PREFIX = 'endless:';

type ServerInternals = {
  _on_BrowseRequest(message: { request: BrowseRequest }, channel: unknown): void;
  _on_BrowseNextRequest(message: { request: BrowseNextRequest }, channel: unknown): void;
  _apply_on_SessionObject(
    cls: unknown,
    message: unknown,
    channel: unknown,
    action: (session: { sessionContext: unknown }, sendResponse: (r: unknown) => void, sendError: (code: unknown) => void) => void | Promise<void>,
  ): void;
};

export function installMisbehaviour(server: OPCUAServer, ns: Namespace, options: MisbehaviourOptions): Misbehaviour {
  const addressSpace = server.engine.addressSpace!;
  const folder = ns.addFolder(addressSpace.rootFolder.objects, { browseName: 'Misbehaving', nodeId: 's=Misbehaving' });
  const counters: MisbehaviourCounters = { historyReads: 0, historyReleases: 0, historyValues: 0, browseNexts: 0, browseReleases: 0 };
  const events: MisbehaviourEvent[] = [];
  const report = (e: MisbehaviourEvent) => {
    events.push(e);
    if (events.length > 10_000) events.shift();
    if (options.printEvents) process.stdout.write(`SIM_EVENT ${JSON.stringify(e)}\n`);
  };
  const nodeIds: Misbehaviour['nodeIds'] = {};
  const browse = { pageSize: 1000, pageDelayMs: 0, maxPages: 200 };
  const configure = (o: NonNullable<MisbehaviourOptions['endlessBrowse']>) => {
    for (const key of ['pageSize', 'pageDelayMs', 'maxPages'] as const) if (o[key] !== undefined) browse[key] = o[key];
  };
  const live: UAVariable[] = [];

  const historized = (name: string, answer: (details: ReadRawModifiedDetails) => Promise<{ values: DataValue[]; cp: Buffer | null }>, node: 'looping' | 'huge') => {
    const v = ns.addVariable({
      componentOf: folder,
      browseName: name,
      nodeId: `s=Misbehaving.${name}`,
      dataType: 'Double',
      accessLevel: 'CurrentRead | HistoryRead',
      userAccessLevel: 'CurrentRead | HistoryRead',
      value: new Variant({ dataType: DataType.Double, value: 0 }),
    });
    v.historizing = true;
    (v as unknown as { historyRead: (...a: unknown[]) => Promise<HistoryReadResult> }).historyRead = async (_ctx, details, _range, _enc, data) => {
      const cd = (data ?? {}) as { continuationPoint?: Buffer | null; releaseContinuationPoints?: boolean };
      const release = cd.releaseContinuationPoints === true;
      const continuation = !!cd.continuationPoint && cd.continuationPoint.length > 0;
      if (release) {
        counters.historyReleases += 1;
        report({ kind: 'history_read', node, release, continuation, values: 0, numValuesPerNode: 0 });
        return new HistoryReadResult({ statusCode: StatusCodes.Good });
      }
      if (!(details instanceof ReadRawModifiedDetails)) return new HistoryReadResult({ statusCode: StatusCodes.BadHistoryOperationUnsupported });
      counters.historyReads += 1;
      const { values, cp } = await answer(details);
      counters.historyValues += values.length;
      report({ kind: 'history_read', node, release, continuation, values: values.length, numValuesPerNode: details.numValuesPerNode });
      return new HistoryReadResult({ statusCode: StatusCodes.Good, continuationPoint: cp ?? undefined, historyData: new HistoryData({ dataValues: values }) });
    };
    live.push(v);
    return `ns=${ns.index};s=Misbehaving.${name}`;
  };

  if (options.loopingHistory) {
    nodeIds.loopingHistory = historized(
      'LoopingHistory',
      async (details) => {
        // The same values every time: from the asked start, 10 ms apart, and "there is more".
        const from = details.startTime?.getTime() ?? Date.now();
        const values: DataValue[] = [];
        for (let k = 0; k < LOOP_VALUES; k++) values.push(dataValue(from + k * 10, k));
        return { values, cp: Buffer.from('again') };
      },
      'looping',
    );
  }
  if (options.hugeHistory && options.hugeHistory > 0) {
    const n = options.hugeHistory;
    nodeIds.hugeHistory = historized(
      'HugeHistory',
      async (details) => {
        const from = details.startTime?.getTime() ?? Date.now() - 60_000;
        const to = details.endTime?.getTime() ?? Date.now();
        const step = Math.max(0, to - from) / n;
        const values: DataValue[] = new Array(n);
        // Built in slices, so the server keeps publishing meanwhile: what is measured is the
        // client receiving the answer, not a server that stalls (its keep-alives would stop).
        for (let k = 0; k < n; k++) {
          values[k] = dataValue(Math.floor(from + k * step), k);
          if (k % 20_000 === 19_999) await new Promise((r) => setImmediate(r));
        }
        return { values, cp: null };
      },
      'huge',
    );
  }

  if (options.bigValue && options.bigValue > 0) {
    const big = ns.addVariable({
      componentOf: folder,
      browseName: 'BigValue',
      nodeId: 's=Misbehaving.BigValue',
      dataType: 'Double',
      valueRank: 1,
      arrayDimensions: [options.bigValue],
      value: new Variant({ dataType: DataType.Double, arrayType: VariantArrayType.Array, value: new Float64Array(options.bigValue) }),
    });
    nodeIds.bigValue = big.nodeId.toString();
  }

  if (options.referenceLoop) {
    const loop = ns.addObject({ organizedBy: folder, browseName: 'ReferenceLoop', nodeId: 's=Misbehaving.ReferenceLoop' });
    const [a, b, c] = ['A', 'B', 'C'].map((n) => ns.addObject({ organizedBy: loop, browseName: n, nodeId: `s=Misbehaving.ReferenceLoop.${n}` }));
    for (const [from, tos] of [[a, [b, c]], [b, [a, c]], [c, [a, b]]] as const) for (const to of tos) from.addReference({ referenceType: 'Organizes', nodeId: to.nodeId });
    nodeIds.referenceLoop = loop.nodeId.toString();
  }

  if (options.endlessBrowse) {
    configure(options.endlessBrowse);
    const endless = ns.addObject({ organizedBy: folder, browseName: 'EndlessBrowse', nodeId: 's=Misbehaving.EndlessBrowse' });
    nodeIds.endlessBrowse = endless.nodeId.toString();
    const internals = server as unknown as ServerInternals;
    let refSeq = 0;
    const page = (): ReferenceDescription[] =>
      Array.from({ length: browse.pageSize }, () => {
        const k = ++refSeq;
        return new ReferenceDescription({
          referenceTypeId: coerceNodeId('i=35'), // Organizes
          isForward: true,
          nodeId: ExpandedNodeId.fromNodeId(new NodeId(NodeId.NodeIdType.STRING, `Misbehaving.EndlessBrowse.N${k}`, ns.index)),
          browseName: { namespaceIndex: ns.index, name: `N${k}` },
          displayName: { text: `N${k}` },
          nodeClass: NodeClass.Object,
          typeDefinition: ExpandedNodeId.fromNodeId(coerceNodeId('i=61')), // FolderType
        });
      });
    const originalBrowse = internals._on_BrowseRequest.bind(server);
    internals._on_BrowseRequest = (message, channel) => {
      const request = message.request;
      const nodes = request.nodesToBrowse ?? [];
      if (!nodes.some((d) => d.nodeId.toString() === endless.nodeId.toString())) return originalBrowse(message, channel);
      internals._apply_on_SessionObject(BrowseResponse, message, channel, async (session, sendResponse) => {
        const results: BrowseResult[] = [];
        for (const d of nodes) {
          if (d.nodeId.toString() === endless.nodeId.toString()) {
            results.push(new BrowseResult({ statusCode: StatusCodes.Good, references: page(), continuationPoint: Buffer.from(`${ENDLESS_CP_PREFIX}1`) }));
          } else {
            const [r] = await server.engine.browseWithAutomaticExpansion([d], session.sessionContext as never);
            results.push(r);
          }
        }
        sendResponse(new BrowseResponse({ results }));
      });
    };
    const originalNext = internals._on_BrowseNextRequest.bind(server);
    internals._on_BrowseNextRequest = (message, channel) => {
      const request = message.request;
      const cps = request.continuationPoints ?? [];
      if (cps.length === 0 || !cps.every((cp) => cp?.toString().startsWith(ENDLESS_CP_PREFIX))) return originalNext(message, channel);
      internals._apply_on_SessionObject(BrowseNextResponse, message, channel, async (_session, sendResponse) => {
        if (browse.pageDelayMs > 0) await new Promise((r) => setTimeout(r, browse.pageDelayMs));
        const release = request.releaseContinuationPoints === true;
        const results = cps.map((cp) => {
          const n = Number(cp!.toString().slice(ENDLESS_CP_PREFIX.length));
          if (release) return new BrowseResult({ statusCode: StatusCodes.Good });
          const last = n + 1 >= browse.maxPages;
          return new BrowseResult({ statusCode: StatusCodes.Good, references: page(), continuationPoint: last ? undefined : Buffer.from(`${ENDLESS_CP_PREFIX}${n + 1}`) });
        });
        if (release) counters.browseReleases += 1;
        else counters.browseNexts += 1;
        report({ kind: 'browse_next', release, references: release ? 0 : cps.length * browse.pageSize });
        sendResponse(new BrowseNextResponse({ results }));
      });
    };
  }

  return {
    counters,
    events,
    nodeIds,
    configureBrowse: configure,
    tick(now) {
      for (const v of live) v.setValueFromSource(new Variant({ dataType: DataType.Double, value: (now % 100_000) / 1000 }), StatusCodes.Good, new Date(now));
    },
  };
}

function dataValue(ts: number, k: number): DataValue {
  const t = new Date(ts);
  return new DataValue({ value: new Variant({ dataType: DataType.Double, value: k / 10 }), statusCode: StatusCodes.Good, sourceTimestamp: t, serverTimestamp: t });
}
