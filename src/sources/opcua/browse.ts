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
  VariableTypeIds,
  makeResultMask,
  resolveNodeId,
  type ClientSession,
  type ReferenceDescription,
} from 'node-opcua';
import { opcuaSnippetYaml } from '../../config/yaml-writer.js';
import { isNumericBuiltin } from './decode.js';
import { isResponseTooLarge } from './errors.js';
import { parseNodeId, resolveNodeId as resolveParsedNodeId, toNsuForm } from './node-id.js';

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
  /**
   * It has children other than properties: false for a leaf (an AnalogItem with only EURange and
   * EngineeringUnits is one), undefined when not known (the walk stopped before looking).
   */
  hasChildren?: boolean;
  /** Browse names of its properties (see isProperty), listed as nodes only with `includeProperties`. */
  properties?: string[];
  /** Variables: the display name of its EngineeringUnits property (Part 8 EUInformation), e.g. `°C`. */
  unit?: string;
  /** Variables: its EURange property (Part 8 Range). */
  range?: { low: number; high: number };
}

export interface BrowseResult {
  namespaces: string[];
  nodes: BrowsedNode[];
  truncated: boolean;
  /** Why the walk stopped early: the node limit, or the time limit. Null when it is complete. */
  stoppedBy: 'max_nodes' | 'timeout' | null;
}

