import type { VariableRow } from '../api/variables.js';

/** A periodic value older than this is stale. */
export const STALE_MS = 60_000;

/**
 * Staleness follows the variable's kind (issue 24 §1): a value reported only on change (MQTT, an
 * OPC UA subscription with or without a deadband, a state variable) is current however old it is;
 * a periodic one (a poll, a generator) is stale after STALE_MS. Never seen is stale for both.
 */
export function isStale(v: Pick<VariableRow, 'ts' | 'on_change'>, now: number): boolean {
  if (v.ts === null) return true;
  return !v.on_change && now - v.ts >= STALE_MS;
}
