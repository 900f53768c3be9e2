import { parseIsoWithOffset } from '../core/time.js';
import {
  EXTERNAL_ID_PATTERN,
  MACHINE_VARIABLE_PATTERN,
  MAX_EPOCH_MS,
  MAX_EXTERNAL_ID_CHARS,
  MAX_MACHINE_VARIABLES,
  MAX_TEXT_CHARS,
  SITE_ID_PATTERN,
  type AnnotationFields,
  type SiteRef,
} from './model.js';

/**
 * Local validation of an annotation, exactly the rules of interface §2.3 (and §2.1 for
 * external_id), so an operator sees a mistake at once instead of hours later when the link is
 * back. Every entry point uses it: the local API, the MQTT trigger, the CLI (through the API or
 * in --direct mode), downtime stop and the detectors. Each problem names the field in the JSON
 * path form the service uses (`machine_variables[3].id`).
 *
 * Input shape: the §2.3 request body, with conveniences the gateway fills in before sending:
 * - date-times may also be epoch milliseconds (numbers);
 * - `machine_variables` may list plain ids ("mvr_...") besides `{id}` objects;
 * - `site` may be left out (the configured `annotations.site` is used);
 * - `machine` (a configured machine key, local only) supplies the machine's variables when
 *   `machine_variables` is left out.
 */

export interface Problem {
  field: string;
  message: string;
}

export interface ValidationContext {
  /** `annotations.site`, used when the body has no `site`. */
  defaultSite: SiteRef;
  /** Configured machines by key: their machine variables. */
  machines: ReadonlyMap<string, { machineVariables: readonly string[] }>;
  /** Plausible times (annotations.max_age / max_ahead around the clock's now); unset: any time 1970–9999. */
  plausible?: { now: () => number; maxAgeMs: number; maxAheadMs: number };
}

const span = (ms: number): string => (ms >= 86_400_000 ? `${Math.round(ms / 86_400_000)} days` : ms >= 3_600_000 ? `${Math.round(ms / 3_600_000)} h` : `${Math.round(ms / 60_000)} min`);

/**
 * A trigger with a reset clock sent a start in 1970, which was accepted. A time outside
 * [now - max_age, now + max_ahead] is refused with the bounds named.
 */
export function checkPlausible(ms: number, raw: unknown, field: string, ctx: Pick<ValidationContext, 'plausible'>): Problem | null {
  const p = ctx.plausible;
  if (!p) return null;
  const now = p.now();
  if (ms < now - p.maxAgeMs) return { field, message: `${show(raw)} is implausibly old: more than annotations.max_age (${span(p.maxAgeMs)}) before now (${new Date(now).toISOString()}); is the sender's clock set?` };
  if (ms > now + p.maxAheadMs) return { field, message: `${show(raw)} is implausibly far in the future: more than annotations.max_ahead (${span(p.maxAheadMs)}) after now (${new Date(now).toISOString()}); is the sender's clock set?` };
  return null;
}

export interface ValidatedInput extends AnnotationFields {
  /** Set when the caller chose its own external_id (an idempotency key). */
  externalId: string | null;
}

export type ValidationResult = { ok: true; value: ValidatedInput } | { ok: false; problems: Problem[] };

const COMMON_FIELDS = ['type', 'text', 'machine_variables', 'site', 'external_id', 'machine'];
const VARIANT_FIELDS: Record<'instant' | 'range', string[]> = { instant: ['occurred_at'], range: ['started_at', 'ended_at'] };

export const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

export function show(v: unknown): string {
  if (v === null) return 'null';
  if (v === undefined) return 'nothing';
  if (typeof v === 'string') return JSON.stringify(v.length > 60 ? `${v.slice(0, 57)}...` : v);
  if (Array.isArray(v)) return `a list of ${v.length}`;
  if (typeof v === 'object') return 'an object';
  return String(v);
}

/**
 * A date-time: ISO 8601 with an explicit offset (`Z` or `±hh:mm`, §2.3 and §9), or epoch ms.
 * Returns epoch ms, or a problem. Sub-millisecond digits are dropped (the gateway sends ms).
 */
