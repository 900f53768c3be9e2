import { Secret } from './secrets.js';

/**
 * Paths whose values differ between two validated configurations, as `section.key` (deeper
 * differences are reported at their first two levels: `opcua.servers`, `service.auth`), for the
 * hot-reload log and to decide which components must be rebuilt.
 *
 * Secrets are compared by value (a rotated client secret is a change) but never printed: only
 * the path is reported.
 */
export function changedPaths(a: unknown, b: unknown, depth = 2, prefix = ''): string[] {
  if (equalValues(a, b)) return [];
  if (depth === 0 || !isPlainObject(a) || !isPlainObject(b)) return [prefix || '(root)'];
  const out: string[] = [];
  for (const key of new Set([...Object.keys(a), ...Object.keys(b)])) {
    const path = prefix ? `${prefix}.${key}` : key;
    out.push(...changedPaths(a[key], b[key], depth - 1, path));
  }
  return out;
}

function isPlainObject(x: unknown): x is Record<string, unknown> {
  return typeof x === 'object' && x !== null && !Array.isArray(x) && !(x instanceof Secret);
}

/** Deep equality of parsed config values (plain data, arrays and Secrets). */
export function equalValues(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (a instanceof Secret || b instanceof Secret) return a instanceof Secret && b instanceof Secret && a.reveal() === b.reveal();
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    return a.every((x, i) => equalValues(x, b[i]));
  }
  if (isPlainObject(a) && isPlainObject(b)) {
    const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
    for (const k of keys) if (!equalValues(a[k], b[k])) return false;
    return true;
  }
  // NaN appears nowhere in a validated config; numbers, strings and booleans compare by identity.
  return false;
}
