import { isNode, parseDocument } from 'yaml';
import { configYaml } from '../config/yaml-writer.js';
import { settingKeys, type VariableInfo } from './variable-index.js';

/**
 * A variable's mapping entry as YAML for the Variables page (issue 24 §4: "the YAML the user
 * wrote, not JSON"): the entry's own text in the configuration file, comments and flow style as
 * written, found by the setting path that names the variable; when the file does not hold it (no
 * file, changed since, or an entry the schema expanded), the entry written as YAML by the one
 * writer (config/yaml-writer.ts).
 */
export function entryYaml(fileText: string | null, info: Pick<VariableInfo, 'settings' | 'config'>): string | null {
  const setting = info.settings.find((s) => !s.startsWith('annotations') && s.endsWith('.variable'));
  if (fileText !== null && setting) {
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
