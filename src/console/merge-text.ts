import { isDeepStrictEqual } from 'node:util';
import { Document, isMap, isPair, isScalar, YAMLMap, YAMLSeq, type Node, type Scalar } from 'yaml';
import { parseYamlConfig } from '../config/load.js';

/**
 * How a merge (config-merge.ts) writes what it did into the user's text as it is: new list entries
 * after the last entry of a list the file already has, a new section at the end, a value of an
 * existing entry replaced, a key added to one. Everything else in the text stays byte for byte (the
 * yaml library would re-space aligned comments and flow lists if the whole document were printed
 * again), and a new entry is written the way its neighbour is: flow or block, each value quoted as
 * the neighbour quotes the same setting, keys at the neighbour's columns when its keys are aligned,
 * its comment at the neighbour's comment column.
 *
 * Linear in the text and the entries: entries for one list are written together, and the text is
 * assembled once from its pieces (20,000 CSV rows used to copy the whole text per row).
 */
export type Splice =
  | { kind: 'append'; seq: YAMLSeq; node: YAMLMap }
  | { kind: 'section'; section: string; node: YAMLMap }
  /** Text `[start, end)` of the user's text replaced (a value of an existing entry). */
  | { kind: 'replace'; start: number; end: number; text: string };

interface Piece {
  at: number;
  end: number;
  text: string;
  /** At one offset, the more indented piece goes first (a list nested in the last entry of another). */
  depth: number;
  order: number;
}

/**
 * The merged text: the user's text with the splices written in, or null when a splice meets a
 * layout it does not know (a list written in flow style over several lines, overlapping edits).
 */
export function spliced(text: string, splices: readonly Splice[]): string | null {
  const pieces: Piece[] = [];
  const appended = new Map<YAMLSeq, { nodes: YAMLMap[]; order: number }>();
  splices.forEach((sp, order) => {
    if (sp.kind === 'append') {
      const group = appended.get(sp.seq) ?? { nodes: [], order };
      group.nodes.push(sp.node);
      appended.set(sp.seq, group);
    } else if (sp.kind === 'replace') {
      pieces.push({ at: sp.start, end: sp.end, text: sp.text, depth: 0, order });
    } else {
      const body = printBlock(sp.section, sp.node);
      pieces.push({ at: text.length, end: text.length, text: `${text.trim() ? '\n' : ''}${body}`, depth: -1, order });
    }
  });
  for (const [seq, group] of appended) {
    const piece = appendPiece(text, seq, group.nodes, group.order);
    if (!piece) return null;
    pieces.push(piece);
  }
  pieces.sort((a, b) => a.at - b.at || b.depth - a.depth || a.order - b.order);
  const out: string[] = [];
  let from = 0;
  // What is written after a last line without a newline starts on a line of its own.
  let newlineFirst = text.length > 0 && !text.endsWith('\n');
  for (const p of pieces) {
    if (p.at < from) return null;
    out.push(text.slice(from, p.at));
    if (newlineFirst && p.at === text.length) {
      out.push('\n');
      newlineFirst = false;
    }
    out.push(p.text);
    from = p.end;
  }
  out.push(text.slice(from));
  return out.join('');
}

/** New entries of one list, after its last entry in the text, written as that entry is. */
function appendPiece(text: string, seq: YAMLSeq, nodes: readonly YAMLMap[], order: number): Piece | null {
  let last: Node | undefined;
  for (let i = seq.items.length - 1; i >= 0 && !last; i--) {
    const item = seq.items[i] as Node;
    if (item?.range) last = item;
  }
  if (!last?.range || seq.flow) return null;
  const lineStart = text.lastIndexOf('\n', last.range[0] - 1) + 1;
  const lead = /^(\s*)-\s+$/.exec(text.slice(lineStart, last.range[0]));
  if (!lead) return null;
  let at = last.range[1];
  if (text[at - 1] !== '\n') at = text.indexOf('\n', at) < 0 ? text.length : text.indexOf('\n', at) + 1;
  const lineEnd = text.indexOf('\n', lineStart);
  const style = styleOf(text, last, lineStart, lineEnd < 0 ? text.length : lineEnd);
  const items = nodes.map((n) => alignComment(itemText(n, style, lead[1]), style.commentColumn)).join('');
  return { at, end: at, text: items, depth: lead[1].length, order };
}

