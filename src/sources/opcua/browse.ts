import {
  AttributeIds,
  BrowseDirection,
  DataType,
  DataValue,
  NodeClass,
  NodeClassMask,
  NodeId,
  ReferenceTypeIds,
  StatusCodes,
  makeResultMask,
  resolveNodeId,
  type ClientSession,
  type ReferenceDescription,
} from 'node-opcua';
import { opcuaSnippetYaml } from '../../config/yaml-writer.js';
import { isNumericBuiltin } from './decode.js';
import { isResponseTooLarge } from './errors.js';
import { toNsuForm } from './node-id.js';

/** One node met while walking the address space. */
export interface BrowsedNode {
  nodeId: string;
  browseName: string;
  displayName: string;
  nodeClass: 'Object' | 'Variable';
  depth: number;
  /** Slash-separated browse names from the root, for filters and snippet comments. */
  path: string;
  /** Variables only. */
  dataType?: string;
  numeric?: boolean;
  scalar?: boolean;
  value?: string;
}

export interface BrowseResult {
  namespaces: string[];
  nodes: BrowsedNode[];
  truncated: boolean;
  /** Why the walk stopped early: the node limit, or the time limit. Null when it is complete. */
  stoppedBy: 'max_nodes' | 'timeout' | null;
}

export interface BrowseOptions {
  root: string;
  /** Levels to descend (at most MAX_BROWSE_DEPTH). */
  depth: number;
  /** References taken at most, while browsing (not after). */
  maxNodes: number;
  includeStandard: boolean;
  /** The walk stops (and releases its continuation points) once this much time has passed. */
  timeoutMs: number;
}

/** Deepest walk, whatever the caller asks. */
export const MAX_BROWSE_DEPTH = 20;
/** Nodes per Browse request. */
const NODES_PER_BROWSE = 100;
/**
 * References per node and page (requestedMaxReferencesPerNode, Part 4 §5.8.2): a page of 100
 * nodes stays far below max_message_size, and a big folder comes in several BrowseNext answers,
 * each counted against the node limit as it arrives.
 */
const REFERENCES_PER_PAGE = 100;

/** What a walk may still take. */
interface Budget {
  references: number;
  deadline: number;
  stoppedBy: BrowseResult['stoppedBy'];
}

/**
 * Walks the address space from `root` down to `depth` levels along hierarchical references
 * (OPC UA Part 4 §5.8.2 Browse, Part 3 §7.3 HierarchicalReferences), reading DataType, ValueRank
 * and Value of each variable in batches. Standard (namespace 0) objects such as `Server` are
 * listed but not descended into unless `includeStandard`.
 *
 * Bounded whatever the server does (issue 21 §2: a server whose BrowseNext never ends grew the
 * gateway by 60 MB/s until it ran out of memory): the node limit counts references as they
 * arrive, page by page; the walk stops at `timeoutMs` and at MAX_BROWSE_DEPTH; a node reached twice
 * (a reference loop, or several parents) is listed but descended into once; a continuation point
 * left when stopping is released (BrowseNext releaseContinuationPoints, Part 4 §5.8.3).
 */
export async function browseAddressSpace(session: ClientSession, options: BrowseOptions): Promise<BrowseResult> {
  const budget: Budget = { references: options.maxNodes, deadline: performance.now() + options.timeoutMs, stoppedBy: null };
  session.requestedMaxReferencesPerNode = REFERENCES_PER_PAGE;
  const namespaces = await session.readNamespaceArray();
  const nodes: BrowsedNode[] = [];
  const rootId = resolveNodeId(options.root);
  const expanded = new Set<string>([rootId.toString()]);
  let level: Array<{ nodeId: NodeId; path: string; insertAfter: BrowsedNode | null }> = [{ nodeId: rootId, path: '', insertAfter: null }];
  // Children are collected per parent and spliced in after it, so the printed tree reads in order.
  const childrenOf = new Map<BrowsedNode | null, BrowsedNode[]>();
  const depth = Math.min(options.depth, MAX_BROWSE_DEPTH);
  for (let d = 1; d <= depth && level.length > 0 && !budget.stoppedBy; d++) {
    const next: typeof level = [];
    const results = await browseAll(session, level.map((l) => l.nodeId), budget);
    for (let i = 0; i < results.length; i++) {
      const parent = level[i];
      const kids: BrowsedNode[] = [];
      for (const ref of results[i]) {
        if (nodes.length >= options.maxNodes) {
          budget.stoppedBy ??= 'max_nodes';
          break;
        }
        const nodeClass = ref.nodeClass === NodeClass.Variable ? 'Variable' : ref.nodeClass === NodeClass.Object ? 'Object' : null;
        if (!nodeClass) continue;
        const nodeId = ref.nodeId.toString();
        const browseName = ref.browseName.name ?? '';
        const node: BrowsedNode = {
          nodeId,
          browseName,
          displayName: ref.displayName.text ?? browseName,
          nodeClass,
          depth: d,
          path: parent.path ? `${parent.path}/${browseName}` : browseName,
        };
        nodes.push(node);
        kids.push(node);
        const standard = ref.nodeId.namespace === 0;
        if ((!standard || options.includeStandard) && !expanded.has(nodeId)) {
          expanded.add(nodeId);
          next.push({ nodeId: resolveNodeId(nodeId), path: node.path, insertAfter: node });
        }
      }
      childrenOf.set(parent.insertAfter, kids);
    }
    level = next;
  }
  await describeVariables(session, nodes.filter((n) => n.nodeClass === 'Variable'));
  // Depth-first order for printing.
  const ordered: BrowsedNode[] = [];
  const visit = (parent: BrowsedNode | null) => {
    for (const kid of childrenOf.get(parent) ?? []) {
      ordered.push(kid);
      visit(kid);
    }
  };
  visit(null);
  return { namespaces, nodes: ordered, truncated: budget.stoppedBy !== null, stoppedBy: budget.stoppedBy };
}

