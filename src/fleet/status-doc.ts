import type { GatewayStatus } from '../status/model.js';
import type { SharingStatus } from '../uplink/budget-sharing.js';

/**
 * What a gateway publishes about itself on the plant broker (topics.ts). Versioned (`v`) so a
 * viewer can tell documents of a newer gateway apart; no secrets, no configuration: the same
 * things `edge-gateway status` shows, reduced to what a fleet table needs.
 */
export interface FleetStatusDoc {
  v: 1;
  gateway: string;
  /** online: published by the running gateway; offline: its last will; stopped: it stopped cleanly. */
  state: 'online' | 'offline' | 'stopped';
  /** ISO 8601 UTC time of publication (of the connection, for a will). */
  at: string;
  version?: string;
  /** Seconds between two status messages (a viewer calls an online gateway stale after 3 of them). */
  interval_s?: number;
  /**
   * What limits delivery, in the words every surface shows (status/uplink-state.ts: "delivering
   * everything", "rate limited (limit found: 118/min)", ...); older gateways send the link condition.
   */
  uplink?: string;
  sources?: { up: number; down: number; down_names: string[] };
  /** Samples waiting in the buffer. */
  backlog?: number;
  oldest_unsent_age_s?: number | null;
  eta_s?: number | null;
  /** Bytes the buffer may still grow by (buffer.max_bytes minus used); null when unbounded. */
  capacity_left_bytes?: number | null;
  /** How long the buffer lasts at the current ingest rate (buffer v2's capacity figure); null when unknown. */
  capacity_left_s?: number | null;
  last_error?: string | null;
  /** Its part of the shared request budget, when budget sharing is on. */
  budget?: { group: string; share_per_minute: number; used_last_minute: number; members: number } | null;
  reason?: string;
  /**
   * Random id of the publishing process (a new one every start). Two ids taking turns on one
   * topic are two gateways with the same name (duplicate-name.ts). Absent before issue 21.
   */
  instance?: string;
  /** Set while this gateway sees another one publishing under its name: what it saw. */
  duplicate_name?: string | null;
}

const UP_STATES = new Set(['connected', 'degraded']);

export function fleetStatusFrom(s: GatewayStatus, sharing: SharingStatus | null, intervalMs: number, at: number): FleetStatusDoc {
  const down = s.sources.filter((x) => !UP_STATES.has(x.state));
  return {
    v: 1,
    gateway: s.gateway.name,
    state: 'online',
    at: new Date(at).toISOString(),
    version: s.gateway.version,
    interval_s: intervalMs / 1000,
    uplink: (s.uplink.state?.text ?? s.uplink.condition).slice(0, 200),
    sources: { up: s.sources.length - down.length, down: down.length, down_names: down.map((x) => x.name).slice(0, 20) },
    backlog: s.buffer.samples,
    oldest_unsent_age_s: s.buffer.oldest_unsent_age_s === null ? null : Math.round(s.buffer.oldest_unsent_age_s),
    eta_s: s.backlog_eta_s === null ? null : Math.round(s.backlog_eta_s),
    capacity_left_bytes: s.buffer.max_bytes > 0 ? Math.max(0, s.buffer.max_bytes - s.buffer.used_bytes) : null,
    capacity_left_s: s.buffer.capacity_s === null ? null : Math.round(s.buffer.capacity_s),
    last_error: lastError(s),
    budget: sharing ? { group: sharing.group, share_per_minute: sharing.share_per_minute, used_last_minute: s.uplink.requests_last_minute, members: sharing.members.length } : null,
  };
}

/** The most pressing problem: the uplink's, else the buffer's, else the newest source error. */
function lastError(s: GatewayStatus): string | null {
  if (s.uplink.condition !== 'ok' && s.uplink.reason) return `uplink ${s.uplink.state?.text ?? s.uplink.condition}: ${s.uplink.reason}`;
  if (!s.buffer.writable && s.buffer.last_write_error) return `buffer: ${JSON.stringify(s.buffer.last_write_error)}`;
  let newest: { text: string; at: number } | null = null;
  for (const src of s.sources) {
    const e = src.lastError;
    if (e && (!newest || e.at > newest.at)) newest = { text: `${src.name}: ${e.message}`, at: e.at };
  }
  return newest?.text.slice(0, 300) ?? null;
}

/** The last will: set at connect time, published by the broker when the connection dies. */
export function offlineWill(gateway: string, connectedAt: number, instance: string): FleetStatusDoc {
  return { v: 1, gateway, state: 'offline', at: new Date(connectedAt).toISOString(), reason: 'gone without a goodbye (last will): crashed, killed, powered off or cut off', instance };
}
