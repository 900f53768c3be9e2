import { FAILSAFE_SCHEMA, load, Type } from 'js-yaml';

/**
 * A lean reader for large configuration files (issue 25: 100,000 variables make a 7.4 MB YAML
 * file). The `yaml` library, which reads every other configuration, builds a concrete syntax tree
 * and a document with source positions before the plain value: for 7.4 MB that was ~330 MB of heap
 * live at once and 5–7 s, the gateway's highest RSS of a whole run (565–677 MB) before any source
 * started. js-yaml builds the plain value directly: ~45 MB of heap and 0.4–0.5 s for the same file.
 *
 * The two must give the same value, so this reader is used only where that is checked to hold:
 *  - scalars resolve by the YAML 1.2 core schema exactly as `yaml` resolves them (the patterns
 *    below are its `core` schema's); js-yaml's own core schema also takes `1_000` and `0b101` as
 *    numbers, which YAML 1.2 (and `yaml`) read as strings;
 *  - a text with anchors or aliases (alias bombs are refused with a message by the full reader),
 *    tags, or directives (`%YAML 1.1` changes what `yes` means there) is left to the full reader, as
 *    is any text js-yaml refuses (duplicate keys, several documents, syntax errors): the full reader
 *    then gives its messages with the line and the setting.
 * Returns undefined where it leaves the text to the full reader. test/config/yaml-lean.test.ts
 * compares both readers on the shipped configurations, on random documents and on damaged copies:
 * where both take a text they agree; js-yaml takes a few texts the full reader refuses (a flow map
 * not indented enough, a `#` glued to a token: 7 of 4,000 damaged copies) and reads them as
 * written. bench/config-load.ts measures the two.
 */
export function readYamlLean(text: string): { value: unknown } | undefined {
  if (LEFT_TO_FULL_READER.test(text)) return undefined;
  try {
    const value: unknown = load(text, { schema: CORE_1_2 });
    if (hasKeyNamedNull(value)) return undefined;
    // An empty text (or only comments, or `~`) is an empty configuration, as for the full reader.
    return { value: value ?? {} };
  } catch {
    return undefined;
  }
}

/**
 * A null key (`~:`, `null:`, `: x`) is "" for the full reader and "null" for js-yaml; a key that
 * reads "null" sends the text to the full reader (also a quoted "null", which it reads the same).
 */
function hasKeyNamedNull(value: unknown): boolean {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (v === null || typeof v !== 'object') continue;
    if (Array.isArray(v)) {
      for (const x of v) if (x !== null && typeof x === 'object') stack.push(x);
      continue;
    }
    for (const k in v) {
      if (k === 'null') return true;
      const x = (v as Record<string, unknown>)[k];
      if (x !== null && typeof x === 'object') stack.push(x);
    }
  }
  return false;
}

/** Texts at least this long take the lean reader; a hand-written configuration is far below it. */
export const LEAN_READER_MIN_CHARS = 256 * 1024;

/**
 * Anchor (`&a`), alias (`*a`), tag (`!t`, `!!str`) or explicit key (`? `, whose key may be a map)
 * where a node may start (a line's start after its indentation and any `- `, after `: `, `[`, `{`
 * or `,`), a directive line, or a flow collection as a key (`[a, b]: c`: the readers write such a
 * key as different strings). Broad on purpose: a quoted string or a comment with `: *` also
 * matches, and such a file is simply read by the full reader; a `*` or `?` elsewhere in a comment
 * (`# why?`) does not send it there.
 */
const LEFT_TO_FULL_READER = /(?:^[ \t]*(?:-[ \t]+)*|:[ \t]+|[[{,][ \t]*)[&*!?]|^%|^[ \t]*(?:-[ \t]+)*[[{].*[\]}][ \t]*:(?:[ \t]|$)/m;

// The `yaml` library's YAML 1.2 core schema (node_modules/yaml/dist/schema/core/*.js), scalar by scalar.
const nullType = new Type('tag:yaml.org,2002:null', {
  kind: 'scalar',
  resolve: (s: string) => /^(?:~|[Nn]ull|NULL)?$/.test(s),
  construct: () => null,
});
const boolType = new Type('tag:yaml.org,2002:bool', {
  kind: 'scalar',
  resolve: (s: string) => /^(?:[Tt]rue|TRUE|[Ff]alse|FALSE)$/.test(s),
  construct: (s: string) => s[0] === 't' || s[0] === 'T',
});
const intType = new Type('tag:yaml.org,2002:int', {
  kind: 'scalar',
  resolve: (s: string) => /^(?:0o[0-7]+|[-+]?[0-9]+|0x[0-9a-fA-F]+)$/.test(s),
  construct: (s: string) => (s.startsWith('0o') ? parseInt(s.slice(2), 8) : s.startsWith('0x') ? parseInt(s.slice(2), 16) : parseInt(s, 10)),
});
const floatType = new Type('tag:yaml.org,2002:float', {
  kind: 'scalar',
  resolve: (s: string) => /^(?:[-+]?\.(?:inf|Inf|INF)|\.nan|\.NaN|\.NAN|[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)[eE][-+]?[0-9]+|[-+]?(?:\.[0-9]+|[0-9]+\.[0-9]*))$/.test(s),
  construct: (s: string) => (s.slice(-3).toLowerCase() === 'nan' ? NaN : /inf$/i.test(s) ? (s[0] === '-' ? -Infinity : Infinity) : parseFloat(s)),
});
const CORE_1_2 = FAILSAFE_SCHEMA.extend({ implicit: [nullType, boolType, intType, floatType] });