/** True (and noted in the budget) when the walk must stop: node limit reached or time up. */
function exhausted(budget: Budget): boolean {
  if (budget.stoppedBy) return true;
  if (budget.references <= 0) budget.stoppedBy = 'max_nodes';
  else if (performance.now() >= budget.deadline) budget.stoppedBy = 'timeout';
  return budget.stoppedBy !== null;
}

/**
 * The references of each node, page by page; stops taking more once the budget is spent. Returns
 * one list per node browsed (fewer lists than nodes when it stopped before browsing them all).
 */
async function browseAll(session: ClientSession, nodeIds: NodeId[], budget: Budget): Promise<ReferenceDescription[][]> {
  const out: ReferenceDescription[][] = [];
  for (let start = 0; start < nodeIds.length && !exhausted(budget); start += NODES_PER_BROWSE) {
    const chunk = nodeIds.slice(start, start + NODES_PER_BROWSE);
    const results = await session.browse(
      chunk.map((nodeId) => ({
        nodeId,
        referenceTypeId: ReferenceTypeIds.HierarchicalReferences,
        includeSubtypes: true,
        browseDirection: BrowseDirection.Forward,
        nodeClassMask: NodeClassMask.Object | NodeClassMask.Variable,
        resultMask: makeResultMask('ReferenceType | IsForward | BrowseName | DisplayName | NodeClass | TypeDefinition'),
      })),
    );
    for (const r of results) {
      const refs = [...(r.references ?? [])];
      budget.references -= refs.length;
      let cp = r.continuationPoint;
      while (cp && cp.length > 0) {
        if (exhausted(budget)) {
          // Part 4 §5.8.3: the server keeps a continuation point until released or the session ends.
          await session.browseNext(cp, true).catch(() => undefined);
          break;
        }
        const more = await session.browseNext(cp, false);
        const got = more.references ?? [];
        refs.push(...got);
        budget.references -= got.length;
        cp = more.continuationPoint;
      }
      out.push(refs);
    }
  }
  return out;
}

async function describeVariables(session: ClientSession, vars: BrowsedNode[]): Promise<void> {
  const typeNames = new Map<string, string>();
  for (let start = 0; start < vars.length; start += 300) {
    const chunk = vars.slice(start, start + 300);
    const results = await readDescriptions(session, chunk);
    for (let i = 0; i < chunk.length; i++) {
      const v = chunk[i];
      const [dt, rank, value] = results.slice(i * 3, i * 3 + 3);
      const dtId = dt.value?.value;
      v.scalar = Number(rank.value?.value ?? -1) < 0;
      if (dtId instanceof NodeId) {
        let builtin: DataType | undefined;
        if (dtId.namespace === 0 && typeof dtId.value === 'number' && dtId.value <= 25) builtin = dtId.value as DataType;
        if (builtin === undefined) {
          try {
            builtin = await session.getBuiltInDataType(resolveNodeId(v.nodeId));
          } catch {
            builtin = undefined;
          }
        }
        const key = dtId.toString();
        if (!typeNames.has(key)) {
          const name = dtId.namespace === 0 && typeof dtId.value === 'number' && dtId.value <= 25 ? DataType[dtId.value] : await readBrowseName(session, dtId);
          typeNames.set(key, name ?? key);
        }
        v.dataType = typeNames.get(key);
        v.numeric = builtin !== undefined && isNumericBuiltin(builtin);
      } else {
        v.dataType = '?';
        v.numeric = false;
      }
      if (value.statusCode.value >>> 30 === 0 && value.value) {
        const raw = value.value.value;
        const text = raw !== null && typeof raw === 'object' && !Array.isArray(raw) && !ArrayBuffer.isView(raw) && !(raw instanceof Date) ? '{structure}' : Array.isArray(raw) || ArrayBuffer.isView(raw) ? `[${Array.from(raw as ArrayLike<unknown>).slice(0, 5).join(', ')}${(raw as ArrayLike<unknown>).length > 5 ? ', ...' : ''}]` : String(raw);
        const flat = text.replace(/\s+/g, ' ');
        v.value = flat.length > 40 ? `${flat.slice(0, 37)}...` : flat;
      } else {
        v.value = value.statusCode.name;
      }
    }
  }
}

