import { ISO_WITH_MILLIS, parseIsoWithOffset } from '../core/time.js';
import type { Principal } from './auth.js';
import { ITEM_ID_FIELDS } from './contract.js';
import type { FixtureIndex, VariableRecord } from './fixture.js';

/**
 * Validation of one machine-data ITEM, shared by POST /machine-data/batch and import-job files
 * (CONTRACT.md "POST /machine-data/batch", ITEM table):
 * - `timestamp`: ISO 8601 with an explicit offset (Z or ±hh:mm) and exactly millisecond precision [V];
 * - `machine_variable_id` (or `machine_data_point_config_id`, exactly one of the two [A/V]):
 *   a machine variable of the organisation;
 * - `value`: a finite JSON number [V].
 * [A] Unknown fields are refused, so a gateway sending a misspelt field learns it at once.
 * [A] An API key may write only variables of machines at its sites (§5.8 scopes keys to sites);
 * a variable outside the scope is a 400 for that item (code `site_not_permitted`), not a 403, so
 * a client isolates the item instead of stopping everything.
 */

export interface ItemProblem {
  /** Field the problem is about (`timestamp`, `value`, ...); empty for the item as a whole. */
  field: string;
  /** Stable code, used in import-job `errors` [A]. */
  code: string;
  message: string;
}

export interface ItemOk {
  variable: VariableRecord;
  epochMs: number;
  value: number;
}

export interface ItemScope {
  fixture: FixtureIndex;
  organisationId: string;
  principal: Principal;
}

const ALLOWED = new Set<string>(['timestamp', 'value', ...ITEM_ID_FIELDS]);

function show(v: unknown): string {
  if (v === null) return 'null';
  if (typeof v === 'string') return JSON.stringify(v.length > 60 ? `${v.slice(0, 57)}...` : v);
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'object') return 'an object';
  return String(v);
}

const DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/**
 * Fast path for the form the gateway sends, `YYYY-MM-DDTHH:MM:SS.mmmZ` (CONTRACT.md); returns
 * undefined for anything else, which then goes through core/time.ts `parseIsoWithOffset`, the
 * authority. Never accepts what that refuses (test/emulator/items.test.ts compares the two).
 */
function fastUtcMillis(ts: string): number | undefined {
  if (ts.length !== 24 || ts.charCodeAt(23) !== 90 || ts.charCodeAt(4) !== 45 || ts.charCodeAt(7) !== 45 || ts.charCodeAt(10) !== 84 || ts.charCodeAt(13) !== 58 || ts.charCodeAt(16) !== 58 || ts.charCodeAt(19) !== 46) return undefined;
  const num = (from: number, to: number): number => {
    let n = 0;
    for (let i = from; i < to; i++) {
      const d = ts.charCodeAt(i) - 48;
      if (d < 0 || d > 9) return -1;
      n = n * 10 + d;
    }
    return n;
  };
  const year = num(0, 4);
  const month = num(5, 7);
  const day = num(8, 10);
  const hour = num(11, 13);
  const minute = num(14, 16);
  const second = num(17, 19);
  const ms = num(20, 23);
  if (year < 100 || month < 1 || month > 12 || day < 1 || hour < 0 || hour > 23 || minute < 0 || minute > 59 || second < 0 || second > 59 || ms < 0) return undefined;
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  if (day > (month === 2 && leap ? 29 : DAYS[month - 1])) return undefined;
  return Date.UTC(year, month - 1, day, hour, minute, second, ms);
}

const problem = (field: string, code: string, message: string): ItemProblem => ({ field, code, message });

/** Returns the accepted item or the first problem found. */
export function checkItem(item: unknown, scope: ItemScope): ItemOk | ItemProblem {
  if (item === null || typeof item !== 'object' || Array.isArray(item)) return problem('', 'invalid_item', `must be an object, got ${show(item)}`);
  const o = item as Record<string, unknown>;
  for (const key in o) {
    if (!ALLOWED.has(key)) return problem(key, 'unknown_field', 'unknown field');
  }

  // Timestamp.
  const ts = o.timestamp;
  if (ts === undefined) return problem('timestamp', 'missing_field', 'required field is missing');
  if (typeof ts !== 'string') return problem('timestamp', 'invalid_timestamp', `${show(ts)} is not a string`);
  const epochMs = fastUtcMillis(ts) ?? parseIsoWithOffset(ts, true);
  if (epochMs === undefined) {
    const why = ISO_WITH_MILLIS.test(ts)
      ? 'is not a valid date-time'
      : 'is not an ISO 8601 date-time with an explicit offset (Z or ±hh:mm) and exactly 3 fraction digits';
    return problem('timestamp', 'invalid_timestamp', `${show(ts)} ${why}`);
  }

  // Machine variable id: exactly one of the accepted names.
  let field: string = ITEM_ID_FIELDS[0];
  let id: unknown = o[ITEM_ID_FIELDS[0]];
  const alt = o[ITEM_ID_FIELDS[1]];
  if (alt !== undefined) {
    if (id !== undefined) return problem(ITEM_ID_FIELDS[1], 'invalid_item', `give either ${ITEM_ID_FIELDS[0]} or ${ITEM_ID_FIELDS[1]}, not both`);
    field = ITEM_ID_FIELDS[1];
    id = alt;
  }
  if (id === undefined) return problem(field, 'missing_field', `required field is missing (or give ${ITEM_ID_FIELDS[1]})`);
  if (typeof id !== 'string') return problem(field, 'unknown_machine_variable', `${show(id)} is not a string`);
  const variable = scope.fixture.variables.get(id);
  if (variable === undefined) return problem(field, 'unknown_machine_variable', `unknown machine variable ${show(id)}`);
  if (variable.organisationId !== scope.organisationId) {
    return problem(field, 'unknown_machine_variable', `unknown machine variable ${show(id)} (not a variable of organisation "${scope.organisationId}")`);
  }
  const sites = scope.principal.sites;
  if (sites !== null && !sites.has(variable.siteId)) {
    return problem(field, 'site_not_permitted', `machine variable ${show(id)} is at site "${variable.siteId}", outside the API key's sites`);
  }

  // Value: a finite number (JSON has no NaN; 1e400 parses to Infinity and is refused here).
  const value = o.value;
  if (value === undefined) return problem('value', 'missing_field', 'required field is missing');
  if (typeof value !== 'number') return problem('value', 'invalid_value', `${show(value)} is not a number`);
  if (!Number.isFinite(value)) return problem('value', 'invalid_value', `${show(value)} is not a finite number`);

  return { variable, epochMs, value };
}

export function isProblem(x: ItemOk | ItemProblem): x is ItemProblem {
  return (x as ItemProblem).code !== undefined;
}

/** `items[17].machine_variable_id: unknown machine variable "mvr_x"` */
export function describeProblem(index: number, p: ItemProblem): string {
  return `items[${index}]${p.field ? `.${p.field}` : ''}: ${p.message}`;
}