export function parseDateTime(v: unknown, field: string): number | Problem {
  if (v === undefined || v === null) return { field, message: 'required field is missing (ISO 8601 with Z or ±hh:mm, or epoch milliseconds)' };
  let ms: number | undefined;
  if (typeof v === 'number') {
    if (!Number.isInteger(v)) return { field, message: `${show(v)} is not a whole number of epoch milliseconds` };
    ms = v;
  } else if (typeof v === 'string') {
    ms = parseIsoWithOffset(v.trim());
    if (ms === undefined) {
      const hint = /T\d{2}:\d{2}(:\d{2}(\.\d+)?)?$/.test(v.trim()) ? ' (the offset is missing: add Z for UTC or ±hh:mm)' : '';
      return { field, message: `${show(v)} is not an ISO 8601 date-time with an explicit offset, like 2026-03-01T08:15:00.000Z${hint}` };
    }
  } else {
    return { field, message: `${show(v)} is not a date-time (ISO 8601 string or epoch milliseconds)` };
  }
  if (ms < 0 || ms > MAX_EPOCH_MS) return { field, message: `${show(v)} is outside the years 1970 to 9999` };
  return ms;
}

/** §2.3 text: required, a string, trimmed, not blank, at most 5000 characters. */
export function checkText(v: unknown, field = 'text'): string | Problem {
  if (v === undefined || v === null) return { field, message: 'required field is missing' };
  if (typeof v !== 'string') return { field, message: `${show(v)} is not a string` };
  const text = v.trim();
  if (text.length === 0) return { field, message: 'must not be blank' };
  if (text.length > MAX_TEXT_CHARS) return { field, message: `${text.length} characters (after trimming) is more than the maximum of ${MAX_TEXT_CHARS}` };
  return text;
}

/** §2.1: external_id, 1-100 characters of [A-Za-z0-9-_], not null. */
export function checkExternalId(v: unknown, field = 'external_id'): string | Problem {
  if (v === null) return { field, message: 'must not be null (leave it out instead)' };
  if (typeof v !== 'string') return { field, message: `${show(v)} is not a string` };
  if (v.length < 1 || v.length > MAX_EXTERNAL_ID_CHARS) return { field, message: `must be 1 to ${MAX_EXTERNAL_ID_CHARS} characters, got ${v.length}` };
  if (!EXTERNAL_ID_PATTERN.test(v)) return { field, message: `${show(v)} may contain only letters, digits, "-" and "_" (^[A-Za-z0-9\\-_]+$)` };
  return v;
}

/** §2.2: a site reference is exactly one of {id} / {external_id}. */
export function checkSite(v: unknown): SiteRef | Problem {
  if (!isObject(v)) return { field: 'site', message: `${show(v)} is not an object ({"id": "ste_..."} or {"external_id": "..."})` };
  for (const k of Object.keys(v)) if (k !== 'id' && k !== 'external_id') return { field: `site.${k}`, message: 'unknown field (a site reference has id or external_id)' };
  const hasId = v.id !== undefined;
  const hasExt = v.external_id !== undefined;
  if (hasId && hasExt) return { field: 'site', message: 'give either id or external_id, not both' };
  if (!hasId && !hasExt) return { field: 'site', message: 'give one of id or external_id' };
  if (hasId) {
    if (typeof v.id !== 'string' || !SITE_ID_PATTERN.test(v.id)) return { field: 'site.id', message: `${show(v.id)} is not a site id (ste_...)` };
    return { id: v.id };
  }
  const ext = checkExternalId(v.external_id, 'site.external_id');
  return typeof ext === 'string' ? { external_id: ext } : ext;
}

/** §2.3 machine_variables: a list of at most 100 `{id}` (plain ids accepted locally). */
export function checkMachineVariables(v: unknown, field = 'machine_variables'): string[] | Problem[] {
  if (!Array.isArray(v)) return [{ field, message: `${show(v)} is not a list (it may be empty: [])` }];
  if (v.length > MAX_MACHINE_VARIABLES) return [{ field, message: `${v.length} entries is more than the maximum of ${MAX_MACHINE_VARIABLES}` }];
  const ids: string[] = [];
  const problems: Problem[] = [];
  v.forEach((entry, i) => {
    const where = `${field}[${i}]`;
    let id: unknown = entry;
    if (isObject(entry)) {
      const extra = Object.keys(entry).find((k) => k !== 'id');
      if (extra !== undefined) {
        problems.push({ field: `${where}.${extra}`, message: 'unknown field (an entry is {"id": "mvr_..."})' });
        return;
      }
      id = entry.id;
      if (id === undefined) {
        problems.push({ field: `${where}.id`, message: 'required field is missing' });
        return;
      }
      if (typeof id !== 'string' || !MACHINE_VARIABLE_PATTERN.test(id)) {
        problems.push({ field: `${where}.id`, message: `${show(id)} is not a machine variable id (mvr_...)` });
        return;
      }
    } else if (typeof id !== 'string' || !MACHINE_VARIABLE_PATTERN.test(id)) {
      problems.push({ field: where, message: `${show(id)} is not a machine variable ({"id": "mvr_..."} or "mvr_...")` });
      return;
    }
    ids.push(id as string);
  });
  return problems.length > 0 ? problems : ids;
}

