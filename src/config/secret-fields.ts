import type { z } from 'zod';
import { gatewaySchema } from './schema.js';
import { Secret, secretRefSchema, type SecretRef } from './secrets.js';

/**
 * Which settings hold secrets, read from the configuration schema itself: every setting declared
 * with `secretSchema()` (config/secrets.ts), so a secret added to a component's schema is masked by
 * the console and guarded by its Apply without a second list to keep in step.
 *
 * A pattern is a setting path with `[]` for any list index: `mqtt.connections[].tls.passphrase`.
 */
export function secretFieldPatterns(schema: z.ZodType = gatewaySchema): string[] {
  const found = new Set<string>();
  const seen = new Set<unknown>();
  const visit = (s: z.ZodType | undefined, path: string, depth: number): void => {
    if (!s || depth > 64) return;
    const def = defOf(s);
    if (isSecretSchema(def)) {
      found.add(path);
      return;
    }
    switch (def.type) {
      case 'optional':
      case 'nullable':
      case 'default':
      case 'prefault':
      case 'catch':
      case 'readonly':
      case 'nonoptional':
        return visit(def.innerType, path, depth + 1);
      case 'pipe':
        return visit(def.in, path, depth + 1);
      case 'lazy':
        if (seen.has(s)) return;
        seen.add(s);
        return visit(def.getter?.(), path, depth + 1);
      case 'union':
        for (const o of def.options ?? []) visit(o, path, depth + 1);
        return;
      case 'array':
        return visit(def.element, `${path}[]`, depth + 1);
      case 'object':
        for (const [k, v] of Object.entries(def.shape ?? {})) visit(v, path ? `${path}.${k}` : k, depth + 1);
        return;
      default:
        return;
    }
  };
  visit(schema, '', 0);
  return [...found].sort();
}

let cached: Set<string> | null = null;

/** Whether a setting path (`mqtt.connections[2].password`, or its parts) holds a secret. */
export function isSecretPath(path: string | ReadonlyArray<string | number>): boolean {
  cached ??= new Set(secretFieldPatterns());
  return cached.has(typeof path === 'string' ? path.replace(/\[\d+\]/g, '[]') : patternOf(path));
}

/** `['mqtt', 'connections', 2, 'password']` → `mqtt.connections[].password`. */
export function patternOf(path: ReadonlyArray<string | number>): string {
  let s = '';
  for (const p of path) s += typeof p === 'number' ? '[]' : s ? `.${p}` : p;
  return s;
}

/** `['mqtt', 'connections', 2, 'password']` → `mqtt.connections[2].password`. */
export function pathText(path: ReadonlyArray<string | number>): string {
  let s = '';
  for (const p of path) s += typeof p === 'number' ? `[${p}]` : s ? `.${p}` : p;
  return s;
}

/** Setting names that say where a secret goes: the peer's address in the same or an enclosing section. */
const DESTINATION_KEYS = ['url', 'endpoint', 'base_url', 'auth_url'];

export interface SecretUse {
  /** The setting: `mqtt.connections[2].password`. */
  path: string;
  secret: Secret;
  /** How the file gives it: `env NAME`, `file PATH`, or `literal` (the value itself is never shown). */
  ref: string;
  /** The peers it is sent to (scheme://host:port of the nearest url/endpoint settings), or `this gateway` when it is sent nowhere. */
  destinations: string[];
}

/**
 * Every secret of a validated configuration with where it goes. A secret's destinations are the
 * URLs of the section holding it and of the sections around it (`service.auth.client_secret` →
 * service.base_url and service.auth_url; `mqtt.connections[0].tls.passphrase` → that connection's
 * url); one with none (mqtt.broker.password, http.api_token) stays on this gateway.
 */
export function secretUses(config: unknown): SecretUse[] {
  const out: SecretUse[] = [];
  const walk = (value: unknown, path: Array<string | number>, around: string[], depth: number): void => {
    if (depth > 64) return;
    if (value instanceof Secret) {
      out.push({ path: pathText(path), secret: value, ref: refText(value.ref), destinations: around.length > 0 ? [...new Set(around)] : ['this gateway'] });
      return;
    }
    if (Array.isArray(value)) {
      value.forEach((v, i) => walk(v, [...path, i], around, depth + 1));
      return;
    }
    if (!value || typeof value !== 'object') return;
    const obj = value as Record<string, unknown>;
    const here = [...around];
    for (const k of DESTINATION_KEYS) if (typeof obj[k] === 'string') here.push(destinationOf(obj[k]));
    for (const [k, v] of Object.entries(obj)) walk(v, [...path, k], here, depth + 1);
  };
  walk(config, [], [], 0);
  return out;
}

function refText(ref: SecretRef | null): string {
  if (ref === null || typeof ref === 'string') return 'literal';
  return 'env' in ref ? `env ${ref.env}` : `file ${ref.file}`;
}

/** `mqtts://Broker.example:8883/x` → `mqtts://broker.example:8883`; `embedded` (the gateway's own broker) → `this gateway`. */
export function destinationOf(url: string): string {
  if (url === 'embedded') return 'this gateway';
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host.toLowerCase()}`;
  } catch {
    return url;
  }
}

type Def = { type: string; shape?: Record<string, z.ZodType>; innerType?: z.ZodType; in?: z.ZodType; element?: z.ZodType; options?: z.ZodType[]; getter?: () => z.ZodType };

function defOf(schema: z.ZodType): Def {
  return (schema as unknown as { _zod: { def: Def } })._zod.def;
}

/** `secretSchema()` is `secretRefSchema` (or its default) piped into a transform. */
function isSecretSchema(def: Def): boolean {
  if (def.type !== 'pipe' || !def.in) return false;
  const input = defOf(def.in);
  return def.in === secretRefSchema || (input.type === 'default' && input.innerType === secretRefSchema);
}
