import { AttributeIds, DataType, NodeId, resolveNodeId as toNodeId, type ClientSession, type DataValue } from 'node-opcua';
import type { OpcuaNodeConfig, OpcuaServerConfig } from './config.js';
import { isNumericBuiltin, severityOf, type NodeBinding } from './decode.js';
import { inFlight } from '../../core/in-flight.js';
import { parseNodeId, resolveNodeId } from './node-id.js';
import { entriesPerCall, NO_OPERATION_LIMITS, type OperationLimits } from './operation-limits.js';

/** A configured node that cannot be monitored, with the reason in plain words. */
export interface InvalidNode {
  index: number;
  node_id: string;
  variable: string;
  reason: string;
}

export interface NodePlan {
  valid: NodeBinding[];
  invalid: InvalidNode[];
}

/** Nodes per Read request (two attributes each), lowered to the server's MaxNodesPerRead (operation-limits.ts). */
const READ_CHUNK = 500;
/** Read requests in flight at once (core/in-flight.ts): one after the other they waited a round trip each. */
const READS_IN_FLIGHT = 4;

/** Abstract numeric types of namespace 0 (Part 5 §12.2: Number i=26, Integer i=27, UInteger i=28). */
const ABSTRACT_NUMERIC = new Set([26, 27, 28]);
/** BaseDataType (i=24): anything; decided by the current value. */
const BASE_DATA_TYPE = 24;

interface Candidate {
  index: number;
  node: OpcuaNodeConfig;
  nodeId: string;
}

/**
 * Resolves every configured node id against the server's namespace array and checks, with
 * batched Reads of DataType and ValueRank, that each exists, is a scalar and has a numeric (or
 * Boolean) data type; only a node typed BaseDataType has its Value read too, to tell what it holds.
 * Non-numeric nodes are refused here, at connect, naming the node id (issue §2). An invalid node
 * never stops the others. `only`: check just the nodes at these indexes of `cfg.nodes` (the rest
 * are in neither list).
 *
 * The Value used to be read for every node (three operations each, the server sampling every node
 * once more): a third of the check's work for what only BaseDataType nodes need.
 */
export async function planNodes(session: ClientSession, cfg: OpcuaServerConfig, namespaceArray: readonly string[], limits: OperationLimits = NO_OPERATION_LIMITS, only?: ReadonlySet<number>): Promise<NodePlan> {
  const valid: NodeBinding[] = [];
  const invalid: InvalidNode[] = [];
  const typeCache = new Map<string, DataType>();
  const perRead = entriesPerCall(READ_CHUNK, limits.maxNodesPerRead, 2);
  // One Read's worth of nodes resolved at a time, not the whole list first: at 100,000 nodes a
  // list of candidates (each with its resolved id) was ~14 MB held through the whole check (issue 25).
  let next = 0;
  const nextChunk = (): Candidate[] => {
    const chunk: Candidate[] = [];
    for (; next < cfg.nodes.length && chunk.length < perRead; next++) {
      if (only && !only.has(next)) continue;
      const node = cfg.nodes[next];
      const parsed = parseNodeId(node.node_id);
      if ('problem' in parsed) {
        invalid.push({ index: next, node_id: node.node_id, variable: node.variable, reason: `node id ${parsed.problem}` });
        continue;
      }
      const r = resolveNodeId(parsed, namespaceArray);
      if (!r.ok) {
        invalid.push({ index: next, node_id: node.node_id, variable: node.variable, reason: r.problem });
        continue;
      }
      // The configured text when it already is the resolved id (ns=<index>;...): one string per
      // node kept for the link's life instead of a second, built copy (issue 25: 100,000 nodes).
      chunk.push({ index: next, node, nodeId: r.nodeId === node.node_id ? node.node_id : r.nodeId });
    }
    return chunk;
  };
  const lanes = Array.from({ length: READS_IN_FLIGHT }, () => null);
  await inFlight(lanes, READS_IN_FLIGHT, async () => {
    for (let chunk = nextChunk(); chunk.length > 0 || next < cfg.nodes.length; chunk = nextChunk()) {
      if (chunk.length === 0) continue;
      const results = await session.read(chunk.flatMap((c) => [{ nodeId: toNodeId(c.nodeId), attributeId: AttributeIds.DataType }, { nodeId: toNodeId(c.nodeId), attributeId: AttributeIds.ValueRank }]));
      const anyType = chunk.filter((c, i) => isBaseDataType(results[i * 2]));
      const values = anyType.length > 0 ? await session.read(anyType.map((c) => ({ nodeId: toNodeId(c.nodeId), attributeId: AttributeIds.Value }))) : [];
      for (let i = 0; i < chunk.length; i++) {
        const c = chunk[i];
        const k = anyType.indexOf(c);
        const reason = await checkNode(session, c.nodeId, results[i * 2], results[i * 2 + 1], k >= 0 ? values[k] : null, typeCache);
        if (reason) invalid.push({ index: c.index, node_id: c.node.node_id, variable: c.node.variable, reason });
        else valid.push(bindingFor(c.index, c.node, c.nodeId, cfg));
      }
    }
  });
  valid.sort((a, b) => a.index - b.index);
  invalid.sort((a, b) => a.index - b.index);
  return { valid, invalid };
}