const isProblem = (v: unknown): v is Problem => isObject(v) && typeof v.field === 'string' && typeof v.message === 'string';

/** Validates a §2.3 request body (plus the local conveniences above). Reports every problem found. */
export function validateAnnotationInput(raw: unknown, ctx: ValidationContext): ValidationResult {
  if (!isObject(raw)) return { ok: false, problems: [{ field: '(body)', message: `${show(raw)} is not a JSON object` }] };
  const problems: Problem[] = [];
  const type = raw.type;
  if (type === undefined) problems.push({ field: 'type', message: 'required field is missing ("instant" or "range")' });
  else if (type !== 'instant' && type !== 'range') problems.push({ field: 'type', message: `${show(type)} is not one of instant, range` });
  const variant = type === 'instant' || type === 'range' ? type : null;

  for (const key of Object.keys(raw)) {
    if (COMMON_FIELDS.includes(key)) continue;
    if (variant && VARIANT_FIELDS[variant].includes(key)) continue;
    if (variant && VARIANT_FIELDS[variant === 'instant' ? 'range' : 'instant'].includes(key)) {
      problems.push({ field: key, message: `not allowed when type is "${variant}" (it belongs to "${variant === 'instant' ? 'range' : 'instant'}")` });
    } else if (!variant && (key === 'occurred_at' || key === 'started_at' || key === 'ended_at')) {
      continue;
    } else {
      problems.push({ field: key, message: 'unknown field' });
    }
  }

  let occurredAt: number | null = null;
  let startedAt: number | null = null;
  let endedAt: number | null = null;
  const timeAt = (field: 'occurred_at' | 'started_at' | 'ended_at'): number | null => {
    const t = parseDateTime(raw[field], field);
    const implausible = isProblem(t) ? t : checkPlausible(t, raw[field], field, ctx);
    if (implausible) problems.push(implausible);
    return isProblem(t) || implausible ? null : t;
  };
  if (variant === 'instant') {
    occurredAt = timeAt('occurred_at');
  } else if (variant === 'range') {
    startedAt = timeAt('started_at');
    endedAt = timeAt('ended_at');
    // §2.3: ended_at must lie after started_at (compared at the millisecond precision that is sent).
    if (startedAt !== null && endedAt !== null && !(endedAt > startedAt)) {
      problems.push({ field: 'ended_at', message: `${show(raw.ended_at)} must be after started_at ${show(raw.started_at)}` });
    }
  }

  const text = checkText(raw.text);
  if (isProblem(text)) problems.push(text);

  let machine: string | null = null;
  let machineVariables: readonly string[] | null = null;
  if (raw.machine !== undefined) {
    if (typeof raw.machine !== 'string' || !ctx.machines.has(raw.machine)) {
      const known = [...ctx.machines.keys()];
      problems.push({ field: 'machine', message: `${show(raw.machine)} is not a configured machine (${known.length ? known.join(', ') : 'annotations.machines is empty'})` });
    } else {
      machine = raw.machine;
      machineVariables = ctx.machines.get(raw.machine)!.machineVariables;
    }
  }

  let variables: string[] = [];
  if (raw.machine_variables !== undefined) {
    const mv = checkMachineVariables(raw.machine_variables);
    if (mv.length > 0 && isProblem(mv[0])) problems.push(...(mv as Problem[]));
    else variables = mv as string[];
  } else if (machineVariables !== null) {
    variables = [...machineVariables];
  } else if (raw.machine === undefined) {
    problems.push({ field: 'machine_variables', message: 'required field is missing (a list of {"id": "mvr_..."}; it may be empty: [])' });
  }

  let site: SiteRef = ctx.defaultSite;
  if (raw.site !== undefined) {
    const s = checkSite(raw.site);
    if (isProblem(s)) problems.push(s);
    else site = s;
  }

  let externalId: string | null = null;
  if (raw.external_id !== undefined) {
    const e = checkExternalId(raw.external_id);
    if (isProblem(e)) problems.push(e);
    else externalId = e;
  }

  if (problems.length > 0 || !variant || isProblem(text)) return { ok: false, problems };
  return { ok: true, value: { type: variant, occurredAt, startedAt, endedAt, text, machineVariables: variables, site, machine, externalId } };
}

export { isProblem };