/** How the neighbour entry is written. */
interface Style {
  /** Quoting of each setting's value (`node_id` double-quoted, ...). */
  quotes: Map<string, Scalar.Type>;
  /** Column of each key on the neighbour's line, when its keys are aligned with padding. */
  columns: Map<string, number> | null;
  /** Column of the keys after the first in a block entry. */
  blockIndent: number | null;
  commentColumn: number;
}

function styleOf(text: string, last: Node, lineStart: number, lineEnd: number): Style {
  const line = text.slice(lineStart, lineEnd);
  const quotes = new Map<string, Scalar.Type>();
  const columns = new Map<string, number>();
  let blockIndent: number | null = null;
  if (isMap(last)) {
    last.items.forEach((pair, i) => {
      if (!isPair(pair) || !isScalar(pair.key)) return;
      const key = String(pair.key.value);
      if (isScalar(pair.value) && pair.value.type) quotes.set(key, pair.value.type);
      const at = pair.key.range?.[0];
      if (at === undefined) return;
      if (at < lineEnd) columns.set(key, at - lineStart);
      else if (i > 0 && blockIndent === null) blockIndent = at - (text.lastIndexOf('\n', at - 1) + 1);
    });
  }
  // Padding between entries of a flow map (`mvr_speed,       table:`) means its keys are aligned.
  const aligned = isMap(last) && last.flow === true && /,[ \t]{2,}\S/.test(line);
  return { quotes, columns: aligned ? columns : null, blockIndent, commentColumn: commentColumn(line) };
}

/** One entry of a block list (`- ...`), ending in a newline, at the list's indentation. */
function itemText(node: YAMLMap, style: Style, lead: string): string {
  const pairs = node.items.filter((p) => isPair(p) && isScalar(p.key) && isScalar(p.value)) as Array<{ key: Scalar; value: Scalar }>;
  if (pairs.length !== node.items.length) return printItem(node).replace(/^(?=.)/gm, lead);
  const note = (c: string | null | undefined) => (c ? ` #${c.replace(/[\r\n]+/g, ' ')}` : '');
  const tail = note(node.comment);
  if (node.flow) {
    let line = `${lead}- { `;
    pairs.forEach((p, i) => {
      if (i > 0) line += ', ';
      const key = String(p.key.value);
      const column = style.columns?.get(key);
      if (column !== undefined && line.length < column) line += ' '.repeat(column - line.length);
      line += `${key}: ${scalarText(p.value.value, style.quotes.get(key), true)}`;
    });
    return `${line} }${note(node.comment ?? pairs.find((p) => p.value.comment)?.value.comment)}\n`;
  }
  const indent = ' '.repeat(style.blockIndent ?? lead.length + 2);
  return pairs
    .map((p, i) => {
      const key = String(p.key.value);
      const head = i === 0 ? `${lead}- ` : indent;
      return `${head}${key}: ${scalarText(p.value.value, style.quotes.get(key), false)}${note(p.key.comment ?? p.value.comment)}${i === 0 ? tail : ''}\n`;
    })
    .join('');
}

/** A value as its neighbour writes that setting: double- or single-quoted, else plain where plain reads back the same. */
export function scalarText(value: unknown, quote: Scalar.Type | undefined, flow: boolean): string {
  if (typeof value !== 'string') return String(value);
  if (quote === 'QUOTE_DOUBLE') return JSON.stringify(value);
  if (quote === 'QUOTE_SINGLE' && !/[\r\n]/.test(value)) return `'${value.replace(/'/g, "''")}'`;
  return plainSafe(value, flow) ? value : JSON.stringify(value);
}