export interface BrowseOptions {
  /** Node id to start from: `ns=`, `i=` or `nsu=` form (resolved against the server's namespace array). */
  root: string;
  /** Levels to descend (at most MAX_BROWSE_DEPTH). */
  depth: number;
  /** References taken at most, while browsing (not after). */
  maxNodes: number;
  includeStandard: boolean;
  /** The walk stops (and releases its continuation points) once this much time has passed. */
  timeoutMs: number;
  /** List property nodes (EURange, EngineeringUnits, ...) as nodes too; by default they are only details of their parent. */
  includeProperties?: boolean;
  /** Browse path of the root, put before the paths found (a tree loaded one level at a time). Default: empty. */
  rootPath?: string;
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
 * Properties (isProperty: EURange, EngineeringUnits, InstrumentRange, EnumStrings ...) are not
 * listed as nodes unless `includeProperties`: they are details of their parent (its `properties`,
 * and a variable's `unit` and `range`). Each listed node says whether it has other children
 * (`hasChildren`), so a tree loaded one level at a time (the console) knows what can be expanded:
 * the nodes of the last level are looked at with one more Browse that takes only the first page
 * of each (its continuation points released at once) and lists nothing.
 *
 * Bounded whatever the server does (a server whose BrowseNext never ends grew the
 * gateway by 60 MB/s until it ran out of memory): the node limit counts references as they
 * arrive, page by page; the walk stops at `timeoutMs` and at MAX_BROWSE_DEPTH; a node reached twice
 * (a reference loop, or several parents) is listed but descended into once; a continuation point
 * left when stopping is released (BrowseNext releaseContinuationPoints, Part 4 §5.8.3). The
 * look-ahead has a node limit of its own (as large) and the same deadline, and is skipped once the
 * walk stopped early.
 */
export async function browseAddressSpace(session: ClientSession, options: BrowseOptions): Promise<BrowseResult> {
  const deadline = performance.now() + options.timeoutMs;
  const budget: Budget = { references: options.maxNodes, deadline, stoppedBy: null };
  session.requestedMaxReferencesPerNode = REFERENCES_PER_PAGE;
  const namespaces = await session.readNamespaceArray();
  const nodes: BrowsedNode[] = [];
  const rootId = resolveRoot(options.root, namespaces);
  const expanded = new Set<string>([rootId.toString()]);
  /** What browsing a node found besides the children listed: its properties, and whether it has other children. */
  const seen = new Map<string, Looked>();
  let level: Array<{ nodeId: NodeId; path: string; insertAfter: BrowsedNode | null }> = [{ nodeId: rootId, path: options.rootPath ?? '', insertAfter: null }];
  // Children are collected per parent and spliced in after it, so the printed tree reads in order.
  const childrenOf = new Map<BrowsedNode | null, BrowsedNode[]>();
  const depth = Math.min(options.depth, MAX_BROWSE_DEPTH);
  for (let d = 1; d <= depth && level.length > 0 && !budget.stoppedBy; d++) {
    const next: typeof level = [];
    const results = await browseAll(session, level.map((l) => l.nodeId), budget, false);
    for (let i = 0; i < results.length; i++) {
      const parent = level[i];
      const kids: BrowsedNode[] = [];
      const looked = lookAt(results[i]);
      seen.set(parent.nodeId.toString(), looked);
      for (const ref of results[i].refs) {
        if (nodes.length >= options.maxNodes) {
          budget.stoppedBy ??= 'max_nodes';
          break;
        }
        if (isProperty(ref) && !options.includeProperties) continue;
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
          if (d < depth) next.push({ nodeId: resolveNodeId(nodeId), path: node.path, insertAfter: node });
        }
      }
      childrenOf.set(parent.insertAfter, kids);
    }
    level = next;
  }
  if (!budget.stoppedBy) await lookAhead(session, nodes, seen, deadline, options.maxNodes);
  for (const n of nodes) {
    const looked = seen.get(n.nodeId);
    if (!looked) continue;
    n.hasChildren = looked.hasChildren;
    if (looked.properties.length > 0) n.properties = looked.properties.map((p) => p.name);
  }
  await describeVariables(session, nodes.filter((n) => n.nodeClass === 'Variable'));
  if (performance.now() < deadline) await readUnits(session, nodes, seen);
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

/** The root as given (`i=85`, `ns=2;s=Press1`), or an `nsu=` id resolved against the server's namespace array. */
function resolveRoot(root: string, namespaces: readonly string[]): NodeId {
  const parsed = parseNodeId(root);
  if ('problem' in parsed) throw new BrowseRootError(`root: "${root.slice(0, 200)}" ${parsed.problem}`);
  const r = resolveParsedNodeId(parsed, namespaces);
  if (!r.ok) throw new BrowseRootError(`root: ${r.problem}`);
  return resolveNodeId(r.nodeId);
}

/** The root node id cannot be used (malformed, or its namespace URI is unknown to the server). */
export class BrowseRootError extends Error {}

/** The properties of a browsed node and whether it has children other than them. */
interface Looked {
  properties: Array<{ name: string; nodeId: string }>;
  /** Undefined when its Browse failed (a bad status): not known. */
  hasChildren: boolean | undefined;
}

/**
 * A property (OPC UA Part 3, ReferenceType HasProperty, i=46; VariableType PropertyType, i=68): the
 * target of a HasProperty reference, or a variable of PropertyType reached by another reference
 * type. Properties describe their parent (EURange, EngineeringUnits, InstrumentRange, EnumStrings,
 * NodeVersion ...); they are not process values, and they cluttered the console's tree.
 */
function isProperty(ref: ReferenceDescription): boolean {
  const type = ref.referenceTypeId;
  if (type && type.namespace === 0 && type.value === ReferenceTypeIds.HasProperty) return true;
  const def = ref.typeDefinition;
  return ref.nodeClass === NodeClass.Variable && !!def && def.namespace === 0 && def.value === VariableTypeIds.PropertyType;
}

function lookAt(r: Browsed): Looked {
  const properties: Looked['properties'] = [];
  let others = false;
  for (const ref of r.refs) {
    if (isProperty(ref)) properties.push({ name: ref.browseName.name ?? '', nodeId: ref.nodeId.toString() });
    else if (ref.nodeClass === NodeClass.Object || ref.nodeClass === NodeClass.Variable) others = true;
  }
  // More pages were left (look-ahead): there is more than it saw, so count it as having children.
  return { properties, hasChildren: r.bad ? undefined : others || r.more };
}

/** One Browse (first page only) of the listed nodes not browsed yet, for their properties and whether they have children. */
async function lookAhead(session: ClientSession, nodes: BrowsedNode[], seen: Map<string, Looked>, deadline: number, maxReferences: number): Promise<void> {
  const ids = [...new Set(nodes.filter((n) => !seen.has(n.nodeId)).map((n) => n.nodeId))];
  if (ids.length === 0) return;
  const budget: Budget = { references: maxReferences, deadline, stoppedBy: null };
  const results = await browseAll(session, ids.map((id) => resolveNodeId(id)), budget, true);
  for (let i = 0; i < results.length; i++) seen.set(ids[i], lookAt(results[i]));
}

/** True (and noted in the budget) when the walk must stop: node limit reached or time up. */
function exhausted(budget: Budget): boolean {
  if (budget.stoppedBy) return true;
  if (budget.references <= 0) budget.stoppedBy = 'max_nodes';
  else if (performance.now() >= budget.deadline) budget.stoppedBy = 'timeout';
  return budget.stoppedBy !== null;
}

/** The references of one browsed node; `more` when pages were left (and released); `bad` when the server answered a bad status for it. */
interface Browsed {
  refs: ReferenceDescription[];
  more: boolean;
  bad: boolean;
}

/**
 * The references of each node, page by page (with `firstPageOnly`, the first page, its
 * continuation point released at once); stops taking more once the budget is spent. Returns one
 * entry per node browsed (fewer entries than nodes when it stopped before browsing them all).
 */
async function browseAll(session: ClientSession, nodeIds: NodeId[], budget: Budget, firstPageOnly: boolean): Promise<Browsed[]> {
  const out: Browsed[] = [];
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
      let more = false;
      while (cp && cp.length > 0) {
        if (firstPageOnly || exhausted(budget)) {
          // Part 4 §5.8.3: the server keeps a continuation point until released or the session ends.
          await session.browseNext(cp, true).catch(() => undefined);
          more = true;
          break;
        }
        const page = await session.browseNext(cp, false);
        const got = page.references ?? [];
        refs.push(...got);
        budget.references -= got.length;
        cp = page.continuationPoint;
      }
      out.push({ refs, more, bad: r.statusCode.value >>> 30 === 2 });
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
/**
 * A variable's unit and range, from its EngineeringUnits (EUInformation: the display name, `°C`)
 * and EURange (Range: low, high) properties (OPC UA Part 8, AnalogItemType), read in one request
 * per 300 nodes. Details only: a property that cannot be read is left out, never an error.
 */
async function readUnits(session: ClientSession, nodes: BrowsedNode[], seen: Map<string, Looked>): Promise<void> {
  const wanted: Array<{ node: BrowsedNode; what: 'unit' | 'range'; nodeId: string }> = [];
  for (const n of nodes) {
    if (n.nodeClass !== 'Variable') continue;
    for (const p of seen.get(n.nodeId)?.properties ?? []) {
      if (p.name === 'EngineeringUnits') wanted.push({ node: n, what: 'unit', nodeId: p.nodeId });
      else if (p.name === 'EURange') wanted.push({ node: n, what: 'range', nodeId: p.nodeId });
    }
  }
  for (let start = 0; start < wanted.length; start += 300) {
    const chunk = wanted.slice(start, start + 300);
    let values: DataValue[];
    try {
      values = await session.read(chunk.map((w) => ({ nodeId: resolveNodeId(w.nodeId), attributeId: AttributeIds.Value })));
    } catch {
      return;
    }
    chunk.forEach((w, i) => {
      const v = values[i]?.statusCode.value === 0 ? (values[i].value?.value as { displayName?: { text?: string | null }; low?: number; high?: number } | null) : null;
      if (!v) return;
      if (w.what === 'unit' && v.displayName?.text) w.node.unit = v.displayName.text;
      if (w.what === 'range' && typeof v.low === 'number' && typeof v.high === 'number') w.node.range = { low: v.low, high: v.high };
    });
  }
}

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
      const unit = n.unit ? ` ${n.unit}` : '';
      const range = n.range ? `  (range ${n.range.low} to ${n.range.high})` : '';
      lines.push(`${indent}${n.displayName}  ${n.nodeId}  ${kind} = ${n.value ?? ''}${unit}${range}${note}`);
    }
  }
  if (result.stoppedBy === 'timeout') lines.push(`... stopped after ${result.nodes.length} nodes: the time limit was reached (raise --timeout or narrow --root)`);
  else if (result.truncated) lines.push(`... stopped after ${result.nodes.length} nodes (raise --max-nodes or narrow --root)`);
  return lines.join('\n');
}

/** The comment written after a mapped node id: its browse path, data type and unit (`Press1/Temperature (Double, °C)`). */
export function nodeComment(n: Pick<BrowsedNode, 'path' | 'dataType' | 'unit'>): string {
  return `${n.path} (${n.dataType ?? '?'}${n.unit ? `, ${n.unit}` : ''})`;
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
    nodes: picked.map((n) => ({ node_id: toNsuForm(n.nodeId, result.namespaces), variable: placeholderVariable(n.path), comment: nodeComment(n) })),
    emptyNote: 'no numeric variables matched',
    notes: skipped.map((n) => `skipped ${n.path} (${n.nodeId}): ${n.scalar === false ? 'array' : `${n.dataType} is not numeric`}`),
  }).trimEnd();
}
