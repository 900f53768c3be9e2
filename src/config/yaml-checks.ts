import { isAlias, isMap, isPair, isScalar, isSeq, type Document, type LineCounter, type Node } from 'yaml';

/**
 * The checks the full YAML reader (load.ts) makes on a composed document before it turns it into
 * plain values, in one walk whose cost is linear in the document's size:
 *
 * - a key written twice in one mapping (the `yaml` library's own `uniqueKeys` compares each key
 *   with every earlier key of its mapping: 30,000 keys held the event loop for 17 s);
 * - an alias without an anchor before it, and one inside the very node it names (`&a [*a]`, which
 *   would make a value that contains itself);
 * - more alias or anchor nodes than a configuration has any use for (the library resolves each
 *   alias by scanning every anchor and alias before it);
 * - aliases that would repeat more than MAX_ALIAS_VALUES values once expanded (an "alias bomb":
 *   each use of an alias counts every value of what it names, aliases inside it included). The
 *   expanded sizes are counted, never built, so a bomb of any depth costs one walk.
 */

/** Values the aliases of a document may repeat in all once expanded; sharing a register list between a few dozen identical devices stays far below. */
export const MAX_ALIAS_VALUES = 100_000;
/** Alias nodes (`*a`) in one document: a configuration reuses an anchor a few dozen times. */
export const MAX_ALIASES = 1_000;
/** Anchors (`&a`) in one document. */
export const MAX_ANCHORS = 10_000;
/** Duplicate keys listed one by one; more are counted. */
const MAX_LISTED = 100;

interface Frame {
  node: Node;
  parent: Frame | null;
  /** The key or index under its parent, for messages. */
  part: string | number | null;
  /** Values of its expansion counted so far (itself included). */
  size: number;
  entered: boolean;
}

/** Problems of the document, each naming the line and the setting; empty when it may be turned into values. */
export function documentProblems(doc: Document.Parsed, lines: LineCounter, origin: string): string[] {
  const problems: string[] = [];
  const at = (node: { range?: [number, number, number] | null } | null | undefined) => {
    const offset = node?.range?.[0];
    return offset === undefined ? '?' : String(lines.linePos(offset).line);
  };
  let duplicates = 0;
  let aliases = 0;
  let anchors = 0;
  let repeated = 0;
  const anchored = new Map<string, Node>();
  const open = new Set<Node>();
  const sizes = new Map<Node, number>();
  const root = doc.contents as Node | null;
  if (!root) return problems;
  const stack: Frame[] = [{ node: root, parent: null, part: null, size: 1, entered: false }];
  while (stack.length > 0) {
    const frame = stack[stack.length - 1];
    const { node } = frame;
    if (frame.entered) {
      stack.pop();
      open.delete(node);
      if (node.anchor) sizes.set(node, frame.size);
      if (frame.parent) frame.parent.size += frame.size;
      continue;
    }
    frame.entered = true;
    if (isAlias(node)) {
      stack.pop();
      aliases += 1;
      if (aliases > MAX_ALIASES) return [`${origin}: line ${at(node)}: ${settingOf(frame)}: more than ${MAX_ALIASES.toLocaleString('en-US')} aliases (*name); a configuration reuses an anchor a few dozen times: write the repeated parts out`];
      const target = anchored.get(node.source);
      if (!target) {
        problems.push(`${origin}: line ${at(node)}: ${settingOf(frame)}: alias *${node.source} refers to no anchor &${node.source} defined above it`);
        continue;
      }
      if (open.has(target)) {
        problems.push(`${origin}: line ${at(node)}: ${settingOf(frame)}: alias *${node.source} is inside the node &${node.source} names, which would contain itself`);
        continue;
      }
      const size = sizes.get(target) ?? 1;
      repeated += size;
      if (repeated > MAX_ALIAS_VALUES) {
        return [`${origin}: line ${at(node)}: ${settingOf(frame)}: alias *${node.source}: aliases expand to more than ${MAX_ALIAS_VALUES.toLocaleString('en-US')} values (an "alias bomb"); write the repeated parts out or reuse fewer anchors`];
      }
      if (frame.parent) frame.parent.size += size;
      continue;
    }
    if (node.anchor) {
      anchors += 1;
      if (anchors > MAX_ANCHORS) return [`${origin}: line ${at(node)}: ${settingOf(frame)}: more than ${MAX_ANCHORS.toLocaleString('en-US')} anchors (&name); a configuration needs a few`];
      anchored.set(node.anchor, node);
      open.add(node);
    }
    if (isMap(node)) {
      const keys = new Set<unknown>();
      for (let i = node.items.length - 1; i >= 0; i--) pushPair(stack, frame, node.items[i]);
      for (const pair of node.items) {
        if (!isScalar(pair.key)) continue;
        if (!keys.has(pair.key.value)) {
          keys.add(pair.key.value);
          continue;
        }
        duplicates += 1;
        if (duplicates <= MAX_LISTED) {
          const pos = pair.key.range ? lines.linePos(pair.key.range[0]) : null;
          problems.push(`${origin}: YAML syntax error at line ${pos?.line ?? '?'}, column ${pos?.col ?? '?'}: Map keys must be unique (${JSON.stringify(String(pair.key.value)).slice(0, 80)} is written twice)`);
        }
      }
    } else if (isSeq(node)) {
      for (let i = node.items.length - 1; i >= 0; i--) {
        const item = node.items[i];
        if (item && typeof item === 'object') stack.push({ node: item as Node, parent: frame, part: i, size: 1, entered: false });
        else frame.size += 1;
      }
    }
  }
  if (duplicates > MAX_LISTED) problems.push(`${origin}: ${(duplicates - MAX_LISTED).toLocaleString('en-US')} more keys written twice`);
  return problems;
}

/** A mapping's pair: its key and value as children of the mapping's frame (a key written as an alias counts as one). */
function pushPair(stack: Frame[], frame: Frame, pair: unknown): void {
  if (!isPair(pair)) return;
  const part = isScalar(pair.key) ? String(pair.key.value) : '?';
  const value = pair.value as Node | null;
  if (value && typeof value === 'object') stack.push({ node: value, parent: frame, part, size: 1, entered: false });
  else frame.size += 1;
  const key = pair.key as Node | null;
  if (key && typeof key === 'object') stack.push({ node: key, parent: frame, part: isScalar(key) ? null : '?', size: 1, entered: false });
  else frame.size += 1;
}

/** The setting a frame sits under (`opcua.servers[0].nodes`), or `(top level)`. */
function settingOf(frame: Frame): string {
  const parts: Array<string | number> = [];
  for (let f: Frame | null = frame; f; f = f.parent) if (f.part !== null) parts.push(f.part);
  let s = '';
  for (const p of parts.reverse()) s += typeof p === 'number' ? `[${p}]` : s ? `.${p}` : p;
  return s || '(top level)';
}