/**
 * A string that a plain scalar reads back as itself under the YAML 1.2 core schema: no indicator
 * first, no `: ` or ` #`, in a flow map none of `,[]{}`, and not a null, bool or number.
 */
function plainSafe(s: string, flow: boolean): boolean {
  if (s === '' || s !== s.trim() || /[\r\n\t]/.test(s)) return false;
  if (/^[-?:,[\]{}#&*!|>'"%@`]/.test(s) && !/^[-?:][^\s,[\]{}]/.test(s)) return false;
  if (/: |:$| #/.test(s)) return false;
  if (flow && /[,[\]{}]/.test(s)) return false;
  if (/^(?:~|null|Null|NULL|true|True|TRUE|false|False|FALSE)$/.test(s)) return false;
  if (/^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$|^0o[0-7]+$|^0x[0-9a-fA-F]+$|^[-+]?\.(?:inf|Inf|INF)$|^\.(?:nan|NaN|NAN)$/.test(s)) return false;
  return true;
}

/** Where the comment of a line starts (a `#` after a blank, outside quoted scalars), or -1. */
export function commentColumn(line: string): number {
  let quote: string | null = null;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quote) {
      if (c === '\\' && quote === '"') i += 1;
      else if (c === quote) quote = null;
    } else if ((c === '"' || c === "'") && (i === 0 || ' \t{[,:-'.includes(line[i - 1]))) quote = c;
    else if (c === '#' && (i === 0 || line[i - 1] === ' ' || line[i - 1] === '\t')) return i;
  }
  return -1;
}

/** A new entry's first-line comment moved to `column`, where its sibling's comment starts (aligned comments stay aligned). */
function alignComment(item: string, column: number): string {
  const nl = item.indexOf('\n');
  const first = nl < 0 ? item : item.slice(0, nl);
  const at = commentColumn(first);
  if (column < 0 || at < 0 || at >= column) return item;
  return `${first.slice(0, at)}${' '.repeat(column - at)}${first.slice(at)}${nl < 0 ? '' : item.slice(nl)}`;
}

/** `node` as one entry of a block list (`- key: value`), at indentation 0. */
function printItem(node: YAMLMap): string {
  const d = new Document(new YAMLSeq());
  (d.contents as YAMLSeq).items.push(node);
  return d.toString({ lineWidth: 0 });
}

function printBlock(key: string, node: YAMLMap): string {
  const map = new YAMLMap();
  const d = new Document(map);
  map.set(key, node);
  return d.toString({ lineWidth: 0 });
}

/**
 * The merged text, checked by reading it back as the gateway reads its file (config/load.ts
 * parseYamlConfig: the lean reader above 256 kB): when it does not mean exactly the merged
 * document, the whole document is printed instead, which keeps comments but may re-space them.
 */
export function render(text: string, doc: Document.Parsed, splices: readonly Splice[]): string {
  const out = spliced(text, splices);
  if (out !== null && readsAs(out, doc.toJS({ maxAliasCount: -1 }) ?? {})) return out;
  return doc.toString({ lineWidth: 0 });
}

/** `render` with a pause between its steps (a text of a few MB: the read back is the larger part). */
export async function renderSliced(text: string, doc: Document.Parsed, splices: readonly Splice[], pause: () => Promise<void>): Promise<string> {
  const out = spliced(text, splices);
  if (out !== null) {
    await pause();
    const want = doc.toJS({ maxAliasCount: -1 }) ?? {};
    await pause();
    if (readsAs(out, want)) return out;
  }
  return doc.toString({ lineWidth: 0 });
}

function readsAs(text: string, want: unknown): boolean {
  try {
    return isDeepStrictEqual(parseYamlConfig(text, 'the merged configuration'), want);
  } catch {
    return false;
  }
}
