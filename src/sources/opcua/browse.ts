import {
  AttributeIds,
  BrowseDirection,
  DataType,
  NodeClass,
  NodeClassMask,
  NodeId,
  ReferenceTypeIds,
  makeResultMask,
  resolveNodeId,
  type ClientSession,
  type ReferenceDescription,
} from 'node-opcua';
import { opcuaSnippetYaml } from '../../config/yaml-writer.js';
import { isNumericBuiltin } from './decode.js';
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
}

/**
 * Walks the address space from `root` down to `depth` levels along hierarchical references
 * (OPC UA Part 4 §5.8.2 Browse, Part 3 §7.3 HierarchicalReferences), reading DataType, ValueRank
 * and Value of each variable in batches. Standard (namespace 0) objects such as `Server` are
 * listed but not descended into unless `includeStandard`.
 */
export async function browseAddressSpace(session: ClientSession, options: { root: string; depth: number; maxNodes: number; includeStandard: boolean }): Promise<BrowseResult> {
  const namespaces = await session.readNamespaceArray();
  const nodes: BrowsedNode[] = [];
  let truncated = false;
  let level: Array<{ nodeId: NodeId; path: string; insertAfter: BrowsedNode | null }> = [{ nodeId: resolveNodeId(options.root), path: '', insertAfter: null }];
  // Children are collected per parent and spliced in after it, so the printed tree reads in order.
  const childrenOf = new Map<BrowsedNode | null, BrowsedNode[]>();
  for (let depth = 1; depth <= options.depth && level.length > 0 && !truncated; depth++) {
    const next: typeof level = [];
    const results = await browseAll(session, level.map((l) => l.nodeId));
    for (let i = 0; i < level.length; i++) {
      const parent = level[i];
      const refs = results[i] ?? [];
      const kids: BrowsedNode[] = [];
      for (const ref of refs) {
        if (nodes.length >= options.maxNodes) {
          truncated = true;
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
          depth,
          path: parent.path ? `${parent.path}/${browseName}` : browseName,
        };
        nodes.push(node);
        kids.push(node);
        const standard = ref.nodeId.namespace === 0;
        if (!standard || options.includeStandard) next.push({ nodeId: resolveNodeId(nodeId), path: node.path, insertAfter: node });
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
  return { namespaces, nodes: ordered, truncated };
}

async function browseAll(session: ClientSession, nodeIds: NodeId[]): Promise<ReferenceDescription[][]> {
  const out: ReferenceDescription[][] = [];
  for (let start = 0; start < nodeIds.length; start += 200) {
    const chunk = nodeIds.slice(start, start + 200);
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
      let cp = r.continuationPoint;
      while (cp && cp.length > 0) {
        const more = await session.browseNext(cp, false);
        refs.push(...(more.references ?? []));
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
    const results = await session.read(
      chunk.flatMap((v) => [
        { nodeId: resolveNodeId(v.nodeId), attributeId: AttributeIds.DataType },
        { nodeId: resolveNodeId(v.nodeId), attributeId: AttributeIds.ValueRank },
        { nodeId: resolveNodeId(v.nodeId), attributeId: AttributeIds.Value },
      ]),
    );
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
  if (result.truncated) lines.push(`... stopped after ${result.nodes.length} nodes (raise --max-nodes or narrow --root)`);
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
