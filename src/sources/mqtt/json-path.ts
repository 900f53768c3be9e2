/**
 * A small path language to pick one value out of a JSON payload, parsed once at configuration
 * time:
 *
 *   temperature              top-level key
 *   data.temperature         nested keys
 *   values[2].v  values.2.v  array index
 *   ["motor.speed"].value    a key containing dots or brackets
 *   /data/temperature        a JSON Pointer (RFC 6901) when the path starts with "/"
 */
export type PathStep = string | number;

export interface ParsedPath {
  readonly text: string;
  readonly steps: readonly PathStep[];
}

export function parseJsonPath(text: string): { ok: true; path: ParsedPath } | { ok: false; problem: string } {
  if (text.length === 0) return { ok: false, problem: 'must not be empty' };
  if (text.startsWith('/')) {
    // RFC 6901 §4: "~1" is "/", "~0" is "~".
    const steps = text
      .slice(1)
      .split('/')
      .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'))
      .map((s): PathStep => (/^(0|[1-9]\d*)$/.test(s) ? Number(s) : s));
    return { ok: true, path: { text, steps } };
  }
  const steps: PathStep[] = [];
  let i = 0;
  let expectKey = true;
  while (i < text.length) {
    const c = text[i];
    if (c === '[') {
      const close = text.indexOf(']', i);
      if (close < 0) return { ok: false, problem: `"[" at position ${i} is not closed` };
      const inner = text.slice(i + 1, close);
      if (/^\d+$/.test(inner)) steps.push(Number(inner));
      else {
        const quoted = /^"((?:[^"\\]|\\.)*)"$|^'((?:[^'\\]|\\.)*)'$/.exec(inner);
        if (!quoted) return { ok: false, problem: `[${inner}] is neither an index nor a quoted key` };
        steps.push((quoted[1] ?? quoted[2]).replace(/\\(.)/g, '$1'));
      }
      i = close + 1;
      expectKey = false;
      continue;
    }
    if (c === '.') {
      if (expectKey) return { ok: false, problem: `empty key at position ${i}` };
      i += 1;
      expectKey = true;
      continue;
    }
    if (!expectKey) return { ok: false, problem: `expected "." or "[" at position ${i}` };
    let j = i;
    while (j < text.length && text[j] !== '.' && text[j] !== '[') j++;
    const key = text.slice(i, j);
    steps.push(/^(0|[1-9]\d*)$/.test(key) && steps.length > 0 ? Number(key) : key);
    i = j;
    expectKey = false;
  }
  if (expectKey) return { ok: false, problem: 'ends with "."' };
  return { ok: true, path: { text, steps } };
}

export const MISSING: unique symbol = Symbol('missing');

/** The value at `path` in `doc`, or `MISSING`. Numeric steps also read object keys "0", "1" ... */
export function readJsonPath(doc: unknown, path: ParsedPath): unknown {
  let cur: unknown = doc;
  for (const step of path.steps) {
    if (cur === null || typeof cur !== 'object') return MISSING;
    if (Array.isArray(cur)) {
      const index = typeof step === 'number' ? step : /^(0|[1-9]\d*)$/.test(step) ? Number(step) : -1;
      if (index < 0 || index >= cur.length) return MISSING;
      cur = cur[index];
      continue;
    }
    const key = String(step);
    if (!Object.prototype.hasOwnProperty.call(cur, key)) return MISSING;
    cur = (cur as Record<string, unknown>)[key];
  }
  return cur;
}
