import type { z } from 'zod';

/**
 * Turns zod issues into sentences an OT engineer can act on, each naming the setting's path and the
 * bad value (DESIGN.md habit 3, Telegraf `Init`):
 *   uplink.batch_size: 250 is above the maximum of 200
 *   modbus.devices[2].registers[5].type: "flaot32" is not one of bool, int16, ... (did you mean "float32"?)
 *   uplink.batchsize: unknown setting (did you mean "batch_size"?)
 */
export function formatIssues(issues: readonly z.core.$ZodIssue[], prefix: ReadonlyArray<PropertyKey> = [], root?: z.ZodType): string[] {
  const out = new Set<string>();
  // One message at a time: spreading a list of 300,000 into push() overflows the stack.
  for (const issue of issues) for (const message of formatIssue(issue, prefix, root)) out.add(message);
  return [...out];
}

/** Unknown settings of one mapping named one by one, each with its "did you mean"; more are counted. */
export const MAX_UNKNOWN_LISTED = 100;

export function formatPath(path: ReadonlyArray<PropertyKey>): string {
  let s = '';
  for (const p of path) {
    if (typeof p === 'number') s += `[${p}]`;
    else s += s.length === 0 ? String(p) : `.${String(p)}`;
  }
  return s.length === 0 ? '(top level)' : s;
}

export function showValue(v: unknown): string {
  if (v === undefined) return 'nothing';
  if (typeof v === 'string') return JSON.stringify(v.length > 80 ? `${v.slice(0, 77)}...` : v);
  if (typeof v === 'number' || typeof v === 'boolean' || v === null) return String(v);
  if (Array.isArray(v)) return `a list of ${v.length}`;
  if (typeof v === 'object') return 'a mapping';
  return String(v);
}

/** Setting names that hold secrets (their values never appear in an error message). */
const SECRET_SETTINGS = new Set(['client_secret', 'api_key', 'secondary_api_key', 'password', 'api_token', 'token', 'private_key', 'passphrase']);

function formatIssue(issue: z.core.$ZodIssue, prefix: ReadonlyArray<PropertyKey>, root?: z.ZodType): string[] {
  const path = [...prefix, ...issue.path];
  const where = formatPath(path);
  // Under a secret setting the value is never shown: it may be the secret itself, pasted where the
  // variable name belongs or written so that YAML reads it as a number.
  const secret = path.some((p) => typeof p === 'string' && SECRET_SETTINGS.has(p));
  const show = (v: unknown): string => (secret ? '(value not shown)' : showValue(v));
  const input = (issue as { input?: unknown }).input;
  switch (issue.code) {
    case 'too_big': {
      const limit = formatLimit(issue.maximum);
      if (issue.origin === 'array' || issue.origin === 'set') return [`${where}: ${countOf(input)} entries is more than the maximum of ${limit}`];
      if (issue.origin === 'string') return [`${where}: ${show(input)} is longer than ${limit} characters`];
      return [`${where}: ${show(input)} is above the maximum of ${limit}`];
    }
    case 'too_small': {
      const limit = formatLimit(issue.minimum);
      if (issue.origin === 'array' || issue.origin === 'set') return [`${where}: needs at least ${limit} entr${Number(issue.minimum) === 1 ? 'y' : 'ies'}`];
      if (issue.origin === 'string') return Number(issue.minimum) === 1 ? [`${where}: must not be empty`] : [`${where}: ${show(input)} is shorter than ${limit} characters`];
      return [`${where}: ${show(input)} is below the minimum of ${limit}`];
    }
    case 'invalid_type': {
      if (input === undefined) return [`${where}: required setting is missing`];
      return [`${where}: ${show(input)} is not ${article(issue.expected)}`];
    }
    case 'unrecognized_keys': {
      const allowed = root ? allowedKeysAt(root, path) : [];
      const listed = issue.keys.slice(0, MAX_UNKNOWN_LISTED).map((key) => `${formatPath([...path, key])}: unknown setting${closest(key, allowed)}`);
      const more = issue.keys.length - listed.length;
      if (more > 0) listed.push(`${where}: ${more.toLocaleString('en-US')} more unknown settings (${issue.keys.length.toLocaleString('en-US')} in all); the settings it accepts are ${allowed.join(', ')}`);
      return listed;
    }
    case 'invalid_value': {
      const options = issue.values.map((v) => String(v));
      return [`${where}: ${show(input)} is not one of ${options.join(', ')}${closest(String(input), options)}`];
    }
    case 'invalid_format': {
      if (issue.format === 'regex') {
        const custom = issue.message && !issue.message.startsWith('Invalid string') ? issue.message : `does not match ${(issue as { pattern?: string }).pattern}`;
        return [`${where}: ${show(input)} ${custom}`];
      }
      if (issue.format === 'url') return [`${where}: ${show(input)} is not a valid URL${issue.message && issue.message !== 'Invalid URL' ? ` (${issue.message})` : ''}`];
      return [`${where}: ${show(input)} is not a valid ${issue.format}`];
    }
    case 'invalid_union': {
      const u = issue as z.core.$ZodIssueInvalidUnion & { discriminator?: string; options?: unknown[]; note?: string };
      if (u.note === 'No matching discriminator') {
        const got = input && typeof input === 'object' ? (input as Record<string, unknown>)[u.discriminator ?? ''] : undefined;
        const options = (u.options ?? []).map(String);
        if (got === undefined) return [`${where}: required setting is missing (one of ${options.join(', ')})`];
        return [`${where}: ${show(got)} is not one of ${options.join(', ')}${closest(String(got), options)}`];
      }
      // Pick the alternative that got furthest (fewest issues, deepest path) and report its issues.
      const best = [...u.errors].sort((a, b) => score(a) - score(b))[0];
      if (best && best.length > 0) return formatIssues(best, path, root);
      return [`${where}: ${show(input)} is not valid here`];
    }
    case 'not_multiple_of':
      return [`${where}: ${show(input)} is not a multiple of ${String(issue.divisor)}`];
    case 'custom':
    default:
      return [`${where}: ${issue.message}`];
  }
}

