import { FAILSAFE_SCHEMA, load, Type } from 'js-yaml';
import { ConfigError } from '../core/errors.js';
import { MAX_ALIAS_VALUES } from './yaml-checks.js';

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
 *  - a text with anchors or aliases, tags, or directives (`%YAML 1.1` changes what `yes` means there) is left to the full reader, as
 *    is any text js-yaml refuses (duplicate keys, several documents, syntax errors): the full reader
 *    then gives its messages with the line and the setting. An alias bomb is refused here, as the
 *    full reader refuses it (yaml-checks.ts MAX_ALIAS_VALUES), before that reader spends seconds
 *    on a large text.
 * Returns undefined where it leaves the text to the full reader. test/config/yaml-lean.test.ts
 * compares both readers on the shipped configurations, on random documents and on damaged copies:
 * where both take a text they agree; js-yaml takes a few texts the full reader refuses (a flow map
 * not indented enough, a `#` glued to a token: 7 of 4,000 damaged copies) and reads them as
 * written. bench/config-load.ts measures the two.
 */
export function readYamlLean(text: string, origin = 'config'): { value: unknown } | undefined {
  const left = LEFT_TO_FULL_READER.test(text);
  // A text with aliases is the full reader's, but an alias bomb is refused here first: the full
  // reader parses a few MB in seconds, js-yaml in a fraction, and its aliases are shared objects
  // whose expanded size is counted in one walk.
  if (left && !MAY_HOLD_ALIAS.test(text)) return undefined;
  let value: unknown;
  try {
    value = load(text, { schema: CORE_1_2 });
  } catch {
    return undefined;
  }
  const shape = shapeOf(value);
  refuseBomb(shape, origin);
  if (left || shape.sharedAt !== null || shape.keyNamedNull) return undefined;
  // An empty text (or only comments, or `~`) is an empty configuration, as for the full reader.
  return { value: value ?? {} };
}

/**
 * Refuses an alias bomb before the full reader parses a large text (the console's routes read the
 * editor's text of up to 5 MB with it): js-yaml reads the text in a fraction of the time and the
 * expansion is counted in one walk. A text js-yaml cannot read is left to the full reader's own
 * count (yaml-checks.ts), linear in the text's size.
 */
export function refuseAliasBomb(text: string, origin = 'config'): void {
  if (text.length < LEAN_READER_MIN_CHARS || !MAY_HOLD_ALIAS.test(text)) return;
  let value: unknown;
  try {
    value = load(text, { schema: CORE_1_2 });
  } catch {
    return;
  }
  refuseBomb(shapeOf(value), origin);
}

function refuseBomb(shape: Shape, origin: string): void {
  if (shape.repeated <= MAX_ALIAS_VALUES) return;
  throw new ConfigError([`${origin}: ${shape.sharedAt ?? '(top level)'}: aliases expand to more than ${MAX_ALIAS_VALUES.toLocaleString('en-US')} values (an "alias bomb"); write the repeated parts out or reuse fewer anchors`]);
}

/** A `*` before a name: where an alias may be (also in strings and comments, which merely costs a parse). */
const MAY_HOLD_ALIAS = /\*[^\s,[\]{}]/;

interface Shape {
  /** The setting of the first value reached twice (an alias of a mapping or list), or null. */
  sharedAt: string | null;
  /** Values the aliases repeat once expanded: each further use of a shared value counts all of it. */
  repeated: number;
  /**
   * A key that reads "null": a null key (`~:`, `null:`, `: x`) is "" for the full reader and
   * "null" for js-yaml, so such a text is the full reader's (also a quoted "null", read the same).
   */
  keyNamedNull: boolean;
}

interface ShapeFrame {
  value: object;
  keys: string[];
  next: number;
  size: number;
  parent: ShapeFrame | null;
  part: string | number | null;
}

/**
 * One walk over js-yaml's value, each object once: js-yaml gives an alias of a mapping or list as
 * the same object, so an alias bomb is a small graph whose expansion is counted (sizes memoised
 * per object), never walked: a walk of every expansion never ends on a bomb.
 */
function shapeOf(value: unknown): Shape {
  const shape: Shape = { sharedAt: null, repeated: 0, keyNamedNull: false };
  if (value === null || typeof value !== 'object') return shape;
  const sizes = new Map<object, number>();
  const frameOf = (v: object, parent: ShapeFrame | null, part: string | number | null): ShapeFrame => ({ value: v, keys: Array.isArray(v) ? [] : Object.keys(v), next: 0, size: 1, parent, part });
  const stack: ShapeFrame[] = [frameOf(value, null, null)];
  while (stack.length > 0) {
    const frame = stack[stack.length - 1];
    const isArray = Array.isArray(frame.value);
    const count = isArray ? (frame.value as unknown[]).length : frame.keys.length;
    if (frame.next >= count) {
      stack.pop();
      sizes.set(frame.value, frame.size);
      if (frame.parent) frame.parent.size += frame.size;
      continue;
    }
    const i = frame.next++;
    const part = isArray ? i : frame.keys[i];
    if (!isArray) {
      frame.size += 1;
      if (part === 'null') shape.keyNamedNull = true;
    }
    const child = (frame.value as Record<string | number, unknown>)[part];
    if (child === null || typeof child !== 'object') {
      frame.size += 1;
      continue;
    }
    const known = sizes.get(child);
    if (known === undefined) {
      stack.push(frameOf(child, frame, part));
      continue;
    }
    shape.repeated += known;
    frame.size += known;
    shape.sharedAt ??= settingOf(frame, part);
    if (shape.repeated > MAX_ALIAS_VALUES) return shape;
  }
  return shape;
}

function settingOf(frame: ShapeFrame, last: string | number): string {
  const parts: Array<string | number> = [last];
  for (let f: ShapeFrame | null = frame; f; f = f.parent) if (f.part !== null) parts.push(f.part);
  let s = '';
  for (const p of parts.reverse()) s += typeof p === 'number' ? `[${p}]` : s ? `.${p}` : p;
  return s;
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
const LEFT_TO_FULL_READER = /(?:^[ \t]*(?:-[ \t]+)*|:[ \t]*|[[{,][ \t]*)[&*!?]|^%|^[ \t]*(?:-[ \t]+)*[[{].*[\]}][ \t]*:(?:[ \t]|$)/m;

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
