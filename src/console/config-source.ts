import { isNode, parseDocument } from 'yaml';
import { configYaml } from '../config/yaml-writer.js';
import { settingKeys, type VariableInfo } from './variable-index.js';

/**
 * A variable's mapping entry as YAML for the Variables page ("the YAML the user
 * wrote, not JSON"): the entry's own text in the configuration file, comments and flow style as
 * written, found by the setting path that names the variable; when the file does not hold it (no
 * file, changed since, or an entry the schema expanded), the entry written as YAML by the one
 * writer (config/yaml-writer.ts).
 */
export function entryYaml(fileText: string | null, info: Pick<VariableInfo, 'id' | 'settings' | 'config'>): string | null {
  const setting = info.settings.find((s) => !s.startsWith('annotations') && s.endsWith('.variable'));
  if (fileText !== null && setting && fileText.length > WHOLE_PARSE_MAX_CHARS) {
    // A plant-sized file (100,000 variables: 8 MB) parsed whole for each variable the console
    // opens held the event loop for seconds and ~330 MB of heap: find the entry by its
    // lines instead, or write it afresh.
    const found = entryByLines(fileText, info.id, String(settingKeys(setting)[0]));
    if (found !== null) return found;
  } else if (fileText !== null && setting) {
    const path = settingKeys(setting.replace(/\.variable$/, ''));
    try {
      const doc = parseDocument(fileText);
      const node = doc.getIn(path, true);
      if (isNode(node) && node.range) {
        // A comment after a flow entry on its line (`- { variable: x, ... }   # rpm`) belongs to it.
        const eol = fileText.indexOf('\n', node.range[1]);
        const rest = fileText.slice(node.range[1], eol < 0 ? undefined : eol);
        const end = /^\s*#/.test(rest) ? node.range[1] + rest.length : node.range[1];
        const written = fileText.slice(node.range[0], end).replace(/\s+$/, '');
        return dedent(written, columnOf(fileText, node.range[0]));
      }
    } catch {
      /* fall back to the entry written afresh */
    }
  }
  return info.config === null || info.config === undefined ? null : configYaml(info.config).replace(/\n$/, '');
}

/** Files up to this size are parsed whole to find an entry (a hand-written file is far below it). */
export const WHOLE_PARSE_MAX_CHARS = 256 * 1024;

/**
 * The entry whose `variable:` is `id`, found by its lines: the one `variable: id` in the file, or in
 * its top-level `section` when given (none or several: null; the annotations' detectors also name
 * variables), then the sequence item around it, by indentation (block style) or its braces
 * (flow style, one line). The text found must read back as a map with that variable, else null.
 * Returns what `entryYaml` returns for the same entry in a small file.
 */
export function entryByLines(text: string, id: string, section?: string): string | null {
  const escaped = id.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const re = new RegExp(`(^|[\\s{,])variable[ \\t]*:[ \\t]*(["']?)${escaped}\\2[ \\t]*(?=$|[,}#\\s])`, 'gm');
  let [from, to] = [0, text.length];
  const head = section === undefined ? null : new RegExp(`^${section.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}[ \\t]*:`, 'm').exec(text);
  if (head) {
    from = head.index;
    const next = /^[^\s#]/m.exec(text.slice(from + head[0].length));
    to = next ? from + head[0].length + next.index : text.length;
  }
  re.lastIndex = from;
  const first = re.exec(text);
  if (!first || first.index >= to) return null;
  const second = re.exec(text);
  if (second && second.index < to) return null;
  const keyAt = first.index + first[1].length;
  const lineStart = text.lastIndexOf('\n', keyAt - 1) + 1;
  const lineEnd = endOfLine(text, lineStart);
  const line = text.slice(lineStart, lineEnd);
  let written: string;
  let column: number;
  const open = line.lastIndexOf('{', keyAt - lineStart);
  if (open >= 0) {
    // Flow style, `- { node_id: ..., variable: id }   # comment`: the braces, and a comment after them.
    const close = line.indexOf('}', keyAt - lineStart);
    if (close < 0) return null;
    const rest = line.slice(close + 1);
    written = line.slice(open, /^\s*#/.test(rest) ? undefined : close + 1);
    column = open;
  } else {
    // Block style: up to the line whose `- ` opens the item, down to the first line indented less.
    column = keyAt - lineStart;
    let start = lineStart;
    while (!/^[ \t]*- $/.test(text.slice(start, start + column))) {
      if (start === 0) return null;
      const prev = text.lastIndexOf('\n', start - 2) + 1;
      const prevLine = text.slice(prev, endOfLine(text, prev));
      if (prevLine.trim() !== '' && !prevLine.trimStart().startsWith('#') && indentOf(prevLine) !== column && !/^[ \t]*- $/.test(prevLine.slice(0, column))) return null;
      start = prev;
    }
    let end = lineEnd;
    for (let next = lineEnd + 1; next < text.length; ) {
      const nextEnd = endOfLine(text, next);
      const nextLine = text.slice(next, nextEnd);
      if (nextLine.trim() !== '' && !nextLine.trimStart().startsWith('#')) {
        if (indentOf(nextLine) < column) break;
        end = nextEnd;
      }
      next = nextEnd + 1;
    }
    written = text.slice(start + column, end).replace(/\s+$/, '');
  }
  const out = dedent(written, column);
  try {
    const back = parseDocument(out).toJS() as unknown;
    if (!back || typeof back !== 'object' || (back as Record<string, unknown>).variable !== id) return null;
  } catch {
    return null;
  }
  return out;
}

const endOfLine = (text: string, from: number) => {
  const eol = text.indexOf('\n', from);
  return eol < 0 ? text.length : eol;
};
const indentOf = (line: string) => line.length - line.trimStart().length;

function columnOf(text: string, offset: number): number {
  return offset - (text.lastIndexOf('\n', offset - 1) + 1);
}

/** A block entry's later lines carry the file's indentation; the first starts at `column`. */
function dedent(text: string, column: number): string {
  return text
    .split('\n')
    .map((line, i) => (i === 0 ? line : line.startsWith(' '.repeat(column)) ? line.slice(column) : line.trimStart()))
    .join('\n');
}
