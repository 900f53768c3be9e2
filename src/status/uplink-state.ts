import { UPLINK_STATES } from '../core/metrics.js';
import type { RefusalCause, UplinkCondition } from '../uplink/uplink-health.js';

/**
 * The one vocabulary of the uplink's state, shown the same on every surface (console header and
 * Overview, `/status` JSON, `edge-gateway status`, the status line, `gateway_uplink_status` in the
 * metrics, the fleet status document). It names what limits delivery, worst first:
 *
 *   refused        refused (authentication | organisation | every item | no such endpoint)
 *   unreachable    unreachable since T
 *   partial        delivering N of M variables (K unknown to the service)
 *   rate_limited   rate limited (limit found: R/min), or (the budget: B/min) when the backlog grows at
 *                  the configured ceiling with no limit found (beside "partial" only when requests
 *                  really wait for the budget: samples held while the catalog judges suspects grow
 *                  the backlog too, and the budget is not what holds them)
 *   delivering     delivering everything
 *
 * `ok` is true only for `delivering`: everything mapped is delivered. A second limit is added to
 * the text after a semicolon ("delivering 20 of 5,000 variables (4,980 unknown to the service);
 * rate limited (limit found: 118/min)").
 */
export { UPLINK_STATES };
export type UplinkState = (typeof UPLINK_STATES)[number];

export interface UplinkSummary {
  state: UplinkState;
  /** The words every surface shows. */
  text: string;
  /** Everything mapped is delivered. */
  ok: boolean;
  /** Variables the configuration's sources map (null when not known), how many of them are delivered, and how many the service does not know. */
  mapped_variables: number | null;
  delivering_variables: number | null;
  unknown_variables: number;
  /** Refused alone and waiting for the catalog's word, and listed but refused again and again (both held for a while). */
  suspect_variables: number;
  refused_variables: number;
  /** The rate the service was found to allow, requests/min (null: no limit met). */
  limit_found_per_minute: number | null;
  /** Since when (ISO) while unreachable or refused. */
  since: string | null;
}

export interface UplinkStateReadings {
  condition: UplinkCondition;
  refused: RefusalCause | null;
  /** Wall-clock ms the condition began. */
  since: number;
  mappedVariables: number | null;
  unknownVariables: number;
  suspectVariables: number;
  refusedVariables: number;
  /** Found rate (null: none) and whether it limits delivery now (work waits, or a pause after a 429). */
  foundPerMinute: number | null;
  rateLimits: boolean;
  /** The backlog grows (backlog-meter.ts): never "ok" then. */
  backlogGrows: boolean;
  /** uplink.requests_per_minute (or the fleet share): what limits when no lower rate was found. */
  budgetPerMinute: number;
  /** The last minute used (nearly) all of the pace in force: requests wait for the budget. */
  budgetSaturated: boolean;
}

const REFUSED: Record<RefusalCause, string> = {
  authentication: 'refused (authentication)',
  organisation: 'refused (organisation not authorised)',
  items: 'refused (every item of whole batches)',
  endpoint: 'refused (no such endpoint)',
};

const num = (n: number) => Math.round(n).toLocaleString('en-US');

export function uplinkSummary(r: UplinkStateReadings): UplinkSummary {
  const held = r.unknownVariables + r.suspectVariables + r.refusedVariables;
  const delivering = r.mappedVariables === null ? null : Math.max(0, r.mappedVariables - held);
  const base = {
    mapped_variables: r.mappedVariables,
    delivering_variables: delivering,
    unknown_variables: r.unknownVariables,
    suspect_variables: r.suspectVariables,
    refused_variables: r.refusedVariables,
    limit_found_per_minute: r.foundPerMinute === null ? null : Math.round(r.foundPerMinute),
  };
  const partial = held > 0 ? partialText(r, delivering) : null;
  const limited =
    r.foundPerMinute !== null && (r.rateLimits || r.backlogGrows)
      ? `rate limited (limit found: ${num(r.foundPerMinute)}/min)`
      : r.backlogGrows && (r.budgetSaturated || partial === null)
        ? `rate limited (the budget: ${num(r.budgetPerMinute)}/min)`
        : null;
  if (r.condition === 'auth_failed' || r.condition === 'halted') {
    const text = REFUSED[r.refused ?? (r.condition === 'auth_failed' ? 'authentication' : 'items')];
    return { ...base, state: 'refused', text, ok: false, since: new Date(r.since).toISOString() };
  }
  if (r.condition === 'retrying') {
    return { ...base, state: 'unreachable', text: `unreachable since ${new Date(r.since).toISOString()}`, ok: false, since: new Date(r.since).toISOString() };
  }
  if (partial) return { ...base, state: 'partial', text: limited ? `${partial}; ${limited}` : partial, ok: false, since: null };
  if (limited) return { ...base, state: 'rate_limited', text: limited, ok: false, since: null };
  return { ...base, state: 'delivering', text: 'delivering everything', ok: true, since: null };
}

function partialText(r: UplinkStateReadings, delivering: number | null): string {
  const what: string[] = [];
  if (r.unknownVariables > 0) what.push(`${num(r.unknownVariables)} unknown to the service`);
  if (r.refusedVariables > 0) what.push(`${num(r.refusedVariables)} refused by the service`);
  if (r.suspectVariables > 0) what.push(`${num(r.suspectVariables)} being checked against its catalog`);
  if (delivering === null || r.mappedVariables === null) return `delivering all but ${num(r.unknownVariables + r.suspectVariables + r.refusedVariables)} variables (${what.join(', ')})`;
  return `delivering ${num(delivering)} of ${num(r.mappedVariables)} variables (${what.join(', ')})`;
}
