/**
 * The console's live model: the overview (GET /console/api/overview) and the event stream
 * (GET /console/api/events). Built by the server (console/live-routes.ts, console/live.ts) and read
 * by the pages (console/web): both sides use these types, so a field renamed on one side fails
 * the typecheck of the other (`npm run typecheck` checks the server and the browser code).
 */
import type { GatewayStatus } from '../../status/model.js';
import type { QualityChange } from '../quality-reads.js';
import type { RefusalCondition, RefusalRecord } from '../refusal-log.js';

export type { GatewayStatus, RefusalCondition, RefusalRecord };

/** One point of the backlog chart: [epoch ms, samples waiting]. */
export type BacklogPoint = [at: number, rows: number];

/** GET /console/api/overview. */
export interface OverviewResponse {
  /** This gateway process (pid and start time): a new one means the variable indexes changed. */
  boot: string;
  status: GatewayStatus;
  /** The last hour, one point every 10 s. */
  backlog: BacklogPoint[];
  /** 429s answered by the service since the start (gateway_uplink_retries_total{reason="rate_limited"}). */
  rate_limited_total: number;
  /** The newest refusals first, at most 50. */
  refusals: RefusalRecord[];
  /** Refusals still going on (refusal-log.ts `currentRefusals`): what the Overview lists as problems. */
  refusing: RefusalCondition[];
  /** Variables seen but not kept in the value ring (its cap reached). */
  untracked: number;
}

/** Event `hello`: the first event of every stream. */
export interface LiveHello {
  boot: string;
}

/** One changed variable in a tick: [index in the variable list, value, ts (epoch ms), samples since the last tick]. */
export type LiveValue = [idx: number, value: number, ts: number, samples: number];

/** Event `tick`, once a second while a console is open (HTML Living Standard §9.2). */
export interface LiveTick {
  boot: string;
  /** The gateway's wall clock (epoch ms) when the tick was built. */
  t: number;
  /** Null when the status could not be built this second (the values still come). */
  status: GatewayStatus | null;
  /** The variables that received samples since the previous tick. */
  v: LiveValue[];
  /** Variables with new refusals: [id, counts by reason]. */
  r: Array<[id: string, byReason: Record<string, number>]>;
  /** Variables whose stored quality changed: [id, quality, since]; the link overlay comes with `status`. */
  q: QualityChange[];
}
