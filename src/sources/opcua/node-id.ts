/**
 * Node id text as written in the config (OPC UA Part 6 §5.3.1.10, "NodeId" string encoding):
 *
 *   ns=2;s=Press1.Temperature     namespace index + string identifier
 *   ns=3;i=1001                   numeric identifier
 *   i=2258                        namespace 0 (the OPC UA namespace)
 *   ns=2;g=09087e75-8e5e-499b-954f-f2a9603db28a   GUID
 *   ns=2;b=M/RbKBsRVkePCePcx24oRA==              opaque (base64)
 *   nsu=urn:vendor:plc;s=Line1.Temp               namespace URI instead of index (Part 6 §5.3.1.11,
 *                                                  "ExpandedNodeId"); resolved against the server's
 *                                                  NamespaceArray at every connect, because indexes
 *                                                  may change when the server restarts.
 *
 * Pure functions: used by the config schema (syntax) and by the source (resolution).
 */

export type IdentifierType = 'i' | 's' | 'g' | 'b';

export interface ParsedNodeId {
  /** Namespace given by index (`ns=`) or by URI (`nsu=`); index 0 when neither is present. */
  namespace: { index: number } | { uri: string };
  type: IdentifierType;
  identifier: string;
}

const NODE_ID = /^(?:(?:ns=(\d+)|nsu=([^;]+));)?([isgb])=(.+)$/s;
const GUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

/** Parses node id text; returns a problem sentence (without the value) when it is malformed. */
export function parseNodeId(text: string): ParsedNodeId | { problem: string } {
  const t = text.trim();
  const m = NODE_ID.exec(t);
  if (!m) return { problem: 'is not a node id (expected ns=<index>;s=<name>, ns=<index>;i=<number>, i=<number> or nsu=<namespace uri>;s=<name>)' };
  const [, ns, nsu, type, identifier] = m;
  if (ns !== undefined && Number(ns) > 65_535) return { problem: 'has a namespace index above 65535' };
  if (type === 'i' && !/^\d+$/.test(identifier)) return { problem: 'has a numeric identifier (i=) that is not a whole number' };
  if (type === 'i' && Number(identifier) > 4_294_967_295) return { problem: 'has a numeric identifier above 4294967295 (UInt32)' };
  if (type === 'g' && !GUID.test(identifier)) return { problem: 'has a GUID identifier (g=) that is not a GUID' };
  if (type === 'b' && !/^[A-Za-z0-9+/]+=*$/.test(identifier)) return { problem: 'has an opaque identifier (b=) that is not base64' };
  const namespace = nsu !== undefined ? { uri: decodeUri(nsu) } : { index: ns === undefined ? 0 : Number(ns) };
  return { namespace, type: type as IdentifierType, identifier };
}

/** Part 6 §5.3.1.11: `;` and `%` inside the URI are percent-encoded. */
function decodeUri(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

export type Resolution = { ok: true; nodeId: string; namespaceIndex: number } | { ok: false; problem: string };

/**
 * Turns a parsed node id into `ns=<index>;<type>=<identifier>` using the server's NamespaceArray
 * (the value of Server.NamespaceArray, i=2255).
 */
export function resolveNodeId(parsed: ParsedNodeId, namespaceArray: readonly string[]): Resolution {
  let index: number;
  if ('uri' in parsed.namespace) {
    index = namespaceArray.indexOf(parsed.namespace.uri);
    if (index < 0) return { ok: false, problem: `namespace URI "${parsed.namespace.uri}" is not in the server's namespace array (${namespaceArray.length} entries; run edge-gateway browse to list them)` };
  } else {
    index = parsed.namespace.index;
  }
  return { ok: true, nodeId: `ns=${index};${parsed.type}=${parsed.identifier}`, namespaceIndex: index };
}

/** `nsu=<uri>;s=...` form of a resolved id, for browse snippets (robust against index changes). */
export function toNsuForm(nodeId: string, namespaceArray: readonly string[]): string {
  const parsed = parseNodeId(nodeId);
  if ('problem' in parsed || !('index' in parsed.namespace) || parsed.namespace.index === 0) return nodeId;
  const uri = namespaceArray[parsed.namespace.index];
  if (!uri) return nodeId;
  return `nsu=${uri.replace(/%/g, '%25').replace(/;/g, '%3B')};${parsed.type}=${parsed.identifier}`;
}