/**
 * DataType, ValueRank and Value of each variable. Values that do not fit max_message_size together
 * (big arrays, byte strings) are shown as BadResponseTooLarge instead of failing the browse.
 */
async function readDescriptions(session: ClientSession, chunk: BrowsedNode[]): Promise<DataValue[]> {
  const attributes = (v: BrowsedNode) => [
    { nodeId: resolveNodeId(v.nodeId), attributeId: AttributeIds.DataType },
    { nodeId: resolveNodeId(v.nodeId), attributeId: AttributeIds.ValueRank },
  ];
  try {
    return await session.read(chunk.flatMap((v) => [...attributes(v), { nodeId: resolveNodeId(v.nodeId), attributeId: AttributeIds.Value }]));
  } catch (err) {
    if (!isResponseTooLarge(err)) throw err;
    const types = await session.read(chunk.flatMap(attributes));
    return chunk.flatMap((_, i) => [types[2 * i], types[2 * i + 1], new DataValue({ statusCode: StatusCodes.BadResponseTooLarge })]);
  }
}

async function readBrowseName(session: ClientSession, nodeId: NodeId): Promise<string | undefined> {
  try {
    const dv = await session.read({ nodeId, attributeId: AttributeIds.BrowseName });
    return (dv.value?.value as { name?: string } | undefined)?.name;
  } catch {
    return undefined;
  }
}

/** The tree as text: one line per node, indented by depth. */
export function renderTree(result: BrowseResult, rootLabel: string): string {
  const lines = [rootLabel];
  for (const n of result.nodes) {
    const indent = '  '.repeat(n.depth);
    if (n.nodeClass === 'Object') {
      lines.push(`${indent}${n.displayName}/  ${n.nodeId}`);
    } else {
      const kind = `${n.dataType ?? '?'}${n.scalar === false ? '[]' : ''}`;
      const note = n.numeric && n.scalar !== false ? '' : '  (not mappable: ' + (n.scalar === false ? 'array' : 'not numeric') + ')';
      lines.push(`${indent}${n.displayName}  ${n.nodeId}  ${kind} = ${n.value ?? ''}${note}`);
    }
  }
  if (result.stoppedBy === 'timeout') lines.push(`... stopped after ${result.nodes.length} nodes: the time limit was reached (raise --timeout or narrow --root)`);
  else if (result.truncated) lines.push(`... stopped after ${result.nodes.length} nodes (raise --max-nodes or narrow --root)`);
  return lines.join('\n');
}

/** Machine variable id placeholder from a browse path: `Press1/Temperature` → `mvr_CHANGE_ME_press1_temperature`. */
export function placeholderVariable(path: string): string {
  const slug = path
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '_')
    .replace(/^_+|_+$/g, '')
    .slice(0, 60);
  return `mvr_CHANGE_ME_${slug || 'node'}`;
}

/**
 * A config snippet (YAML) for the numeric scalar variables found, optionally filtered. Node ids are
 * written in nsu= form so a change of namespace index on the server cannot remap them. Written by
 * config/yaml-writer.ts (as the console's Build page's), without the final newline: the CLI adds it.
 */
export function renderSnippet(result: BrowseResult, server: { name: string; endpoint: string; securityMode: string; securityPolicy?: string; user?: string }, filter?: RegExp): string {
  const picked = result.nodes.filter((n) => n.nodeClass === 'Variable' && n.numeric && n.scalar !== false && (!filter || filter.test(n.path) || filter.test(n.nodeId)));
  const skipped = result.nodes.filter((n) => n.nodeClass === 'Variable' && !(n.numeric && n.scalar !== false) && (!filter || filter.test(n.path) || filter.test(n.nodeId)));
  return opcuaSnippetYaml({
    header: ['Generated by edge-gateway browse: replace each mvr_CHANGE_ME_* with the machine variable id', 'from the tracking service, and delete the nodes you do not need.'],
    name: server.name,
    endpoint: server.endpoint,
    security_mode: server.securityMode,
    ...(server.securityPolicy ? { security_policy: server.securityPolicy } : {}),
    ...(server.user ? { user: server.user } : {}),
    nodes: picked.map((n) => ({ node_id: toNsuForm(n.nodeId, result.namespaces), variable: placeholderVariable(n.path), comment: `${n.path} (${n.dataType})` })),
    emptyNote: 'no numeric variables matched',
    notes: skipped.map((n) => `skipped ${n.path} (${n.nodeId}): ${n.scalar === false ? 'array' : `${n.dataType} is not numeric`}`),
  }).trimEnd();
}
