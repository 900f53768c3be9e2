/**
 * The Variables page's model: GET /console/api/variables (every variable, streamed) and
 * GET /console/api/variables/:id. Built by console/variable-routes.ts, read by
 * console/web/page-variables.tsx and console/web/store.ts.
 */
import type { RefusalRecord } from '../refusal-log.js';

/** Where the newest sample of a variable is: sent, still queued, set aside by the service, or none seen. */
export type Delivery = 'delivered' | 'queued' | 'set_aside' | 'none';

export interface VariableRow {
  id: string;
  /** Index in the value ring, the key of the live ticks; -1 when no sample has been seen. */
  idx: number;
  source: string | null;
  machine: string | null;
  /** Named in the configuration (false: only seen, under the name the device sent). */
  mapped: boolean;
  /**
   * Reported only on change (MQTT, OPC UA subscriptions; variables only seen, never mapped, come
   * from MQTT's open-ended subscriptions): an old value is current, never stale (issue 24 §1).
   */
  on_change: boolean;
  value: number | null;
  /** Unit of the value, from the organisation's catalog (the configuration has none); null: none given or not read yet. */
  unit: string | null;
  ts: number | null;
  /** Samples per second. */
  rate: number;
  refused: Record<string, number> | null;
  set_aside: number;
  delivery: Delivery;
  /** The last 5 minutes, one point per bucket (null: no sample in it). */
  spark: Array<number | null>;
}

export interface VariablesResponse {
  boot: string;
  /** The gateway's wall clock (epoch ms). */
  now: number;
  bucket_ms: number;
  oldest_queued_ts: number | null;
  variables: VariableRow[];
}

/** One bucket of the trend: [start (epoch ms), min, max, samples]. */
export type TrendBucket = [at: number, min: number, max: number, samples: number];

export interface VariableDetailResponse {
  id: string;
  source: string | null;
  kind: string | null;
  machine: string | null;
  /** Settings that name the variable (`opcua.servers[0].nodes[3].variable`). */
  settings: string[];
  /** The mapping entry itself (node, register, value ...). */
  config: unknown;
  /** The mapping entry as YAML: as written in the configuration file (comments included) when found there, else written from `config`. */
  config_yaml: string | null;
  value: number | null;
  unit: string | null;
  ts: number | null;
  total: number;
  rate: number;
  bucket_ms: number;
  trend: TrendBucket[];
  refusals: { byReason: Record<string, number>; last: RefusalRecord[] };
}