function isBaseDataType(dt: DataValue): boolean {
  const id = dt.value?.value as NodeId | undefined;
  return id instanceof NodeId && id.namespace === 0 && id.value === BASE_DATA_TYPE;
}

async function checkNode(session: ClientSession, nodeId: string, dt: DataValue, rank: DataValue, value: DataValue | null, cache: Map<string, DataType>): Promise<string | undefined> {
  const dtStatus = dt.statusCode.value;
  if (severityOf(dtStatus) === 'bad') {
    const name = dt.statusCode.name;
    if (name === 'BadNodeIdUnknown') return 'node does not exist on the server (BadNodeIdUnknown)';
    if (name === 'BadNodeIdInvalid') return 'node id is not valid for this server (BadNodeIdInvalid)';
    if (name === 'BadAttributeIdInvalid') return 'node is not a variable (it has no DataType; an object or folder?)';
    if (name === 'BadUserAccessDenied' || name === 'BadNotReadable') return `node may not be read by this user (${name})`;
    return `cannot read the node's data type (${name})`;
  }
  const valueRank = Number(rank.value?.value ?? -1);
  if (valueRank >= 0) return `node holds an array (ValueRank ${valueRank}); only scalar values can be mapped to a machine variable`;
  const dataTypeId = dt.value?.value as NodeId | undefined;
  if (!(dataTypeId instanceof NodeId)) return 'server returned no data type for the node';
  let builtin: DataType | undefined;
  if (dataTypeId.namespace === 0 && typeof dataTypeId.value === 'number') {
    const n = dataTypeId.value;
    if (n >= 1 && n <= 25 && n !== BASE_DATA_TYPE) builtin = n as DataType;
    else if (ABSTRACT_NUMERIC.has(n)) builtin = DataType.Double;
  }
  if (builtin === undefined && dataTypeId.namespace === 0 && dataTypeId.value === BASE_DATA_TYPE) {
    // Any type: decide by what the node holds now.
    const current = value?.value?.dataType;
    if (current === undefined || current === DataType.Null) return 'node has the abstract data type BaseDataType and no current value to tell its type';
    builtin = current;
  }
  if (builtin === undefined) {
    const key = dataTypeId.toString();
    builtin = cache.get(key);
    if (builtin === undefined) {
      try {
        // Walks the DataType's HasSubtype chain to its built-in type (enumerations → Int32).
        builtin = await session.getBuiltInDataType(toNodeId(nodeId));
      } catch (err) {
        return `cannot resolve the node's data type ${key} (${err instanceof Error ? err.message : String(err)})`;
      }
      cache.set(key, builtin);
    }
  }
  if (!isNumericBuiltin(builtin)) return `data type ${DataType[builtin] ?? builtin} is not numeric; only Boolean, integer, Float and Double nodes can feed a machine variable`;
  return undefined;
}

/** What a monitored-item queue should hold when not configured: the samplings of this long. */
const QUEUE_COVERS_MS = 30_000;

/**
 * The default queue size of a node sampled every `samplingMs` (0: on change, counted at the
 * publishing interval): 30 s of samplings, at least 10, at most 1,000. The server keeps values in
 * it while the gateway holds its Publish requests back (publish-pipeline.ts): with the former
 * fixed 10, a stall of 10 s at 1 s sampling already made the server discard values.
 */
export function defaultQueueSize(samplingMs: number, publishingMs: number): number {
  const every = samplingMs > 0 ? samplingMs : publishingMs;
  return Math.min(1_000, Math.max(10, Math.ceil(QUEUE_COVERS_MS / every)));
}

function bindingFor(index: number, node: OpcuaNodeConfig, nodeId: string, cfg: OpcuaServerConfig): NodeBinding {
  return {
    index,
    configuredId: node.node_id,
    nodeId,
    variable: node.variable,
    scale: node.scale,
    offset: node.offset,
    timestamp: node.timestamp ?? cfg.timestamp,
    uncertain: node.uncertain ?? cfg.uncertain,
    samplingInterval: node.sampling_interval ?? cfg.sampling_interval ?? cfg.publishing_interval,
    queueSize: node.queue_size ?? cfg.queue_size ?? defaultQueueSize(node.sampling_interval ?? cfg.sampling_interval ?? cfg.publishing_interval, cfg.publishing_interval),
    ...(node.deadband ? { deadband: node.deadband } : {}),
  };
}
