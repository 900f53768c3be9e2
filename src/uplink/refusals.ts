import type { BufferedRow } from '../buffer/types.js';
import { UNKNOWN_VARIABLE_REASON, type UnknownVariable } from './unknown-variables.js';

/** A sample the service refused (or would: its variable is held), with why. */
export interface Refusal {
  row: BufferedRow;
  reason: string;
  requestId?: string;
  /**
   * Set aside without a request because its variable is held (unknown to the catalog, suspect,
   * quarantined): never counted towards a systematic halt.
   */
  held?: boolean;
  /** The unknown-variable bound (keep_set_aside) counts it. */
  unknown?: boolean;
}

/** One claimed batch on its way: what was refused, what waits for the catalog, what went through. */
export interface BatchRun {
  refused: Refusal[];
  /** Items the service refused on their own (the split isolated them, or the refusal located them). */
  isolated: number;
  /** Rows given back to the queue unsent: the catalog is being read to judge the suspects first. */
  held: BufferedRow[];
  delivered: number;
}

export const newRun = (): BatchRun => ({ refused: [], isolated: 0, held: [], delivered: 0 });

/** A batch whose every item the service refused alone, across this many variables, is a systematic refusal. */
const SYSTEMATIC_MIN_ITEMS = 20;
const SYSTEMATIC_MIN_VARIABLES = 2;

/**
 * Nothing of the batch went through and the service itself refused many items of several variables,
 * none of them unknown to the catalog (a wrong service.item_id_field, say): the cause is systematic,
 * so nothing is set aside and delivery halts with an alert instead of emptying the buffer into
 * set-aside. Held variables (unknown, suspect) never count: the catalog judges those.
 */
export function isSystematic(run: BatchRun): boolean {
  if (run.delivered > 0 || run.held.length > 0) return false;
  const served = run.refused.filter((r) => !r.held);
  if (served.length < SYSTEMATIC_MIN_ITEMS || served.some((r) => r.unknown)) return false;
  return new Set(served.map((r) => r.row.variable)).size >= SYSTEMATIC_MIN_VARIABLES;
}

/** The set-aside entry of a sample whose variable is held (unknown, suspect or quarantined). */
export function heldRefusal(row: BufferedRow, u: UnknownVariable, served = false): Refusal {
  switch (u.via) {
    case 'catalog':
      return { row, reason: `${UNKNOWN_VARIABLE_REASON}${u.message}`, requestId: u.requestId, held: !served, unknown: true };
    case 'suspect':
      // Counted as unknown until the catalog clears it (its samples then go back into the queue).
      return { row, reason: `${UNKNOWN_VARIABLE_REASON}refused alone, checking the organisation's catalog: ${u.message}`, requestId: u.requestId, held: !served, unknown: true };
    default:
      return { row, reason: `refused again and again, set aside for a while: ${u.message}`, requestId: u.requestId, held: !served };
  }
}
