/**
 * The Variables page's model: GET /console/api/variables (every variable, streamed) and
 * GET /console/api/variables/:id. Built by console/variable-routes.ts, read by
 * console/web/page-variables.tsx and console/web/store.ts.
 */
import type { Quality } from '../../core/quality.js';
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
   * from MQTT's open-ended subscriptions): an old value is current, never stale.
   */
  on_change: boolean;
  /**
   * Quality as the source stored it (core/quality.ts): good, uncertain, bad, stale (by age or a
   * protocol's death message) or none (no value yet). The page shows it through the link of
   * `source`/`device` as the status it receives says (`throughLink`): stale while that is down.
   */
  quality: Quality;
  /** Since when it has that quality (epoch ms); null with none. */
  quality_since: number | null;
  /** The device whose link the variable follows (a Modbus device), null: its source's. */
  device: string | null;
  value: number | null;
  /** Unit of the value: the mapping's `unit`, else the organisation's catalog's; null: none given (or the catalog not read yet). */
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
  /** The mapping's `unit`, else the catalog's. */
  unit: string | null;
  /** The unit the mapping gives (null: none) and the catalog's (null: none, or not read yet), to show where they differ. */
  unit_configured: string | null;
  unit_catalog: string | null;
  quality: Quality;
  quality_since: number | null;
  device: string | null;
  ts: number | null;
  total: number;
  rate: number;
  bucket_ms: number;
  trend: TrendBucket[];
  refusals: { byReason: Record<string, number>; last: RefusalRecord[] };
}
