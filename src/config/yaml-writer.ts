import { Document, isMap, isScalar, isSeq } from 'yaml';

/**
 * The one writer of configuration text the project generates: the `opcua:` snippet of
 * `edge-gateway browse --snippet` and of the console's Build page, and whole configuration files
 * (scripts/container-check). It goes through the yaml package's Document API, so quoting and
 * escaping (a node id with `#` or `: `, a comment with a line break) are the library's rules, not
 * hand-made strings, and every writer gives the same form.
 */

/** A configuration (or part of one) as YAML text ending in a newline, with comment lines above it. */
export function configYaml(value: unknown, o: { header?: readonly string[] } = {}): string {
  const doc = new Document(value);
  if (o.header?.length) doc.commentBefore = commentText(o.header);
  return doc.toString({ lineWidth: 0 });
}

export interface SnippetNode {
  node_id: string;
  variable: string;
  /** Shown after the node id (`# Press1/Temperature (Double)`); line breaks become spaces. */
  comment?: string;
}

export interface OpcuaSnippet {
  name: string;
  endpoint: string;
  security_mode: string;
  security_policy?: string;
  /** User name of a `type: username` identity; its password is left to `{env: OPCUA_PASSWORD}`. */
  user?: string;
  nodes: readonly SnippetNode[];
  /** Comment lines above the snippet. */
  header?: readonly string[];
  /** Comment lines after the nodes (what was left out, and why). */
  notes?: readonly string[];
  /** Comment on an empty node list. */
  emptyNote?: string;
}

/** An `opcua:` section with one server, as YAML text ending in a newline. */
export function opcuaSnippetYaml(s: OpcuaSnippet): string {
  const server: Record<string, unknown> = { name: s.name, endpoint: s.endpoint, security_mode: s.security_mode };
  if (s.security_policy) server.security_policy = s.security_policy;
  if (s.user !== undefined) server.user = { type: 'username', username: s.user, password: { env: 'OPCUA_PASSWORD' } };
  server.nodes = s.nodes.map((n) => ({ node_id: n.node_id, variable: n.variable }));
  const doc = new Document({ opcua: { servers: [server] } });
  if (s.header?.length) doc.commentBefore = commentText(s.header);
  const password = doc.getIn(['opcua', 'servers', 0, 'user', 'password'], true);
  if (isMap(password)) password.flow = true;
  const nodes = doc.getIn(['opcua', 'servers', 0, 'nodes'], true);
  if (!isSeq(nodes)) throw new Error('opcuaSnippetYaml: nodes is not a sequence');
  s.nodes.forEach((n, i) => {
    const id = isMap(nodes.items[i]) ? nodes.items[i].get('node_id', true) : undefined;
    if (n.comment && isScalar(id)) id.comment = ` ${oneLine(n.comment)}`;
  });
  if (s.nodes.length === 0) nodes.flow = true;
  const after = [...(s.nodes.length === 0 && s.emptyNote ? [s.emptyNote] : []), ...(s.notes ?? [])];
  if (after.length > 0) nodes.comment = commentText(after);
  return doc.toString({ lineWidth: 0 });
}

/** Comment lines for the Document API: it writes `#` before each line. */
function commentText(lines: readonly string[]): string {
  return lines.map((l) => ` ${oneLine(l)}`).join('\n');
}

function oneLine(text: string): string {
  return text.replace(/[\r\n]+/g, ' ');
}
