import { AttributeIds, DataType, NodeId, resolveNodeId as toNodeId, type ClientSession, type DataValue } from 'node-opcua';
import type { OpcuaNodeConfig, OpcuaServerConfig } from './config.js';
import { isNumericBuiltin, severityOf, type NodeBinding } from './decode.js';
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

/** Nodes per Read request (three attributes each), lowered to the server's MaxNodesPerRead (operation-limits.ts). */
const READ_CHUNK = 500;

/** Abstract numeric types of namespace 0 (Part 5 §12.2: Number i=26, Integer i=27, UInteger i=28). */
const ABSTRACT_NUMERIC = new Set([26, 27, 28]);
/** BaseDataType (i=24): anything; decided by the current value. */
const BASE_DATA_TYPE = 24;

/**
 * Resolves every configured node id against the server's namespace array and checks, with one
 * batched Read of DataType, ValueRank and Value, that each exists, is a scalar and has a numeric
 * (or Boolean) data type. Non-numeric nodes are refused here, at connect, naming the node id
 * (issue §2). An invalid node never stops the others. `only`: check just the nodes at these
 * indexes of `cfg.nodes` (the rest are in neither list).
 */
export async function planNodes(session: ClientSession, cfg: OpcuaServerConfig, namespaceArray: readonly string[], limits: OperationLimits = NO_OPERATION_LIMITS, only?: ReadonlySet<number>): Promise<NodePlan> {
  const valid: NodeBinding[] = [];
  const invalid: InvalidNode[] = [];
  const typeCache = new Map<string, DataType>();
  const perRead = entriesPerCall(READ_CHUNK, limits.maxNodesPerRead, 3);
  // One Read's worth of nodes resolved at a time, not the whole list first: at 100,000 nodes a
  // list of candidates (each with its resolved id) was ~14 MB held through the whole check (issue 25).
  let next = 0;
  while (next < cfg.nodes.length) {
    const chunk: Array<{ index: number; node: OpcuaNodeConfig; nodeId: string }> = [];
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
    if (chunk.length === 0) continue;
    const toRead = chunk.flatMap((c) => {
      const nodeId = toNodeId(c.nodeId);
      return [
        { nodeId, attributeId: AttributeIds.DataType },
        { nodeId, attributeId: AttributeIds.ValueRank },
        { nodeId, attributeId: AttributeIds.Value },
      ];
    });
    const results = await session.read(toRead);
    for (let i = 0; i < chunk.length; i++) {
      const c = chunk[i];
      const reason = await checkNode(session, c.nodeId, results[i * 3], results[i * 3 + 1], results[i * 3 + 2], typeCache);
      if (reason) invalid.push({ index: c.index, node_id: c.node.node_id, variable: c.node.variable, reason });
      else valid.push(bindingFor(c.index, c.node, c.nodeId, cfg));
    }
  }
  invalid.sort((a, b) => a.index - b.index);
  return { valid, invalid };
}

async function checkNode(session: ClientSession, nodeId: string, dt: DataValue, rank: DataValue, value: DataValue, cache: Map<string, DataType>): Promise<string | undefined> {
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
    const current = value.value?.dataType;
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
    queueSize: node.queue_size ?? cfg.queue_size,
    ...(node.deadband ? { deadband: node.deadband } : {}),
  };
}