function score(issues: readonly z.core.$ZodIssue[]): number {
  // Fewer issues and issues further down the tree mean the alternative matched more of the input.
  const depth = Math.max(0, ...issues.map((i) => i.path.length));
  const typeMismatchAtRoot = issues.some((i) => i.code === 'invalid_type' && i.path.length === 0) ? 100 : 0;
  return issues.length * 10 - depth + typeMismatchAtRoot;
}

function formatLimit(n: number | bigint): string {
  return typeof n === 'number' && Math.abs(n) >= 10_000 ? n.toLocaleString('en-US') : String(n);
}

function countOf(v: unknown): string {
  return Array.isArray(v) ? String(v.length) : 'too many';
}

function article(expected: string): string {
  const word = expected === 'object' ? 'mapping' : expected === 'array' ? 'list' : expected;
  return /^[aeiou]/.test(word) ? `an ${word}` : `a ${word}`;
}

type Def = { type: string; shape?: Record<string, z.ZodType>; innerType?: z.ZodType; in?: z.ZodType; out?: z.ZodType; element?: z.ZodType; options?: z.ZodType[]; schema?: z.ZodType; getter?: () => z.ZodType };

function defOf(schema: z.ZodType): Def {
  return (schema as unknown as { _zod: { def: Def } })._zod.def;
}

/** Keys a mapping at `path` accepts, found by walking the schema; used for "did you mean". */
export function allowedKeysAt(schema: z.ZodType, path: ReadonlyArray<PropertyKey>): string[] {
  const found = new Set<string>();
  const visit = (s: z.ZodType | undefined, rest: ReadonlyArray<PropertyKey>, depth: number): void => {
    if (!s || depth > 64) return;
    const def = defOf(s);
    switch (def.type) {
      case 'optional':
      case 'nullable':
      case 'default':
      case 'prefault':
      case 'catch':
      case 'readonly':
      case 'nonoptional':
        return visit(def.innerType, rest, depth + 1);
      case 'pipe':
        return visit(def.in, rest, depth + 1);
      case 'lazy':
        return visit(def.getter?.(), rest, depth + 1);
      case 'union':
        for (const o of def.options ?? []) visit(o, rest, depth + 1);
        return;
      case 'array':
        if (rest.length > 0 && typeof rest[0] === 'number') visit(def.element, rest.slice(1), depth + 1);
        return;
      case 'record':
        return;
      case 'object':
        if (rest.length === 0) {
          for (const k of Object.keys(def.shape ?? {})) found.add(k);
          return;
        }
        return visit(def.shape?.[String(rest[0])], rest.slice(1), depth + 1);
      default:
        return;
    }
  };
  visit(schema, path, 0);
  return [...found];
}

/** ` (did you mean "x"?)` when one option is within a small edit distance of `got`. */
export function closest(got: string, options: readonly string[]): string {
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const o of options) {
    const d = editDistance(got.toLowerCase(), o.toLowerCase());
    if (d < bestDistance) {
      bestDistance = d;
      best = o;
    }
  }
  if (best === undefined) return '';
  const threshold = Math.max(2, Math.floor(best.length / 3));
  return bestDistance > 0 && bestDistance <= threshold ? ` (did you mean "${best}"?)` : '';
}

function editDistance(a: string, b: string): number {
  const dp = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let prev = dp[0];
    dp[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const tmp = dp[j];
      dp[j] = Math.min(dp[j] + 1, dp[j - 1] + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1));
      prev = tmp;
    }
  }
  return dp[b.length];
}
